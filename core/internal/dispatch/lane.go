package dispatch

import (
	"slices"
	"time"
)

// The lanes of Queues (see its "Fair scheduling"): one per subscription, each a FIFO
// per path with its subscription's MaxConcurrency and rate limit, and the pick that
// serves the lane served longest ago.

// Lanes of events that no single subscription takes.
var (
	fanOutLane     = &Route{Name: "(fan-out)"}
	unroutableLane = &Route{Name: "(unroutable)"}
)

// lane holds the queued events of one subscription.
type lane struct {
	rt      *Route
	limit   int     // the most workers at once; 0: no bound
	fifo    [2]fifo // by path
	running int     // workers holding a slot of the lane
	isReady bool    // in Queues.ready
	paused  bool    // its subscription is paused: it holds no events (Queues.SetPaused)
	served  uint64  // Queues.served when a worker last took from the lane; 0: never
	// A token bucket when the subscription has a rate limit (rate > 0): each event
	// taken spends a token; tokens come back at rate per second up to burst.
	rate, burst, tokens float64
	filled              time.Time // when tokens was last brought up to date
}

// newLane returns the lane of rt's events.
func newLane(rt *Route) *lane {
	l := &lane{rt: rt, limit: rt.MaxConcurrency, rate: rt.RateLimit}
	if l.rate > 0 {
		l.burst = float64(max(rt.RateBurst, 1))
		l.tokens = l.burst
	}
	return l
}

// load returns l's load at now. The caller holds Queues.mu.
func (l *lane) load(now time.Time) SubscriptionLoad {
	n := l.size()
	limited := n > 0 && !l.free()
	if n > 0 && !limited {
		limited = l.wait(now) > 0
	}
	return SubscriptionLoad{Listener: l.rt.Name, Queued: n, Running: l.running, MaxConcurrency: l.limit,
		RateLimit: l.rate, Limited: limited, Paused: l.paused}
}

// laneOf returns rt's lane, made when it has none. The caller holds mu.
func (q *Queues) laneOf(rt *Route) *lane {
	l := q.lanes[rt]
	if l == nil {
		l = newLane(rt)
		l.paused = q.paused[rt.Name] && l.isSubscription()
		q.lanes[rt] = l
	}
	return l
}

// isSubscription reports whether l is a subscription's lane (not the lane of events
// to split or of unroutable ones).
func (l *lane) isSubscription() bool { return l.rt != fanOutLane && l.rt != unroutableLane }

// free reports whether a worker may take an event of l now.
func (l *lane) free() bool { return l.limit <= 0 || l.running < l.limit }

// tokensAt returns l's tokens at now: those left at the last take, plus those that
// came back since, up to burst.
func (l *lane) tokensAt(now time.Time) float64 {
	if !l.filled.IsZero() && now.After(l.filled) {
		return min(l.burst, l.tokens+now.Sub(l.filled).Seconds()*l.rate)
	}
	return l.tokens
}

// wait returns 0 when l has a token of its rate limit at now, or how long until it has
// one. A lane without a rate limit always has one.
func (l *lane) wait(now time.Time) time.Duration {
	if l.rate <= 0 {
		return 0
	}
	if tokens := l.tokensAt(now); tokens < 1 {
		return max(time.Duration((1-tokens)/l.rate*float64(time.Second)), time.Millisecond)
	}
	return 0
}

// spend takes a token of l's rate limit at now and returns 0, or, when none is left,
// how long until the next one. A lane without a rate limit always has one.
func (l *lane) spend(now time.Time) time.Duration {
	if w := l.wait(now); w > 0 || l.rate <= 0 {
		return w
	}
	l.tokens = l.tokensAt(now) - 1
	if l.filled.IsZero() || now.After(l.filled) {
		l.filled = now
	}
	return 0
}

// size returns the events queued in l.
func (l *lane) size() int { return l.fifo[PathHot].len() + l.fifo[PathCold].len() }

// fifo is a queue of items.
type fifo struct {
	items []dispatchItem
	head  int
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(it dispatchItem) {
	if f.head > 0 && f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	}
	f.items = append(f.items, it)
}

func (f *fifo) pop() dispatchItem {
	it := f.items[f.head]
	f.items[f.head] = dispatchItem{}
	f.head++
	if f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	} else if f.head >= 64 && f.head*2 >= len(f.items) {
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return it
}

// pick takes the next event of the lane served longest ago among those with an event,
// a free slot and a token of their rate limit (see Queues), and a slot of it. When it
// finds none and some lane waits only for a token, it returns how long until the first
// such token. The caller holds mu.
func (q *Queues) pick(turn uint) (it dispatchItem, ok bool, wait time.Duration) {
	var (
		now  time.Time
		best *lane
	)
	for _, l := range q.ready { // oldest first: of lanes never served, the first queued
		if !l.free() || best != nil && l.served >= best.served {
			continue
		}
		if l.rate > 0 {
			if now.IsZero() {
				now = q.now()
			}
			if w := l.wait(now); w > 0 {
				if wait == 0 || w < wait {
					wait = w
				}
				continue
			}
		}
		best = l
	}
	if best == nil {
		return dispatchItem{}, false, wait
	}
	best.spend(now)
	q.take(best)
	best.running++
	return q.popLane(best, turn%3 == 2), true, 0
}

// take stamps l as the lane served last. The caller holds mu.
func (q *Queues) take(l *lane) {
	q.served++
	l.served = q.served
}

// popLane takes the next event of l, of its cold FIFO first when coldFirst, and takes l
// out of the ready lanes when it is empty after, waking a worker when every lane is.
// The caller holds mu and knows l has events.
func (q *Queues) popLane(l *lane, coldFirst bool) dispatchItem {
	first, second := PathHot, PathCold
	if coldFirst {
		first, second = second, first
	}
	p := first
	if l.fifo[p].len() == 0 {
		p = second
	}
	it := l.fifo[p].pop()
	q.setQueued(p, q.queued[p]-1)
	if l.size() == 0 {
		l.isReady = false
		i := slices.Index(q.ready, l)
		q.ready = slices.Delete(q.ready, i, i+1)
		if q.queued[PathHot]+q.queued[PathCold] == 0 {
			// Workers that waited while a bounded lane held the last events look again:
			// after a graceful stop they return once the lanes are empty (next).
			q.signal()
		}
	}
	return it
}
