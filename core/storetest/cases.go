package storetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

func testInsertGetRoundTrip(x *fixture) {
	created := time.Date(2031, 3, 1, 13, 0, 0, 123456789, time.FixedZone("CET", 3600))
	in := outbox.Event{
		ID: "01J0ROUNDTRIP", Type: "OrderPlaced", AggregateType: "Order", AggregateID: "order-42", TenantID: "tenant-7",
		Payload:   json.RawMessage(`{"b":[1,2.5,{"c":null}],"a":"ü \" \\ \u2028","n":true}`),
		Headers:   map[string]string{"traceparent": "00-abc-def-01", "empty": "", "ünï": "cödé"},
		CreatedAt: created, AvailableAt: created.Add(90*time.Second + 999*time.Nanosecond),
		// Insert stores NEW rows; these must be ignored.
		Status: outbox.StatusDead, Attempts: 7, LastError: "ignored", DoneAt: created,
	}
	x.insert(in)
	got := x.get(in.ID)
	if got.ID != in.ID || got.Type != in.Type || got.AggregateType != in.AggregateType ||
		got.AggregateID != in.AggregateID || got.TenantID != in.TenantID {
		x.Fatalf("identity fields: got %+v", got)
	}
	if !jsonEqual(got.Payload, in.Payload) {
		x.Fatalf("payload %s, want %s", got.Payload, in.Payload)
	}
	if !reflect.DeepEqual(got.Headers, in.Headers) {
		x.Fatalf("headers %v, want %v", got.Headers, in.Headers)
	}
	if got.Status != outbox.StatusNew || got.Attempts != 0 || got.LastError != "" || !got.DoneAt.IsZero() {
		x.Fatalf("new row state: status %s, attempts %d, last error %q, done at %v", got.Status, got.Attempts, got.LastError, got.DoneAt)
	}
	x.wantTime("CreatedAt", got.CreatedAt, created)
	x.wantTime("AvailableAt", got.AvailableAt, in.AvailableAt)
	if got.CreatedAt.Nanosecond() != 123456000 {
		x.Fatalf("CreatedAt %v: want microseconds kept, nanoseconds dropped", got.CreatedAt)
	}

	// What Pending returns is the same event.
	b := x.pending(in.AvailableAt, 0, 10)
	if len(b.Events) != 1 || !reflect.DeepEqual(b.Events[0], got) {
		x.Fatalf("Pending returned %+v, Get %+v", b.Events, got)
	}

	// An event without optional fields.
	bare := outbox.Event{ID: "bare", Type: "T", AggregateType: outbox.GlobalAggregateType,
		Payload: json.RawMessage(`"just a string"`), CreatedAt: base, AvailableAt: base}
	x.insert(bare)
	g := x.get("bare")
	if g.AggregateID != "" || g.TenantID != "" || g.Headers != nil || !jsonEqual(g.Payload, bare.Payload) {
		x.Fatalf("bare event read back as %+v", g)
	}
}

func testInsertHeadersNilOrEmpty(x *fixture) {
	a, b := ev("nil-headers", base), ev("empty-headers", base)
	b.Headers = map[string]string{}
	x.insert(a, b)
	for _, id := range []string{a.ID, b.ID} {
		if h := x.get(id).Headers; h != nil {
			x.Fatalf("%s: headers %#v, want nil", id, h)
		}
	}
}

func testInsertBatch(x *fixture) {
	batch := []outbox.Event{ev("b1", at(time.Second)), ev("b2", at(2*time.Second)), ev("b3", at(3*time.Second))}
	batch[1].Headers = map[string]string{"k": "v"}
	x.insert(batch...)
	for _, e := range batch {
		got := x.get(e.ID)
		x.wantTime(e.ID+" CreatedAt", got.CreatedAt, e.CreatedAt)
		if !jsonEqual(got.Payload, e.Payload) || !reflect.DeepEqual(got.Headers, e.Headers) {
			x.Fatalf("%s read back as %+v", e.ID, got)
		}
	}
	x.wantIDs("Pending", x.pending(at(time.Hour), 0, 10).Events, "b1", "b2", "b3")
}

