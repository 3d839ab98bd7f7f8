package storetest

import (
	"cmp"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// orders returns the store as an storage.OrderStore, or skips the test.
func (x *fixture) orders() storage.OrderStore {
	os, ok := x.h.Store.(storage.OrderStore)
	if !ok {
		x.Skipf("%T does not implement storage.OrderStore", x.h.Store)
	}
	return os
}

// ordered returns ev(id, created) with the order key key.
func ordered(id, key string, created time.Time) outbox.Event {
	e := ev(id, created)
	e.OrderKey = key
	return e
}

func (x *fixture) promote(p storage.PromoteParams, want int64) storage.PromoteResult {
	x.Helper()
	res, err := x.orders().Promote(x.ctx, p)
	x.changed("Promote", res.Promoted, err, want)
	if !p.Read && (res.Events != nil || res.Undecodable != nil) {
		x.Fatalf("Promote without Read returned %d events, %d undecodable; want none", len(res.Events), len(res.Undecodable))
	}
	if p.Read && int64(len(res.Events)+len(res.Undecodable)) != res.Promoted {
		x.Fatalf("Promote with Read promoted %d and returned %d events, %d undecodable", res.Promoted, len(res.Events), len(res.Undecodable))
	}
	for _, e := range res.Events { // each one as stored now: NEW, claimed by the token
		if got := x.get(e.ID); got.Status != outbox.StatusNew || e.Status != outbox.StatusNew || got.LockedBy != p.Token ||
			e.LockedBy != p.Token || e.OrderKey != got.OrderKey || e.OrderSeq != got.OrderSeq || e.Type != got.Type ||
			string(e.Payload) != string(got.Payload) || !e.AvailableAt.Equal(got.AvailableAt) {
			x.Fatalf("Promote returned %+v; stored %+v (token %q)", e, got, p.Token)
		}
	}
	return res
}

// headsWait reports whether the store inserted the ordered event id, the first of a key
// with nothing before it, WAITING (it then needs a Promote) rather than NEW: both are
// allowed (none of this module's stores waits).
func (x *fixture) headsWait(id string) bool {
	x.Helper()
	switch e := x.get(id); e.Status {
	case outbox.StatusWaiting:
		return true
	case outbox.StatusNew:
		return false
	default:
		x.Fatalf("%s: status %s, want NEW or WAITING", id, e.Status)
		return false
	}
}

// ifWait is n when heads are inserted WAITING, else 0: what a Promote of fresh keys does.
func ifWait(wait bool, n int64) int64 {
	if wait {
		return n
	}
	return 0
}

func (x *fixture) wantSeq(id string, status outbox.Status, seq int64) {
	x.Helper()
	if e := x.wantStatus(id, status); e.OrderSeq != seq || e.OrderKey == "" {
		x.Fatalf("%s: OrderKey %q OrderSeq %d, want a key and %d", id, e.OrderKey, e.OrderSeq, seq)
	}
}

func testOrderedInsert(x *fixture, headsWait bool) {
	x.orders()
	events := []outbox.Event{ordered("a1", "A", base), ev("u", base), ordered("b1", "B", base), ordered("a2", "A", base)}
	x.insert(events...)
	wait := x.headsWait("a1")
	if wait != headsWait {
		x.Fatalf("a1, the first event of a new key, inserted WAITING: %v, want %v (Features.HeadsWait)", wait, headsWait)
	}
	head := outbox.StatusNew
	if wait {
		head = outbox.StatusWaiting
	}
	x.wantSeq("a1", head, 1)
	x.wantSeq("a2", outbox.StatusWaiting, 2)
	x.wantSeq("b1", head, 1)
	if e := x.wantStatus("u", outbox.StatusNew); e.OrderKey != "" || e.OrderSeq != 0 {
		x.Fatalf("unordered event has OrderKey %q OrderSeq %d", e.OrderKey, e.OrderSeq)
	}
	// Insert reports what it stored.
	if events[0].OrderSeq != 1 || events[0].Status != head || events[3].OrderSeq != 2 || events[3].Status != outbox.StatusWaiting {
		x.Fatalf("Insert set OrderSeq/Status %d/%s and %d/%s, want 1/%s and 2/WAITING",
			events[0].OrderSeq, events[0].Status, events[3].OrderSeq, events[3].Status, head)
	}
	x.insert(ordered("a3", "A", at(-time.Hour))) // numbered by commit, not by CreatedAt
	x.wantSeq("a3", outbox.StatusWaiting, 3)
	// WAITING events are never pending.
	for _, e := range x.pending(at(time.Hour), 0, 10).Events {
		if e.Status == outbox.StatusWaiting || e.ID == "a2" || e.ID == "a3" {
			x.Fatalf("Pending returned %s (%s)", e.ID, e.Status)
		}
	}
}

func testOrderedInsertClaimed(x *fixture) {
	x.orders()
	a1, a2 := ordered("a1", "A", base), ordered("a2", "A", base)
	a1.LockedBy, a2.LockedBy = "n1/t", "n1/t"
	if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{a1, a2}, ClaimTTL: time.Minute}); err != nil {
		x.Fatalf("Insert: %v", err)
	}
	if e := x.get("a2"); e.Status != outbox.StatusWaiting || e.LockedBy != "" {
		x.Fatalf("a2: %s claimed by %q; a WAITING event is never claimed", e.Status, e.LockedBy)
	}
	if e := x.get("a1"); e.Status == outbox.StatusNew && e.LockedBy != "n1/t" || e.Status == outbox.StatusWaiting && e.LockedBy != "" {
		x.Fatalf("a1: %s claimed by %q; want NEW and claimed, or WAITING and not", e.Status, e.LockedBy)
	}
	// The first event of a batch whose key is open (a1 is not DONE) waits, unclaimed,
	// and Insert reports each first event's status as stored.
	batch := []outbox.Event{ordered("a3", "A", base), ordered("b1", "B", base)}
	batch[0].LockedBy, batch[1].LockedBy = "n1/t", "n1/t"
	if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: batch, ClaimTTL: time.Minute}); err != nil {
		x.Fatalf("Insert: %v", err)
	}
	if e := x.get("a3"); e.Status != outbox.StatusWaiting || e.LockedBy != "" || batch[0].Status != outbox.StatusWaiting {
		x.Fatalf("a3: stored %s claimed by %q, reported %s; want WAITING, unclaimed, behind a1", e.Status, e.LockedBy, batch[0].Status)
	}
	if e := x.get("b1"); e.Status != batch[1].Status || e.Status == outbox.StatusNew && e.LockedBy != "n1/t" {
		x.Fatalf("b1: stored %s claimed by %q, reported %s", e.Status, e.LockedBy, batch[1].Status)
	}
}

