package outbox

import "time"

// Path says how an event reached the dispatcher.
type Path int

// The dispatch paths.
const (
	// PathHot is the in-process hand-off right after commit.
	PathHot Path = iota
	// PathCold is the poller's fallback.
	PathCold
)

// String returns "hot" or "cold".
func (p Path) String() string {
	if p == PathHot {
		return "hot"
	}
	return "cold"
}

// Outcome is the result of one delivery attempt.
type Outcome int

// The delivery outcomes.
const (
	// OutcomeSuccess: the event is DONE.
	OutcomeSuccess Outcome = iota
	// OutcomeFailure: the attempt failed and the event will be retried.
	OutcomeFailure
	// OutcomeDead: the event moved to DEAD.
	OutcomeDead
	// OutcomeDeferred: the listener deferred the event without counting an attempt.
	OutcomeDeferred
)

// String returns "success", "failure", "dead" or "deferred".
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "success"
	case OutcomeFailure:
		return "failure"
	case OutcomeDead:
		return "dead"
	case OutcomeDeferred:
		return "deferred"
	default:
		return "unknown"
	}
}

// DispatchInfo describes one finished delivery attempt.
type DispatchInfo struct {
	Path          Path
	Outcome       Outcome
	EventType     string
	AggregateType string
	// Duration is how long the interceptors and the listener ran.
	Duration time.Duration
	// Latency is the time from commit (hot path) or from the moment the event became due
	// (cold path) to the start of the attempt.
	Latency time.Duration
}

// Metrics receives the outbox's measurements. Implementations must be safe for concurrent
// use and fast: they are called on the write and dispatch paths. Embed [NopMetrics] to
// stay compatible when methods are added.
type Metrics interface {
	// HotEnqueued counts an event handed to the hot queue after commit.
	HotEnqueued()
	// HotDropped counts an event the hot queue could not take; the poller delivers it.
	HotDropped()
	// DelayedSkipped counts a committed event that skipped the hot path because it is delayed.
	DelayedSkipped()
	// ColdEnqueued counts an event the poller put on the cold queue.
	ColdEnqueued()
	// Dispatched reports a finished delivery attempt.
	Dispatched(info DispatchInfo)
	// QueueDepths reports the current hot and cold queue lengths.
	QueueDepths(hot, cold int)
	// OldestPendingLag reports the age of the oldest due event the poller saw (0 when none).
	OldestPendingLag(lag time.Duration)
}

// NopMetrics implements [Metrics] and does nothing. It is the default.
type NopMetrics struct{}

var _ Metrics = NopMetrics{}

// HotEnqueued does nothing.
func (NopMetrics) HotEnqueued() {}

// HotDropped does nothing.
func (NopMetrics) HotDropped() {}

// DelayedSkipped does nothing.
func (NopMetrics) DelayedSkipped() {}

// ColdEnqueued does nothing.
func (NopMetrics) ColdEnqueued() {}

// Dispatched does nothing.
func (NopMetrics) Dispatched(DispatchInfo) {}

// QueueDepths does nothing.
func (NopMetrics) QueueDepths(int, int) {}

// OldestPendingLag does nothing.
func (NopMetrics) OldestPendingLag(time.Duration) {}
