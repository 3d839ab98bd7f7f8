package dispatch

import (
	"context"
	"time"
)

// Route is a subscription as the Dispatcher uses it. Package outbox's registry makes one
// per Subscription and resolves events to them ([Routes]).
type Route struct {
	Name string
	// AggregateType and EventType are the subscription's route as events store them
	// (either may be outbox.AnyType).
	AggregateType, EventType string
	// Handle is the listener's Handle.
	Handle func(ctx context.Context, e *Event) error
	// HandleBatch is the listener's HandleBatch when it is a batch listener, else nil;
	// BatchSize then bounds a batch.
	HandleBatch func(ctx context.Context, batch []BatchItem) []error
	BatchSize   int
	// MaxConcurrency bounds the workers delivering the subscription's events at once
	// (its lane's slots, see Queues); 0: no bound but Workers.
	MaxConcurrency int
	// RateLimit bounds the events of the subscription taken per second (its lane's
	// token bucket, see Queues), RateBurst (at least 1) how many at once after a pause;
	// 0: no bound.
	RateLimit float64
	RateBurst int
	// The subscription's own policy; zero values take the dispatcher's.
	Retry       RetryPolicy   // nil: Config.Retry
	MaxAttempts int           // 0: Config.MaxAttempts; -1 retries forever
	Timeout     time.Duration // 0: Config.ListenerTimeout; -1 none
	Retryable   func(error) bool
	Fallback    func(context.Context, Failure) error
}

// RetryPolicy computes the delay before retry number attempt (package outbox's
// RetryPolicy).
type RetryPolicy interface {
	Delay(attempt int) time.Duration
}

// Routes resolves an event (its Listener, AggregateType and Type) to where it goes: the
// subscription its listener names or the one whose route matches it (rt), or, when
// several match, all of them in registration order (fan: the event is to be split).
// Both nil: the event is unroutable. It must be safe for concurrent use. It takes the
// fields, not the event, so that a worker's event does not escape to the heap.
type Routes interface {
	Resolve(listener, aggregateType, eventType string) (rt *Route, fan []*Route)
}

// Orders moves the keys of ordered events on (package order's Orderer).
type Orders interface {
	// AfterCommit moves on the keys of events a transaction just committed.
	AfterCommit(ctx context.Context, events []Event, keys []string)
	// Promote moves keys on.
	Promote(ctx context.Context, keys []string)
	// Finished moves on the keys of ordered events whose outcomes were just written.
	Finished(ctx context.Context, keys []string)
	// DeadBlocks reports whether a DEAD event holds its key.
	DeadBlocks() bool
}