func testPromoteMovesTheHeadOnly(x *fixture) {
	x.orders()
	x.insert(ordered("a1", "A", base), ordered("a2", "A", base), ordered("b1", "B", base), ordered("c1", "C", base))
	wait := x.headsWait("a1")
	x.promote(storage.PromoteParams{Keys: []string{"A", "B", "missing"}}, ifWait(wait, 2))
	x.wantStatus("a1", outbox.StatusNew)
	x.wantStatus("a2", outbox.StatusWaiting)
	x.wantStatus("b1", outbox.StatusNew)
	x.promote(storage.PromoteParams{Keys: []string{"A", "B"}}, 0)
	// An outcome of a WAITING event changes nothing: only the head is delivered.
	x.changed("MarkDone of WAITING", x.markDone(at(time.Minute), "a2"), nil, 0)
	n, err := x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "a2", Status: outbox.StatusRetry, AvailableAt: at(time.Hour)})
	x.changed("Reschedule of WAITING", n, err, 0)
	// A retry holds the key; DONE lets it move on.
	x.retry("a1", at(time.Minute))
	x.promote(storage.PromoteParams{Keys: []string{"A"}}, 0)
	x.changed("MarkDone a1", x.markDone(at(2*time.Minute), "a1"), nil, 1)
	x.promote(storage.PromoteParams{Keys: []string{"A"}}, 1)
	x.wantStatus("a2", outbox.StatusNew)
	if wait {
		x.wantIDs("Pending", x.pending(at(time.Hour), 0, 10).Events, "a2", "b1")
	} else {
		x.wantIDs("Pending", x.pending(at(time.Hour), 0, 10).Events, "a2", "b1", "c1")
	}
	// Without keys: any key, at most Limit. d2 waits behind d1.
	x.insert(ordered("d1", "D", base), ordered("d2", "D", base))
	dWait := x.headsWait("d1")
	x.changed("MarkDone d1", x.markDone(at(time.Minute), "d1"), nil, ifWait(!dWait, 1))
	if !dWait {
		x.promote(storage.PromoteParams{Limit: 1}, 1) // d2
		x.wantStatus("d2", outbox.StatusNew)
	} else {
		x.promote(storage.PromoteParams{Limit: 1}, 1) // c1 or d1
		x.promote(storage.PromoteParams{Limit: 10}, 1)
		x.wantStatus("c1", outbox.StatusNew)
		x.wantStatus("d1", outbox.StatusNew)
	}
	x.promote(storage.PromoteParams{Limit: 10}, 0)
}

