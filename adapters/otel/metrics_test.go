package outboxotel_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	outboxotel "github.com/outboxkit/outbox/adapters/otel"
	outbox "github.com/outboxkit/outbox/core"
)

// newMetrics returns NewMetrics(cfg) on a fresh MeterProvider and the reader that
// collects it.
func newMetrics(t *testing.T, cfg outboxotel.Config) (outbox.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		if err := mp.Shutdown(context.Background()); err != nil {
			t.Errorf("shut down the meter provider: %v", err)
		}
	})
	cfg.MeterProvider = mp
	m, err := outboxotel.NewMetrics(cfg)
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	return m, reader
}

// collect reads every metric of the adapter's scope, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != outboxotel.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// kv builds attributes from key, value pairs.
func kv(pairs ...string) []attribute.KeyValue {
	var kvs []attribute.KeyValue
	for i := 0; i+1 < len(pairs); i += 2 {
		kvs = append(kvs, attribute.String(pairs[i], pairs[i+1]))
	}
	return kvs
}

// sumPoint returns the value of the int64 sum name at exactly the attributes kvs.
func sumPoint(t *testing.T, ms map[string]metricdata.Metrics, name string, kvs ...attribute.KeyValue) (int64, bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, false
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, m.Data)
	}
	want := attribute.NewSet(kvs...)
	for _, dp := range sum.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value, true
		}
	}
	return 0, false
}

// histPoint returns the data point of the float64 histogram name at exactly kvs.
func histPoint(t *testing.T, ms map[string]metricdata.Metrics, name string, kvs ...attribute.KeyValue) (metricdata.HistogramDataPoint[float64], bool) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return metricdata.HistogramDataPoint[float64]{}, false
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", name, m.Data)
	}
	want := attribute.NewSet(kvs...)
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp, true
		}
	}
	return metricdata.HistogramDataPoint[float64]{}, false
}

// TestMetricsDeliveries runs real deliveries on SQLite: a success on the hot path, and a
// failure on the hot path retried with success on the cold path.
func TestMetricsDeliveries(t *testing.T) {
	t.Parallel()
	m, reader := newMetrics(t, outboxotel.Config{Instance: "orders"})
	var failures atomic.Int32
	b := setup(t, setupOptions{outbox: outbox.Config{
		Metrics: m,
		// Young rows are left to the hot path; the retry, due at once, is polled.
		PollInterval: 10 * time.Millisecond, PollMaxInterval: -1, SkipRecent: 200 * time.Millisecond,
		Retry: outbox.FixedBackoff{},
	}}, func(b *testBundle) error {
		ok := outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })
		flaky := outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			if failures.Add(1) == 1 {
				return errors.New("downstream unavailable")
			}
			return nil
		})
		return errors.Join(b.ob.Register("Order", "OrderPlaced", ok), b.ob.Register("Order", "OrderShipped", flaky))
	})
	b.writeInSpan(t, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
	b.writeInSpan(t, outbox.Envelope{Type: "OrderShipped", AggregateType: "Order", Payload: 1})

	attempt := func(path, outcome, typ string) []attribute.KeyValue {
		return kv("outbox.instance", "orders", "outbox.path", path, "outbox.outcome", outcome,
			"outbox.aggregate.type", "Order", "outbox.event.type", typ)
	}
	var ms map[string]metricdata.Metrics
	waitFor(t, "the retry's successful attempt", func() bool {
		ms = collect(t, reader)
		n, _ := sumPoint(t, ms, "outbox.dispatch.attempts", attempt("cold", "done", "OrderShipped")...)
		return n == 1
	})

	attempts := ms["outbox.dispatch.attempts"]
	if attempts.Unit != "{attempt}" {
		t.Errorf("outbox.dispatch.attempts unit = %q, want {attempt}", attempts.Unit)
	}
	if sum := attempts.Data.(metricdata.Sum[int64]); !sum.IsMonotonic || len(sum.DataPoints) != 3 {
		t.Errorf("outbox.dispatch.attempts: monotonic %v with %d points, want a monotonic sum with 3: %+v",
			sum.IsMonotonic, len(sum.DataPoints), sum.DataPoints)
	}
	duration := ms["outbox.dispatch.duration"]
	if duration.Unit != "s" {
		t.Errorf("outbox.dispatch.duration unit = %q, want s", duration.Unit)
	}
	for _, a := range [][]attribute.KeyValue{
		attempt("hot", "done", "OrderPlaced"),
		attempt("hot", "retry", "OrderShipped"),
		attempt("cold", "done", "OrderShipped"),
	} {
		if n, ok := sumPoint(t, ms, "outbox.dispatch.attempts", a...); n != 1 {
			t.Errorf("outbox.dispatch.attempts%v = %d (present %v), want 1", a, n, ok)
		}
		dp, ok := histPoint(t, ms, "outbox.dispatch.duration", a...)
		if !ok || dp.Count != 1 {
			t.Errorf("outbox.dispatch.duration%v: count %d (present %v), want 1", a, dp.Count, ok)
			continue
		}
		if !slices.Equal(dp.Bounds, outboxotel.DefaultBuckets()) {
			t.Errorf("outbox.dispatch.duration bounds = %v, want DefaultBuckets", dp.Bounds)
		}
		if dp.Sum < 0 || dp.Sum > 30 {
			t.Errorf("outbox.dispatch.duration%v sum = %v s, want a plausible duration", a, dp.Sum)
		}
	}
	for path, want := range map[string]uint64{"hot": 2, "cold": 1} {
		dp, ok := histPoint(t, ms, "outbox.dispatch.latency", kv("outbox.instance", "orders", "outbox.path", path)...)
		if !ok || dp.Count != want {
			t.Errorf("outbox.dispatch.latency{path=%s} count = %d (present %v), want %d", path, dp.Count, ok, want)
		}
	}
	for name, want := range map[string]int64{"outbox.hot.enqueued": 2, "outbox.cold.enqueued": 1} {
		if n, _ := sumPoint(t, ms, name, kv("outbox.instance", "orders")...); n != want {
			t.Errorf("%s = %d, want %d", name, n, want)
		}
	}
	for _, path := range []string{"hot", "cold"} {
		if _, ok := sumPoint(t, ms, "outbox.queue.depth", kv("outbox.instance", "orders", "outbox.path", path)...); !ok {
			t.Errorf("outbox.queue.depth{path=%s} is missing", path)
		}
	}
}

