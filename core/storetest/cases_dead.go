package storetest

import (
	"errors"
	"reflect"
	"slices"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// deadSet inserts DEAD rows for the ListDead, CountDead and Replay tests and returns the
// IDs of type "X" in aggregate "A", in keyset order.
func (x *fixture) deadSet() []string {
	mk := func(id, typ, agg string, created time.Time) outbox.Event {
		e := ev(id, created)
		e.Type, e.AggregateType = typ, agg
		return e
	}
	x.insert(
		mk("x-3", "X", "A", at(2*time.Second)),
		mk("x-1", "X", "A", at(time.Second)), // three rows share created_at: ID order
		mk("x-0", "X", "A", at(time.Second)),
		mk("x-2", "X", "A", at(time.Second)),
		mk("x-first", "X", "A", at(0)),
		mk("y-1", "Y", "A", at(0)),
		mk("y-2", "Y", "A", at(5*time.Second)),
		mk("xb-1", "X", "B", at(3*time.Second)),
		mk("x-alive", "X", "A", at(0)),
		mk("x-done", "X", "A", at(0)),
	)
	for _, id := range []string{"x-3", "x-1", "x-0", "x-2", "x-first", "y-1", "y-2", "xb-1"} {
		x.markDead(id, "dead "+id)
	}
	x.markDone(at(time.Minute), "x-done")
	return []string{"x-first", "x-0", "x-1", "x-2", "x-3"}
}

func (x *fixture) listDead(p storage.ListDeadParams) []outbox.Event {
	x.Helper()
	got, err := x.dead().ListDead(x.ctx, p)
	if err != nil {
		x.Fatalf("ListDead(%+v): %v", p, err)
	}
	return got
}

func testListDeadFilters(x *fixture) {
	xa := x.deadSet()
	all := x.listDead(storage.ListDeadParams{Limit: 100})
	x.wantIDs("no filter", all, "x-first", "y-1", "x-0", "x-1", "x-2", "x-3", "xb-1", "y-2")
	for _, e := range all {
		if e.Status != outbox.StatusDead || e.LastError != "dead "+e.ID || e.Attempts != 1 {
			x.Fatalf("listed %+v", e)
		}
	}
	x.wantIDs("type and aggregate", x.listDead(storage.ListDeadParams{
		DeadFilter: outbox.DeadFilter{EventType: "X", AggregateType: "A"}, Limit: 100}), xa...)
	x.wantIDs("type", x.listDead(storage.ListDeadParams{
		DeadFilter: outbox.DeadFilter{EventType: "X"}, Limit: 100}), append(slices.Clone(xa), "xb-1")...)
	x.wantIDs("aggregate", x.listDead(storage.ListDeadParams{
		DeadFilter: outbox.DeadFilter{AggregateType: "B"}, Limit: 100}), "xb-1")
	x.wantIDs("no match", x.listDead(storage.ListDeadParams{
		DeadFilter: outbox.DeadFilter{EventType: "Z"}, Limit: 100}))
}

func testListDeadPagination(x *fixture) {
	want := x.deadSet()
	filter := outbox.DeadFilter{EventType: "X", AggregateType: "A"}
	var got []string
	var after outbox.Cursor
	for page := 0; ; page++ {
		if page > 10 {
			x.Fatal("pagination does not end")
		}
		events := x.listDead(storage.ListDeadParams{DeadFilter: filter, After: after, Limit: 2})
		if len(events) > 2 {
			x.Fatalf("page of %d, limit 2", len(events))
		}
		if len(events) == 0 {
			break
		}
		got = append(got, ids(events)...)
		last := events[len(events)-1]
		after = outbox.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if !slices.Equal(got, want) {
		x.Fatalf("pages gave %q, want %q", got, want)
	}
	// A cursor between two rows with the same created_at starts at the next ID.
	x.wantIDs("mid-tie cursor", x.listDead(storage.ListDeadParams{DeadFilter: filter,
		After: outbox.Cursor{CreatedAt: at(time.Second), ID: "x-0"}, Limit: 2}), "x-1", "x-2")
}

func testCountDead(x *fixture) {
	count := func(f outbox.DeadFilter) int64 {
		x.Helper()
		n, err := x.dead().CountDead(x.ctx, f)
		if err != nil {
			x.Fatalf("CountDead: %v", err)
		}
		return n
	}
	if n := count(outbox.DeadFilter{}); n != 0 {
		x.Fatalf("empty store counts %d dead", n)
	}
	x.deadSet()
	for f, want := range map[outbox.DeadFilter]int64{
		{}:                                   8,
		{EventType: "X"}:                     6,
		{AggregateType: "A"}:                 7,
		{EventType: "X", AggregateType: "A"}: 5,
		{EventType: "Z"}:                     0,
	} {
		if n := count(f); n != want {
			x.Fatalf("CountDead(%+v) = %d, want %d", f, n, want)
		}
	}
}

func testReplayByID(x *fixture) {
	x.insert(ev("dead", base), ev("done", base), ev("new", base), ev("retry", base))
	x.retry("dead", at(time.Minute))
	x.markDead("dead", "poison")
	x.markDone(at(time.Minute), "done")
	x.retry("retry", at(time.Minute))
	retryBefore, newBefore := x.get("retry"), x.get("new")

	now := at(time.Hour + 5*time.Nanosecond)
	n, err := x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"dead", "done", "new", "retry", "missing"}, Now: now})
	x.changed("Replay", n, err, 1)
	e := x.wantStatus("dead", outbox.StatusNew)
	if e.Attempts != 0 || e.LastError != "" || !e.DoneAt.IsZero() {
		x.Fatalf("replayed: attempts %d, last error %q, done at %v", e.Attempts, e.LastError, e.DoneAt)
	}
	x.wantTime("replayed AvailableAt", e.AvailableAt, now)
	x.wantStatus("done", outbox.StatusDone)
	if got := x.get("retry"); !reflect.DeepEqual(got, retryBefore) {
		x.Fatalf("RETRY row changed by replay: %+v", got)
	}
	if got := x.get("new"); !reflect.DeepEqual(got, newBefore) {
		x.Fatalf("NEW row changed by replay: %+v", got)
	}
	// Due longest first: the replayed row is due from the replay.
	x.wantIDs("Pending", x.pending(now, 0, 10).Events, "new", "retry", "dead")

	// Replaying again changes nothing: the row is no longer DEAD.
	n, err = x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"dead"}, Now: now})
	x.changed("second Replay", n, err, 0)
}