// testPromoteDueFromThePromote: a promoted event is due from the promote (database
// clock), unless it was written due later, so that it sorts among the rows that became
// pending with it (the poller's low-water mark reads from there).
func testPromoteDueFromThePromote(x *fixture) {
	x.orders()
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	f2 := ordered("f2", "F", ago(time.Hour))
	f2.AvailableAt = later
	x.insert(ordered("p1", "P", ago(time.Hour)), ordered("p2", "P", ago(time.Hour)), ordered("f1", "F", ago(time.Hour)), f2)
	if x.headsWait("p1") {
		x.promote(storage.PromoteParams{Keys: []string{"P", "F"}}, 2)
	}
	x.changed("MarkDone of the heads", x.markDone(time.Now(), "p1", "f1"), nil, 2)
	from := time.Now().Add(-time.Second) // the database's clock against this one's
	x.promote(storage.PromoteParams{Keys: []string{"P", "F"}}, 2)
	to := time.Now().Add(time.Second)
	if got := x.wantStatus("p2", outbox.StatusNew).AvailableAt; got.Before(from) || got.After(to) {
		x.Fatalf("promoted p2 AvailableAt %v, want the promote's time, within [%v, %v]", got, from, to)
	}
	x.wantTime("promoted f2 AvailableAt, written due later", x.wantStatus("f2", outbox.StatusNew).AvailableAt, later)
}

func testPromoteDeadPolicy(x *fixture) {
	x.orders()
	x.insert(ordered("a1", "A", base), ordered("a2", "A", base), ordered("a3", "A", base))
	x.promote(storage.PromoteParams{Keys: []string{"A"}, DeadBlocks: true}, ifWait(x.headsWait("a1"), 1))
	x.markDead("a1", "poison")
	x.promote(storage.PromoteParams{Keys: []string{"A"}, DeadBlocks: true}, 0)
	x.promote(storage.PromoteParams{Limit: 10, DeadBlocks: true}, 0)
	// A replayed DEAD event waits for its turn again: here it is first.
	n, err := x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"a1"}, Now: at(time.Hour)})
	x.changed("Replay", n, err, 1)
	x.wantStatus("a1", outbox.StatusWaiting)
	x.promote(storage.PromoteParams{Keys: []string{"A"}, DeadBlocks: true}, 1)
	x.wantStatus("a1", outbox.StatusNew)
	x.wantStatus("a2", outbox.StatusWaiting)
	// When DEAD does not block, the key moves past it, and a replay goes next in line.
	x.markDead("a1", "poison again")
	x.promote(storage.PromoteParams{Keys: []string{"A"}}, 1)
	x.wantStatus("a2", outbox.StatusNew)
	n, err = x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"a1"}, Now: at(time.Hour)})
	x.changed("Replay", n, err, 1)
	x.promote(storage.PromoteParams{Keys: []string{"A"}}, 0) // a2 holds the key
	x.changed("MarkDone a2", x.markDone(at(2*time.Hour), "a2"), nil, 1)
	x.promote(storage.PromoteParams{Keys: []string{"A"}}, 1)
	x.wantStatus("a1", outbox.StatusNew)
	x.wantStatus("a3", outbox.StatusWaiting)
}

func testPurgeForgetsIdleKeys(x *fixture) {
	x.orders()
	x.insert(ordered("a1", "A", base), ordered("b1", "B", base))
	x.promote(storage.PromoteParams{Limit: 10}, ifWait(x.headsWait("a1"), 2))
	x.markDone(at(time.Minute), "a1")
	// Key rows carry the database's time, before base.
	n, err := x.store().Purge(x.ctx, storage.PurgeParams{Before: at(24 * time.Hour), Limit: 100})
	x.changed("Purge", n, err, 1)
	// A's counter went with its last event; B still has b1 pending and keeps counting.
	x.insert(ordered("a2", "A", base), ordered("b2", "B", base))
	if e := x.get("a2"); e.OrderSeq != 1 {
		x.Fatalf("a2: OrderSeq %d, want 1 (a new counter)", e.OrderSeq)
	}
	x.wantSeq("b2", outbox.StatusWaiting, 2)
}

