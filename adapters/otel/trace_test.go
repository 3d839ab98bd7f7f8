package outboxotel_test

// Real deliveries on SQLite, traced by the SDK into an in-memory recorder: the span
// tree from the request that writes an event to its delivery and the listener's work.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	outboxotel "github.com/outboxkit/outbox/adapters/otel"
	outbox "github.com/outboxkit/outbox/core"
)

// TestSpanTree checks request span → delivery span → listener span: one trace, the
// delivery span a Consumer child of the request span with the event's attributes.
func TestSpanTree(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{otel: outboxotel.Config{Instance: "orders"}}, func(b *testBundle) error {
		return b.ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			_, span := b.tracer.Start(ctx, "send email")
			span.End()
			return nil
		}))
	})
	id, req := b.writeInSpan(t, outbox.Envelope{
		Type: "OrderPlaced", AggregateType: "Order", AggregateID: "42", TenantID: "acme",
		OrderKey: "order-42", Payload: map[string]int{"total": 10},
	})

	del := b.deliverySpans(t, id, 1)[0]
	if del.Name() != "outbox deliver OrderPlaced" {
		t.Errorf("name = %q, want %q", del.Name(), "outbox deliver OrderPlaced")
	}
	if del.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kind = %v, want consumer", del.SpanKind())
	}
	if del.SpanContext().TraceID() != req.TraceID() {
		t.Errorf("trace ID = %s, want the request's %s", del.SpanContext().TraceID(), req.TraceID())
	}
	if p := del.Parent(); p.SpanID() != req.SpanID() || !p.IsRemote() {
		t.Errorf("parent = %s (remote %v), want the request span %s, remote", p.SpanID(), p.IsRemote(), req.SpanID())
	}
	if len(del.Links()) != 0 {
		t.Errorf("links = %v, want none", del.Links())
	}
	checkAttrs(t, attrs(del), map[attribute.Key]any{
		"messaging.system":         "outbox",
		"messaging.operation":      "process",
		"messaging.operation.type": "process",
		"messaging.message.id":     id,
		"outbox.event.id":          id,
		"outbox.event.type":        "OrderPlaced",
		"outbox.aggregate.type":    "Order",
		"outbox.aggregate.id":      "42",
		"outbox.tenant.id":         "acme",
		"outbox.order_key":         "order-42",
		"outbox.attempt":           int64(1),
		"outbox.outcome":           "done",
		"outbox.instance":          "orders",
	})
	if st := del.Status(); st.Code != codes.Unset {
		t.Errorf("status = %v %q, want unset", st.Code, st.Description)
	}
	if sc := del.InstrumentationScope(); sc.Name != outboxotel.ScopeName {
		t.Errorf("scope = %q, want %q", sc.Name, outboxotel.ScopeName)
	}

	work := b.endedSpan(t, "send email")
	if work.SpanContext().TraceID() != req.TraceID() || work.Parent().SpanID() != del.SpanContext().SpanID() {
		t.Errorf("listener span: trace %s parent %s, want trace %s parent %s (the delivery span)",
			work.SpanContext().TraceID(), work.Parent().SpanID(), req.TraceID(), del.SpanContext().SpanID())
	}
}

// TestSpanOptionalAttributes checks that an event without aggregate ID, tenant or order
// key gets no such attribute, and the aggregate type defaults to the global one.
func TestSpanOptionalAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{}, func(b *testBundle) error {
		return b.ob.Register("", "Ping", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
	})
	id, _ := b.writeInSpan(t, outbox.Envelope{Type: "Ping", Payload: 1})
	del := b.deliverySpans(t, id, 1)[0]
	checkAttrs(t, attrs(del), map[attribute.Key]any{
		"outbox.aggregate.type": outbox.GlobalAggregateType,
		"outbox.attempt":        int64(1),
	}, "outbox.aggregate.id", "outbox.tenant.id", "outbox.order_key", "outbox.instance")
}

// TestSpanDeferral checks that a deferral is no failure: its span says deferred, with
// no error status nor exception, and the next attempt is still attempt 1.
func TestSpanDeferral(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	b := setup(t, setupOptions{}, func(b *testBundle) error {
		return b.ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			if calls.Add(1) == 1 {
				return outbox.Defer(time.Millisecond)
			}
			return nil
		}))
	})
	id, _ := b.writeInSpan(t, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})

	spans := b.deliverySpans(t, id, 2)
	checkAttrs(t, attrs(spans[0]), map[attribute.Key]any{"outbox.attempt": int64(1), "outbox.outcome": "deferred"})
	checkAttrs(t, attrs(spans[1]), map[attribute.Key]any{"outbox.attempt": int64(1), "outbox.outcome": "done"})
	for i, s := range spans {
		if st := s.Status(); st.Code != codes.Unset {
			t.Errorf("span %d: status = %v %q, want unset", i+1, st.Code, st.Description)
		}
		for _, ev := range s.Events() {
			if ev.Name == "exception" {
				t.Errorf("span %d: exception event %v, want none", i+1, ev.Attributes)
			}
		}
	}
}