func testInsertLargeBatch(x *fixture, n int) {
	all := seq("large-", n)
	events := make([]outbox.Event, n)
	for i, id := range all {
		events[i] = ev(id, at(time.Duration(i)*time.Microsecond))
	}
	x.insert(events...)
	st, err := x.stats().Stats(x.ctx)
	if err != nil {
		x.Fatalf("Stats: %v", err)
	}
	if st.Counts[outbox.StatusNew] != int64(n) {
		x.Fatalf("Stats counts %v NEW rows, want %d", st.Counts, n)
	}
	x.wantIDs("Pending", x.pending(at(time.Hour), 0, 3).Events, all[0], all[1], all[2])
	if got := x.markDone(at(time.Hour), all...); got != int64(n) {
		x.Fatalf("MarkDone of %d IDs changed %d", n, got)
	}
	if got := x.markDone(at(2*time.Hour), all...); got != 0 {
		x.Fatalf("second MarkDone changed %d", got)
	}
	x.wantStatus(all[n-1], outbox.StatusDone)
}

func testInsertExistingID(x *fixture) {
	x.insert(ev("dup", base))
	x.retry("dup", at(time.Minute)) // not NEW: an existing row is left as it is
	changed := ev("dup", at(time.Hour))
	changed.Payload = json.RawMessage(`{"changed":true}`)
	res, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{ev("fresh", base), changed, ev("after", base)}})
	if err != nil {
		x.Fatalf("Insert of an existing ID: %v, want the ID skipped", err)
	}
	if !slices.Equal(res.Existing, []string{"dup"}) {
		x.Fatalf("Existing = %q, want [dup]", res.Existing)
	}
	// One existing event alone (a statement of its own on some stores).
	if res, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{changed}}); err != nil || !slices.Equal(res.Existing, []string{"dup"}) {
		x.Fatalf("Insert of one existing ID = %q, %v; want [dup]", res.Existing, err)
	}
	x.wantStatus("fresh", outbox.StatusNew)
	x.wantStatus("after", outbox.StatusNew)
	got := x.wantStatus("dup", outbox.StatusRetry)
	if !jsonEqual(got.Payload, ev("dup", base).Payload) || !got.CreatedAt.Equal(base) || got.Attempts != 1 {
		x.Fatalf("existing row changed: %+v", got)
	}
	// Every ID of a batch existing: nothing is written, all are reported.
	if res, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{ev("after", base), ev("fresh", base)}}); err != nil || !slices.Equal(res.Existing, []string{"after", "fresh"}) {
		x.Fatalf("Insert of existing IDs only = %q, %v; want [after fresh]", res.Existing, err)
	}
	// One ID twice in a batch is invalid, whether or not it exists.
	for _, id := range []string{"twice", "dup"} {
		if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{ev(id, base), ev(id, base)}}); !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Fatalf("Insert of %q twice in a batch: %v, want ErrInvalidArgument", id, err)
		}
	}
	x.notFound("twice")
}

// testInsertExistingIDInTx: an existing ID, committed before or written earlier in the
// same transaction, is skipped and the transaction goes on: later statements succeed
// and commit with it.
func testInsertExistingIDInTx(x *fixture) {
	x.insert(ev("old", base))
	x.inTx(func(tx *sql.Tx) {
		insert := func(want []string, events ...outbox.Event) {
			x.Helper()
			res, err := x.store().Insert(x.ctx, tx, storage.InsertParams{Events: events})
			if err != nil {
				x.Fatalf("Insert in tx: %v", err)
			}
			if !slices.Equal(res.Existing, want) {
				x.Fatalf("Existing = %q, want %q", res.Existing, want)
			}
		}
		insert(nil, ev("t1", base))
		insert([]string{"t1"}, ev("t1", base))
		insert([]string{"old"}, ev("old", base))
		insert([]string{"old", "t1"}, ev("old", base), ev("t2", base), ev("t1", base))
		insert(nil, ev("t3", base))
	}, true)
	for _, id := range []string{"old", "t1", "t2", "t3"} {
		x.wantStatus(id, outbox.StatusNew)
	}
}

