package outboxotel_test

import (
	"context"
	"maps"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	outboxotel "github.com/outboxkit/outbox/adapters/otel"
	outbox "github.com/outboxkit/outbox/core"
)

// TestStoredHeaders checks what the writer hook stores: the request's traceparent
// beside the caller's headers, whose map it leaves alone, and nothing for an event
// written without a span.
func TestStoredHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{}, func(b *testBundle) error {
		return b.ob.Register("", "Ping", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
	})
	ctx := context.Background()

	headers := map[string]string{"source": "checkout", "traceparent": "stale", "tracestate": "stale=1"}
	id, req := b.writeInSpan(t, outbox.Envelope{Type: "Ping", Payload: 1, Headers: headers})
	if want := map[string]string{"source": "checkout", "traceparent": "stale", "tracestate": "stale=1"}; !maps.Equal(headers, want) {
		t.Errorf("the caller's headers became %v, want %v", headers, want)
	}
	e, err := b.ob.Events().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if e.Headers["source"] != "checkout" {
		t.Errorf("stored headers %v lost source=checkout", e.Headers)
	}
	if v, ok := e.Headers["tracestate"]; ok {
		t.Errorf("stored headers kept the caller's stale tracestate %q", v)
	}
	tid, parent := parseTraceparent(t, e.Headers["traceparent"])
	if tid != req.TraceID() || parent != req.SpanID() {
		t.Errorf("stored traceparent names trace %s span %s, want the request's %s %s", tid, parent, req.TraceID(), req.SpanID())
	}

	plain := b.write(t, ctx, outbox.Envelope{Type: "Ping", Payload: 1})
	withHeaders := b.write(t, ctx, outbox.Envelope{Type: "Ping", Payload: 1, Headers: map[string]string{"k": "v"}})
	for _, id := range []string{plain, withHeaders} {
		e, err := b.ob.Events().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range propagator.Fields() {
			if v, ok := e.Headers[k]; ok {
				t.Errorf("event %s written without a span has header %s=%q", id, k, v)
			}
		}
	}
	b.deliverySpans(t, plain, 1) // delivered all the same, in a trace of its own
}

// TestWriterHookCopies calls BeforeWrite directly: it returns the envelopes it was given
// when there is nothing to inject, and otherwise new envelopes with new header maps.
func TestWriterHookCopies(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	spanCtx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()

	tests := []struct {
		name      string
		ctx       context.Context
		prop      propagation.TextMapPropagator
		wantTrace bool
	}{
		{name: "no span", ctx: context.Background(), prop: propagator},
		{name: "span, propagator writes nothing", ctx: spanCtx, prop: propagation.NewCompositeTextMapPropagator()},
		{name: "span", ctx: spanCtx, prop: propagator, wantTrace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hook := outboxotel.WriterHook(outboxotel.Config{Propagator: tt.prop})
			headers := map[string]string{"k": "v"}
			envs := []outbox.Envelope{{Type: "A", Payload: 1, Headers: headers}, {Type: "B", Payload: 2}}
			out, err := hook.BeforeWrite(tt.ctx, envs)
			if err != nil {
				t.Fatalf("BeforeWrite: %v", err)
			}
			if len(out) != len(envs) {
				t.Fatalf("got %d envelopes, want %d", len(out), len(envs))
			}
			if !maps.Equal(headers, map[string]string{"k": "v"}) || envs[1].Headers != nil {
				t.Errorf("the caller's envelopes changed: %v, %v", envs[0].Headers, envs[1].Headers)
			}
			if !tt.wantTrace {
				if &out[0] != &envs[0] {
					t.Error("BeforeWrite copied the envelopes with nothing to inject")
				}
				return
			}
			want := trace.SpanContextFromContext(spanCtx)
			for i, env := range out {
				if env.Type != envs[i].Type {
					t.Errorf("envelope %d: type %q, want %q", i, env.Type, envs[i].Type)
				}
				tid, parent := parseTraceparent(t, env.Headers["traceparent"])
				if tid != want.TraceID() || parent != want.SpanID() {
					t.Errorf("envelope %d: traceparent %q, want the span's", i, env.Headers["traceparent"])
				}
			}
			if out[0].Headers["k"] != "v" {
				t.Errorf("envelope 0 lost its header: %v", out[0].Headers)
			}
		})
	}
}
