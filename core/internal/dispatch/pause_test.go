package dispatch

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// TestSetPausedTakesQueuedEventsOut: pausing a subscription takes its queued events out
// of its lane and the in-flight set (returned with its name, for the poller to pin or
// release), leaves its running attempt alone, refuses its new events, and leaves the
// other lanes as they were; resuming takes its events again.
func TestSetPausedTakesQueuedEventsOut(t *testing.T) {
	a, b := &Route{Name: "A"}, &Route{Name: "B"}
	q := newTestQueues(t, routesByType{"A": a, "B": b})
	q.mustEnqueue(t, "a1", "A")
	q.mustEnqueue(t, "a2", "A")
	q.mustEnqueue(t, "b1", "B")
	running, id := q.pickAs(t, 0)
	if id != "a1" {
		t.Fatalf("first take %q, want a1", id)
	}
	out := q.SetPaused([]string{"A"})
	if len(out) != 1 || out[0].ID != "a2" || out[0].Listener != "A" {
		t.Fatalf("SetPaused took out %+v, want a2 of A", out)
	}
	if hot, _ := q.Depths(); hot != 1 {
		t.Fatalf("hot depth %d after the pause, want 1 (b1)", hot)
	}
	if r := q.Enqueue(Event{ID: "a3", Type: "A"}, PathCold, q.now(), time.Time{}); r != EnqueuePaused {
		t.Fatalf("Enqueue of a paused subscription's event = %v, want EnqueuePaused", r)
	}
	if got := q.PausedListener(Event{ID: "a3", Type: "A"}); got != "A" {
		t.Fatalf("PausedListener = %q, want A", got)
	}
	if got := q.PausedListener(Event{ID: "b9", Type: "B"}); got != "" {
		t.Fatalf("PausedListener of B = %q, want none", got)
	}
	loads := q.Loads()
	i := slices.IndexFunc(loads, func(l SubscriptionLoad) bool { return l.Listener == "A" })
	if i < 0 || !loads[i].Paused || loads[i].Queued != 0 || loads[i].Running != 1 {
		t.Fatalf("loads %+v: want A paused, nothing queued, one running", loads)
	}
	if _, id := q.pickAs(t, 0); id != "b1" {
		t.Fatalf("next take %q, want b1", id)
	}
	if _, id := q.pickAs(t, 0); id != "" {
		t.Fatalf("took %q from a paused lane", id)
	}
	q.done(running)
	if got := q.Paused(); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("Paused() = %v", got)
	}
	if out := q.SetPaused(nil); len(out) != 0 {
		t.Fatalf("resume took out %+v", out)
	}
	q.mustEnqueue(t, "a2", "A") // forgotten at the pause: read again after the resume
	if _, id := q.pickAs(t, 0); id != "a2" {
		t.Fatalf("take after the resume %q, want a2", id)
	}
}

// countedRoutes is routesByType with its number of subscriptions (the registry's Count).
type countedRoutes struct{ routesByType }

func (r countedRoutes) Count() int { return len(r.routesByType) }

// TestReadPlanLeavesFullLanesOut: a lane may hold the cold window but a tenth; the read
// plan's budget stops at what the fullest lane may still take; once the lane is full
// its rows are left out (by name, and by its route when no other subscription's route
// matches), with the window's free room for the other subscriptions, and only while
// some other subscription may have rows.
func TestReadPlanLeavesFullLanesOut(t *testing.T) {
	slow := &Route{Name: "slow", AggregateType: "Order", EventType: "Slow"}
	fast := &Route{Name: "fast", AggregateType: "Order", EventType: "Fast"}
	q := NewQueues(100, 20, 2, outboxtype.NopMetrics{}, time.Now, countedRoutes{routesByType{"Slow": slow, "Fast": fast}})
	q.open()
	if p := q.ReadPlan(); p.Budget != 18 || p.Full || !p.Skip.IsZero() {
		t.Fatalf("empty queues: plan %+v, want budget 18 (20 but a tenth), nothing left out", p)
	}
	cold := func(id, typ string) EnqueueResult {
		return q.Enqueue(Event{ID: id, Type: typ, AggregateType: "Order"}, PathCold, q.now(), time.Time{})
	}
	for i := range 10 {
		if r := cold(fmt.Sprintf("s%d", i), "Slow"); r != EnqueueOK {
			t.Fatalf("s%d: %v", i, r)
		}
	}
	if p := q.ReadPlan(); p.Budget != 8 || p.Full {
		t.Fatalf("slow lane at 10: plan %+v, want budget 8, not full", p)
	}
	for i := 10; i < 18; i++ {
		cold(fmt.Sprintf("s%d", i), "Slow")
	}
	if r := cold("s18", "Slow"); r != EnqueueLaneFull {
		t.Fatalf("a 19th cold event of the slow lane: %v, want EnqueueLaneFull", r)
	}
	p := q.ReadPlan()
	wantSkip := storage.Skip{Listeners: []string{"slow"}, Routes: []storage.RouteKey{{AggregateType: "Order", EventType: "Slow"}}}
	if p.Budget != 2 || !p.Full || !p.Others || !reflect.DeepEqual(p.Skip, wantSkip) {
		t.Fatalf("slow lane full: plan %+v, want budget 2, full, others, skip %+v", p, wantSkip)
	}
	if r := cold("f1", "Fast"); r != EnqueueOK {
		t.Fatalf("a fast event beside the full lane: %v", r)
	}
	q.SetPaused([]string{"fast"})
	if p := q.ReadPlan(); !slices.Equal(p.Skip.Listeners, []string{"fast", "slow"}) {
		t.Fatalf("with fast paused: skip %+v, want both names", p.Skip)
	}
	one := NewQueues(100, 20, 2, outboxtype.NopMetrics{}, time.Now, countedRoutes{routesByType{"Slow": slow}})
	one.open()
	for i := range 18 {
		one.Enqueue(Event{ID: fmt.Sprintf("s%d", i), Type: "Slow", AggregateType: "Order"}, PathCold, one.now(), time.Time{})
	}
	if p := one.ReadPlan(); !p.Full || p.Others {
		t.Fatalf("the only subscription full: plan %+v, want full and no others to read", p)
	}
}