// testInsertNewIDs: an insert whose IDs were generated for it (NewIDs), of one event
// and of several, in a transaction and outside one, writes every event NEW and reports
// none existing.
func testInsertNewIDs(x *fixture) {
	insert := func(exec outbox.Executor, events ...outbox.Event) {
		x.Helper()
		res, err := x.store().Insert(x.ctx, exec, storage.InsertParams{Events: events, NewIDs: true})
		if err != nil || len(res.Existing) != 0 {
			x.Fatalf("Insert with NewIDs = %q, %v; want every event written", res.Existing, err)
		}
	}
	insert(x.exec(), ev("n1", base))
	insert(x.exec(), ev("n2", base), ev("n3", base), ev("n4", base))
	x.inTx(func(tx *sql.Tx) {
		insert(tx, ev("t1", base))
		insert(tx, ev("t2", base), ev("t3", base))
	}, true)
	for _, id := range []string{"n1", "n2", "n3", "n4", "t1", "t2", "t3"} {
		x.wantStatus(id, outbox.StatusNew)
	}
}

func (x *fixture) inTx(fn func(tx *sql.Tx), commit bool) {
	x.Helper()
	tx, err := x.h.DB.BeginTx(x.ctx, nil)
	if err != nil {
		x.Fatalf("BeginTx: %v", err)
	}
	fn(tx)
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		x.Fatalf("end tx: %v", err)
	}
}

func testInsertRollback(x *fixture) {
	x.inTx(func(tx *sql.Tx) {
		if _, err := x.store().Insert(x.ctx, tx, storage.InsertParams{Events: []outbox.Event{ev("rb1", base), ev("rb2", base)}}); err != nil {
			x.Fatalf("Insert in tx: %v", err)
		}
	}, false)
	x.notFound("rb1")
	x.notFound("rb2")
	if b := x.pending(at(time.Hour), 0, 10); len(b.Events) != 0 {
		x.Fatalf("rolled back events are pending: %v", ids(b.Events))
	}
}

func testInsertCommit(x *fixture) {
	x.inTx(func(tx *sql.Tx) {
		if _, err := x.store().Insert(x.ctx, tx, storage.InsertParams{Events: []outbox.Event{ev("c1", base)}}); err != nil {
			x.Fatalf("Insert in tx: %v", err)
		}
	}, true)
	x.wantStatus("c1", outbox.StatusNew)
}

func testGetNotFound(x *fixture) {
	x.notFound("missing")
	x.insert(ev("present", base))
	x.notFound("PRESENT")
}

func testMarkDone(x *fixture) {
	x.insert(ev("a", base), ev("b", base), ev("c", base))
	x.retry("b", at(time.Minute))
	doneAt := time.Date(2031, 3, 1, 14, 0, 0, 987654321, time.FixedZone("EST", -5*3600))
	if n := x.markDone(doneAt, "a", "b", "missing"); n != 2 {
		x.Fatalf("MarkDone changed %d rows, want 2", n)
	}
	for _, id := range []string{"a", "b"} {
		x.wantTime(id+" DoneAt", x.wantStatus(id, outbox.StatusDone).DoneAt, doneAt)
	}
	if e := x.wantStatus("c", outbox.StatusNew); !e.DoneAt.IsZero() {
		x.Fatalf("c has DoneAt %v", e.DoneAt)
	}
	// Idempotent: DONE rows are not touched again, done_at keeps the first value.
	if n := x.markDone(at(time.Hour), "a", "b"); n != 0 {
		x.Fatalf("second MarkDone changed %d rows", n)
	}
	x.wantTime("a DoneAt", x.get("a").DoneAt, doneAt)
	if b := x.pending(at(time.Hour), 0, 10); !slices.Equal(ids(b.Events), []string{"c"}) {
		x.Fatalf("Pending after MarkDone: %v", ids(b.Events))
	}
}

