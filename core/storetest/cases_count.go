package storetest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// counts returns the store as an storage.EventCountStore, or skips the test.
func (x *fixture) counts() storage.EventCountStore {
	cs, ok := x.h.Store.(storage.EventCountStore)
	if !ok {
		x.Skipf("%T does not implement storage.EventCountStore", x.h.Store)
	}
	return cs
}

func (x *fixture) countEvents(p storage.CountEventsParams) outbox.EventCounts {
	x.Helper()
	c, err := x.counts().CountEvents(x.ctx, p)
	if err != nil {
		x.Fatalf("CountEvents(%+v): %v", p, err)
	}
	return c
}

// testCountEvents: a count of a status, filtered or not, with groups, is exact when the
// index holds fewer rows than ScanLimit; past that it is a lower bound (AtLeast) of at
// most ScanLimit events.
func testCountEvents(x *fixture) {
	x.events()
	x.counts()
	x.eventSet()
	for _, c := range []struct {
		st   outbox.Status
		f    outbox.EventFilter
		want int64
	}{
		{outbox.StatusNew, outbox.EventFilter{}, 3},
		{outbox.StatusRetry, outbox.EventFilter{}, 1},
		{outbox.StatusDead, outbox.EventFilter{}, 2},
		{outbox.StatusDone, outbox.EventFilter{}, 2},
		{outbox.StatusFallback, outbox.EventFilter{}, 0},
		{outbox.StatusWaiting, outbox.EventFilter{}, 0},
		{outbox.StatusNew, outbox.EventFilter{EventType: "X"}, 2},
		{outbox.StatusNew, outbox.EventFilter{Listener: "mail"}, 1},
		{outbox.StatusDead, outbox.EventFilter{AggregateType: "B"}, 1},
		{outbox.StatusDead, outbox.EventFilter{ErrorContains: "BROKER"}, 1},
		{outbox.StatusDone, outbox.EventFilter{AggregateID: "a-A"}, 1},
	} {
		got := x.countEvents(storage.CountEventsParams{Status: c.st, EventFilter: c.f, ScanLimit: 100})
		if got.N != c.want || got.AtLeast || got.Groups != nil {
			x.Fatalf("count of %s %+v = %+v, want exactly %d", c.st, c.f, got, c.want)
		}
	}
	if _, ok := x.h.Store.(storage.DiscardStore); ok {
		if got := x.countEvents(storage.CountEventsParams{Status: outbox.StatusDiscarded, ScanLimit: 100}); got.N != 1 || got.AtLeast {
			x.Fatalf("count of DISCARDED = %+v, want 1", got)
		}
	}
	groups := func(c outbox.EventCounts) string {
		var s []string
		for _, g := range c.Groups {
			s = append(s, fmt.Sprintf("%s/%s/%s=%d", g.AggregateType, g.EventType, g.Listener, g.N))
		}
		slices.Sort(s)
		return strings.Join(s, " ")
	}
	got := x.countEvents(storage.CountEventsParams{Status: outbox.StatusNew, Groups: true, ScanLimit: 100})
	if got.N != 3 || got.AtLeast || groups(got) != "A/X/=1 A/X/mail=1 B/Y/=1" {
		x.Fatalf("count of NEW with groups = %+v (%s)", got, groups(got))
	}
	// ScanLimit 2 of 3 NEW events (4 rows of the pending index, on some stores): a
	// lower bound, its groups of the events counted.
	got = x.countEvents(storage.CountEventsParams{Status: outbox.StatusNew, Groups: true, ScanLimit: 2})
	var sum int64
	for _, g := range got.Groups {
		sum += g.N
	}
	if !got.AtLeast || got.N > 2 || sum != got.N {
		x.Fatalf("count of NEW, ScanLimit 2 = %+v; want AtLeast, at most 2, its groups summing to it", got)
	}
	if got := x.countEvents(storage.CountEventsParams{Status: outbox.StatusDone, ScanLimit: 1}); !got.AtLeast || got.N > 1 {
		x.Fatalf("count of DONE, ScanLimit 1 = %+v; want AtLeast, at most 1", got)
	}
	if _, err := x.counts().CountEvents(x.ctx, storage.CountEventsParams{Status: outbox.StatusNew}); err == nil {
		x.Fatal("CountEvents with ScanLimit 0 = nil error")
	}
}

// testCountBlockedKeys: the blocked keys among the rows of the order index read, as
// Stats counts them, with their oldest holder; AtLeast when the index has more rows.
func testCountBlockedKeys(x *fixture) {
	x.orders()
	cs := x.counts()
	x.insert(ordered("a1", "A", at(2*time.Minute)), ordered("a2", "A", base), ordered("b1", "B", at(time.Minute)),
		ordered("b2", "B", base), ordered("c1", "C", base), ordered("d1", "D", base))
	x.promote(storage.PromoteParams{Limit: 10}, ifWait(x.headsWait("a1"), 4))
	x.retry("a1", at(time.Hour))      // holds a2
	x.markDead("b1", "poison")        // holds b2
	x.markDead("d1", "no one behind") // holds nothing
	b, err := cs.CountBlockedKeys(x.ctx, 100)
	if err != nil || b.N != 2 || b.AtLeast {
		x.Fatalf("CountBlockedKeys = %+v, %v; want exactly 2", b, err)
	}
	x.wantTime("Oldest", b.Oldest, at(time.Minute))
	// The first two rows of the order index are key A's: one blocked key among them.
	if b, err = cs.CountBlockedKeys(x.ctx, 2); err != nil || b.N != 1 || !b.AtLeast {
		x.Fatalf("CountBlockedKeys(2) = %+v, %v; want 1, at least", b, err)
	}
	x.wantTime("Oldest", b.Oldest, at(2*time.Minute))
	x.promote(storage.PromoteParams{Keys: []string{"B"}}, 1)
	if b, err = cs.CountBlockedKeys(x.ctx, 100); err != nil || b.N != 1 || b.AtLeast {
		x.Fatalf("CountBlockedKeys after B moved on = %+v, %v; want 1", b, err)
	}
}
