package dispatch

import (
	"cmp"
	"slices"
	"strings"

	"github.com/outboxkit/outbox/core/storage"
)

// anyType is outbox.AnyType: a route's aggregate or event type that matches every value.
const anyType = "*"

// Paused subscriptions (docs/listeners.md, pause). The set is the table's (the poller
// reads it at each cycle, Events.Pause and Resume set it at once in their process):
// Enqueue refuses the events of a paused subscription (EnqueuePaused), so they stay
// pending in the table, and SetPaused takes the queued ones out of the lane. An attempt
// running when its subscription is paused finishes, and its outcome is written. The
// lanes of events to split and of unroutable ones are never paused: an event that
// several subscriptions take is split as usual, and only the paused subscription's
// delivery waits.

// SetPaused makes names the paused subscriptions. The events queued for a subscription
// that names adds are taken out of the queues and forgotten (none of them was taken by a
// worker) and returned with the name of their subscription, so that the caller gives
// back their claims or pins them (storage.PauseStore.Pin); their rows are pending.
func (q *Queues) SetPaused(names []string) []PausedEvent {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	var (
		out     []PausedEvent
		changed []*lane
	)
	q.mu.Lock()
	if q.routes != nil {
		for n := range set { // a lane of its own, so that its load shows it paused
			if rt, _ := q.routes.Resolve(n, "", ""); rt != nil {
				q.laneOf(rt)
			}
		}
	}
	q.paused = set
	wasHeld := q.held
	for _, l := range q.lanes {
		now := set[l.rt.Name] && l.isSubscription()
		if now == l.paused {
			continue
		}
		l.paused = now
		changed = append(changed, l)
		if !now {
			continue
		}
		for p := range l.fifo {
			for l.fifo[p].len() > 0 {
				it := l.fifo[p].pop()
				q.setQueued(Path(p), q.queued[p]-1)
				q.forget(it.ev.ID)
				out = append(out, PausedEvent{Event: it.ev, Listener: l.rt.Name})
			}
		}
		if l.isReady {
			l.isReady = false
			i := slices.Index(q.ready, l)
			q.ready = slices.Delete(q.ready, i, i+1)
		}
	}
	held := q.held != wasHeld
	q.mu.Unlock()
	if len(out) > 0 {
		q.reportDepths()
	}
	for _, l := range changed {
		q.reportLoad(l)
	}
	if held {
		q.reportHeld()
	}
	return out
}

// PausedEvent is an event that Queues refused or took out of a lane because its
// subscription, Listener, is paused.
type PausedEvent struct {
	Event
	Listener string
}

// PausedListener returns the name of the paused subscription that e would go to, or ""
// when e goes to none (it is split, unroutable, or its subscription is not paused).
func (q *Queues) PausedListener(e Event) string {
	if q.routes == nil {
		return ""
	}
	rt, fan := q.routes.Resolve(e.Listener, e.AggregateType, e.Type)
	if rt == nil || fan != nil {
		return ""
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.paused[rt.Name] {
		return rt.Name
	}
	return ""
}

// Paused returns the paused subscriptions, sorted by name.
func (q *Queues) Paused() []string {
	q.mu.Lock()
	out := make([]string, 0, len(q.paused))
	for n := range q.paused {
		out = append(out, n)
	}
	q.mu.Unlock()
	slices.Sort(out)
	return out
}

// Full lanes (docs/listeners.md, fair delivery). The poller reads due rows oldest first,
// so a backlog of one subscription larger than the cold queue would fill it and keep
// the rows of every other subscription unread until the backlog drained. So no lane may
// take more than laneColdCap cold events (the rest of the queue stays for the other
// lanes), and ReadPlan leaves out of the poller's reads the rows of the lanes that hold
// that many cold events (hot ones are not the poller's: a lane full of them leaves the
// poller's room alone): the paused subscriptions' and the full lanes' own (by listener), and the
// rows routed by their type alone to a full lane (by its route, when no other
// subscription's route matches them, and the route has no AnyType: a catch-all's rows
// cannot be told apart in SQL, so its backlog is not left out).

// laneColdCap is the most cold events one lane may hold: the poller's window (the cold
// queue, or its batch when it claims) but a tenth, kept for the other lanes' events.
// The caller holds mu.
func (q *Queues) laneColdCap() int {
	w := q.coldWindow
	if w <= 0 {
		w = q.coldCap
	}
	return w - w/10
}

// SetColdWindow sets how many cold events the poller keeps queued at most: the cold
// queue's size when it reads, its batch size when it claims (rows are claimed just in
// time). Each lane may hold all of it but a tenth (laneColdCap).
func (q *Queues) SetColdWindow(n int) {
	q.mu.Lock()
	q.coldWindow = min(n, q.coldCap)
	q.mu.Unlock()
}

// ReadPlan is what the poller's next read may take (Queues.ReadPlan).
type ReadPlan struct {
	// Skip is what the read leaves out: the paused subscriptions' rows and the full
	// lanes' (see above).
	Skip storage.Skip
	// Budget is how many rows the read may take: the window's free room, and no more
	// than the fullest lane that is not full may still take, so that a read of one
	// subscription's backlog does not take rows its lane would refuse. 0: none now.
	Budget int
	// Full reports that some lane is full: the read leaves its rows out, which costs
	// the database a walk over them (they are the oldest), and Others whether another
	// subscription, whose lane is not full, may have rows to read. The poller makes such
	// a read at most once per interval.
	Full, Others bool
}

// ReadPlan returns what the poller's next read may take now.
func (q *Queues) ReadPlan() ReadPlan {
	var (
		p    ReadPlan
		full []*Route // the full lanes
	)
	q.mu.Lock()
	if !q.accepting {
		q.mu.Unlock()
		return p // the Dispatcher is not running
	}
	w := q.coldWindow
	if w <= 0 {
		w = q.coldCap
	}
	limit := q.laneColdCap()
	fullest := 0
	for n := range q.paused {
		p.Skip.Listeners = append(p.Skip.Listeners, n)
	}
	for rt, l := range q.lanes {
		switch n := l.fifo[PathCold].len(); {
		case l.paused:
		case n >= limit && l.isSubscription():
			p.Skip.Listeners = append(p.Skip.Listeners, rt.Name)
			full = append(full, rt)
		case n >= limit: // the lane of events to split or of unroutable ones
			fullest = limit
		case n > fullest:
			fullest = n
		}
	}
	p.Budget = max(min(w-q.queued[PathCold], limit-fullest), 0)
	q.mu.Unlock()
	slices.Sort(p.Skip.Listeners)
	if len(full) == 0 {
		return p
	}
	p.Full, p.Others = true, true
	if c, ok := q.routes.(interface{ Count() int }); ok {
		p.Others = c.Count() > len(full)
	}
	for _, rt := range full {
		if rt.EventType == "" || rt.EventType == anyType || rt.AggregateType == anyType || q.routes == nil {
			continue
		}
		if only, fan := q.routes.Resolve("", rt.AggregateType, rt.EventType); only == rt && fan == nil {
			p.Skip.Routes = append(p.Skip.Routes, storage.RouteKey{AggregateType: rt.AggregateType, EventType: rt.EventType})
		}
	}
	slices.SortFunc(p.Skip.Routes, func(a, b storage.RouteKey) int {
		return cmp.Or(strings.Compare(a.AggregateType, b.AggregateType), strings.Compare(a.EventType, b.EventType))
	})
	return p
}
