package outbox_test

import (
	"database/sql"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestMySQLHeadsFollowTheSnapshot checks how MySQL decides that the first event of a key
// is inserted NEW: only when the transaction's snapshot, read before the key lock, saw
// the key's row as it still is and saw the key idle. A REPEATABLE READ snapshot taken
// before another transaction wrote the key (or before the key's row was purged and
// written again) must leave the event WAITING, behind the event it cannot see.
func TestMySQLHeadsFollowTheSnapshot(t *testing.T) {
	t.Parallel()
	base := time.Date(2031, 5, 1, 0, 0, 0, 0, time.UTC)
	ordered := func(id string) outbox.Event {
		e := testEvent(id, base)
		e.OrderKey = "K"
		return e
	}
	type step func(t *testing.T, b sqlBundle, snapshot *sql.Tx)
	insert := func(id string) step { // committed by itself while the snapshot is open
		return func(t *testing.T, b sqlBundle, _ *sql.Tx) {
			t.Helper()
			if _, err := b.store.Insert(t.Context(), b.db, outbox.InsertParams{Events: []outbox.Event{ordered(id)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := func(id string) step {
		return func(t *testing.T, b sqlBundle, _ *sql.Tx) {
			t.Helper()
			if _, err := b.store.MarkDone(t.Context(), outbox.MarkDoneParams{IDs: []string{id}, DoneAt: base}); err != nil {
				t.Fatal(err)
			}
		}
	}
	purge := func(t *testing.T, b sqlBundle, _ *sql.Tx) { // the DONE rows and the idle key's row
		t.Helper()
		if _, err := b.store.Purge(t.Context(), outbox.PurgeParams{Before: time.Now().Add(time.Hour), Limit: 100}); err != nil {
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
			last := []outbox.Event{ordered("last")}
			if _, err := b.store.Insert(ctx, tx, outbox.InsertParams{Events: last}); err != nil {
				t.Fatal(err)
			}
			if last[0].Status != c.want || last[0].OrderSeq != c.seq {
				t.Errorf("Insert reported %s, OrderSeq %d; want %s, %d", last[0].Status, last[0].OrderSeq, c.want, c.seq)
			}
			// A second write of the key in the same transaction waits behind the first.
			again := []outbox.Event{ordered("again")}
			if _, err := b.store.Insert(ctx, tx, outbox.InsertParams{Events: again}); err != nil {
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