func testDoneIsFenced(x *fixture) {
	x.insert(ev("done", base))
	x.markDone(at(time.Minute), "done")
	before := x.get("done")
	n, err := x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "done", Status: outbox.StatusRetry,
		AvailableAt: at(time.Hour), CountAttempt: true, LastError: "late failure"})
	x.changed("Reschedule of DONE", n, err, 0)
	n, err = x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "done", Status: outbox.StatusNew, AvailableAt: at(time.Hour)})
	x.changed("deferral of DONE", n, err, 0)
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{DeadAt: base, ID: "done", Reason: "late", CountAttempt: true})
	x.changed("MarkDead of DONE", n, err, 0)
	n, err = x.dead().Replay(x.ctx, storage.ReplayParams{IDs: []string{"done"}, Now: at(time.Hour)})
	x.changed("Replay of DONE", n, err, 0)
	x.changed("MarkDone of DONE", x.markDone(at(time.Hour), "done"), nil, 0)
	if after := x.get("done"); !reflect.DeepEqual(after, before) {
		x.Fatalf("DONE row changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

func testReschedule(x *fixture) {
	x.insert(ev("r", base))
	n, err := x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "r", Status: outbox.StatusRetry,
		AvailableAt: at(time.Minute + 7*time.Nanosecond), CountAttempt: true, LastError: "timeout"})
	x.changed("Reschedule", n, err, 1)
	e := x.wantStatus("r", outbox.StatusRetry)
	if e.Attempts != 1 || e.LastError != "timeout" {
		x.Fatalf("after failure: attempts %d, last error %q", e.Attempts, e.LastError)
	}
	x.wantTime("AvailableAt", e.AvailableAt, at(time.Minute))
	if b := x.pending(at(time.Minute-time.Microsecond), 0, 10); len(b.Events) != 0 {
		x.Fatalf("rescheduled row is due early: %v", ids(b.Events))
	}
	x.wantIDs("Pending at AvailableAt", x.pending(at(time.Minute), 0, 10).Events, "r")

	// A deferral: back to NEW, no attempt counted, last error kept.
	n, err = x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "r", Status: outbox.StatusNew, AvailableAt: at(time.Hour)})
	x.changed("deferral", n, err, 1)
	e = x.wantStatus("r", outbox.StatusNew)
	if e.Attempts != 1 || e.LastError != "timeout" {
		x.Fatalf("after deferral: attempts %d, last error %q", e.Attempts, e.LastError)
	}
	x.wantTime("AvailableAt", e.AvailableAt, at(time.Hour))

	// Another failure counts again and replaces the error.
	n, err = x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "r", Status: outbox.StatusRetry,
		AvailableAt: at(2 * time.Hour), CountAttempt: true, LastError: "refused"})
	x.changed("second failure", n, err, 1)
	if e = x.get("r"); e.Attempts != 2 || e.LastError != "refused" {
		x.Fatalf("after second failure: attempts %d, last error %q", e.Attempts, e.LastError)
	}

	n, err = x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "missing", Status: outbox.StatusRetry, AvailableAt: base})
	x.changed("Reschedule of a missing row", n, err, 0)
}