// testPurgeUndeliveredKeys: undelivered ordered rows go by created_at like the others,
// NEW and RETRY before WAITING; a key whose earlier events were purged is not held by
// them (a promote moves it on), and a key with nothing left loses its key row as an
// idle key does, so that its next event starts a new counter.
func testPurgeUndeliveredKeys(x *fixture) {
	x.orders()
	day := 24 * time.Hour
	old, cutoff := at(-30*day), at(-7*day)
	x.insert(ordered("a1", "A", old), ordered("a2", "A", old.Add(time.Hour)),
		ordered("b1", "B", old.Add(2*time.Hour)), ordered("b2", "B", at(-day)))
	x.promote(storage.PromoteParams{Limit: 10}, ifWait(x.headsWait("a1"), 2))
	x.wantStatus("a2", outbox.StatusWaiting)
	purge := func(limit int) int64 {
		x.Helper()
		// Key rows carry the database's time, before base: the key purge's cutoff is
		// past them.
		n, err := x.store().Purge(x.ctx, storage.PurgeParams{Before: cutoff, UndeliveredBefore: cutoff, Limit: limit})
		if err != nil {
			x.Fatalf("Purge: %v", err)
		}
		return n
	}
	if n := purge(2); n != 2 {
		x.Fatalf("Purge(limit 2) deleted %d, want the heads a1 and b1", n)
	}
	x.notFound("a1")
	x.notFound("b1")
	x.wantStatus("a2", outbox.StatusWaiting)
	if n := purge(10); n != 1 {
		x.Fatalf("second Purge deleted %d, want a2", n)
	}
	x.notFound("a2")
	// b2 is young: it stays, and nothing holds its key.
	x.wantStatus("b2", outbox.StatusWaiting)
	x.promote(storage.PromoteParams{Limit: 10}, 1)
	x.wantSeq("b2", outbox.StatusNew, 2)
	// A's key row went with its last event: a new counter. B keeps counting.
	x.insert(ordered("a3", "A", base), ordered("b3", "B", base))
	if e := x.get("a3"); e.OrderSeq != 1 {
		x.Fatalf("a3: OrderSeq %d, want 1 (a new counter)", e.OrderSeq)
	}
	x.wantSeq("b3", outbox.StatusWaiting, 3)
}

