package outbox_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPostgresHeadsFollowTheVersion checks how PostgreSQL writes ordered events in one
// statement: its snapshot is taken before the key upsert waits for another
// transaction's lock on the key, so the first event of a key may be inserted NEW only
// when the key row is still the version that snapshot holds. A key another
// transaction wrote while the statement waited must leave the event WAITING, behind
// the event the snapshot cannot see, and numbered after it.
func TestPostgresHeadsFollowTheVersion(t *testing.T) {
	t.Parallel()
	base := time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC)
	ordered := func(id, key string) outbox.Event {
		e := testEvent(id, base)
		e.OrderKey = key
		return e
	}
	insert := func(t *testing.T, b sqlBundle, exec outbox.Executor, events ...outbox.Event) ([]outbox.Event, storage.InsertResult) {
		t.Helper()
		res, err := b.store.Insert(t.Context(), exec, storage.InsertParams{Events: events})
		if err != nil {
			t.Fatal(err)
		}
		return events, res
	}
	done := func(t *testing.T, b sqlBundle, id string) {
		t.Helper()
		if _, err := b.store.MarkDone(t.Context(), storage.MarkDoneParams{IDs: []string{id}, DoneAt: base}); err != nil {
			t.Fatal(err)
		}
	}
	type want struct {
		status outbox.Status
		seq    int64
	}
	cases := []struct {
		name   string
		before func(t *testing.T, b sqlBundle)
		// hold, when set, writes in a transaction that holds the key's lock while the
		// tested Insert starts and waits for it; commit ends it one way or the other.
		hold   func(t *testing.T, b sqlBundle, tx *sql.Tx)
		commit bool
		want   want
	}{
		{name: "new key", want: want{outbox.StatusNew, 1}},
		{name: "idle key", before: func(t *testing.T, b sqlBundle) { insert(t, b, b.db, ordered("e1", "K")); done(t, b, "e1") },
			want: want{outbox.StatusNew, 2}},
		{name: "open key", before: func(t *testing.T, b sqlBundle) { insert(t, b, b.db, ordered("e1", "K")) },
			want: want{outbox.StatusWaiting, 2}},
		{name: "key created while the insert waits", hold: func(t *testing.T, b sqlBundle, tx *sql.Tx) { insert(t, b, tx, ordered("e1", "K")) },
			commit: true, want: want{outbox.StatusWaiting, 2}},
		{name: "idle key written while the insert waits",
			before: func(t *testing.T, b sqlBundle) { insert(t, b, b.db, ordered("e1", "K")); done(t, b, "e1") },
			hold:   func(t *testing.T, b sqlBundle, tx *sql.Tx) { insert(t, b, tx, ordered("e2", "K")) },
			commit: true, want: want{outbox.StatusWaiting, 3}},
		{name: "idle key written while the insert waits, rolled back",
			before: func(t *testing.T, b sqlBundle) { insert(t, b, b.db, ordered("e1", "K")); done(t, b, "e1") },
			hold:   func(t *testing.T, b sqlBundle, tx *sql.Tx) { insert(t, b, tx, ordered("e2", "K")) },
			want:   want{outbox.StatusNew, 2}},
		{name: "key created while the insert waits, rolled back",
			hold: func(t *testing.T, b sqlBundle, tx *sql.Tx) { insert(t, b, tx, ordered("e1", "K")) },
			want: want{outbox.StatusNew, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setupPostgres(t)
			ctx := t.Context()
			if c.before != nil {
				c.before(t, b)
			}
			// "other" is a second key, idle: it takes the one statement whatever K does,
			// so the write below mixes both ways of writing.
			insert(t, b, b.db, ordered("o1", "other"))
			done(t, b, "o1")
			var holder *sql.Tx
			if c.hold != nil {
				var err error
				if holder, err = b.db.BeginTx(ctx, nil); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = holder.Rollback() }()
				c.hold(t, b, holder)
			}
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			type result struct {
				events []outbox.Event
				err    error
			}
			written := make(chan result, 1)
			go func() {
				events := []outbox.Event{ordered("last", "K"), ordered("o2", "other"), ordered("last2", "K")}
				_, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: events})
				written <- result{events, err}
			}()
			if holder != nil {
				eventually(t, "the insert waits for the key's lock", func() bool { return lockWaits(t, b.db, b.d, b.table) > 0 })
				if c.commit {
					err = holder.Commit()
				} else {
					err = holder.Rollback()
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			r := <-written
			if r.err != nil {
				t.Fatal(r.err)
			}
			wants := map[string]want{"last": c.want, "last2": {outbox.StatusWaiting, c.want.seq + 1}, "o2": {outbox.StatusNew, 2}}
			for _, e := range r.events {
				if w := wants[e.ID]; e.Status != w.status || e.OrderSeq != w.seq {
					t.Errorf("Insert reported %s as %s, OrderSeq %d; want %s, %d", e.ID, e.Status, e.OrderSeq, w.status, w.seq)
				}
			}
			// A second write of the key in the same transaction waits behind the first.
			again, _ := insert(t, b, tx, ordered("again", "K"))
			if again[0].Status != outbox.StatusWaiting || again[0].OrderSeq != c.want.seq+2 {
				t.Errorf("second Insert reported %s, OrderSeq %d; want WAITING, %d", again[0].Status, again[0].OrderSeq, c.want.seq+2)
			}
			// Writing existing IDs again reports them, whichever way their key goes.
			if _, res := insert(t, b, tx, ordered("last", "K"), ordered("o2", "other")); len(res.Existing) != 2 {
				t.Errorf("existing IDs reported as %v, want [last o2]", res.Existing)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			wants["again"] = want{outbox.StatusWaiting, c.want.seq + 2}
			for id, w := range wants {
				if e, err := b.store.Get(ctx, id); err != nil || e.Status != w.status || e.OrderSeq != w.seq {
					t.Errorf("%s stored as %s, OrderSeq %d (%v); want %s, %d", id, e.Status, e.OrderSeq, err, w.status, w.seq)
				}
			}
		})
	}
}

// TestPostgresHeadsRepeatableRead checks that under REPEATABLE READ, where the
// transaction's snapshot may be older than the key lock, the one-statement write of a
// key that another transaction wrote since that snapshot fails with a serialization
// failure instead of inserting NEW behind an event it cannot see.
func TestPostgresHeadsRepeatableRead(t *testing.T) {
	t.Parallel()
	base := time.Date(2031, 6, 2, 0, 0, 0, 0, time.UTC)
	for _, existed := range []bool{false, true} {
		t.Run(map[bool]string{false: "new key", true: "idle key"}[existed], func(t *testing.T) {
			t.Parallel()
			b := setupPostgres(t)
			ctx := t.Context()
			ordered := func(id string) []outbox.Event {
				e := testEvent(id, base)
				e.OrderKey = "K"
				return []outbox.Event{e}
			}
			if existed {
				if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: ordered("e0")}); err != nil {
					t.Fatal(err)
				}
				if _, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"e0"}, DoneAt: base}); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			var n int // the transaction's first statement fixes its snapshot
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+b.quoted()).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: ordered("e1")}); err != nil {
				t.Fatal(err)
			}
			events := ordered("last")
			_, err = b.store.Insert(ctx, tx, storage.InsertParams{Events: events})
			if err == nil || !strings.Contains(err.Error(), "could not serialize") {
				t.Fatalf("Insert = %v (reported %s, OrderSeq %d), want a serialization failure", err, events[0].Status, events[0].OrderSeq)
			}
		})
	}
}
