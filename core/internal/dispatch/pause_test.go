package dispatch

import (
	"slices"
	"testing"
	"time"
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
