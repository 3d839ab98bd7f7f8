package outbox

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// Listener handles one event. Delivery is at least once: deduplicate by [Event.ID].
//
// What Handle returns decides the event's fate (docs/how-it-works.md): nil makes it DONE;
// [Defer] makes it NEW again without counting an attempt; every other error counts one.
// [RetryAfter]'s, any other error and a panic make it RETRY, DEAD at MaxAttempts; [Dead]'s,
// or one matching ErrUnrecoverable, makes it DEAD now (or FALLBACK, see
// [Subscription.Fallback]). The context ends at the timeout or a hard stop.
type Listener interface {
	Handle(ctx context.Context, e *Event) error
}

// ListenerFunc adapts a function to [Listener].
type ListenerFunc func(ctx context.Context, e *Event) error

// Handle calls f.
func (f ListenerFunc) Handle(ctx context.Context, e *Event) error { return f(ctx, e) }

// AnyType in a [Subscription]'s AggregateType or EventType matches every value: a
// catch-all route.
const AnyType = "*"

// Subscription is a listener, its route and its own policy (zero: the [Config] setting);
// each matching one gets a delivery (fan-out, docs/listeners.md).
type Subscription struct {
	// Name, unique and stable across releases (MaxListenerLen): "AggregateType/EventType" if "".
	Name string
	// AggregateType and EventType (required) are the route; "" means GlobalAggregateType.
	AggregateType string
	EventType     string
	// Listener handles the events. Required.
	Listener Listener
	// Retry replaces Config.Retry for this listener's failures.
	Retry RetryPolicy
	// MaxAttempts replaces Config.MaxAttempts; -1 retries forever.
	MaxAttempts int
	// Timeout replaces Config.ListenerTimeout (-1: none); MultiNode: < ClaimTTL - StatusTimeout.
	Timeout time.Duration
	// Retryable, when set, returns false for an error that is final; deferrals never reach it.
	Retryable func(error) bool
	// BatchSize bounds the events of one [BatchListener.HandleBatch] call; 0: DefaultBatchSize.
	BatchSize int
	// MaxConcurrency bounds this process's workers on the listener at once (a batch counts
	// one), RateLimit the events per second it takes, RateBurst (default 1) how many at once;
	// 0: no bound. Per process (docs/listeners.md, fair delivery).
	MaxConcurrency int
	RateLimit      float64
	RateBurst      int
	// Fallback runs before a delivery becomes DEAD: nil makes it FALLBACK (docs/listeners.md).
	Fallback func(ctx context.Context, f Failure) error
}

// Failure is what a [Subscription.Fallback] gets: the Event, the Listener's name, the
// failed Attempts (the last included), the last Err, and when the first and the last
// failed attempts ended.
type Failure = outboxtype.Failure

// registry maps routes to their subscriptions. It is safe for concurrent use; listeners
// may be registered while the dispatcher runs.
type registry struct {
	mu        sync.RWMutex
	routes    map[routeKey][]*dispatch.Route // in registration order
	names     map[string]*dispatch.Route
	listeners map[string]Listener     // by name
	wild      bool                    // some route has AnyType
	seq       map[*dispatch.Route]int // registration order: a fan-out's deliveries follow it
}

type routeKey struct{ aggregateType, eventType string }