func testMarkDead(x *fixture) {
	x.insert(ev("d1", base), ev("d2", base))
	x.retry("d1", at(time.Minute))
	n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{DeadAt: at(2 * time.Minute), ID: "d1", Reason: "poison", CountAttempt: true})
	x.changed("MarkDead", n, err, 1)
	if e := x.wantStatus("d1", outbox.StatusDead); e.Attempts != 2 || e.LastError != "poison" || !e.DoneAt.Equal(at(2*time.Minute)) {
		x.Fatalf("d1: attempts %d, last error %q, done at %v", e.Attempts, e.LastError, e.DoneAt)
	}
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{DeadAt: base, ID: "d2", Reason: "unroutable"})
	x.changed("MarkDead without attempt", n, err, 1)
	if e := x.wantStatus("d2", outbox.StatusDead); e.Attempts != 0 || e.LastError != "unroutable" {
		x.Fatalf("d2: attempts %d, last error %q", e.Attempts, e.LastError)
	}
	if b := x.pending(at(time.Hour), 0, 10); len(b.Events) != 0 {
		x.Fatalf("dead rows are pending: %v", ids(b.Events))
	}
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{DeadAt: base, ID: "missing", Reason: "x"})
	x.changed("MarkDead of a missing row", n, err, 0)
}

func testLastErrorTruncated(x *fixture) {
	x.insert(ev("long1", base), ev("long2", base))
	long := strings.Repeat("€", outbox.MaxLastErrorLen) // 3 bytes each
	check := func(id string) {
		x.Helper()
		got := x.get(id).LastError
		if len(got) > outbox.MaxLastErrorLen || len(got) < outbox.MaxLastErrorLen-3 || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
			x.Fatalf("%s: last error of %d bytes (valid UTF-8 %v), want a prefix of at most %d bytes",
				id, len(got), utf8.ValidString(got), outbox.MaxLastErrorLen)
		}
	}
	n, err := x.store().Reschedule(x.ctx, storage.RescheduleParams{ID: "long1", Status: outbox.StatusRetry,
		AvailableAt: base, CountAttempt: true, LastError: long})
	x.changed("Reschedule", n, err, 1)
	check("long1")
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{DeadAt: base, ID: "long2", Reason: long})
	x.changed("MarkDead", n, err, 1)
	check("long2")
}

func testPendingDueAndOrder(x *fixture) {
	now := at(time.Hour)
	const skip = 10 * time.Second
	due := func(id string, created time.Time) outbox.Event { return ev(id, created) }
	late := ev("not-yet", at(-time.Hour))
	late.AvailableAt = now.Add(time.Microsecond)
	edge := ev("due-now", at(-time.Hour))
	edge.AvailableAt = now
	x.insert(
		due("b-same", at(0)), due("a-same", at(0)), // same created_at: event_id decides
		due("oldest", at(-time.Minute)),
		late, edge,
		due("recent", now.Add(-skip+time.Microsecond)), // created inside the SkipRecent window
		due("skip-edge", now.Add(-skip)),               // exactly at the window's edge: included
		due("retry", at(time.Second)),
		due("done", at(-2*time.Hour)),
		due("dead", at(-2*time.Hour)),
	)
	x.retry("retry", at(30*time.Minute))
	x.markDone(at(time.Minute), "done")
	x.markDead("dead", "x")

	// Due longest first: by available_at, then created_at and event_id.
	got := x.pending(now, skip, 100).Events
	x.wantIDs("Pending", got, "oldest", "a-same", "b-same", "retry", "skip-edge", "due-now")
	for _, e := range got {
		if e.Status != outbox.StatusNew && e.Status != outbox.StatusRetry {
			x.Fatalf("Pending returned %s in status %s", e.ID, e.Status)
		}
	}
	// Without SkipRecent the recent row is due too; later, the not-yet row as well.
	x.wantIDs("Pending without skip", x.pending(now, 0, 100).Events,
		"oldest", "a-same", "b-same", "retry", "skip-edge", "recent", "due-now")
	x.wantIDs("Pending later", x.pending(now.Add(time.Second), 0, 100).Events,
		"oldest", "a-same", "b-same", "retry", "skip-edge", "recent", "due-now", "not-yet")
}

