package outboxotel

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// Propagate returns a function that writes the trace context of its ctx through cfg's
// propagator, calling set once for each field (traceparent and tracestate with the W3C
// propagator, baggage too with the Baggage propagator). Its signature is that of the
// Propagate field of the outbox's Kafka and NATS relays, which call it with the
// delivery's context right before they publish, so that the consumer of the broker
// message continues the delivery span's trace. Any other code that sends a message can
// call it the same way, with set writing a message header. When ctx has no valid span,
// the W3C propagator writes nothing. A nil set does nothing.
func Propagate(cfg Config) func(ctx context.Context, set func(key, value string)) {
	prop := cfg.propagator()
	return func(ctx context.Context, set func(key, value string)) {
		if set == nil {
			return
		}
		prop.Inject(ctx, setCarrier(set))
	}
}

// setCarrier is a write-only [propagation.TextMapCarrier] that hands every field to a
// function.
type setCarrier func(key, value string)

var _ propagation.TextMapCarrier = setCarrier(nil)

// Get returns "": the carrier is write-only.
func (setCarrier) Get(string) string { return "" }

// Set calls the function.
func (c setCarrier) Set(key, value string) { c(key, value) }

// Keys returns nil: the carrier is write-only.
func (setCarrier) Keys() []string { return nil }
