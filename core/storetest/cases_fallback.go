package storetest

import (
	"errors"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// testFallback: MarkDead with Fallback makes the row FALLBACK, a final state no outcome
// changes, that is neither pending nor DEAD, and that Purge deletes like DONE and DEAD.
// The first counted failure sets FirstAttemptAt, later ones keep it, and a replay clears
// it.
func testFallback(x *fixture) {
	x.insert(ev("f1", base), ev("f2", base), ev("old", at(-30*24*time.Hour)))
	if e := x.get("f1"); !e.FirstAttemptAt.IsZero() {
		x.Fatalf("FirstAttemptAt %v before any failure", e.FirstAttemptAt)
	}
	x.retry("f1", at(time.Minute))
	first := x.get("f1").FirstAttemptAt
	if first.IsZero() {
		x.Fatal("FirstAttemptAt not set by the first counted failure")
	}
	x.retry("f1", at(2*time.Minute))
	n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "f1", DeadAt: at(3 * time.Minute), Reason: "handled: broker down",
		CountAttempt: true, Fallback: true})
	x.changed("MarkDead with Fallback", n, err, 1)
	e := x.wantStatus("f1", outbox.StatusFallback)
	if e.Attempts != 3 || e.LastError != "handled: broker down" || !e.DoneAt.Equal(at(3*time.Minute)) || !e.FirstAttemptAt.Equal(first) {
		x.Fatalf("f1: attempts %d, last error %q, done at %v, first attempt %v (want %v)",
			e.Attempts, e.LastError, e.DoneAt, e.FirstAttemptAt, first)
	}
	// Final: no outcome changes it.
	x.changed("MarkDone of FALLBACK", x.markDone(at(time.Hour), "f1"), nil, 0)
	n, err = x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "f1", Status: outbox.StatusRetry, AvailableAt: at(time.Hour), CountAttempt: true})
	x.changed("Reschedule of FALLBACK", n, err, 0)
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "f1", DeadAt: at(time.Hour), Reason: "x"})
	x.changed("MarkDead of FALLBACK", n, err, 0)
	x.wantStatus("f1", outbox.StatusFallback)
	if b := x.pending(at(24*time.Hour), 0, 10); len(b.Events) != 2 {
		x.Fatalf("pending %v, want f2 and old only", ids(b.Events))
	}
	if dead := x.listDead(storage.ListDeadParams{Limit: 10}); len(dead) != 0 {
		x.Fatalf("DEAD rows %v, want none: FALLBACK is not DEAD", ids(dead))
	}
	n, err = x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"f1"}, Now: at(time.Hour)})
	x.changed("Replay of FALLBACK", n, err, 0)

	// A replay clears FirstAttemptAt with the attempts.
	x.markDead("f2", "poison")
	if x.get("f2").FirstAttemptAt.IsZero() {
		x.Fatal("f2: FirstAttemptAt not set by MarkDead counting an attempt")
	}
	n, err = x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"f2"}, Now: at(time.Hour)})
	x.changed("Replay", n, err, 1)
	if e := x.wantStatus("f2", outbox.StatusNew); !e.FirstAttemptAt.IsZero() || e.Attempts != 0 {
		x.Fatalf("f2 after replay: attempts %d, first attempt %v", e.Attempts, e.FirstAttemptAt)
	}

	// Purged once past retention, as DONE and DEAD rows are.
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "old", DeadAt: at(-29 * 24 * time.Hour), Reason: "handled", Fallback: true})
	x.changed("MarkDead old with Fallback", n, err, 1)
	n, err = x.store().Purge(x.ctx, storage.PurgeParams{Before: at(-7 * 24 * time.Hour), Limit: 10})
	x.changed("Purge", n, err, 1)
	x.notFound("old")
	x.wantStatus("f1", outbox.StatusFallback)
}

