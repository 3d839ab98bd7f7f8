package outboxprom

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	outbox "github.com/outboxkit/outbox/core"
)

// DefaultNamespace is the first part of every metric name unless [Options.Namespace] or
// [StatsOptions.Namespace] says otherwise.
const DefaultNamespace = "outbox"

// InstanceLabel is the constant label that carries [Options.Instance] and
// [StatsOptions.Instance].
const InstanceLabel = "outbox"

// The variable labels of the metrics.
const (
	labelPath          = "path"
	labelOutcome       = "outcome"
	labelAggregateType = "aggregate_type"
	labelEventType     = "event_type"
	labelListener      = "listener"
	labelStatus        = "status"
)

// DefaultBuckets returns the default upper bounds, in seconds, of the listener duration
// and dispatch latency histograms: 0.5 ms to 60 s, about three per decade. Each call
// returns a new slice.
func DefaultBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// Options configures [New]. The zero value is ready to use.
type Options struct {
	// Namespace is the first part of every metric name: "outbox" gives
	// outbox_hot_enqueued_total. It must match [a-zA-Z_][a-zA-Z0-9_]*.
	// Defaults to DefaultNamespace.
	Namespace string
	// Instance names this outbox. When set, every metric carries the constant label
	// outbox="<Instance>" (see InstanceLabel), so that several outboxes of one process
	// register on one registry without colliding. Give every outbox that shares a
	// registry and a Namespace an Instance: a registry rejects a metric name registered
	// both with and without the label. Defaults to "" (no label).
	Instance string
	// DurationBuckets are the upper bounds, in seconds and strictly increasing, of
	// outbox_listener_duration_seconds. Defaults to DefaultBuckets().
	DurationBuckets []float64
	// LatencyBuckets are the upper bounds, in seconds and strictly increasing, of
	// outbox_dispatch_latency_seconds. Defaults to DefaultBuckets().
	LatencyBuckets []float64
	// EventTypeLabels adds the labels aggregate_type and event_type to
	// outbox_dispatch_total and outbox_listener_duration_seconds. Every distinct
	// (aggregate type, event type) pair that is dispatched then creates its own series
	// (a dozen per pair for the histogram), and each dispatch costs a label lookup and
	// an allocation. Turn it on only when the event types are few and fixed by code.
	// Defaults to false.
	EventTypeLabels bool
	// ListenerLabels adds the label listener, the listener's name
	// ([outbox.Subscription.Name]; "" for an unroutable event), to
	// outbox_dispatch_total and outbox_listener_duration_seconds. Listener names are
	// fixed by code, so the series stay few, but each dispatch costs a label lookup.
	// Defaults to false.
	ListenerLabels bool
}

// withDefaults fills in the defaults and validates o.
func (o Options) withDefaults() (Options, error) {
	o.Namespace = cmp.Or(o.Namespace, DefaultNamespace)
	if err := validateNames(o.Namespace, o.Instance); err != nil {
		return o, err
	}
	if len(o.DurationBuckets) == 0 {
		o.DurationBuckets = DefaultBuckets()
	}
	if len(o.LatencyBuckets) == 0 {
		o.LatencyBuckets = DefaultBuckets()
	}
	if err := validateBuckets("DurationBuckets", o.DurationBuckets); err != nil {
		return o, err
	}
	if err := validateBuckets("LatencyBuckets", o.LatencyBuckets); err != nil {
		return o, err
	}
	return o, nil
}

// Metrics implements [outbox.Metrics] with Prometheus counters, gauges and histograms.
// Create it with [New] and pass it as [outbox.Config].Metrics. It is also the
// prometheus.Collector that New registers: unregister it with reg.Unregister(m).
//
// Its methods are safe for concurrent use and, unless [Options.EventTypeLabels] is set,
// do not allocate: every series is created and looked up once, in New (a subscription's
// series of SubscriptionLoad at its first report). It implements
// outboxtype.SubscriptionMetrics too.
type Metrics struct {
	hotEnqueued    prometheus.Counter
	hotDropped     prometheus.Counter
	delayedSkipped prometheus.Counter
	coldEnqueued   prometheus.Counter
	pollLag        prometheus.Gauge
	stuck          prometheus.Gauge
	keysHeld       prometheus.Gauge
	subQueued      *prometheus.GaugeVec // by listener: SubscriptionLoad
	subRunning     *prometheus.GaugeVec
	subLimited     *prometheus.GaugeVec
	subPaused      *prometheus.GaugeVec
	subs           sync.Map // listener → *subGauges: each listener's series, looked up once
	claimsVec      *prometheus.CounterVec
	claims         [outbox.ClaimTakenOver + 1]prometheus.Counter
	depth          [numPaths]prometheus.Gauge
	dispatch       [numPaths][numOutcomes]prometheus.Counter
	duration       [numOutcomes]prometheus.Observer
	latency        [numPaths]prometheus.Observer

	// The vectors, for Describe and Collect and for the series created per call.
	dispatchVec    *prometheus.CounterVec
	durationVec    *prometheus.HistogramVec
	eventTypes     bool
	listeners      bool
	collectors     []prometheus.Collector
	namespace      string
	instanceLabels prometheus.Labels
}

