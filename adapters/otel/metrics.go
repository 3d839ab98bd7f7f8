package outboxotel

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	outbox "github.com/outboxkit/outbox/core"
)

// The attributes of the measurements.
const (
	keyPath       = attribute.Key("outbox.path")
	keyClaimEvent = attribute.Key("outbox.claim.event")
)

// DefaultBuckets returns the explicit bucket boundaries, in seconds, that [NewMetrics]
// advises for outbox.dispatch.duration and outbox.dispatch.latency: 0.5 ms to 60 s,
// about three per decade, as the Prometheus adapter's. The SDK's own default
// boundaries suit milliseconds, not seconds. A View overrides the advice. Each call
// returns a new slice.
func DefaultBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// NewMetrics returns an [outbox.Metrics] that records the outbox's measurements with
// instruments of cfg's MeterProvider, under the meter [ScopeName]: put it in
// [outbox.Config].Metrics. The instruments are listed in the package documentation.
// Its methods are safe for concurrent use; QueueDepths, OldestPendingLag,
// StuckAttempts and KeysHeld only store a number, which the instruments' callbacks
// read when the SDK collects. The callbacks stay registered for the life of the
// MeterProvider.
//
// It returns the meter's errors in creating the instruments, each wrapped with the
// instrument's name and joined with errors.Join.
func NewMetrics(cfg Config) (outbox.Metrics, error) {
	meter := cfg.meterProvider().Meter(ScopeName)
	m := &otelMetrics{}
	if cfg.Instance != "" {
		m.base = []attribute.KeyValue{keyInstance.String(cfg.Instance)}
	}
	m.plain = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(m.base...))}
	for i, path := range []outbox.Path{outbox.PathHot, outbox.PathCold} {
		set := m.set(keyPath.String(path.String()))
		m.latencyOpts[i] = []metric.RecordOption{metric.WithAttributeSet(set)}
		m.depthOpts[i] = []metric.ObserveOption{metric.WithAttributeSet(set)}
	}
	for ev := range m.claimOpts {
		m.claimOpts[ev] = []metric.AddOption{
			metric.WithAttributeSet(m.set(keyClaimEvent.String(outbox.ClaimEvent(ev).String()))),
		}
	}
	observeOpts := []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(m.base...))}

	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, wrapInstrument(name, err))
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(DefaultBuckets()...))
		errs = append(errs, wrapInstrument(name, err))
		return h
	}
	upDown := func(name, unit, desc string, observe func(metric.Int64Observer)) {
		_, err := meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				observe(o)
				return nil
			}))
		errs = append(errs, wrapInstrument(name, err))
	}

	m.hotEnqueued = counter("outbox.hot.enqueued", "{event}",
		"Committed events handed to the hot queue right after commit.")
	m.hotDropped = counter("outbox.hot.dropped", "{event}",
		"Committed events the hot queue could not take (full, or the dispatcher not running); the poller delivers them later.")
	m.delayedSkipped = counter("outbox.hot.delayed_skipped", "{event}",
		"Committed events that skipped the hot queue because their delivery is delayed; the poller delivers them when due.")
	m.coldEnqueued = counter("outbox.cold.enqueued", "{event}",
		"Pending events the poller handed to the cold queue.")
	m.dispatched = counter("outbox.dispatch.attempts", "{attempt}",
		"Finished delivery attempts by path (hot, cold), outcome (done, retry: failed and will be retried, dead, deferred: the listener asked for a later attempt, fallback: failed for good and handled by the fallback), aggregate type and event type.")
	m.duration = histogram("outbox.dispatch.duration",
		"Time the interceptors and the listener took for one delivery attempt.")
	m.latency = histogram("outbox.dispatch.latency",
		"Time from commit (hot path) or from when the event became due (cold path) to the start of a delivery attempt.")
	m.claims = counter("outbox.claims", "{claim}",
		"Claims of MultiNode mode by event: taken, renewed, lost (another node took the event over), expired (left to expire), released (by a hard stop, or a pre-claim the hot path did not take), taken_over (claimed after another claim expired; not counted on SQLite).")
	upDown("outbox.queue.depth", "{event}",
		"Events waiting in the dispatcher's in-memory queue of each path (hot: handed over after commit; cold: read by the poller).",
		func(o metric.Int64Observer) {
			o.Observe(m.hotDepth.Load(), m.depthOpts[0]...)
			o.Observe(m.coldDepth.Load(), m.depthOpts[1]...)
		})
	upDown("outbox.stuck_attempts", "{attempt}",
		"Listener attempts running past ListenerTimeout (their listener ignored its context); their workers took other events.",
		func(o metric.Int64Observer) { o.Observe(m.stuck.Load(), observeOpts...) })
	upDown("outbox.keys_held", "{key}",
		"Ordered events this process holds (queued, running, or their outcome not yet written): one per order key, so the keys it holds.",
		func(o metric.Int64Observer) { o.Observe(m.keysHeld.Load(), observeOpts...) })
	_, err := meter.Float64ObservableGauge("outbox.poll.lag", metric.WithUnit("s"),
		metric.WithDescription("Time since the oldest due event seen by the poller's last cycle became due; 0 when it saw none."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(time.Duration(m.pollLag.Load()).Seconds(), observeOpts...)
			return nil
		}))
	errs = append(errs, wrapInstrument("outbox.poll.lag", err))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// wrapInstrument wraps the error of creating the instrument name, or returns nil.