func testPendingLimit(x *fixture) {
	all := seq("p", 7)
	for i, id := range all {
		x.insert(ev(id, at(time.Duration(i)*time.Second)))
	}
	x.wantIDs("Limit 3", x.pending(at(time.Hour), 0, 3).Events, all[:3]...)
	x.wantIDs("Limit 1", x.pending(at(time.Hour), 0, 1).Events, all[0])
	x.markDone(at(time.Hour), all[0], all[1])
	x.wantIDs("after MarkDone", x.pending(at(time.Hour), 0, 3).Events, all[2:5]...)
}

// testPendingAfter: a keyset cursor reads on after (available_at, created_at,
// event_id), equal times ordered by event_id, and filters as without one; a cursor of
// a due time alone (the poller's low-water mark) reads the rows due at or after it.
func testPendingAfter(x *fixture) {
	d := ev("d", at(-time.Minute)) // created first, due between a3 and c
	d.AvailableAt = at(1500 * time.Millisecond)
	x.insert(ev("a1", at(0)), ev("a2", at(0)), ev("a3", at(0)), ev("b", at(time.Second)), ev("c", at(2*time.Second)),
		ev("recent", at(time.Hour)), d)
	x.retry("b", at(time.Hour+time.Second)) // not due at now
	now := at(time.Hour)
	page := func(after outbox.Cursor, limit int) []outbox.Event {
		x.Helper()
		b, err := x.store().Pending(x.ctx, storage.PendingParams{Now: now, SkipRecent: time.Minute, Limit: limit, After: after})
		if err != nil {
			x.Fatalf("Pending after %+v: %v", after, err)
		}
		return b.Events
	}
	cursor := func(e outbox.Event) outbox.Cursor {
		return outbox.Cursor{AvailableAt: e.AvailableAt, CreatedAt: e.CreatedAt, ID: e.ID}
	}
	first := page(outbox.Cursor{}, 2)
	x.wantIDs("first page", first, "a1", "a2")
	x.wantIDs("after a2", page(cursor(first[len(first)-1]), 2), "a3", "d")
	x.wantIDs("after a1, same times", page(outbox.Cursor{AvailableAt: at(0), CreatedAt: at(0), ID: "a1"}, 10), "a2", "a3", "d", "c")
	x.wantIDs("after d", page(outbox.Cursor{AvailableAt: d.AvailableAt, CreatedAt: d.CreatedAt, ID: "d"}, 10), "c")
	x.wantIDs("after c", page(outbox.Cursor{AvailableAt: at(2 * time.Second), CreatedAt: at(2 * time.Second), ID: "c"}, 10))
	x.wantIDs("after an earlier time", page(outbox.Cursor{AvailableAt: at(-time.Second), CreatedAt: at(-time.Second), ID: "zzz"}, 10),
		"a1", "a2", "a3", "d", "c")
	// A due time alone: the rows due at or after it, whenever they were created.
	x.wantIDs("from a due time", page(outbox.Cursor{AvailableAt: at(0)}, 10), "a1", "a2", "a3", "d", "c")
	x.wantIDs("from just after it", page(outbox.Cursor{AvailableAt: at(time.Microsecond)}, 10), "d", "c")
	x.wantIDs("from d's due time", page(outbox.Cursor{AvailableAt: d.AvailableAt}, 10), "d", "c")
}