var (
	_ outbox.Metrics       = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)

// The paths and outcomes in label order, indexed by pathIndex and outcomeIndex.
const (
	numPaths    = 2
	numOutcomes = 5
)

var (
	pathNames    = [numPaths]string{outbox.PathHot.String(), outbox.PathCold.String()}
	outcomeNames = [numOutcomes]string{
		outbox.OutcomeDone.String(), outbox.OutcomeRetry.String(),
		outbox.OutcomeDead.String(), outbox.OutcomeDeferred.String(), outbox.OutcomeFallback.String(),
	}
)

// pathIndex maps a path to its index in pathNames; like [outbox.Path.String], anything
// but PathHot is cold.
func pathIndex(p outbox.Path) int {
	if p == outbox.PathHot {
		return 0
	}
	return 1
}

// outcomeIndex maps an outcome to its index in outcomeNames, or reports false for an
// outcome this package does not know.
func outcomeIndex(o outbox.Outcome) (int, bool) {
	switch o {
	case outbox.OutcomeDone:
		return 0, true
	case outbox.OutcomeRetry:
		return 1, true
	case outbox.OutcomeDead:
		return 2, true
	case outbox.OutcomeDeferred:
		return 3, true
	case outbox.OutcomeFallback:
		return 4, true
	default:
		return 0, false
	}
}

