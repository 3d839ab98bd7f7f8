package dispatch

import (
	"slices"
)

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