// testDeleteDead: only DEAD rows are deleted; the others, and a missing ID, are left.
func testDeleteDead(x *fixture) {
	x.insert(ev("dead", base), ev("dead2", base), ev("done", base), ev("new", base), ev("retry", base))
	x.markDead("dead", "poison")
	x.markDead("dead2", "poison")
	x.markDone(at(time.Minute), "done")
	x.retry("retry", at(time.Minute))
	n, err := x.dead().DeleteDead(x.ctx, []string{"dead", "done", "new", "retry", "missing"})
	x.changed("DeleteDead", n, err, 1)
	if _, err := x.store().Get(x.ctx, "dead"); !errors.Is(err, outbox.ErrNotFound) {
		x.Fatalf("Get of a deleted DEAD event: %v, want ErrNotFound", err)
	}
	x.wantStatus("dead2", outbox.StatusDead)
	x.wantStatus("done", outbox.StatusDone)
	x.wantStatus("new", outbox.StatusNew)
	x.wantStatus("retry", outbox.StatusRetry)
	n, err = x.dead().DeleteDead(x.ctx, []string{"dead"})
	x.changed("second DeleteDead", n, err, 0)
	if _, err := x.dead().DeleteDead(x.ctx, []string{""}); !errors.Is(err, outbox.ErrInvalidArgument) {
		x.Fatalf("DeleteDead of an empty ID: %v, want ErrInvalidArgument", err)
	}
}