// New creates the outbox metrics and registers them on reg as one collector. It never
// uses prometheus.DefaultRegisterer: pass it explicitly if you want it.
//
// It returns [ErrNilRegisterer] when reg is nil, an error wrapping [ErrInvalidOptions]
// for a bad option, and the registry's error, wrapped, when registration fails:
// registering a second Metrics with the same Namespace and Instance on one registry
// returns an error matching *prometheus.AlreadyRegisteredError (with errors.As) whose
// ExistingCollector is the first *Metrics. Nothing is registered when New fails.
func New(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if reg == nil {
		return nil, ErrNilRegisterer
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Metrics{eventTypes: opts.EventTypeLabels, listeners: opts.ListenerLabels, namespace: opts.Namespace}
	if opts.Instance != "" {
		m.instanceLabels = prometheus.Labels{InstanceLabel: opts.Instance}
	}

	m.hotEnqueued = m.counter("hot_enqueued_total",
		"Committed events handed to the hot queue right after commit.")
	m.hotDropped = m.counter("hot_dropped_total",
		"Committed events the hot queue could not take (full, or the dispatcher not running); the poller delivers them later.")
	m.delayedSkipped = m.counter("hot_delayed_skipped_total",
		"Committed events that skipped the hot queue because their delivery is delayed; the poller delivers them when due.")
	m.coldEnqueued = m.counter("cold_enqueued_total",
		"Pending events the poller handed to the cold queue.")
	m.pollLag = m.gauge("poll_lag_seconds",
		"Time since the oldest due event seen by the poller's last cycle became due; 0 when it saw none.")
	m.claimsVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: m.namespace, Name: "claims_total", ConstLabels: m.instanceLabels,
		Help: "Claims of MultiNode mode by event: taken, renewed, lost (another node took the event over), expired (left to expire), released (by a hard stop, or a pre-claim the hot path did not take), taken_over (claimed after another claim expired: a lease take-over; not counted on SQLite).",
	}, []string{"event"})
	m.collectors = append(m.collectors, m.claimsVec)
	for _, ev := range []outbox.ClaimEvent{outbox.ClaimTaken, outbox.ClaimRenewed, outbox.ClaimLost, outbox.ClaimExpired, outbox.ClaimReleased, outbox.ClaimTakenOver} {
		m.claims[ev] = m.claimsVec.WithLabelValues(ev.String())
	}
	m.keysHeld = m.gauge("keys_held",
		"Ordered events this process holds (queued, running, or their outcome not yet written): one per order key, so the keys it holds.")
	m.subQueued = m.gaugeVec("subscription_queued",
		"Events of each subscription (listener) queued in this process for a worker.", labelListener)
	m.subRunning = m.gaugeVec("subscription_running",
		"Workers of this process delivering each subscription's (listener's) events.", labelListener)
	m.subLimited = m.gaugeVec("subscription_limited",
		"1 while a subscription's (listener's) queued events wait for its MaxConcurrency or RateLimit in this process, else 0.", labelListener)
	m.subPaused = m.gaugeVec("subscription_paused",
		"1 while a subscription (listener) is paused (Events.Pause) and this process holds its events pending, else 0.", labelListener)
	m.stuck = m.gauge("stuck_attempts",
		"Listener attempts running past ListenerTimeout (their listener ignored its context); their workers took other events.")

	depthVec := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: m.namespace, Name: "queue_depth", ConstLabels: m.instanceLabels,
		Help: "Events waiting in the dispatcher's in-memory queue of each path (hot: handed over after commit; cold: read by the poller).",
	}, []string{labelPath})
	m.collectors = append(m.collectors, depthVec)

	dispatchLabels := []string{labelPath, labelOutcome}
	durationLabels := []string{labelOutcome}
	if m.eventTypes {
		dispatchLabels = append(dispatchLabels, labelAggregateType, labelEventType)
		durationLabels = append(durationLabels, labelAggregateType, labelEventType)
	}
	if m.listeners {
		dispatchLabels = append(dispatchLabels, labelListener)
		durationLabels = append(durationLabels, labelListener)
	}
	m.dispatchVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: m.namespace, Name: "dispatch_total", ConstLabels: m.instanceLabels,
		Help: "Finished delivery attempts by path (hot, cold) and outcome (done, retry: failed and will be retried, dead, deferred: the listener asked for a later attempt, fallback: failed for good and handled by the fallback).",
	}, dispatchLabels)
	m.durationVec = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: m.namespace, Name: "listener_duration_seconds", ConstLabels: m.instanceLabels,
		Help:    "Time the interceptors and the listener took for one delivery attempt, by outcome.",
		Buckets: opts.DurationBuckets,
	}, durationLabels)
	latencyVec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: m.namespace, Name: "dispatch_latency_seconds", ConstLabels: m.instanceLabels,
		Help:    "Time from commit (hot path) or from when the event became due (cold path) to the start of a delivery attempt.",
		Buckets: opts.LatencyBuckets,
	}, []string{labelPath})
	m.collectors = append(m.collectors, m.dispatchVec, m.durationVec, latencyVec)

	// Create every fixed series now: they are exported from the start (at 0), and the
	// hot-path methods use them without a label lookup.
	for p, path := range pathNames {
		m.depth[p] = depthVec.WithLabelValues(path)
		m.latency[p] = latencyVec.WithLabelValues(path)
		if !m.perCall() {
			for r, outcome := range outcomeNames {
				m.dispatch[p][r] = m.dispatchVec.WithLabelValues(path, outcome)
			}
		}
	}
	if !m.perCall() {
		for r, outcome := range outcomeNames {
			m.duration[r] = m.durationVec.WithLabelValues(outcome)
		}
	}

	if err := reg.Register(m); err != nil {
		return nil, fmt.Errorf("outboxprom: register metrics: %w", err)
	}
	return m, nil
}

// counter creates and keeps a counter without variable labels.
func (m *Metrics) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: m.namespace, Name: name, Help: help, ConstLabels: m.instanceLabels,
	})
	m.collectors = append(m.collectors, c)
	return c
}

// gaugeVec creates and keeps a gauge vector with labels.
func (m *Metrics) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: m.namespace, Name: name, ConstLabels: m.instanceLabels, Help: help,
	}, labels)
	m.collectors = append(m.collectors, v)
	return v
}

// gauge creates and keeps a gauge without variable labels.
func (m *Metrics) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: m.namespace, Name: name, Help: help, ConstLabels: m.instanceLabels,
	})
	m.collectors = append(m.collectors, g)
	return g
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors {
		c.Collect(ch)
	}
}

// HotEnqueued increments outbox_hot_enqueued_total.
func (m *Metrics) HotEnqueued() { m.hotEnqueued.Inc() }

// HotDropped increments outbox_hot_dropped_total.
func (m *Metrics) HotDropped() { m.hotDropped.Inc() }

// DelayedSkipped increments outbox_hot_delayed_skipped_total.
func (m *Metrics) DelayedSkipped() { m.delayedSkipped.Inc() }

// ColdEnqueued increments outbox_cold_enqueued_total.
func (m *Metrics) ColdEnqueued() { m.coldEnqueued.Inc() }

// QueueDepths sets outbox_queue_depth for both paths.
func (m *Metrics) QueueDepths(hot, cold int) {
	m.depth[0].Set(float64(hot))
	m.depth[1].Set(float64(cold))
}

