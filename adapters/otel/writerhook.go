package outboxotel

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	outbox "github.com/outboxkit/outbox/core"
)

// WriterHook returns the hook that carries the writer's trace into the events: put it
// in [outbox.Config].WriterHooks. Its BeforeWrite injects the trace context of the
// write's ctx through cfg's propagator into the Headers of every envelope (traceparent
// and tracestate with the W3C propagator, baggage too with the Baggage propagator).
// The headers the propagator owns (its Fields) are replaced; the others are kept. It never modifies the
// caller's envelopes or maps: a changed envelope gets a new Headers map in a new slice.
// When ctx has no valid span, or the propagator writes nothing, the envelopes pass
// unchanged. Its other methods do nothing, and it never returns an error.
func WriterHook(cfg Config) outbox.WriterHook {
	return writerHook{prop: cfg.propagator()}
}

// writerHook is the [outbox.WriterHook] of [WriterHook].
type writerHook struct {
	outbox.NopWriterHook
	prop propagation.TextMapPropagator
}

// BeforeWrite injects ctx's trace context into copies of the envelopes' headers.
func (h writerHook) BeforeWrite(ctx context.Context, envs []outbox.Envelope) ([]outbox.Envelope, error) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return envs, nil
	}
	fields := propagation.MapCarrier{}
	h.prop.Inject(ctx, fields)
	if len(fields) == 0 {
		return envs, nil
	}
	out := make([]outbox.Envelope, len(envs))
	for i, env := range envs {
		headers := make(map[string]string, len(env.Headers)+len(fields))
		maps.Copy(headers, env.Headers)
		for _, k := range h.prop.Fields() {
			delete(headers, k) // a stale tracestate or baggage must not outlive its traceparent
		}
		maps.Copy(headers, fields)
		env.Headers = headers
		out[i] = env
	}
	return out, nil
}