// TestMetricsInstruments calls every method of the Metrics and checks each instrument's
// kind, unit and value.
func TestMetricsInstruments(t *testing.T) {
	t.Parallel()
	m, reader := newMetrics(t, outboxotel.Config{})
	ms := collect(t, reader)
	// The observed instruments report from the start, at 0.
	for _, name := range []string{"outbox.stuck_attempts", "outbox.keys_held"} {
		if n, ok := sumPoint(t, ms, name); !ok || n != 0 {
			t.Errorf("%s before any call = %d (present %v), want 0", name, n, ok)
		}
	}

	m.HotEnqueued()
	m.HotEnqueued()
	m.HotDropped()
	m.DelayedSkipped()
	m.ColdEnqueued()
	m.QueueDepths(3, 1)
	m.OldestPendingLag(1500 * time.Millisecond)
	m.StuckAttempts(2)
	m.KeysHeld(5)
	m.Claims(outbox.ClaimTaken, 4)
	m.Claims(outbox.ClaimLost, 1)
	m.Claims(outbox.ClaimTakenOver, 0) // nothing to count
	m.Dispatched(outbox.DispatchInfo{
		Path: outbox.PathCold, Outcome: outbox.OutcomeDead, EventType: "E", AggregateType: "A",
		Duration: 250 * time.Millisecond, Latency: 2 * time.Second,
	})
	ms = collect(t, reader)

	sums := []struct {
		name, unit string
		monotonic  bool
		attrs      []attribute.KeyValue
		want       int64
	}{
		{"outbox.hot.enqueued", "{event}", true, nil, 2},
		{"outbox.hot.dropped", "{event}", true, nil, 1},
		{"outbox.hot.delayed_skipped", "{event}", true, nil, 1},
		{"outbox.cold.enqueued", "{event}", true, nil, 1},
		{"outbox.claims", "{claim}", true, kv("outbox.claim.event", "taken"), 4},
		{"outbox.claims", "{claim}", true, kv("outbox.claim.event", "lost"), 1},
		{"outbox.dispatch.attempts", "{attempt}", true, kv("outbox.path", "cold", "outbox.outcome", "dead", "outbox.aggregate.type", "A", "outbox.event.type", "E"), 1},
		{"outbox.queue.depth", "{event}", false, kv("outbox.path", "hot"), 3},
		{"outbox.queue.depth", "{event}", false, kv("outbox.path", "cold"), 1},
		{"outbox.stuck_attempts", "{attempt}", false, nil, 2},
		{"outbox.keys_held", "{key}", false, nil, 5},
	}
	for _, s := range sums {
		got, ok := sumPoint(t, ms, s.name, s.attrs...)
		if !ok || got != s.want {
			t.Errorf("%s%v = %d (present %v), want %d", s.name, s.attrs, got, ok, s.want)
			continue
		}
		if m := ms[s.name]; m.Unit != s.unit || m.Data.(metricdata.Sum[int64]).IsMonotonic != s.monotonic {
			t.Errorf("%s: unit %q, monotonic %v; want %q, %v", s.name, m.Unit, m.Data.(metricdata.Sum[int64]).IsMonotonic, s.unit, s.monotonic)
		}
	}
	if pts := ms["outbox.claims"].Data.(metricdata.Sum[int64]).DataPoints; len(pts) != 2 {
		t.Errorf("outbox.claims has %d points, want 2 (taken, lost): %+v", len(pts), pts)
	}

	lag, ok := ms["outbox.poll.lag"].Data.(metricdata.Gauge[float64])
	if !ok || len(lag.DataPoints) != 1 || lag.DataPoints[0].Value != 1.5 || ms["outbox.poll.lag"].Unit != "s" {
		t.Errorf("outbox.poll.lag = %+v (unit %q), want one point of 1.5 s", ms["outbox.poll.lag"].Data, ms["outbox.poll.lag"].Unit)
	}
	for name, want := range map[string]float64{"outbox.dispatch.duration": 0.25, "outbox.dispatch.latency": 2} {
		h := ms[name].Data.(metricdata.Histogram[float64])
		if len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 || h.DataPoints[0].Sum != want {
			t.Errorf("%s = %+v, want one observation of %v s", name, h.DataPoints, want)
		}
	}
}