// OldestPendingLag sets outbox_poll_lag_seconds.
func (m *Metrics) OldestPendingLag(lag time.Duration) { m.pollLag.Set(lag.Seconds()) }

// Claims adds n to outbox_claims_total{event}.
func (m *Metrics) Claims(event outbox.ClaimEvent, n int) {
	if event >= 0 && int(event) < len(m.claims) && n > 0 {
		m.claims[event].Add(float64(n))
	}
}

// StuckAttempts sets outbox_stuck_attempts.
func (m *Metrics) StuckAttempts(n int) { m.stuck.Set(float64(n)) }

// KeysHeld sets outbox_keys_held.
func (m *Metrics) KeysHeld(n int) { m.keysHeld.Set(float64(n)) }

// subGauges are one listener's series of SubscriptionLoad.
type subGauges struct{ queued, running, limited, paused prometheus.Gauge }

// SubscriptionLoad sets outbox_subscription_queued, outbox_subscription_running,
// outbox_subscription_limited and outbox_subscription_paused of l's listener
// ([outbox.SubscriptionLoad]). It is called
// on every change of a lane, several times per event: a listener's series are created
// and looked up at its first report, then read from a map.
func (m *Metrics) SubscriptionLoad(l outbox.SubscriptionLoad) {
	v, ok := m.subs.Load(l.Listener)
	if !ok {
		v, _ = m.subs.LoadOrStore(l.Listener, &subGauges{queued: m.subQueued.WithLabelValues(l.Listener),
			running: m.subRunning.WithLabelValues(l.Listener), limited: m.subLimited.WithLabelValues(l.Listener),
			paused: m.subPaused.WithLabelValues(l.Listener)})
	}
	g := v.(*subGauges)
	g.queued.Set(float64(l.Queued))
	g.running.Set(float64(l.Running))
	g.limited.Set(oneIf(l.Limited))
	g.paused.Set(oneIf(l.Paused))
}

// oneIf is 1 when b is set, else 0: the value of a boolean gauge.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Dispatched increments outbox_dispatch_total and observes the attempt's duration in
// outbox_listener_duration_seconds and its latency in outbox_dispatch_latency_seconds.
// The outcome label is info.Outcome's name (done, retry, dead, deferred or fallback;
// see the package documentation) and the path label info.Path's (hot or cold).
func (m *Metrics) Dispatched(info outbox.DispatchInfo) {
	p := pathIndex(info.Path)
	m.latency[p].Observe(info.Latency.Seconds())
	r, known := outcomeIndex(info.Outcome)
	if known && !m.perCall() {
		m.dispatch[p][r].Inc()
		m.duration[r].Observe(info.Duration.Seconds())
		return
	}
	// Series created per call: an outcome added to core after this package was
	// written, or the event type labels.
	outcome := info.Outcome.String()
	if known {
		outcome = outcomeNames[r]
	}
	dl := []string{pathNames[p], outcome}
	hl := []string{outcome}
	if m.eventTypes {
		agg, typ := labelValue(info.AggregateType), labelValue(info.EventType)
		dl = append(dl, agg, typ)
		hl = append(hl, agg, typ)
	}
	if m.listeners {
		dl = append(dl, labelValue(info.Listener))
		hl = append(hl, labelValue(info.Listener))
	}
	if c, err := m.dispatchVec.GetMetricWithLabelValues(dl...); err == nil {
		c.Inc()
	}
	if h, err := m.durationVec.GetMetricWithLabelValues(hl...); err == nil {
		h.Observe(info.Duration.Seconds())
	}
}

// perCall reports whether Dispatched looks its series up per call (labels beyond path
// and outcome).
func (m *Metrics) perCall() bool { return m.eventTypes || m.listeners }

// labelValue makes s a valid label value: the registry rejects invalid UTF-8.
func labelValue(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// validateNames checks a namespace and an instance label value.
func validateNames(namespace, instance string) error {
	for i, r := range namespace {
		if r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9' {
			continue
		}
		return fmt.Errorf("%w: Namespace %q must match [a-zA-Z_][a-zA-Z0-9_]*", ErrInvalidOptions, namespace)
	}
	if instance != labelValue(instance) {
		return fmt.Errorf("%w: Instance %q is not valid UTF-8", ErrInvalidOptions, instance)
	}
	return nil
}

// validateBuckets checks that histogram bounds strictly increase; client_golang panics
// otherwise.
func validateBuckets(field string, b []float64) error {
	for i, v := range b {
		if math.IsNaN(v) || i > 0 && v <= b[i-1] {
			return fmt.Errorf("%w: %s %v must be strictly increasing numbers", ErrInvalidOptions, field, b)
		}
	}
	return nil
}