func wrapInstrument(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outboxotel: create instrument %s: %w", name, err)
}

// otelMetrics is the [outbox.Metrics] of [NewMetrics].
type otelMetrics struct {
	hotEnqueued    metric.Int64Counter
	hotDropped     metric.Int64Counter
	delayedSkipped metric.Int64Counter
	coldEnqueued   metric.Int64Counter
	dispatched     metric.Int64Counter
	duration       metric.Float64Histogram
	latency        metric.Float64Histogram
	claims         metric.Int64Counter

	// The values of the observed instruments, read at collection.
	hotDepth  atomic.Int64
	coldDepth atomic.Int64
	stuck     atomic.Int64
	keysHeld  atomic.Int64
	pollLag   atomic.Int64 // nanoseconds

	// The attributes, computed once: base holds outbox.instance when it is set.
	base        []attribute.KeyValue
	plain       []metric.AddOption
	latencyOpts [2][]metric.RecordOption  // by path: hot, cold
	depthOpts   [2][]metric.ObserveOption // by path: hot, cold
	claimOpts   [outbox.ClaimTakenOver + 1][]metric.AddOption
}

var _ outbox.Metrics = (*otelMetrics)(nil)

// set returns the attribute set of base and kvs.
func (m *otelMetrics) set(kvs ...attribute.KeyValue) attribute.Set {
	all := make([]attribute.KeyValue, 0, len(m.base)+len(kvs))
	return attribute.NewSet(append(append(all, m.base...), kvs...)...)
}

// pathIndex maps a path to its index in latencyOpts and depthOpts; like
// [outbox.Path.String], anything but PathHot is cold.
func pathIndex(p outbox.Path) int {
	if p == outbox.PathHot {
		return 0
	}
	return 1
}

// HotEnqueued adds 1 to outbox.hot.enqueued.
func (m *otelMetrics) HotEnqueued() { m.hotEnqueued.Add(context.Background(), 1, m.plain...) }

// HotDropped adds 1 to outbox.hot.dropped.
func (m *otelMetrics) HotDropped() { m.hotDropped.Add(context.Background(), 1, m.plain...) }

// DelayedSkipped adds 1 to outbox.hot.delayed_skipped.
func (m *otelMetrics) DelayedSkipped() { m.delayedSkipped.Add(context.Background(), 1, m.plain...) }

// ColdEnqueued adds 1 to outbox.cold.enqueued.
func (m *otelMetrics) ColdEnqueued() { m.coldEnqueued.Add(context.Background(), 1, m.plain...) }

// Dispatched adds 1 to outbox.dispatch.attempts and records the attempt's duration in
// outbox.dispatch.duration, both with the attributes outbox.path, outbox.outcome,
// outbox.aggregate.type and outbox.event.type, and its latency in
// outbox.dispatch.latency with outbox.path.
func (m *otelMetrics) Dispatched(info outbox.DispatchInfo) {
	ctx := context.Background()
	p := pathIndex(info.Path)
	m.latency.Record(ctx, info.Latency.Seconds(), m.latencyOpts[p]...)
	set := m.set(
		keyPath.String(info.Path.String()),
		keyOutcome.String(info.Outcome.String()),
		keyAggregateType.String(info.AggregateType),
		keyEventType.String(info.EventType),
	)
	m.dispatched.Add(ctx, 1, metric.WithAttributeSet(set))
	m.duration.Record(ctx, info.Duration.Seconds(), metric.WithAttributeSet(set))
}

// QueueDepths keeps the values of outbox.queue.depth.
func (m *otelMetrics) QueueDepths(hot, cold int) {
	m.hotDepth.Store(int64(hot))
	m.coldDepth.Store(int64(cold))
}

// OldestPendingLag keeps the value of outbox.poll.lag.
func (m *otelMetrics) OldestPendingLag(lag time.Duration) { m.pollLag.Store(int64(lag)) }

// StuckAttempts keeps the value of outbox.stuck_attempts.
func (m *otelMetrics) StuckAttempts(n int) { m.stuck.Store(int64(n)) }

// KeysHeld keeps the value of outbox.keys_held.
func (m *otelMetrics) KeysHeld(n int) { m.keysHeld.Store(int64(n)) }

// Claims adds n to outbox.claims with the attribute outbox.claim.event.
func (m *otelMetrics) Claims(event outbox.ClaimEvent, n int) {
	if n <= 0 {
		return
	}
	var opts []metric.AddOption
	if event >= 0 && int(event) < len(m.claimOpts) {
		opts = m.claimOpts[event]
	} else { // an event added to core after this package was written
		opts = []metric.AddOption{metric.WithAttributeSet(m.set(keyClaimEvent.String(event.String())))}
	}
	m.claims.Add(context.Background(), int64(n), opts...)
}
