package outboxotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	outbox "github.com/outboxkit/outbox/core"
)

// spanNamePrefix starts the name of every delivery span: "outbox deliver OrderPlaced"
// delivers an event of type OrderPlaced.
const spanNamePrefix = "outbox deliver "

// The attributes of a delivery span.
const (
	keyMessagingSystem        = attribute.Key("messaging.system")
	keyMessagingOperation     = attribute.Key("messaging.operation")
	keyMessagingOperationType = attribute.Key("messaging.operation.type")
	keyMessagingMessageID     = attribute.Key("messaging.message.id")
	keyEventID                = attribute.Key("outbox.event.id")
	keyEventType              = attribute.Key("outbox.event.type")
	keyAggregateType          = attribute.Key("outbox.aggregate.type")
	keyAggregateID            = attribute.Key("outbox.aggregate.id")
	keyTenantID               = attribute.Key("outbox.tenant.id")
	keyAttempt                = attribute.Key("outbox.attempt")
	keyOrderKey               = attribute.Key("outbox.order_key")
	keyOutcome                = attribute.Key("outbox.outcome")
)

// The values of outbox.outcome on a delivery span: the names of [outbox.Outcome] where
// the attempt's error decides it, and failure for an error whose outcome (retry, dead
// or fallback) the attempt count and the policy decide after the span ends.
const (
	outcomeDone     = "done"
	outcomeDeferred = "deferred"
	outcomeFailure  = "failure"
)

// Interceptor returns the interceptor that traces every delivery attempt: put it first
// in [outbox.Config].Interceptors, so that the other interceptors and the listener run
// inside its span.
//
// Before reads the trace context from the event's Headers through cfg's propagator
// (the one [WriterHook] wrote) and starts a span of kind Consumer named "outbox deliver
// <event type>", as a child of the writer's span, or, with
// [Config.LinkToWriter], as the root of a new trace with a link to it. An event that
// carries no trace context gets a root span; a span in Before's ctx is never the
// parent (it would be the one current when [outbox.Outbox.Start] was called). The
// context Before returns carries the span and the extracted baggage, so the listener,
// and a broker relay calling [Propagate], run inside it.
//
// After sets outbox.outcome to "done" when the attempt's error is nil, to "deferred"
// when it is [outbox.Defer]'s, and to "failure" otherwise, recording the error and
// setting the status Error then, and ends the span. Neither method returns an error. The attributes are listed in the package
// documentation.
func Interceptor(cfg Config) outbox.Interceptor {
	ic := interceptor{
		tracer: cfg.tracerProvider().Tracer(ScopeName),
		prop:   cfg.propagator(),
		link:   cfg.LinkToWriter,
		fixed: []attribute.KeyValue{
			keyMessagingSystem.String("outbox"),
			keyMessagingOperation.String("process"),
			keyMessagingOperationType.String("process"),
		},
	}
	if cfg.Instance != "" {
		ic.fixed = append(ic.fixed, keyInstance.String(cfg.Instance))
	}
	return ic
}

// interceptor is the [outbox.Interceptor] of [Interceptor].
type interceptor struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	link   bool
	fixed  []attribute.KeyValue // the attributes every span has
}

// Before starts the delivery span; see [Interceptor].
func (ic interceptor) Before(ctx context.Context, e *outbox.Event) (context.Context, error) {
	// Drop any span of ctx, so that only the event's headers can give a parent.
	ctx = ic.prop.Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), propagation.MapCarrier(e.Headers))

	attrs := make([]attribute.KeyValue, 0, len(ic.fixed)+9)
	attrs = append(attrs, ic.fixed...)
	attrs = append(attrs,
		keyMessagingMessageID.String(e.ID),
		keyEventID.String(e.ID),
		keyEventType.String(e.Type),
		keyAggregateType.String(e.AggregateType),
		keyAttempt.Int(e.Attempts+1),
	)
	if e.AggregateID != "" {
		attrs = append(attrs, keyAggregateID.String(e.AggregateID))
	}
	if e.TenantID != "" {
		attrs = append(attrs, keyTenantID.String(e.TenantID))
	}
	if e.OrderKey != "" {
		attrs = append(attrs, keyOrderKey.String(e.OrderKey))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if ic.link {
		if writer := trace.SpanContextFromContext(ctx); writer.IsValid() {
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: writer}))
		}
	}
	ctx, _ = ic.tracer.Start(ctx, spanNamePrefix+e.Type, opts...)
	return ctx, nil
}

// After ends the delivery span that Before put in ctx; see [Interceptor].
func (ic interceptor) After(ctx context.Context, _ *outbox.Event, err error) error {
	span := trace.SpanFromContext(ctx)
	if de := (*outbox.DeferError)(nil); err == nil || errors.As(err, &de) {
		outcome := outcomeDone
		if err != nil {
			outcome = outcomeDeferred // no failure: no attempt counted
		}
		span.SetAttributes(keyOutcome.String(outcome))
	} else {
		span.SetAttributes(keyOutcome.String(outcomeFailure))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return nil
}