// TestNewMetricsGlobal checks that NewMetrics works on the global MeterProvider, which
// does nothing until one is set.
func TestNewMetricsGlobal(t *testing.T) {
	t.Parallel()
	m, err := outboxotel.NewMetrics(outboxotel.Config{})
	if err != nil {
		t.Fatalf("NewMetrics: %v", err)
	}
	m.HotEnqueued()
	m.Dispatched(outbox.DispatchInfo{EventType: "E"})
}

// TestMetricsViewDropsEventTypes checks the View docs/otel.md shows to drop the event
// type attributes.
func TestMetricsViewDropsEventTypes(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(reader),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Scope: instrumentation.Scope{Name: outboxotel.ScopeName}},
			sdkmetric.Stream{AttributeFilter: attribute.NewDenyKeysFilter("outbox.event.type", "outbox.aggregate.type")},
		)),
	)
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := outboxotel.NewMetrics(outboxotel.Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	m.Dispatched(outbox.DispatchInfo{Outcome: outbox.OutcomeDone, EventType: "E1", AggregateType: "A"})
	m.Dispatched(outbox.DispatchInfo{Outcome: outbox.OutcomeDone, EventType: "E2", AggregateType: "B"})
	ms := collect(t, reader)
	if n, ok := sumPoint(t, ms, "outbox.dispatch.attempts", kv("outbox.path", "hot", "outbox.outcome", "done")...); n != 2 {
		t.Errorf("outbox.dispatch.attempts{hot, done} = %d (present %v), want 2 in one series", n, ok)
	}
	if dp, ok := histPoint(t, ms, "outbox.dispatch.duration", kv("outbox.path", "hot", "outbox.outcome", "done")...); dp.Count != 2 {
		t.Errorf("outbox.dispatch.duration{hot, done} count = %d (present %v), want 2", dp.Count, ok)
	}
}
