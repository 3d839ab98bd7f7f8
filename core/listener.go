package outbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Listener handles one event. Delivery is at least once: deduplicate by [Event.ID].
//
// What the listener returns decides the event's fate. The rule a reader can check at
// the call site: a returned error is a failed attempt and counts toward MaxAttempts; a
// [Result] without an error never counts one, except [Dead], which ends the event.
//
//	return                             the row becomes                    attempt counted
//	nil, or Done(), nil                DONE                               no
//	Defer(d), nil                      NEW, due in d (not a failure)      no
//	Dead(reason), nil                  DEAD now                           yes
//	an error wrapping ErrUnrecoverable DEAD now                           yes
//	RetryAfter(err, d)                 RETRY in d; DEAD at MaxAttempts    yes
//	any other error, or a panic        RETRY after the retry policy's     yes
//	                                   backoff; DEAD at MaxAttempts
//
// The context ends at ListenerTimeout or a hard stop. A [ResultListener]'s HandleResult
// is called instead of Handle.
type Listener interface {
	Handle(ctx context.Context, e *Event) error
}

// ResultListener is the richer listener form: it can defer an event without counting an
// attempt ([Defer]) or send it to DEAD ([Dead]). A non-nil error is treated exactly as
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

// Handle calls f for a caller that only knows [Listener] (a wrapping listener). A
// non-Done result becomes an error with the same outcome: a [Defer] stays a deferral
// (no attempt counted), a [Dead] wraps ErrUnrecoverable.
func (f ResultListenerFunc) Handle(ctx context.Context, e *Event) error {
	r, err := f(ctx, e)
	if err != nil {
		return err
	}
	return r.asError()
}

// asError is r as a listener error with the same outcome; nil for Done.
func (r Result) asError() error {
	switch r.kind {
	case resultDefer:
		return &deferredError{delay: r.delay}
	case resultDead:
		return fmt.Errorf("%w: %s", ErrUnrecoverable, r.reason)
	}
	return nil
}

// deferredError carries a [Defer] result through a plain [Listener.Handle]; the
// dispatcher turns it back into a deferral.
type deferredError struct{ delay time.Duration }

func (e *deferredError) Error() string { return fmt.Sprintf("deferred for %s", e.delay) }

type resultKind int

const (
	resultDone resultKind = iota
	resultDefer
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

// Defer puts the event back, due after d, without counting an attempt: it is not a
// failure (the event is not ready yet, a downstream asks to wait). The row goes back to
// NEW. A negative d is treated as 0. To retry a failure after a delay of your choice,
// return [RetryAfter] instead, which counts the attempt.
func Defer(d time.Duration) Result { return Result{kind: resultDefer, delay: max(d, 0)} }

// Dead moves the event to DEAD at once with reason as its last error.
func Dead(reason string) Result { return Result{kind: resultDead, reason: reason} }

// Registry maps (aggregate type, event type) to exactly one listener. It is safe for
// concurrent use; listeners may be registered while the dispatcher runs.
type registry struct {
	mu        sync.RWMutex
	listeners map[routeKey]Listener
}

type routeKey struct{ aggregateType, eventType string }

// NewRegistry returns an empty registry.
func newRegistry() *registry { return &registry{listeners: make(map[routeKey]Listener)} }

// Register routes events of eventType on aggregateType to l. An empty aggregateType means
// GlobalAggregateType. It returns an error wrapping ErrDuplicateListener when the route is
// taken, and a [ConfigError] for an empty event type or a nil listener.
func (r *registry) Register(aggregateType, eventType string, l Listener) error {
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
func (r *registry) Lookup(aggregateType, eventType string) (Listener, bool) {
	if aggregateType == "" {
		aggregateType = GlobalAggregateType
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	l, ok := r.listeners[routeKey{aggregateType, eventType}]
	return l, ok
}