func testReplayByFilter(x *fixture) {
	xa := x.deadSet()
	filter := outbox.DeadFilter{EventType: "X", AggregateType: "A"}
	now := at(time.Hour)
	n, err := x.dead().Replay(x.ctx, storage.ReplayParams{DeadFilter: filter, Limit: 2, Now: now})
	x.changed("Replay by filter", n, err, 2)
	for i, id := range xa {
		want := outbox.StatusDead
		if i < 2 { // the oldest two
			want = outbox.StatusNew
		}
		if e := x.wantStatus(id, want); want == outbox.StatusNew && (e.Attempts != 0 || e.LastError != "") {
			x.Fatalf("%s replayed with attempts %d, last error %q", id, e.Attempts, e.LastError)
		}
	}
	total := n
	for range 10 {
		n, err = x.dead().Replay(x.ctx, storage.ReplayParams{DeadFilter: filter, Limit: 2, Now: now})
		if err != nil {
			x.Fatalf("Replay: %v", err)
		}
		if n > 2 {
			x.Fatalf("Replay with limit 2 changed %d", n)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != int64(len(xa)) {
		x.Fatalf("replayed %d in batches, want %d", total, len(xa))
	}
	for _, id := range []string{"y-1", "y-2", "xb-1"} {
		x.wantStatus(id, outbox.StatusDead)
	}
	x.wantStatus("x-done", outbox.StatusDone)
	x.wantStatus("x-alive", outbox.StatusNew)
	if c, err := x.dead().CountDead(x.ctx, outbox.DeadFilter{}); err != nil || c != 3 {
		x.Fatalf("CountDead after replay = %d, %v; want 3", c, err)
	}
}

func testPurge(x *fixture) {
	old := at(-30 * 24 * time.Hour)
	before := at(-7 * 24 * time.Hour)
	x.insert(
		ev("done-old", old),                      // DONE long ago: purged first
		ev("dead-old", old.Add(time.Hour)),       // DEAD, created long ago: purged second
		ev("died-recently", old),                 // created long ago, DEAD recently: kept
		ev("done-recently", old),                 // created long ago, DONE recently: kept
		ev("dead-recent", before.Add(time.Hour)), // kept
		ev("new-old", old),                       // not finished: kept
		ev("retry-old", old),                     // not finished: kept
	)
	x.markDone(old.Add(time.Minute), "done-old")
	x.markDeadAt("dead-old", "x", old.Add(2*time.Hour))
	x.markDeadAt("died-recently", "x", before.Add(time.Minute))
	x.markDone(before.Add(time.Minute), "done-recently")
	x.markDeadAt("dead-recent", "x", before.Add(2*time.Hour))
	x.retry("retry-old", old)

	purge := func(limit int) int64 {
		x.Helper()
		n, err := x.store().Purge(x.ctx, storage.PurgeParams{Before: before, Limit: limit})
		if err != nil {
			x.Fatalf("Purge: %v", err)
		}
		return n
	}
	if n := purge(1); n != 1 {
		x.Fatalf("Purge(limit 1) deleted %d", n)
	}
	x.notFound("done-old")
	x.wantStatus("dead-old", outbox.StatusDead)
	if n := purge(10); n != 1 {
		x.Fatalf("second Purge deleted %d, want 1", n)
	}
	x.notFound("dead-old")
	if n := purge(10); n != 0 {
		x.Fatalf("third Purge deleted %d, want 0", n)
	}
	x.wantStatus("done-recently", outbox.StatusDone)
	x.wantStatus("dead-recent", outbox.StatusDead)
	x.wantStatus("died-recently", outbox.StatusDead)
	x.wantStatus("new-old", outbox.StatusNew)
	x.wantStatus("retry-old", outbox.StatusRetry)
}

// testPurgeUndelivered: with UndeliveredBefore, a purge batch deletes the finished rows
// first, then NEW and RETRY rows created before that cutoff, oldest first, within
// Limit; without it, no undelivered row goes.
func testPurgeUndelivered(x *fixture) {
	day := 24 * time.Hour
	before, undelivered := at(-7*day), at(-20*day)
	x.insert(
		ev("done-old", at(-30*day)),
		ev("new-oldest", at(-30*day)),
		ev("new-old", at(-30*day+time.Hour)),
		ev("retry-old", at(-30*day+2*time.Hour)),
		ev("new-mid", at(-10*day)), // older than Before, younger than the undelivered cutoff: kept
		ev("retry-young", at(-day)),
		ev("dead-young", at(-day)),
	)
	x.markDone(at(-29*day), "done-old")
	x.retry("retry-old", at(-30*day))
	x.retry("retry-young", at(-day))
	x.markDeadAt("dead-young", "x", at(-day))
	purge := func(undeliveredBefore time.Time, limit int) int64 {
		x.Helper()
		n, err := x.store().Purge(x.ctx, storage.PurgeParams{Before: before, UndeliveredBefore: undeliveredBefore, Limit: limit})
		if err != nil {
			x.Fatalf("Purge: %v", err)
		}
		return n
	}
	if n := purge(time.Time{}, 10); n != 1 {
		x.Fatalf("Purge without UndeliveredBefore deleted %d, want done-old alone", n)
	}
	x.notFound("done-old")
	x.wantStatus("new-oldest", outbox.StatusNew)
	x.insert(ev("done-old-2", at(-30*day)))
	x.markDone(at(-29*day), "done-old-2")
	// Finished rows first, then the oldest undelivered ones, Limit in all.
	if n := purge(undelivered, 2); n != 2 {
		x.Fatalf("Purge(limit 2) deleted %d, want 2", n)
	}
	x.notFound("done-old-2")
	x.notFound("new-oldest")
	x.wantStatus("new-old", outbox.StatusNew)
	if n := purge(undelivered, 10); n != 2 {
		x.Fatalf("second Purge deleted %d, want new-old and retry-old", n)
	}
	x.notFound("new-old")
	x.notFound("retry-old")
	if n := purge(undelivered, 10); n != 0 {
		x.Fatalf("third Purge deleted %d, want 0", n)
	}
	x.wantStatus("new-mid", outbox.StatusNew)
	x.wantStatus("retry-young", outbox.StatusRetry)
	x.wantStatus("dead-young", outbox.StatusDead)
}

func testStats(x *fixture) {
	st, err := x.stats().Stats(x.ctx)
	if err != nil {
		x.Fatalf("Stats: %v", err)
	}
	for s, n := range st.Counts {
		if n != 0 {
			x.Fatalf("empty store: %d rows in %s", n, s)
		}
	}
	if !st.OldestPending.IsZero() {
		x.Fatalf("empty store: OldestPending %v", st.OldestPending)
	}
	x.insert(ev("n1", at(time.Minute)), ev("n2", at(2*time.Minute)), ev("r1", at(30*time.Second+123*time.Microsecond)),
		ev("done", at(-time.Hour)), ev("dead", at(-time.Hour)), ev("done2", at(-time.Hour)))
	x.retry("r1", at(time.Hour)) // not due: still pending for Stats
	x.markDone(at(time.Hour), "done", "done2")
	x.markDead("dead", "x")
	st, err = x.stats().Stats(x.ctx)
	if err != nil {
		x.Fatalf("Stats: %v", err)
	}
	want := map[outbox.Status]int64{outbox.StatusNew: 2, outbox.StatusRetry: 1, outbox.StatusDone: 2, outbox.StatusDead: 1}
	if !reflect.DeepEqual(st.Counts, want) {
		x.Fatalf("Counts %v, want %v", st.Counts, want)
	}
	x.wantTime("OldestPending", st.OldestPending, at(30*time.Second+123*time.Microsecond))
}

// testPurgeByOutcome: with DeadBefore, DONE rows are held to Before and DEAD and
// FALLBACK rows to DeadBefore, whichever is later.
func testPurgeByOutcome(x *fixture) {
	week := 7 * 24 * time.Hour
	x.insert(ev("done-2w", at(-3*week)), ev("dead-2w", at(-3*week)), ev("fb-2w", at(-3*week)),
		ev("done-5w", at(-6*week)), ev("dead-5w", at(-6*week)), ev("fb-5w", at(-6*week)))
	for _, w := range []struct {
		suffix string
		age    time.Duration
	}{{"2w", 2 * week}, {"5w", 5 * week}} {
		x.markDone(at(-w.age), "done-"+w.suffix)
		x.markDeadAt("dead-"+w.suffix, "x", at(-w.age))
		n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "fb-" + w.suffix, DeadAt: at(-w.age), Reason: "handled", Fallback: true})
		x.changed("MarkDead with Fallback", n, err, 1)
	}
	purge := func(before, deadBefore time.Time) int64 {
		x.Helper()
		n, err := x.store().Purge(x.ctx, storage.PurgeParams{Before: before, DeadBefore: deadBefore, Limit: 10})
		if err != nil {
			x.Fatalf("Purge: %v", err)
		}
		return n
	}
	// DONE after a week, DEAD and FALLBACK after four: the DONE rows and the old failures.
	if n := purge(at(-week), at(-4*week)); n != 4 {
		x.Fatalf("Purge deleted %d, want 4 (both DONE rows, dead-5w, fb-5w)", n)
	}
	for _, id := range []string{"done-2w", "done-5w", "dead-5w", "fb-5w"} {
		x.notFound(id)
	}
	x.wantStatus("dead-2w", outbox.StatusDead)
	x.wantStatus("fb-2w", outbox.StatusFallback)
	// A shorter dead retention than the DONE one works too.
	x.insert(ev("done-3d", at(-week)))
	x.markDone(at(-3*24*time.Hour), "done-3d")
	if n := purge(at(-4*week), at(-week)); n != 2 {
		x.Fatalf("second Purge deleted %d, want dead-2w and fb-2w", n)
	}
	x.wantStatus("done-3d", outbox.StatusDone)
}