// TestSpanFailureThenSuccess checks two attempts of one event: the failed one has status
// Error, the error recorded and outcome failure; the retry succeeds. Both are children of
// the request span.
func TestSpanFailureThenSuccess(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	boom := errors.New("smtp: connection refused")
	b := setup(t, setupOptions{}, func(b *testBundle) error {
		return b.ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			if calls.Add(1) == 1 {
				return boom
			}
			return nil
		}))
	})
	id, req := b.writeInSpan(t, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})

	spans := b.deliverySpans(t, id, 2)
	first, second := spans[0], spans[1]
	checkAttrs(t, attrs(first), map[attribute.Key]any{"outbox.attempt": int64(1), "outbox.outcome": "failure"})
	if st := first.Status(); st.Code != codes.Error || st.Description != boom.Error() {
		t.Errorf("first attempt: status = %v %q, want error %q", st.Code, st.Description, boom.Error())
	}
	var recorded bool
	for _, ev := range first.Events() {
		if ev.Name == "exception" {
			for _, kv := range ev.Attributes {
				if kv.Key == "exception.message" && kv.Value.AsString() == boom.Error() {
					recorded = true
				}
			}
		}
	}
	if !recorded {
		t.Errorf("first attempt: no exception event with the error; events %v", first.Events())
	}
	checkAttrs(t, attrs(second), map[attribute.Key]any{"outbox.attempt": int64(2), "outbox.outcome": "done"})
	if st := second.Status(); st.Code != codes.Unset {
		t.Errorf("second attempt: status = %v %q, want unset", st.Code, st.Description)
	}
	for i, s := range spans {
		if s.SpanContext().TraceID() != req.TraceID() || s.Parent().SpanID() != req.SpanID() {
			t.Errorf("attempt %d: trace %s parent %s, want trace %s parent %s", i+1,
				s.SpanContext().TraceID(), s.Parent().SpanID(), req.TraceID(), req.SpanID())
		}
	}
	if first.SpanContext().SpanID() == second.SpanContext().SpanID() {
		t.Error("both attempts have the same span")
	}
}

// TestSpanLinkToWriter checks Config.LinkToWriter: the delivery span starts a trace of
// its own with a link to the request span.
func TestSpanLinkToWriter(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{otel: outboxotel.Config{LinkToWriter: true}}, func(b *testBundle) error {
		return b.ob.Register("", "Ping", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
	})
	id, req := b.writeInSpan(t, outbox.Envelope{Type: "Ping", Payload: 1})
	del := b.deliverySpans(t, id, 1)[0]
	if del.Parent().IsValid() {
		t.Errorf("parent = %s, want none (a root span)", del.Parent().SpanID())
	}
	if del.SpanContext().TraceID() == req.TraceID() {
		t.Error("the delivery span is in the request's trace, want a trace of its own")
	}
	links := del.Links()
	if len(links) != 1 || !links[0].SpanContext.Equal(req.WithRemote(true)) {
		t.Errorf("links = %+v, want one to the request span %s", links, req.SpanID())
	}
}

// TestSpanWithoutWriterSpan checks that an event written without a span gets a root
// delivery span, even when Start's context carried a span.
func TestSpanWithoutWriterSpan(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled,
	})
	startCtx := trace.ContextWithSpanContext(context.Background(), sc)
	b := setup(t, setupOptions{startCtx: startCtx}, func(b *testBundle) error {
		return b.ob.Register("", "Ping", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
	})
	id := b.write(t, context.Background(), outbox.Envelope{Type: "Ping", Payload: 1})
	del := b.deliverySpans(t, id, 1)[0]
	if del.Parent().IsValid() {
		t.Errorf("parent = %s in trace %s, want none (a root span)", del.Parent().SpanID(), del.Parent().TraceID())
	}
	if del.SpanContext().TraceID() == sc.TraceID() {
		t.Error("the delivery span joined the trace of Start's context")
	}
}

// TestPropagateInListener checks Propagate as a relay calls it inside the listener: the
// traceparent it writes names the request's trace and the delivery span as the parent,
// and the request's baggage travels with it.
func TestPropagateInListener(t *testing.T) {
	t.Parallel()
	type result struct {
		fields   map[string]string
		delivery trace.SpanContext
		member   string
	}
	got := make(chan result, 1)
	var propagate func(context.Context, func(string, string))
	b := setup(t, setupOptions{}, func(b *testBundle) error {
		propagate = outboxotel.Propagate(b.cfg)
		return b.ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			fields := map[string]string{}
			propagate(ctx, func(k, v string) { fields[k] = v })
			got <- result{
				fields:   fields,
				delivery: trace.SpanContextFromContext(ctx),
				member:   baggage.FromContext(ctx).Member("user").Value(),
			}
			return nil
		}))
	})

	member, err := baggage.NewMember("user", "alice")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := b.tracer.Start(baggage.ContextWithBaggage(context.Background(), bag), "request")
	id := b.write(t, ctx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
	span.End()
	req := span.SpanContext()

	r := <-got
	tid, parent := parseTraceparent(t, r.fields["traceparent"])
	if tid != req.TraceID() {
		t.Errorf("traceparent trace ID = %s, want the request's %s", tid, req.TraceID())
	}
	if parent != r.delivery.SpanID() {
		t.Errorf("traceparent parent = %s, want the delivery span %s", parent, r.delivery.SpanID())
	}
	if del := b.deliverySpans(t, id, 1)[0]; del.SpanContext().SpanID() != parent {
		t.Errorf("traceparent parent = %s, want the recorded delivery span %s", parent, del.SpanContext().SpanID())
	}
	if r.fields["baggage"] != "user=alice" {
		t.Errorf("baggage = %q, want %q", r.fields["baggage"], "user=alice")
	}
	if r.member != "alice" {
		t.Errorf("listener's baggage user = %q, want alice", r.member)
	}

	// Without a span, the W3C propagator writes nothing; a nil set does nothing.
	fields := map[string]string{}
	propagate(context.Background(), func(k, v string) { fields[k] = v })
	if len(fields) != 0 {
		t.Errorf("fields without a span = %v, want none", fields)
	}
	propagate(ctx, nil)
}
