package dispatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// routesByType resolves an event to the route named after its type.
type routesByType map[string]*Route

func (r routesByType) Resolve(_, _, eventType string) (*Route, []*Route) { return r[eventType], nil }

func newTestQueues(t *testing.T, routes routesByType) *Queues {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	q := NewQueues(100, 100, 2, outboxtype.NopMetrics{}, func() time.Time { return now }, routes)
	q.open()
	return q
}

func (q *Queues) mustEnqueue(t *testing.T, id, typ string) {
	t.Helper()
	if r := q.Enqueue(Event{ID: id, Type: typ}, PathHot, q.now(), time.Time{}); r != EnqueueOK {
		t.Fatalf("Enqueue(%s) = %v", id, r)
	}
}

// pickAs picks an event as a worker would and returns its ID ("" when none may be taken).
func (q *Queues) pickAs(t *testing.T, turn uint) (dispatchItem, string) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	it, ok, _ := q.pick(turn)
	if !ok {
		return it, ""
	}
	return it, it.ev.ID
}

// TestPickServesTheLaneWaitingLongest is the interleaving of a hot burst that a loaded
// machine produces: each of the two workers takes a slow event while the burst is still
// being queued one event at a time, so the slow lane empties after each take and is
// queued again after them, and the fast lane is queued behind it. The first worker to
// be free must take the fast event, not a third slow one: the slow lane was served
// since the fast lane was queued. (A turn index into the ready lanes, which that order
// of events moves back to the slow lane, served the third slow event first.)
func TestPickServesTheLaneWaitingLongest(t *testing.T) {
	slow, fast := &Route{Name: "slow"}, &Route{Name: "fast"}
	q := newTestQueues(t, routesByType{"Slow": slow, "Fast": fast})
	q.mustEnqueue(t, "slow-00", "Slow")
	first, id := q.pickAs(t, 0)
	if id != "slow-00" {
		t.Fatalf("first take = %q, want slow-00", id)
	}
	q.mustEnqueue(t, "slow-01", "Slow")
	second, id := q.pickAs(t, 0)
	if id != "slow-01" {
		t.Fatalf("second take = %q, want slow-01", id)
	}
	for i := 2; i < 20; i++ {
		q.mustEnqueue(t, fmt.Sprintf("slow-%02d", i), "Slow")
	}
	q.mustEnqueue(t, "fast", "Fast")
	q.done(first)
	if _, id := q.pickAs(t, 1); id != "fast" {
		t.Fatalf("the first free worker took %q, want the fast event", id)
	}
	q.done(second)
	if _, id := q.pickAs(t, 1); id != "slow-02" {
		t.Fatalf("then %q, want slow-02", id)
	}
}

// TestPickTakesLanesInTurn: with every lane holding events, workers take one from each
// lane in turn, whatever order the lanes were queued in, and a lane at its
// MaxConcurrency is passed over without losing its place.
func TestPickTakesLanesInTurn(t *testing.T) {
	a, b, c := &Route{Name: "a"}, &Route{Name: "b", MaxConcurrency: 1}, &Route{Name: "c"}
	q := newTestQueues(t, routesByType{"A": a, "B": b, "C": c})
	for i := range 3 {
		q.mustEnqueue(t, fmt.Sprintf("a%d", i), "A")
	}
	for i := range 3 {
		q.mustEnqueue(t, fmt.Sprintf("b%d", i), "B")
		q.mustEnqueue(t, fmt.Sprintf("c%d", i), "C")
	}
	var got []string
	var heldB dispatchItem
	for range 5 {
		it, id := q.pickAs(t, 0)
		if id == "b0" {
			heldB = it // b's one slot stays taken
		}
		got = append(got, id)
	}
	want := []string{"a0", "b0", "c0", "a1", "c1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("takes = %v, want %v", got, want)
	}
	q.done(heldB)
	if _, id := q.pickAs(t, 0); id != "b1" {
		t.Fatalf("after b's slot was given back: %q, want b1 (b was served longest ago)", id)
	}
}