func testBadParams(x *fixture) {
	x.insert(ev("a", base))
	s := x.store()
	ds, dead := s.(storage.DeadStore)
	calls := map[string]func() error{
		"Insert without ID": func() error {
			_, err := s.Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{{Type: "T", Payload: json.RawMessage(`1`), CreatedAt: base}}})
			return err
		},
		"Pending after a cursor without AvailableAt": func() error {
			_, err := s.Pending(x.ctx, storage.PendingParams{Now: base, Limit: 1, After: outbox.Cursor{CreatedAt: base, ID: "a"}})
			return err
		},
		"Pending after a cursor with CreatedAt and no ID": func() error {
			_, err := s.Pending(x.ctx, storage.PendingParams{Now: base, Limit: 1, After: outbox.Cursor{AvailableAt: base, CreatedAt: base}})
			return err
		},
		"MarkDone without IDs": func() error {
			_, err := s.MarkDone(x.ctx, storage.MarkDoneParams{DoneAt: base})
			return err
		},
		"MarkDone with fewer Tokens than IDs": func() error {
			_, err := s.MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"a", "b"}, Tokens: []string{"t"}, DoneAt: base})
			return err
		},
		"MarkDone with an empty token in Tokens": func() error {
			_, err := s.MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"a"}, Tokens: []string{""}, DoneAt: base})
			return err
		},
		"MarkDone with Token and Tokens": func() error {
			_, err := s.MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"a"}, Token: "t", Tokens: []string{"t"}, DoneAt: base})
			return err
		},
		"Reschedule without ID": func() error {
			_, err := s.Reschedule(x.ctx, storage.RescheduleParams{Status: outbox.StatusRetry, AvailableAt: base})
			return err
		},
		"Reschedule to DEAD": func() error {
			_, err := s.Reschedule(x.ctx, storage.RescheduleParams{ID: "a", Status: outbox.StatusDead, AvailableAt: base})
			return err
		},
		"Reschedule to DONE": func() error {
			_, err := s.Reschedule(x.ctx, storage.RescheduleParams{ID: "a", Status: outbox.StatusDone, AvailableAt: base})
			return err
		},
		"MarkDead without ID": func() error {
			_, err := s.MarkDead(x.ctx, storage.MarkDeadParams{DeadAt: base, Reason: "x"})
			return err
		},
		"Pending with limit 0": func() error {
			_, err := s.Pending(x.ctx, storage.PendingParams{Now: base})
			return err
		},
		"Pending with negative limit": func() error {
			_, err := s.Pending(x.ctx, storage.PendingParams{Now: base, Limit: -1})
			return err
		},
		"ListDead with limit 0": func() error {
			_, err := ds.ListDead(x.ctx, storage.ListDeadParams{})
			return err
		},
		"Replay without IDs or limit": func() error {
			_, err := ds.Replay(x.ctx, storage.ReplayParams{Now: base})
			return err
		},
		"ListDead with NUL in the event type": func() error {
			_, err := ds.ListDead(x.ctx, storage.ListDeadParams{DeadFilter: outbox.DeadFilter{EventType: "a\x00b"}, Limit: 1})
			return err
		},
		"CountDead with invalid UTF-8": func() error {
			_, err := ds.CountDead(x.ctx, outbox.DeadFilter{AggregateType: "\xff"})
			return err
		},
		"CountDead with an overlong event type": func() error {
			_, err := ds.CountDead(x.ctx, outbox.DeadFilter{EventType: strings.Repeat("t", outbox.MaxTypeLen+1)})
			return err
		},
		"Replay of an ID with NUL": func() error {
			_, err := ds.Replay(x.ctx, storage.ReplayParams{IDs: []string{"a\x00"}, Now: base})
			return err
		},
		"Replay with a bad filter": func() error {
			_, err := ds.Replay(x.ctx, storage.ReplayParams{DeadFilter: outbox.DeadFilter{EventType: "\x00"}, Limit: 1, Now: base})
			return err
		},
		"Purge with limit 0": func() error {
			_, err := s.Purge(x.ctx, storage.PurgeParams{Before: base})
			return err
		},
	}
	for name, call := range calls {
		if !dead && (strings.HasPrefix(name, "ListDead") || strings.HasPrefix(name, "CountDead") || strings.HasPrefix(name, "Replay")) {
			continue // the store does not implement storage.DeadStore
		}
		if err := call(); !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Errorf("%s: err = %v, want one matching ErrInvalidArgument", name, err)
		}
	}
	if e := x.wantStatus("a", outbox.StatusNew); e.Attempts != 0 {
		x.Fatalf("bad calls changed the row: %+v", e)
	}
	// An ID no row can have is a miss, not a database error.
	for _, id := range []string{"", "a\x00", "\xff", strings.Repeat("i", outbox.MaxIDLen+1)} {
		if _, err := s.Get(x.ctx, id); !errors.Is(err, outbox.ErrNotFound) {
			x.Errorf("Get(%q): err = %v, want ErrNotFound", id, err)
		}
	}
}