// newRegistry returns an empty registry.
func newRegistry() *registry {
	return &registry{routes: map[routeKey][]*dispatch.Route{}, names: map[string]*dispatch.Route{}, listeners: map[string]Listener{}, seq: map[*dispatch.Route]int{}}
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
	case s.RateLimit < 0 || math.IsNaN(s.RateLimit) || math.IsInf(s.RateLimit, 0):
		return &ConfigError{Field: "Subscription.RateLimit", Reason: fmt.Sprintf("listener %s: must be a positive number of events per second or 0, got %v", name, s.RateLimit)}
	case s.RateBurst < 0 || s.RateBurst > 0 && s.RateLimit == 0:
		return &ConfigError{Field: "Subscription.RateBurst", Reason: fmt.Sprintf("listener %s: must be positive with a RateLimit, or 0, got %d", name, s.RateBurst)}
	case s.MaxConcurrency < 0:
		return &ConfigError{Field: "Subscription.MaxConcurrency", Reason: fmt.Sprintf("listener %s: must not be negative, got %d", name, s.MaxConcurrency)}
	case s.BatchSize < 0:
		return &ConfigError{Field: "Subscription.BatchSize", Reason: fmt.Sprintf("listener %s: must not be negative, got %d", name, s.BatchSize)}
	case !check.ValidText(name) || len(name) > MaxListenerLen:
		return &ConfigError{Field: "Subscription.Name", Reason: fmt.Sprintf("%q is not valid text or longer than MaxListenerLen (%d)", name, MaxListenerLen)}
	}
	k := routeKey{s.AggregateType, s.EventType}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.routes == nil {
		r.routes, r.names, r.listeners = map[routeKey][]*dispatch.Route{}, map[string]*dispatch.Route{}, map[string]Listener{}
		r.seq = map[*dispatch.Route]int{}
	}
	if _, ok := r.names[name]; ok {
		if s.Name == "" {
			return fmt.Errorf("%w: aggregate type %q, event type %q (a second listener of a route needs a Name)",
				ErrDuplicateListener, s.AggregateType, s.EventType)
		}
		return fmt.Errorf("%w: name %q", ErrDuplicateListener, name)
	}
	rt := &dispatch.Route{Name: name, AggregateType: k.aggregateType, EventType: k.eventType,
		Handle: s.Listener.Handle, MaxAttempts: s.MaxAttempts,
		Timeout: s.Timeout, Retryable: s.Retryable, Fallback: s.Fallback, MaxConcurrency: s.MaxConcurrency,
		RateLimit: s.RateLimit, RateBurst: s.RateBurst}
	if s.Retry != nil {
		rt.Retry = s.Retry
	}
	if bl, ok := s.Listener.(BatchListener); ok {
		rt.HandleBatch, rt.BatchSize = bl.HandleBatch, cmp.Or(s.BatchSize, DefaultBatchSize)
	}
	r.routes[k] = append(r.routes[k], rt)
	r.names[name] = rt
	r.seq[rt] = len(r.seq)
	r.listeners[name] = s.Listener
	r.wild = r.wild || k.aggregateType == AnyType || k.eventType == AnyType
	return nil
}

// Resolve returns where an event goes: the subscription its listener names (a fan-out
// delivery, or an event whose listener failed for good and was replayed), else the one
// subscription whose route (aggregateType, eventType) matches it. When several match, rt is nil and fan lists them
// in registration order: the event is to be split (dispatch's fan-out). Both nil: the
// event is unroutable.
func (r *registry) Resolve(listener, aggregateType, eventType string) (rt *dispatch.Route, fan []*dispatch.Route) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if listener != "" {
		return r.names[listener], nil
	}
	agg := cmp.Or(aggregateType, GlobalAggregateType)
	exact := r.routes[routeKey{agg, eventType}]
	if !r.wild {
		if len(exact) == 1 {
			return exact[0], nil
		}
		if len(exact) == 0 {
			return nil, nil
		}
		return nil, exact
	}
	keys := [...]routeKey{{agg, eventType}, {agg, AnyType}, {AnyType, eventType}, {AnyType, AnyType}}
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
	fan = make([]*dispatch.Route, 0, n)
	for i, k := range keys {
		if i > 0 && k == keys[i-1] {
			continue
		}
		fan = append(fan, r.routes[k]...)
	}
	slices.SortFunc(fan, func(a, b *dispatch.Route) int { return r.seq[a] - r.seq[b] })
	fan = slices.CompactFunc(fan, func(a, b *dispatch.Route) bool { return a == b })
	if len(fan) == 1 { // an event whose own aggregate type is "*" matched a route twice
		return fan[0], nil
	}
	return nil, fan
}

// loads returns a zero load of every subscription, with its limits, by name.
// Count returns the number of subscriptions (dispatch.Queues.ReadPlan: whether a
// subscription besides the full lanes may have rows to read).
func (r *registry) Count() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.names)
}

func (r *registry) loads() []SubscriptionLoad {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]SubscriptionLoad, 0, len(r.names))
	for name, rt := range r.names {
		out = append(out, SubscriptionLoad{Listener: name, MaxConcurrency: rt.MaxConcurrency, RateLimit: rt.RateLimit})
	}
	slices.SortFunc(out, func(a, b SubscriptionLoad) int { return strings.Compare(a.Listener, b.Listener) })
	return out
}

// lookup returns the one subscription of the route, or false when it has none or
// several.
func (r *registry) lookup(aggregateType, eventType string) (*dispatch.Route, bool) {
	rt, _ := r.Resolve("", aggregateType, eventType)
	return rt, rt != nil
}

// Lookup returns the listener for the route, or false when there is none.
func (r *registry) Lookup(aggregateType, eventType string) (Listener, bool) {
	rt, ok := r.lookup(aggregateType, eventType)
	if !ok {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.listeners[rt.Name], true
}

// DeliveryID is the ID, the same on every node, of event id's delivery to listener in a fan-out.
func DeliveryID(id, listener string) string { return dispatch.DeliveryID(id, listener) }
