package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Listener handles one event. Returning nil marks the event DONE. An error that wraps
// ErrUnrecoverable moves it to DEAD at once; a [*RetryAfterError] retries after its delay;
// any other error (or a panic) retries with the retry policy's backoff until MaxAttempts,
// then the event is DEAD. Delivery is at least once: deduplicate by [Event.ID].
//
// The context is cancelled when the per-event timeout passes or the dispatcher is
// stopped hard. A listener may also implement [ResultListener]; the dispatcher then calls
// HandleResult instead of Handle.
type Listener interface {
	Handle(ctx context.Context, e *Event) error
}

// ResultListener is the richer listener form: it can defer an event without counting an
// attempt ([RetryAfter]) or send it to DEAD ([Dead]). A non-nil error is treated exactly as
// an error from [Listener.Handle], and the Result is ignored.
type ResultListener interface {
	HandleResult(ctx context.Context, e *Event) (Result, error)
}

// ListenerFunc adapts a function to [Listener].
type ListenerFunc func(ctx context.Context, e *Event) error

// Handle calls f.
func (f ListenerFunc) Handle(ctx context.Context, e *Event) error { return f(ctx, e) }

// ResultListenerFunc adapts a function to [ResultListener] (and to [Listener]).
type ResultListenerFunc func(ctx context.Context, e *Event) (Result, error)

// HandleResult calls f.
func (f ResultListenerFunc) HandleResult(ctx context.Context, e *Event) (Result, error) {
	return f(ctx, e)
}

// Handle calls f and reports a non-Done result as an error, for callers that only know
// [Listener]. The dispatcher calls HandleResult instead.
func (f ResultListenerFunc) Handle(ctx context.Context, e *Event) error {
	r, err := f(ctx, e)
	if err != nil {
		return err
	}
	switch r.kind {
	case resultRetryAfter:
		return &RetryAfterError{Delay: r.delay}
	case resultDead:
		return fmt.Errorf("%w: %s", ErrUnrecoverable, r.reason)
	}
	return nil
}

type resultKind int

const (
	resultDone resultKind = iota
	resultRetryAfter
	resultDead
)

// Result is the outcome a [ResultListener] reports. The zero value is [Done].
type Result struct {
	kind   resultKind
	delay  time.Duration
	reason string
}

// Done reports success: the event becomes DONE.
func Done() Result { return Result{} }

// RetryAfter defers the event: it goes back to NEW, due after d, and no attempt is counted.
// A negative d is treated as 0.
func RetryAfter(d time.Duration) Result { return Result{kind: resultRetryAfter, delay: max(d, 0)} }

// Dead moves the event to DEAD at once with reason as its last error.
func Dead(reason string) Result { return Result{kind: resultDead, reason: reason} }

// Registry maps (aggregate type, event type) to exactly one listener. It is safe for
// concurrent use; listeners may be registered while the dispatcher runs.
type Registry struct {
	mu        sync.RWMutex
	listeners map[routeKey]Listener
}

type routeKey struct{ aggregateType, eventType string }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{listeners: make(map[routeKey]Listener)} }

// Register routes events of eventType on aggregateType to l. An empty aggregateType means
// GlobalAggregateType. It returns an error wrapping ErrDuplicateListener when the route is
// taken, and a [ConfigError] for an empty event type or a nil listener.
func (r *Registry) Register(aggregateType, eventType string, l Listener) error {
	if eventType == "" {
		return &ConfigError{Field: "Listener", Reason: "event type is empty"}
	}
	if l == nil {
		return &ConfigError{Field: "Listener", Reason: "listener for " + eventType + " is nil"}
	}
	if aggregateType == "" {
		aggregateType = GlobalAggregateType
	}
	k := routeKey{aggregateType, eventType}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listeners == nil {
		r.listeners = make(map[routeKey]Listener)
	}
	if _, ok := r.listeners[k]; ok {
		return fmt.Errorf("%w: aggregate type %q, event type %q", ErrDuplicateListener, aggregateType, eventType)
	}
	r.listeners[k] = l
	return nil
}

// Lookup returns the listener for the route, or false when there is none.
func (r *Registry) Lookup(aggregateType, eventType string) (Listener, bool) {
	if aggregateType == "" {
		aggregateType = GlobalAggregateType
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	l, ok := r.listeners[routeKey{aggregateType, eventType}]
	return l, ok
}