func testCanceledContext(x *fixture) {
	x.insert(ev("a", base))
	ctx, cancel := context.WithCancel(x.ctx)
	cancel()
	s := x.store()
	if _, err := s.Get(ctx, "a"); !errors.Is(err, context.Canceled) {
		x.Errorf("Get: %v", err)
	}
	if _, err := s.Pending(ctx, storage.PendingParams{Now: base, Limit: 1}); !errors.Is(err, context.Canceled) {
		x.Errorf("Pending: %v", err)
	}
	if _, err := s.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"a"}, DoneAt: base}); !errors.Is(err, context.Canceled) {
		x.Errorf("MarkDone: %v", err)
	}
	x.wantStatus("a", outbox.StatusNew)
}

// testOddIDs uses IDs with characters that need quoting in SQL literals or arrays.
func testOddIDs(x *fixture) {
	odd := []string{`quote"d`, `back\slash`, "comma,sep", "{brace}", " spaced ", "NULL", "it's", "ünï", "semi;colon"}
	for i, id := range odd {
		x.insert(ev(id, at(time.Duration(i)*time.Second)))
	}
	x.wantIDs("Pending", x.pending(at(time.Hour), 0, 100).Events, odd...)
	if n := x.markDone(at(time.Hour), odd[:4]...); n != 4 {
		x.Fatalf("MarkDone changed %d, want 4", n)
	}
	for _, id := range odd[4:] {
		x.markDead(id, "x")
	}
	n, err := x.dead().Replay(x.ctx, storage.ReplayParams{IDs: odd, Now: at(time.Hour)})
	x.changed("Replay", n, err, int64(len(odd)-4))
	for i, id := range odd {
		want := outbox.StatusNew
		if i < 4 {
			want = outbox.StatusDone
		}
		x.wantStatus(id, want)
	}
}

// testMarkDoneDelete: MarkDone with Delete deletes the rows, behind the same fences as
// the update: not a WAITING or FALLBACK row, nor a row claimed by another token.
func testMarkDoneDelete(x *fixture) {
	x.insert(ev("a", base), ev("b", base), evAt("c", ago(time.Hour), ago(time.Hour)), ev("f", base))
	n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "f", DeadAt: base, Reason: "handled", Fallback: true})
	x.changed("MarkDead f with Fallback", n, err, 1)
	n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"a", "b", "f", "missing"}, DoneAt: at(time.Minute), Delete: true})
	x.changed("MarkDone with Delete", n, err, 2)
	x.notFound("a")
	x.notFound("b")
	x.wantStatus("f", outbox.StatusFallback)
	// Fenced by claim: another token's claim keeps the row.
	if _, ok := x.h.Store.(storage.ClaimStore); ok {
		b := x.claim("n1/t", time.Hour, 0, 10)
		x.wantIDs("claimed", b.Events, "c")
		n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"c"}, Tokens: []string{"n2/other"}, DoneAt: at(time.Minute), Delete: true})
		x.changed("MarkDone with Delete and another token", n, err, 0)
		x.wantStatus("c", outbox.StatusNew)
		n, err = x.store().MarkDone(x.ctx, storage.MarkDoneParams{IDs: []string{"c"}, Tokens: []string{"n1/t"}, DoneAt: at(time.Minute), Delete: true})
		x.changed("MarkDone with Delete and its token", n, err, 1)
		x.notFound("c")
	}
}
