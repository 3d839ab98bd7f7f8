package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
)

// Listener handles one event. Delivery is at least once: deduplicate by [Event.ID].
//
// What Handle returns decides the event's fate, named by its [Outcome] in metrics and
// logs. The rule a reader can check at the call site: every returned error is a failed
// attempt and counts toward MaxAttempts, except the one [Defer] returns, which is no
// failure.
//
//	Handle returns                  outcome   the row becomes                    attempt counted
//	nil                             done      DONE                               no
//	Defer(d)                        deferred  NEW, due in d                      no
//	RetryAfter(err, d)              retry     RETRY in d; DEAD at MaxAttempts    yes
//	any other error, or a panic     retry     RETRY after the retry policy's     yes
//	                                          backoff; DEAD at MaxAttempts
//	Dead(err), or any error         dead      DEAD now                           yes
//	matching ErrUnrecoverable
//
// A dead outcome is fallback instead (the row FALLBACK) when the [Subscription]'s
// Fallback handles it. MaxAttempts, the retry policy and the timeout are the
// Subscription's when set, else the Config's. The context ends at the timeout or a hard
// stop.
type Listener interface {
	Handle(ctx context.Context, e *Event) error
}

// ListenerFunc adapts a function to [Listener].
type ListenerFunc func(ctx context.Context, e *Event) error

// Handle calls f.
func (f ListenerFunc) Handle(ctx context.Context, e *Event) error { return f(ctx, e) }

// AnyType in a [Subscription]'s AggregateType or EventType matches every aggregate
// type or event type: a catch-all route, for example a broker relay that takes every
// event ({AggregateType: AnyType, EventType: AnyType}).
const AnyType = "*"

// Subscription is one listener with its route and, optionally, its own delivery
// policy; the zero value of each policy field means the [Config] setting.
// [Outbox.Register] is Subscribe with the route and the listener only.
//
// An event goes to every subscription whose route matches it (fan-out): when that is
// more than one, the dispatcher splits it into one delivery per listener, each with its
// own attempts, retries, DEAD state and replay (docs/listeners.md).
type Subscription struct {
	// Name names the listener in logs, metrics, fan-out deliveries and dead events.
	// Defaults to "AggregateType/EventType". Unique, at most MaxListenerLen bytes; keep
	// it stable across releases, since stored deliveries name their listener by it.
	Name string
	// AggregateType and EventType are the route: the events of EventType (required) on
	// AggregateType ("" means GlobalAggregateType); AnyType in either matches every
	// value. Several subscriptions may share a route (a second one needs a Name).
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
	// up, [Dead], a permanent error), under the listener's timeout. When it returns nil
	// the event is FALLBACK, a final state of its own, with the listener's last error;
	// when it fails or panics the event is DEAD, the fallback's error added.
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
	seq         int // registration order: a fan-out's deliveries follow it
	listener    Listener
	retry       RetryPolicy // nil: the dispatcher's
	maxAttempts int         // 0: the dispatcher's
	timeout     time.Duration
	retryable   func(error) bool
	batch       BatchListener // nil: not a BatchListener
	batchSize   int
	fallback    func(context.Context, Failure) error
}

// registry maps routes to their subscriptions. It is safe for concurrent use; listeners
// may be registered while the dispatcher runs.
type registry struct {
	mu     sync.RWMutex
	routes map[routeKey][]*route // in registration order
	names  map[string]*route
	wild   bool // some route has AnyType
}

type routeKey struct{ aggregateType, eventType string }

// newRegistry returns an empty registry.
func newRegistry() *registry {
	return &registry{routes: map[routeKey][]*route{}, names: map[string]*route{}}
}

// Register routes events of eventType on aggregateType to l with the default policy.
func (r *registry) Register(aggregateType, eventType string, l Listener) error {
	return r.Subscribe(Subscription{AggregateType: aggregateType, EventType: eventType, Listener: l})
}

// Subscribe adds s. It returns an error wrapping ErrDuplicateListener when its name is
// taken, and a [ConfigError] for an empty event type, a nil listener or an invalid
// policy field.
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
	case !check.ValidText(name) || len(name) > MaxListenerLen:
		return &ConfigError{Field: "Subscription.Name", Reason: fmt.Sprintf("%q is not valid text or longer than MaxListenerLen (%d)", name, MaxListenerLen)}
	}
	k := routeKey{s.AggregateType, s.EventType}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.routes == nil {
		r.routes, r.names = map[routeKey][]*route{}, map[string]*route{}
	}
	if _, ok := r.names[name]; ok {
		if s.Name == "" {
			return fmt.Errorf("%w: aggregate type %q, event type %q (a second listener of a route needs a Name)",
				ErrDuplicateListener, s.AggregateType, s.EventType)
		}
		return fmt.Errorf("%w: name %q", ErrDuplicateListener, name)
	}
	rt := &route{name: name, seq: len(r.names), listener: s.Listener, retry: s.Retry, maxAttempts: s.MaxAttempts,
		timeout: s.Timeout, retryable: s.Retryable, fallback: s.Fallback}
	if bl, ok := s.Listener.(BatchListener); ok {
		rt.batch, rt.batchSize = bl, cmp.Or(s.BatchSize, DefaultBatchSize)
	}
	r.routes[k] = append(r.routes[k], rt)
	r.names[name] = rt
	r.wild = r.wild || k.aggregateType == AnyType || k.eventType == AnyType
	return nil
}

// resolve returns where e goes: the subscription its Listener names (a fan-out
// delivery, or an event whose listener failed for good and was replayed), else the one
// subscription whose route matches it. When several match, rt is nil and fan lists them
// in registration order: the event is to be split (dispatcher.fanOut). Both nil: the
// event is unroutable.
func (r *registry) resolve(e *Event) (rt *route, fan []*route) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e.Listener != "" {
		return r.names[e.Listener], nil
	}
	agg := cmp.Or(e.AggregateType, GlobalAggregateType)
	exact := r.routes[routeKey{agg, e.Type}]
	if !r.wild {
		if len(exact) == 1 {
			return exact[0], nil
		}
		if len(exact) == 0 {
			return nil, nil
		}
		return nil, exact
	}
	keys := [...]routeKey{{agg, e.Type}, {agg, AnyType}, {AnyType, e.Type}, {AnyType, AnyType}}
	n := 0
	for i, k := range keys {
		if i > 0 && k == keys[i-1] { // the event's own type or aggregate type is "*"
			continue
		}
		for _, x := range r.routes[k] {
			n++
			rt = x
		}
	}
	if n <= 1 {
		return rt, nil
	}
	fan = make([]*route, 0, n)
	for i, k := range keys {
		if i > 0 && k == keys[i-1] {
			continue
		}
		fan = append(fan, r.routes[k]...)
	}
	slices.SortFunc(fan, func(a, b *route) int { return a.seq - b.seq })
	fan = slices.CompactFunc(fan, func(a, b *route) bool { return a == b })
	if len(fan) == 1 { // an event whose own aggregate type is "*" matched a route twice
		return fan[0], nil
	}
	return nil, fan
}

// lookup returns the one subscription of the route, or false when it has none or
// several.
func (r *registry) lookup(aggregateType, eventType string) (*route, bool) {
	rt, _ := r.resolve(&Event{AggregateType: aggregateType, Type: eventType})
	return rt, rt != nil
}

// Lookup returns the listener for the route, or false when there is none.
func (r *registry) Lookup(aggregateType, eventType string) (Listener, bool) {
	rt, ok := r.lookup(aggregateType, eventType)
	if !ok {
		return nil, false
	}
	return rt.listener, true
}
