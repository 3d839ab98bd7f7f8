package outbox

import (
	"cmp"
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
// MaxAttempts, the retry policy and the timeout are the listener's [Subscription]'s
// when set, else the Config's. The context ends at the timeout or a hard stop. A
// [ResultListener]'s HandleResult is called instead of Handle.
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

// Subscription is one listener with its route and, optionally, its own delivery
// policy; the zero value of each policy field means the [Config] setting.
// [Outbox.Register] is Subscribe with the route and the listener only.
type Subscription struct {
	// Name names the listener in logs. Defaults to "AggregateType/EventType". Unique.
	Name string
	// AggregateType and EventType are the route: the events of EventType (required) on
	// AggregateType ("" means GlobalAggregateType). One listener per route.
	AggregateType string
	EventType     string
	// Listener handles the events. Required.
	Listener Listener
	// Retry replaces Config.Retry for this listener's failures.
	Retry RetryPolicy
	// MaxAttempts replaces Config.MaxAttempts: 1 makes the first failure final, -1
	// retries forever.
	MaxAttempts int
	// Timeout replaces Config.ListenerTimeout; -1 means none (not in MultiNode mode).
	// In MultiNode mode it must stay below ClaimTTL - StatusTimeout, as the default.
	Timeout time.Duration
	// Retryable, when set, decides whether an error the listener returns is worth a
	// retry: false makes the event DEAD at once, as an error wrapping ErrUnrecoverable
	// does (which stays final whatever Retryable says). Deferrals never reach it.
	Retryable func(error) bool
	// BatchSize bounds the events of one [BatchListener.HandleBatch] call when Listener
	// is a BatchListener (ignored otherwise); 0 means DefaultBatchSize, 1 hands over one
	// event per call.
	BatchSize int
	// Fallback, when set, runs when a delivery is about to become DEAD (attempts used
	// up, a permanent error, a [Dead] result), under the listener's timeout. When it
	// returns nil the event is FALLBACK, a final state of its own, with the listener's
	// last error; when it fails or panics the event is DEAD, the fallback's error added.
	Fallback func(ctx context.Context, f Failure) error
}

// Failure is what a [Subscription.Fallback] gets: the event and how its delivery failed.
type Failure struct {
	Event          *Event
	Listener       string    // the subscription's name
	Attempts       int       // failed attempts, the last one included
	Err            error     // the last attempt's error
	FirstAttemptAt time.Time // when the first failed attempt ended
	LastAttemptAt  time.Time // when the last one ended
}

// route is a subscription as the dispatcher uses it.
type route struct {
	name        string
	listener    Listener
	retry       RetryPolicy // nil: the dispatcher's
	maxAttempts int         // 0: the dispatcher's
	timeout     time.Duration
	retryable   func(error) bool
	batch       BatchListener // nil: not a BatchListener
	batchSize   int
	fallback    func(context.Context, Failure) error
}

// registry maps (aggregate type, event type) to exactly one listener. It is safe for
// concurrent use; listeners may be registered while the dispatcher runs.
type registry struct {
	mu     sync.RWMutex
	routes map[routeKey]*route
	names  map[string]bool
}

type routeKey struct{ aggregateType, eventType string }

// newRegistry returns an empty registry.
func newRegistry() *registry {
	return &registry{routes: map[routeKey]*route{}, names: map[string]bool{}}
}

// Register routes events of eventType on aggregateType to l with the default policy.
func (r *registry) Register(aggregateType, eventType string, l Listener) error {
	return r.Subscribe(Subscription{AggregateType: aggregateType, EventType: eventType, Listener: l})
}

// Subscribe adds s. It returns an error wrapping ErrDuplicateListener when its route or
// name is taken, and a [ConfigError] for an empty event type, a nil listener or an
// invalid policy field.
func (r *registry) Subscribe(s Subscription) error {
	if s.EventType == "" {
		return &ConfigError{Field: "Listener", Reason: "event type is empty"}
	}
	if s.Listener == nil {
		return &ConfigError{Field: "Listener", Reason: "listener for " + s.EventType + " is nil"}
	}
	if s.AggregateType == "" {
		s.AggregateType = GlobalAggregateType
	}
	name := cmp.Or(s.Name, s.AggregateType+"/"+s.EventType)
	switch {
	case s.MaxAttempts < -1:
		return &ConfigError{Field: "Subscription.MaxAttempts", Reason: fmt.Sprintf("listener %s: must be positive or -1, got %d", name, s.MaxAttempts)}
	case s.Timeout < 0 && s.Timeout != -1:
		return &ConfigError{Field: "Subscription.Timeout", Reason: fmt.Sprintf("listener %s: must be positive or -1, got %s", name, s.Timeout)}
	case s.BatchSize < 0:
		return &ConfigError{Field: "Subscription.BatchSize", Reason: fmt.Sprintf("listener %s: must not be negative, got %d", name, s.BatchSize)}
	case !validText(name):
		return &ConfigError{Field: "Subscription.Name", Reason: fmt.Sprintf("%q is not valid text", name)}
	}
	k := routeKey{s.AggregateType, s.EventType}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.routes == nil {
		r.routes, r.names = map[routeKey]*route{}, map[string]bool{}
	}
	if _, ok := r.routes[k]; ok {
		return fmt.Errorf("%w: aggregate type %q, event type %q", ErrDuplicateListener, s.AggregateType, s.EventType)
	}
	if r.names[name] {
		return fmt.Errorf("%w: name %q", ErrDuplicateListener, name)
	}
	rt := &route{name: name, listener: s.Listener, retry: s.Retry, maxAttempts: s.MaxAttempts,
		timeout: s.Timeout, retryable: s.Retryable, fallback: s.Fallback}
	if bl, ok := s.Listener.(BatchListener); ok {
		rt.batch, rt.batchSize = bl, cmp.Or(s.BatchSize, DefaultBatchSize)
	}
	r.routes[k] = rt
	r.names[name] = true
	return nil
}

// lookup returns the route of the events of eventType on aggregateType, or false when
// there is none.
func (r *registry) lookup(aggregateType, eventType string) (*route, bool) {
	if aggregateType == "" {
		aggregateType = GlobalAggregateType
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	rt, ok := r.routes[routeKey{aggregateType, eventType}]
	return rt, ok
}

// Lookup returns the listener for the route, or false when there is none.
func (r *registry) Lookup(aggregateType, eventType string) (Listener, bool) {
	rt, ok := r.lookup(aggregateType, eventType)
	if !ok {
		return nil, false
	}
	return rt.listener, true
}
