package outbox_test

import (
	"database/sql"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestMySQLHeadsFollowTheSnapshot checks how MySQL decides that the first event of a key
// is inserted NEW: only when the transaction's snapshot, read before the key lock, saw
// the key's row as it still is and saw the key idle. A REPEATABLE READ snapshot taken
// before another transaction wrote the key (or before the key's row was purged and
// written again) must leave the event WAITING, behind the event it cannot see.
func TestMySQLHeadsFollowTheSnapshot(t *testing.T) {
	t.Parallel()
	base := headsBase
	ordered := orderedOnK
	type step func(t *testing.T, b sqlBundle, snapshot *sql.Tx)
	insert := func(id string) step { // committed by itself while the snapshot is open
		return func(t *testing.T, b sqlBundle, _ *sql.Tx) {
			t.Helper()
			if _, err := b.store.Insert(t.Context(), b.db, storage.InsertParams{Events: []outbox.Event{ordered(id)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := func(id string) step {
		return func(t *testing.T, b sqlBundle, _ *sql.Tx) {
			t.Helper()
			if _, err := b.store.MarkDone(t.Context(), storage.MarkDoneParams{IDs: []string{id}, DoneAt: base}); err != nil {
				t.Fatal(err)
			}
		}
	}
	purge := func(t *testing.T, b sqlBundle, _ *sql.Tx) { // the DONE rows and the idle key's row
		t.Helper()
		if _, err := b.store.Purge(t.Context(), storage.PurgeParams{Before: time.Now().Add(time.Hour), Limit: 100}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name          string
		before, while []step // before the snapshot; after it, before the snapshot's transaction writes "last"
		want          outbox.Status
		seq           int64
		// serializable runs the transaction under SERIALIZABLE, where InnoDB makes the
		// read before the lock a locking read (and the test reads nothing before it).
		serializable bool
	}{
		{name: "new key", want: outbox.StatusNew, seq: 1},
		{name: "idle key", before: []step{insert("e1"), done("e1")}, want: outbox.StatusNew, seq: 2},
		{name: "open key", before: []step{insert("e1")}, want: outbox.StatusWaiting, seq: 2},
		{name: "key written after the snapshot", while: []step{insert("e1")}, want: outbox.StatusWaiting, seq: 2},
		{name: "idle key written after the snapshot", before: []step{insert("e1"), done("e1")}, while: []step{insert("e2")},
			want: outbox.StatusWaiting, seq: 3},
		{name: "open key finished after the snapshot", before: []step{insert("e1")}, while: []step{done("e1")},
			want: outbox.StatusWaiting, seq: 2}, // conservative: a promote moves it on
		// The snapshot saw the row at last_seq 1; it was purged and written again, to
		// last_seq 1 again: only updated_at tells the two versions apart.
		{name: "key purged and written again after the snapshot", before: []step{insert("e1"), done("e1")},
			while: []step{purge, insert("e2")}, want: outbox.StatusWaiting, seq: 2},
		{name: "key purged after the snapshot", before: []step{insert("e1"), done("e1")}, while: []step{purge},
			want: outbox.StatusNew, seq: 1},
		{name: "serializable idle key", before: []step{insert("e1"), done("e1")}, want: outbox.StatusNew, seq: 2, serializable: true},
		{name: "serializable open key", before: []step{insert("e1")}, want: outbox.StatusWaiting, seq: 2, serializable: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setupMySQL(t)
			ctx := t.Context()
			for _, s := range c.before {
				s(t, b, nil)
			}
			level := sql.LevelRepeatableRead
			if c.serializable {
				level = sql.LevelSerializable
			}
			tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: level})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if !c.serializable {
				var n int // the transaction's first consistent read fixes its snapshot
				if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+b.quoted()).Scan(&n); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range c.while {
				s(t, b, tx)
			}
			last := []outbox.Event{orderedOnK("last")}
			if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: last}); err != nil {
				t.Fatal(err)
			}
			if last[0].Status != c.want || last[0].OrderSeq != c.seq {
				t.Errorf("Insert reported %s, OrderSeq %d; want %s, %d", last[0].Status, last[0].OrderSeq, c.want, c.seq)
			}
			// A second write of the key in the same transaction waits behind the first.
			again := []outbox.Event{ordered("again")}
			if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: again}); err != nil {
				t.Fatal(err)
			}
			if again[0].Status != outbox.StatusWaiting || again[0].OrderSeq != c.seq+1 {
				t.Errorf("second Insert reported %s, OrderSeq %d; want WAITING, %d", again[0].Status, again[0].OrderSeq, c.seq+1)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[string]outbox.Status{"last": c.want, "again": outbox.StatusWaiting} {
				if e, err := b.store.Get(ctx, id); err != nil || e.Status != want {
					t.Errorf("%s stored as %s (%v), want %s", id, e.Status, err, want)
				}
			}
		})
	}
}

// TestMySQLHeadsFollowThePromotesRead checks the writes that use what a promote of
// finished keys read of them instead of reading the keys themselves: a key the promote
// saw idle takes its next event NEW without a read in the writer's transaction, as long
// as the key's row is still the version the promote saw; a key written since (by a
// process that did not see the promote), or purged and written again, leaves the event
// WAITING. The promote's read is used once: a writer that rolls back leaves the next
// writer to read the key itself.
func TestMySQLHeadsFollowThePromotesRead(t *testing.T) {
	t.Parallel()
	type step = headsStep
	insert, done, promoteBy, dead, discard := headsInsert, headsDone, headsPromote, headsDead, headsDiscard
	promote := promoteBy(true)
	purge, rolledBack := headsPurge, headsRolledBack
	cases := []struct {
		name    string
		steps   []step
		want    outbox.Status
		seq     int64
		selects int // SELECT statements the write runs in its transaction
	}{
		{name: "promote saw the key idle", steps: []step{insert("e1", false), done("e1"), promote},
			want: outbox.StatusNew, seq: 2, selects: 0},
		{name: "no promote", steps: []step{insert("e1", false), done("e1")}, want: outbox.StatusNew, seq: 2, selects: 1},
		{name: "promote saw the key open", steps: []step{insert("e1", false), promote}, want: outbox.StatusWaiting, seq: 2, selects: 1},
		{name: "promote promoted the next event", steps: []step{insert("e1", false), insert("e2", false), done("e1"), promote},
			want: outbox.StatusWaiting, seq: 3, selects: 1},
		{name: "key written by another process since", steps: []step{insert("e1", false), done("e1"), promote, insert("e2", true), done("e2")},
			want: outbox.StatusWaiting, seq: 3, selects: 0}, // conservative: a promote moves it on
		{name: "key written by this process since", steps: []step{insert("e1", false), done("e1"), promote, insert("e2", false)},
			want: outbox.StatusWaiting, seq: 3, selects: 1},
		// Purged and written again to last_seq 1: only updated_at tells the versions apart.
		{name: "key purged and written again since", steps: []step{insert("e1", false), done("e1"), promote, purge, insert("e2", true)},
			want: outbox.StatusWaiting, seq: 2, selects: 0},
		{name: "key purged since", steps: []step{insert("e1", false), done("e1"), promote, purge},
			want: outbox.StatusNew, seq: 1, selects: 0},
		{name: "writer rolled back", steps: []step{insert("e1", false), done("e1"), promote, rolledBack},
			want: outbox.StatusNew, seq: 2, selects: 1},
		// A DEAD event is open for a writer under either policy (replay makes it NEW
		// again without writing the key's row), so the promote keeps no version of its
		// key, also when DEAD does not hold the key.
		{name: "key's event DEAD", steps: []step{insert("e1", false), dead("e1"), promoteBy(false)},
			want: outbox.StatusWaiting, seq: 2, selects: 1},
		// A DISCARDED event is finished, as a DONE one is.
		{name: "key's event discarded", steps: []step{insert("e1", false), discard("e1"), promote},
			want: outbox.StatusNew, seq: 2, selects: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setupMySQL(t)
			ctx := t.Context()
			tx := runHeadsSteps(t, b, c.steps)
			before := comSelect(t, tx)
			last := []outbox.Event{orderedOnK("last")}
			if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: last}); err != nil {
				t.Fatal(err)
			}
			if n := comSelect(t, tx) - before; n != c.selects {
				t.Errorf("the write ran %d SELECTs in its transaction, want %d", n, c.selects)
			}
			if last[0].Status != c.want || last[0].OrderSeq != c.seq {
				t.Errorf("Insert reported %s, OrderSeq %d; want %s, %d", last[0].Status, last[0].OrderSeq, c.want, c.seq)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if e, err := b.store.Get(ctx, "last"); err != nil || e.Status != c.want {
				t.Errorf("last stored as %s (%v), want %s", e.Status, err, c.want)
			}
		})
	}
}

// comSelect returns how many SELECT statements tx's session has run.
func comSelect(t *testing.T, tx *sql.Tx) int {
	t.Helper()
	var name string
	var n int
	if err := tx.QueryRowContext(t.Context(), "SHOW SESSION STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// headsBase is the creation time of the heads tests' events.
var headsBase = time.Date(2031, 5, 1, 0, 0, 0, 0, time.UTC)

// orderedOnK returns an event with ID id ordered by key K.
func orderedOnK(id string) outbox.Event {
	e := testEvent(id, headsBase)
	e.OrderKey = "K"
	return e
}
