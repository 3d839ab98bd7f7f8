package outboxotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter this package uses:
// match it in an SDK View to rename or drop its instruments or attributes.
const ScopeName = "github.com/outboxkit/outbox/adapters/otel"

// Config configures [WriterHook], [Interceptor], [Propagate] and [NewMetrics]. The zero
// value uses the OpenTelemetry globals. Give the writer hook, the interceptor and the
// relays' Propagate the same Propagator, or leave it nil in all of them.
type Config struct {
	// TracerProvider creates the delivery spans. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into event headers and broker messages, and
	// reads it back. The global propagator does nothing until otel.SetTextMapPropagator
	// is called: set it, or set this field to
	// propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}).
	// Defaults to otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
	// MeterProvider creates the instruments of [NewMetrics]. Defaults to
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// LinkToWriter starts each delivery span in a trace of its own, linked to the span
	// that wrote the event, instead of as that span's child in the writer's trace. Use it
	// when one request writes many events, or when deliveries run long after the
	// request, and the request's trace should stay small. Defaults to false: the
	// delivery span is a child of the writer's span.
	LinkToWriter bool
	// Instance names this outbox: when set, the attribute outbox.instance carries it on
	// every delivery span and every measurement, so that several outboxes in one process
	// can share a MeterProvider (their gauges would overwrite each other otherwise).
	// Defaults to "" (no attribute).
	Instance string
}

// keyInstance is the attribute that carries [Config.Instance].
const keyInstance = attribute.Key("outbox.instance")

// tracerProvider returns the configured tracer provider or the global one.
func (c Config) tracerProvider() trace.TracerProvider {
	if c.TracerProvider != nil {
		return c.TracerProvider
	}
	return otel.GetTracerProvider()
}

// propagator returns the configured propagator or the global one.
func (c Config) propagator() propagation.TextMapPropagator {
	if c.Propagator != nil {
		return c.Propagator
	}
	return otel.GetTextMapPropagator()
}

// meterProvider returns the configured meter provider or the global one.
func (c Config) meterProvider() metric.MeterProvider {
	if c.MeterProvider != nil {
		return c.MeterProvider
	}
	return otel.GetMeterProvider()
}
