package outboxtype

import (
	"context"
	"fmt"
	"time"
)

// from interceptor.go

// Interceptor wraps every attempt (tracing, logging): each Before in order (it returns
// the attempt's context; its error or panic fails the attempt), the listener, then each
// After in reverse, for Befores that succeeded, with the attempt's error (After's own
// errors and panics are only logged). A deferral's error is a [*DeferError]: errors.As
// tells it from a failure.
type Interceptor interface {
	Before(ctx context.Context, e *Event) (context.Context, error)
	After(ctx context.Context, e *Event, err error) error
}

// InterceptorFuncs adapts a pair of functions to [Interceptor]. A nil function does
// nothing.
type InterceptorFuncs struct {
	// BeforeFunc is called by Before.
	BeforeFunc func(ctx context.Context, e *Event) (context.Context, error)
	// AfterFunc is called by After.
	AfterFunc func(ctx context.Context, e *Event, err error) error
}

// Before calls f.BeforeFunc, or returns ctx when it is nil.
func (f InterceptorFuncs) Before(ctx context.Context, e *Event) (context.Context, error) {
	if f.BeforeFunc == nil {
		return ctx, nil
	}
	return f.BeforeFunc(ctx, e)
}

// After calls f.AfterFunc, or returns nil when it is nil.
func (f InterceptorFuncs) After(ctx context.Context, e *Event, err error) error {
	if f.AfterFunc == nil {
		return nil
	}
	return f.AfterFunc(ctx, e, err)
}

// from metrics.go

// Path says how an event reached the dispatcher.
type Path int

// The dispatch paths.
const (
	PathHot  Path = iota // the in-process hand-off right after commit
	PathCold             // the poller's fallback
)

// String returns "hot" or "cold".
func (p Path) String() string {
	if p == PathHot {
		return "hot"
	}
	return "cold"
}

// Outcome is what one delivery attempt led to. Its names are those of the table in
// outbox.Listener and of the statuses the event takes.
type Outcome int

// The delivery outcomes.
const (
	OutcomeDone     Outcome = iota // the event is DONE
	OutcomeRetry                   // the attempt failed and counts; the event is RETRY
	OutcomeDead                    // the event is DEAD
	OutcomeDeferred                // the listener returned Defer: NEW again, no attempt counted
	OutcomeFallback                // the event failed for good and its fallback handled it: FALLBACK
)

// String returns "done", "retry", "dead", "deferred" or "fallback".
func (o Outcome) String() string {
	switch o {
	case OutcomeDone:
		return "done"
	case OutcomeRetry:
		return "retry"
	case OutcomeDead:
		return "dead"
	case OutcomeDeferred:
		return "deferred"
	case OutcomeFallback:
		return "fallback"
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
	// Listener is the name of the listener that ran (outbox.Subscription.Name), or "".
	Listener string
	// Duration is how long the interceptors and the listener ran.
	Duration time.Duration
	// Latency is the time from commit (hot path) or from the moment the event became due
	// (cold path) to the start of the attempt.
	Latency time.Duration
}

// SubscriptionLoad is one subscription's load in this process: its events queued for a
// worker and the workers running them, its limits (outbox.Subscription), and whether
// queued events wait for those limits now (Limited), and whether it is paused (its
// events then wait in the table, not in the queue: Queued is 0).
type SubscriptionLoad struct {
	Listener        string
	Queued, Running int
	MaxConcurrency  int
	RateLimit       float64
	Limited         bool
	Paused          bool
}

// SubscriptionMetrics is a [Metrics] that also takes each subscription's load, reported
// when it changes (Outbox.Subscriptions reads it on demand).
type SubscriptionMetrics interface {
	SubscriptionLoad(l SubscriptionLoad)
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
	// StuckAttempts reports, when it changes, how many attempts are stuck (outbox.Config.OnStuck).
	StuckAttempts(n int)
	// Claims counts n claims of outbox.MultiNode mode by what happened to them ([ClaimEvent]).
	Claims(event ClaimEvent, n int)
	// KeysHeld reports, when it changes, the ordered events in flight here: one per key.
	KeysHeld(n int)
}

// ClaimEvent is what happened to claims, for [Metrics.Claims].
type ClaimEvent int

// The claim events.
const (
	ClaimTaken     ClaimEvent = iota // claimed by the poller, or pre-claimed by a committed write
	ClaimRenewed                     // renewed before an attempt that could outlive it
	ClaimLost                        // another node took the event over; this node's outcome is not recorded
	ClaimExpired                     // left to expire: too short to deliver, or a release failed
	ClaimReleased                    // released for pollers to take at once: hard stop, or claimed and not taken
	ClaimTakenOver                   // claimed after another claim expired (lease take-over; not on SQLite)
)

// String returns the event's name, as in "taken", "lost" or "taken_over".
func (c ClaimEvent) String() string {
	switch c {
	case ClaimTaken:
		return "taken"
	case ClaimRenewed:
		return "renewed"
	case ClaimLost:
		return "lost"
	case ClaimExpired:
		return "expired"
	case ClaimReleased:
		return "released"
	case ClaimTakenOver:
		return "taken_over"
	default:
		return fmt.Sprintf("ClaimEvent(%d)", int(c))
	}
}

// NopMetrics implements [Metrics] and does nothing: every method is empty. It is the
// default; embed it to implement only some methods.
type NopMetrics struct{}

func (NopMetrics) HotEnqueued() {}

func (NopMetrics) HotDropped() {}

func (NopMetrics) DelayedSkipped() {}

func (NopMetrics) ColdEnqueued() {}

func (NopMetrics) Dispatched(DispatchInfo) {}

func (NopMetrics) QueueDepths(int, int) {}

func (NopMetrics) OldestPendingLag(time.Duration) {}

func (NopMetrics) StuckAttempts(int) {}

func (NopMetrics) Claims(ClaimEvent, int) {}

func (NopMetrics) KeysHeld(int) {}

// Notifier wakes dispatching processes for events another process committed, dropped
// or replayed, instead of leaving them to the next poll (package pgnotify: PostgreSQL
// LISTEN/NOTIFY). The outbox calls Notify after commit in WriterOnly mode, after hot-path
// drops in MultiNode mode and after replays, from one goroutine, outside transactions,
// coalescing signals; a failure costs only latency. Dispatching modes run Listen while
// started: a wake makes the poller read every due row at once; an error is logged,
// wakes the poller, and Listen runs again after a back-off of up to 30 seconds.
type Notifier interface {
	// Notify tells the listening processes that events may be due.
	Notify(ctx context.Context) error
	// Listen calls wake for each notification until ctx ends, then returns ctx.Err().
	Listen(ctx context.Context, wake func()) error
}