// testFallbackReleasesKey: a FALLBACK event lets its order key move on as DONE does,
// also when DEAD events block their keys.
func testFallbackReleasesKey(x *fixture) {
	x.orders()
	x.insert(ordered("k1", "K", base), ordered("k2", "K", base))
	x.promote(storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: true}, ifWait(x.headsWait("k1"), 1))
	x.wantStatus("k1", outbox.StatusNew)
	n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "k1", DeadAt: base, Reason: "handled", CountAttempt: true, Fallback: true})
	x.changed("MarkDead k1 with Fallback", n, err, 1)
	x.promote(storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: true}, 1)
	x.wantStatus("k2", outbox.StatusNew)
	// A new event of the key is not held by the FALLBACK one either.
	x.changed("MarkDone k2", x.markDone(at(time.Minute), "k2"), nil, 1)
	x.insert(ordered("k3", "K", at(time.Minute)))
	x.promote(storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: true}, ifWait(x.headsWait("k3"), 1))
	x.wantStatus("k3", outbox.StatusNew)
}

// testDiscard: Discard makes NEW, RETRY, DEAD and WAITING rows DISCARDED, a final state
// no outcome changes, that is neither pending nor DEAD, that Purge deletes with the DEAD
// rows, and that lets an ordered key move on.
func testDiscard(x *fixture) {
	ds, ok := x.h.Store.(storage.DiscardStore)
	if !ok {
		x.Skipf("%T does not implement storage.DiscardStore", x.h.Store)
	}
	x.insert(ev("n", base), ev("r", base), ev("d", base), ev("done", base), ev("f", base))
	x.retry("r", at(time.Minute))
	x.markDead("d", "poison")
	x.markDone(at(time.Minute), "done")
	n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "f", DeadAt: base, Reason: "handled", Fallback: true})
	x.changed("MarkDead f with Fallback", n, err, 1)
	n, err = ds.Discard(x.ctx, []string{"n", "r", "d", "done", "f", "missing"}, at(2*time.Minute))
	x.changed("Discard", n, err, 3)
	for _, id := range []string{"n", "r", "d"} {
		if e := x.wantStatus(id, outbox.StatusDiscarded); !e.DoneAt.Equal(at(2*time.Minute)) || e.LockedBy != "" {
			x.Fatalf("%s: done at %v, locked by %q", id, e.DoneAt, e.LockedBy)
		}
	}
	x.wantStatus("done", outbox.StatusDone)
	x.wantStatus("f", outbox.StatusFallback)
	if b := x.pending(at(24*time.Hour), 0, 10); len(b.Events) != 0 {
		x.Fatalf("pending %v after the discard", ids(b.Events))
	}
	if dead := x.listDead(storage.ListDeadParams{Limit: 10}); len(dead) != 0 {
		x.Fatalf("DEAD rows %v, want none", ids(dead))
	}
	x.changed("MarkDone of DISCARDED", x.markDone(at(time.Hour), "n"), nil, 0)
	n, err = x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"d"}, Now: at(time.Hour)})
	x.changed("Replay of DISCARDED", n, err, 0)
	n, err = ds.Discard(x.ctx, []string{"n"}, at(3*time.Minute))
	x.changed("second Discard", n, err, 0)
	// Purged with the DEAD rows' cutoff.
	n, err = x.store().Purge(x.ctx, storage.PurgeParams{Before: at(time.Minute), DeadBefore: at(time.Hour), Limit: 10})
	x.changed("Purge", n, err, 4) // n, r, d and f; "done" finished at the DONE cutoff
	x.wantStatus("done", outbox.StatusDone)
	if _, err := ds.Discard(x.ctx, []string{""}, base); !errors.Is(err, outbox.ErrInvalidArgument) {
		x.Fatalf("Discard of an empty ID: %v", err)
	}

	// An ordered key moves on past a discarded event.
	if _, ok := x.h.Store.(storage.OrderStore); !ok {
		return
	}
	x.insert(ordered("k1", "K", base), ordered("k2", "K", base))
	x.promote(storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: true}, ifWait(x.headsWait("k1"), 1))
	n, err = ds.Discard(x.ctx, []string{"k1"}, base)
	x.changed("Discard k1", n, err, 1)
	x.promote(storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: true}, 1)
	x.wantStatus("k2", outbox.StatusNew)
}
