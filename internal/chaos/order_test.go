package chaos

import (
	"slices"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestCheckOrder feeds the order checker runs that keep order and runs that break it in
// each way it gates, and checks that it tells them apart.
func TestCheckOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rec := func(k Kind, ev, node string, ms int) Record {
		return Record{Kind: k, Event: ev, Node: node, At: at(ms)}
	}
	done := int(outbox.StatusDone)
	dead := int(outbox.StatusDead)
	// a1, a2, a3 on key A (seq 1, 2, 3); b1 on key B; u unordered.
	finals := []Final{
		{Event: "a1", Status: done, OrderKey: "A", OrderSeq: 1},
		{Event: "a2", Status: done, OrderKey: "A", OrderSeq: 2},
		{Event: "a3", Status: done, OrderKey: "A", OrderSeq: 3},
		{Event: "b1", Status: done, OrderKey: "B", OrderSeq: 1},
		{Event: "u", Status: done},
	}
	writes := []Record{
		rec(Begun, "a1", "w", 0), rec(Committed, "a1", "w", 1),
		rec(Begun, "a2", "w", 2), rec(Committed, "a2", "w", 3),
		rec(Begun, "a3", "w", 4), rec(Committed, "a3", "w", 5),
		rec(Begun, "b1", "w", 4), rec(Committed, "b1", "w", 5),
		rec(Begun, "u", "w", 4), rec(Committed, "u", "w", 5),
	}
	good := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		rec(Started, "b1", "n2", 10), rec(Delivered, "b1", "n2", 20), // other key: concurrent is fine
		rec(Started, "u", "n1", 10), rec(Delivered, "u", "n1", 30),
		rec(Started, "a2", "n2", 12), rec(Failed, "a2", "n2", 13), // a retry holds the key
		rec(Started, "a2", "n1", 14), rec(Delivered, "a2", "n1", 15),
		rec(Started, "a3", "n1", 16), rec(Delivered, "a3", "n1", 17),
	)
	check := func(name string, recs []Record, fin []Final, want func(OrderReport) bool) {
		t.Helper()
		o := CheckOrder(recs, fin, time.Second)
		if !want(o) {
			t.Errorf("%s: %s", name, o.Summary())
		}
	}
	clean := func(o OrderReport) bool {
		return o.Keys == 2 && o.Events == 4 && len(o.OutOfOrder)+len(o.SeqAgainstCommit)+len(o.KeyOverlaps)+len(o.StalledOverlaps) == 0
	}
	check("in order", good, finals, clean)

	// a3 starts before a2 was delivered (a2 was only failing then).
	bad := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		rec(Started, "a2", "n2", 12), rec(Failed, "a2", "n2", 13),
		rec(Started, "a3", "n1", 14), rec(Delivered, "a3", "n1", 15),
		rec(Started, "a2", "n1", 16), rec(Delivered, "a2", "n1", 17),
		rec(Started, "b1", "n2", 10), rec(Delivered, "b1", "n2", 20),
	)
	check("overtaken", bad, finals, func(o OrderReport) bool {
		return slices.Equal(o.OutOfOrder, []string{"a3"}) && len(o.KeyOverlaps) == 0
	})

	// A DEAD event releases its key when its last attempt ended (DeadKeySkips)...
	deadFinals := slices.Clone(finals)
	deadFinals[1].Status = dead
	skips := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		rec(Started, "a2", "n1", 12), rec(Failed, "a2", "n1", 13),
		rec(Started, "a2", "n1", 14), rec(Failed, "a2", "n1", 15),
		rec(Started, "a3", "n2", 16), rec(Delivered, "a3", "n2", 17),
		rec(Started, "b1", "n2", 10), rec(Delivered, "b1", "n2", 11),
	)
	check("past a DEAD event", skips, deadFinals, clean)
	// ... not before.
	early := slices.Clone(skips)
	early[len(early)-4].At = at(14) // a3 starts with a2's last attempt
	check("before a DEAD event ended", early, deadFinals, func(o OrderReport) bool {
		return slices.Equal(o.OutOfOrder, []string{"a3"})
	})
	// An event never delivered nor DEAD never releases its key.
	stuck := slices.Clone(finals)
	stuck[1].Status = int(outbox.StatusRetry)
	noA2 := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		rec(Started, "a3", "n1", 16), rec(Delivered, "a3", "n1", 17),
	)
	check("past a pending event", noA2, stuck, func(o OrderReport) bool {
		return slices.Equal(o.OutOfOrder, []string{"a3"})
	})

	// Two attempts of one key at once, on two nodes (a2's first attempt still runs
	// when a3 starts, although a2 was delivered elsewhere in between).
	overlap := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		rec(Started, "a2", "n1", 12),
		rec(Started, "a2", "n2", 13), rec(Delivered, "a2", "n2", 14),
		rec(Started, "a3", "n2", 15), rec(Delivered, "a3", "n2", 16),
		rec(Delivered, "a2", "n1", 17),
		rec(Started, "b1", "n2", 10), rec(Delivered, "b1", "n2", 11),
	)
	check("key overlap", overlap, finals, func(o OrderReport) bool {
		return len(o.KeyOverlaps) == 1 && len(o.StalledOverlaps) == 0 && len(o.OutOfOrder) == 0
	})
	// The same with a2's first attempt stalled past the bound: counted apart.
	check("stalled overlap", overlap, finals, func(o OrderReport) bool {
		o = CheckOrder(overlap, finals, time.Millisecond)
		return len(o.KeyOverlaps) == 0 && len(o.StalledOverlaps) == 1
	})
	// A kill ends the dead node's attempt: no overlap, a take-over.
	killed := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		rec(Started, "a2", "n1", 12),
		Record{Kind: Fault, Node: "n1", Event: "kill -9", At: at(13)},
		rec(Started, "a2", "n2", 3013), rec(Delivered, "a2", "n2", 3014),
		rec(Started, "a3", "n2", 3015), rec(Delivered, "a3", "n2", 3016),
		rec(Started, "b1", "n2", 10), rec(Delivered, "b1", "n2", 11),
	)
	check("take-over after a kill", killed, finals, func(o OrderReport) bool {
		return clean(o) && o.Takeovers == 1 && o.Takeover == 3*time.Second
	})
	// A chain: n2 claims the dead node's a2 and dies at the after-claim crash point,
	// n3 claims it and dies too, n4 runs it. Each death costs its own lease: three
	// take-overs, the longest link 3.5 s, not the 9.5 s from the first kill.
	chain := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		rec(Started, "a2", "n1", 12),
		Record{Kind: Fault, Node: "n1", Event: "kill -9", At: at(13)},
		Record{Kind: Fault, Node: "n2", Event: "crash point", At: at(3013)},
		rec(Claimed, "a2", "n2", 3013), rec(Claimed, "u", "n2", 3013),
		Record{Kind: Fault, Node: "n3", Event: "crash point", At: at(6513)},
		rec(Claimed, "a2", "n3", 6513),
		rec(Started, "a2", "n4", 9513), rec(Delivered, "a2", "n4", 9514),
		rec(Started, "a3", "n4", 9515), rec(Delivered, "a3", "n4", 9516),
		rec(Started, "b1", "n2", 10), rec(Delivered, "b1", "n2", 11),
	)
	check("take-over chain", chain, finals, func(o OrderReport) bool {
		return clean(o) && o.Takeovers == 3 && o.Takeover == 3500*time.Millisecond &&
			o.Chain == 9500*time.Millisecond && o.ChainDeaths == 3
	})
	// Without the Claimed records the same run is one take-over of 9.5 s.
	unclaimed := slices.DeleteFunc(slices.Clone(chain), func(r Record) bool { return r.Kind == Claimed })
	check("take-over chain without claims", unclaimed, finals, func(o OrderReport) bool {
		return clean(o) && o.Takeovers == 1 && o.Takeover == 9500*time.Millisecond
	})
	// A claim lost with its node is a take-over by itself, though nothing had started.
	claimOnly := append(slices.Clone(writes),
		rec(Started, "a1", "n1", 10), rec(Delivered, "a1", "n1", 11),
		Record{Kind: Fault, Node: "n2", Event: "crash point", At: at(12)},
		rec(Claimed, "a2", "n2", 12),
		rec(Started, "a2", "n1", 3512), rec(Delivered, "a2", "n1", 3513),
		rec(Started, "a3", "n1", 3515), rec(Delivered, "a3", "n1", 3516),
		rec(Started, "b1", "n1", 10), rec(Delivered, "b1", "n1", 11),
	)
	check("take-over of a lost claim", claimOnly, finals, func(o OrderReport) bool {
		return clean(o) && o.Takeovers == 1 && o.Takeover == 3500*time.Millisecond
	})

	// Write order against commit order: a2 begins its commit after a3 committed, yet
	// a2 has the lower seq; with the seqs swapped, the same commits are in order.
	late := slices.Clone(writes)
	late[2].At, late[3].At = at(6), at(7)
	check("seq against commit", late, finals, func(o OrderReport) bool {
		return slices.Equal(o.SeqAgainstCommit, []string{"a2"})
	})
	swapped := slices.Clone(finals)
	swapped[1].OrderSeq, swapped[2].OrderSeq = 3, 2
	check("seq with commit", late, swapped, func(o OrderReport) bool { return len(o.SeqAgainstCommit) == 0 })

	// Unordered runs have nothing to check.
	if o := CheckOrder(good, []Final{{Event: "u", Status: done}}, time.Second); o.Events != 0 || o.Keys != 0 {
		t.Errorf("unordered run: %s", o.Summary())
	}
}