// testOrderedKeyLock checks that a transaction writing a key waits for another that
// wrote it and has not ended, and that the numbers follow commit order.
func testOrderedKeyLock(x *fixture) {
	x.orders()
	tx1, err := x.h.DB.BeginTx(x.ctx, nil)
	if err != nil {
		x.Fatalf("BeginTx: %v", err)
	}
	defer func() { _ = tx1.Rollback() }()
	if _, err := x.store().Insert(x.ctx, tx1, storage.InsertParams{Events: []outbox.Event{ordered("first", "K", base)}}); err != nil {
		x.Fatalf("Insert in tx1: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			tx2, err := x.h.DB.BeginTx(x.ctx, nil)
			if err != nil {
				return err
			}
			if _, err := x.store().Insert(x.ctx, tx2, storage.InsertParams{Events: []outbox.Event{ordered("second", "K", base)}}); err != nil {
				return errors.Join(err, tx2.Rollback())
			}
			return tx2.Commit()
		}()
	}()
	// tx2 cannot finish while tx1 holds the key; this wait only gives a store that
	// does not lock the chance to be caught.
	select {
	case err := <-done:
		x.Fatalf("a second transaction wrote key K while the first had not ended (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx1.Commit(); err != nil {
		x.Fatalf("commit tx1: %v", err)
	}
	if err := <-done; err != nil {
		x.Fatalf("tx2: %v", err)
	}
	if e := x.get("first"); e.OrderSeq != 1 || e.Status != outbox.StatusNew && e.Status != outbox.StatusWaiting {
		x.Fatalf("first: %s, OrderSeq %d", e.Status, e.OrderSeq)
	}
	x.wantSeq("second", outbox.StatusWaiting, 2)
	// A rolled-back write gives its number back.
	x.inTx(func(tx *sql.Tx) {
		if _, err := x.store().Insert(x.ctx, tx, storage.InsertParams{Events: []outbox.Event{ordered("gone", "K", base)}}); err != nil {
			x.Fatalf("Insert: %v", err)
		}
	}, false)
	x.insert(ordered("third", "K", base))
	x.wantSeq("third", outbox.StatusWaiting, 3)
	if got := x.pending(at(time.Hour), 0, 10).Events; slices.ContainsFunc(got, func(e outbox.Event) bool { return e.OrderKey != "" && e.ID != "first" }) {
		x.Fatalf("WAITING events are pending: %v", ids(got))
	}
}

func testStatsBlockedKeys(x *fixture) {
	x.orders()
	ss := x.stats()
	x.insert(ordered("a1", "A", at(2*time.Minute)), ordered("a2", "A", base), ordered("b1", "B", at(time.Minute)),
		ordered("b2", "B", base), ordered("c1", "C", base), ordered("d1", "D", base))
	x.promote(storage.PromoteParams{Limit: 10}, ifWait(x.headsWait("a1"), 4))
	x.retry("a1", at(time.Hour))      // holds a2
	x.markDead("b1", "poison")        // holds b2
	x.markDead("d1", "no one behind") // holds nothing
	st, err := ss.Stats(x.ctx)
	if err != nil {
		x.Fatalf("Stats: %v", err)
	}
	if st.BlockedKeys != 2 || st.Counts[outbox.StatusWaiting] != 2 {
		x.Fatalf("Stats: %d blocked keys, %d WAITING; want 2 and 2", st.BlockedKeys, st.Counts[outbox.StatusWaiting])
	}
	x.wantTime("OldestBlocked", st.OldestBlocked, at(time.Minute))
	// Once a key's next event is NEW it is not blocked, whatever DEAD event it passed.
	x.promote(storage.PromoteParams{Keys: []string{"B"}}, 1)
	if st, err = ss.Stats(x.ctx); err != nil || st.BlockedKeys != 1 {
		x.Fatalf("Stats after B moved on: %+v, %v; want 1 blocked key", st, err)
	}
	x.wantTime("OldestBlocked", st.OldestBlocked, at(2*time.Minute))
}

func testPromoteIDs(x *fixture) {
	x.orders()
	x.insert(ordered("a0", "A", base), ordered("a1", "A", base), ordered("a2", "A", base), ordered("b0", "B", base), ordered("b1", "B", base))
	x.promote(storage.PromoteParams{Keys: []string{"A", "B"}}, ifWait(x.headsWait("a0"), 2))
	x.promote(storage.PromoteParams{IDs: []string{"a1"}}, 0) // a0 is before it
	x.markDone(at(time.Minute), "a0", "b0")
	x.promote(storage.PromoteParams{IDs: []string{"a2"}}, 0) // a1 is next, not a2
	x.promote(storage.PromoteParams{IDs: []string{"a1", "b1", "missing"}, Token: "n1/t", TTL: time.Minute}, 2)
	for _, id := range []string{"a1", "b1"} {
		if e := x.wantStatus(id, outbox.StatusNew); e.LockedBy != "n1/t" || e.LockedUntil.IsZero() {
			x.Fatalf("%s: LockedBy %q LockedUntil %v, want claimed by the promote's token", id, e.LockedBy, e.LockedUntil)
		}
	}
	x.promote(storage.PromoteParams{IDs: []string{"a2"}}, 0) // a1 holds the key
	if res, err := x.orders().Promote(x.ctx, storage.PromoteParams{IDs: []string{"a1"}, Keys: []string{"A"}}); err == nil {
		x.Fatalf("Promote with IDs and Keys = %d, nil; want an error", res.Promoted)
	}
}

// testPromoteRead: with Read, Promote returns the rows it promoted as they are stored
// now (claimed by its token when it has one), and only those.
func testPromoteRead(x *fixture) {
	x.orders()
	x.insert(ordered("a0", "A", base), ordered("a1", "A", base), ordered("a2", "A", base),
		ordered("b0", "B", base), ordered("b1", "B", base), ordered("c0", "C", base), ordered("c1", "C", base))
	x.promote(storage.PromoteParams{Keys: []string{"A", "B", "C"}}, ifWait(x.headsWait("a0"), 3))
	x.changed("MarkDone", x.markDone(at(time.Minute), "a0", "b0"), nil, 2)
	// C is held by c0: only a1 and b1 move, and come back.
	res := x.promote(storage.PromoteParams{Keys: []string{"A", "B", "C", "missing"}, Read: true}, 2)
	x.wantIDs("Promote", sortedByID(res.Events), "a1", "b1")
	x.promote(storage.PromoteParams{Keys: []string{"A", "B"}, Read: true}, 0)
	x.changed("MarkDone", x.markDone(at(2*time.Minute), "a1", "c0"), nil, 2)
	res = x.promote(storage.PromoteParams{Keys: []string{"A", "C"}, Read: true, Token: "n1/r", TTL: time.Minute}, 2)
	x.wantIDs("Promote", sortedByID(res.Events), "a2", "c1")
	for _, e := range res.Events {
		if e.LockedUntil.IsZero() {
			x.Fatalf("%s: returned without its claim's end", e.ID)
		}
	}
	// By ID too, and without keys (the sweep's form).
	x.changed("MarkDone", x.markDone(at(3*time.Minute), "a2", "b1", "c1"), nil, 3)
	x.insert(ordered("d0", "D", base), ordered("d1", "D", base))
	if x.headsWait("d0") {
		x.promote(storage.PromoteParams{IDs: []string{"d0"}, Read: true}, 1)
	}
	x.changed("MarkDone", x.markDone(at(4*time.Minute), "d0"), nil, 1)
	res = x.promote(storage.PromoteParams{Limit: 10, Read: true}, 1)
	x.wantIDs("Promote", res.Events, "d1")
}

// sortedByID returns events sorted by ID.
func sortedByID(events []outbox.Event) []outbox.Event {
	return slices.SortedFunc(slices.Values(events), func(a, b outbox.Event) int { return cmp.Compare(a.ID, b.ID) })
}

// testOrderedLargeBatch inserts more keys than one statement of any store binds: the
// keys are locked and read in chunks, and each key's events are numbered in order.
func testOrderedLargeBatch(x *fixture) {
	x.orders()
	const keys, events = 700, 1400
	batch := make([]outbox.Event, events)
	for i := range batch {
		batch[i] = ordered(fmt.Sprintf("e%05d", i), fmt.Sprint("K", i%keys), base)
	}
	x.insert(batch...)
	for i, e := range batch {
		want := int64(i/keys + 1)
		if e.OrderSeq != want || i >= keys && e.Status != outbox.StatusWaiting {
			x.Fatalf("%s: OrderSeq %d status %s, want %d", e.ID, e.OrderSeq, e.Status, want)
		}
	}
	if got := x.get(fmt.Sprintf("e%05d", events-1)); got.OrderSeq != 2 || got.Status != outbox.StatusWaiting {
		x.Fatalf("last event: %+v", got)
	}
	x.promote(storage.PromoteParams{Limit: 10000}, ifWait(x.headsWait("e00000"), keys))
}

// testOrderedInsertExistingID: an ordered event whose ID exists is skipped and takes no
// place in its key; the key's other events of the batch keep their order after the
// existing ones.
func testOrderedInsertExistingID(x *fixture) {
	x.orders()
	x.insert(ordered("k1", "K", base))
	before := x.get("k1")
	batch := []outbox.Event{ordered("k1", "K", at(time.Hour)), ordered("k2", "K", base)}
	res, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: batch})
	if err != nil || !slices.Equal(res.Existing, []string{"k1"}) {
		x.Fatalf("Insert of an existing ordered ID = %q, %v; want [k1]", res.Existing, err)
	}
	if got := x.get("k1"); got.Status != before.Status || got.OrderSeq != before.OrderSeq || !got.CreatedAt.Equal(base) {
		x.Fatalf("existing k1 changed: %+v, was %+v", got, before)
	}
	if k2 := x.wantStatus("k2", outbox.StatusWaiting); k2.OrderSeq <= before.OrderSeq {
		x.Fatalf("k2 OrderSeq %d, want after k1's %d", k2.OrderSeq, before.OrderSeq)
	}

	// The skipped event was the one that would have been the key's head: the next
	// event of the batch is NEW, or WAITING for the promote the writer runs after
	// commit for a key whose events all went in WAITING.
	x.insert(ordered("i1", "I", base))
	if x.get("i1").Status == outbox.StatusWaiting {
		x.promote(storage.PromoteParams{Keys: []string{"I"}}, 1)
	}
	x.markDone(at(time.Minute), "i1")
	batch = []outbox.Event{ordered("i1", "I", base), ordered("i2", "I", base)}
	if res, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: batch}); err != nil || !slices.Equal(res.Existing, []string{"i1"}) {
		x.Fatalf("Insert of an existing DONE head = %q, %v; want [i1]", res.Existing, err)
	}
	x.wantStatus("i1", outbox.StatusDone)
	if x.get("i2").Status == outbox.StatusWaiting {
		x.promote(storage.PromoteParams{Keys: []string{"I"}}, 1)
	}
	x.wantStatus("i2", outbox.StatusNew)
}
