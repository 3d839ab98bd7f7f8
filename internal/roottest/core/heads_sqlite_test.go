package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// countingExec counts the statements a write runs: Exec (the event INSERT, or the
// guarded INSERT of a key a promote read idle) and Query (the key upsert).
type countingExec struct {
	*sql.Tx
	execs, queries int
}

func (c *countingExec) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	c.execs++
	return c.Tx.ExecContext(ctx, q, args...)
}

func (c *countingExec) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	c.queries++
	return c.Tx.QueryContext(ctx, q, args...)
}

// TestSQLiteHeadsFollowThePromotesRead checks SQLite's ordered writes (schema version
// 7, docs/ordering.md): the key row carries the highest number of the key's events that
// left the order index, and a write numbers from it or from the key's open rows. A key
// that the promote after a DONE outcome read idle is written by one guarded INSERT (no
// key upsert); the INSERT checks, under the write lock, that the key has still nothing
// open and its key row still carries what the promote read, else inserts nothing and the
// write takes the key upsert and the plain INSERT. Every case checks the status, the
// number, which statements ran, and that the key row ends carrying no more than the
// highest number written.
func TestSQLiteHeadsFollowThePromotesRead(t *testing.T) {
	t.Parallel()
	type step = headsStep
	insert, done, promoteBy, dead, discard := headsInsert, headsDone, headsPromote, headsDead, headsDiscard
	promote := promoteBy(true)
	purge, rolledBack := headsPurge, headsRolledBack
	deleteDead := func(id string) step {
		return func(t *testing.T, s, _ sqlTestStore, _ *sql.DB) {
			t.Helper()
			if n, err := s.(storage.DeadStore).DeleteDead(t.Context(), []string{id}); err != nil || n != 1 {
				t.Fatalf("DeleteDead(%s) = %d, %v", id, n, err)
			}
		}
	}
	cases := []struct {
		name    string
		steps   []step
		want    outbox.Status
		seq     int64
		guarded bool // the write was the guarded INSERT alone, no key upsert
		execs   int  // Exec statements of the write
	}{
		{name: "promote saw the key idle", steps: []step{insert("e1", false), done("e1"), promote},
			want: outbox.StatusNew, seq: 2, guarded: true, execs: 1},
		{name: "no promote", steps: []step{insert("e1", false), done("e1")}, want: outbox.StatusNew, seq: 2, execs: 1},
		{name: "new key", want: outbox.StatusNew, seq: 1, execs: 1},
		{name: "promote saw the key open", steps: []step{insert("e1", false), promote}, want: outbox.StatusWaiting, seq: 2, execs: 1},
		{name: "promote promoted the next event", steps: []step{insert("e1", false), insert("e2", false), done("e1"), promote},
			want: outbox.StatusWaiting, seq: 3, execs: 1},
		// The guarded INSERT finds the key row carrying 2, not 1: it inserts nothing.
		{name: "key written and finished by another process since",
			steps: []step{insert("e1", false), done("e1"), promote, insert("e2", true), done("e2")},
			want:  outbox.StatusNew, seq: 3, execs: 2},
		{name: "key written by another process since", steps: []step{insert("e1", false), done("e1"), promote, insert("e2", true)},
			want: outbox.StatusWaiting, seq: 3, execs: 2},
		{name: "key written by this process since", steps: []step{insert("e1", false), done("e1"), promote, insert("e2", false)},
			want: outbox.StatusWaiting, seq: 3, execs: 1},
		// The key row is gone and the key starts again at 1 (its DONE row is purged too).
		{name: "key purged since", steps: []step{insert("e1", false), done("e1"), promote, purge},
			want: outbox.StatusNew, seq: 1, execs: 2},
		{name: "key purged and written again since", steps: []step{insert("e1", false), done("e1"), promote, purge, insert("e2", true)},
			want: outbox.StatusWaiting, seq: 2, execs: 2},
		{name: "writer rolled back", steps: []step{insert("e1", false), done("e1"), promote, rolledBack},
			want: outbox.StatusNew, seq: 2, execs: 1},
		{name: "key's event DEAD", steps: []step{insert("e1", false), dead("e1"), promoteBy(false)},
			want: outbox.StatusWaiting, seq: 2, execs: 1},
		// A DISCARDED event is finished, as a DONE one is; a deleted DEAD event left the
		// order index, and the key row carries its number.
		{name: "key's event discarded", steps: []step{insert("e1", false), discard("e1"), promote},
			want: outbox.StatusNew, seq: 2, guarded: true, execs: 1},
		{name: "key's DEAD event deleted", steps: []step{insert("e1", false), dead("e1"), deleteDead("e1"), promote},
			want: outbox.StatusNew, seq: 2, guarded: true, execs: 1},
		// e2 leaves the order index before e1 (DEAD, open): the key row carries 2 while
		// e1 is open, and the write numbers after both.
		{name: "key's later event finished first", steps: []step{insert("e1", false), insert("e2", false), discard("e2"), promote},
			want: outbox.StatusWaiting, seq: 3, execs: 1},
		{name: "key's later event delivered past a DEAD one",
			steps: []step{insert("e1", false), insert("e2", false), dead("e1"), promoteBy(false), done("e2"), promoteBy(false)},
			want:  outbox.StatusWaiting, seq: 3, execs: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setupSQLite(t)
			ctx := t.Context()
			tx := runHeadsSteps(t, b, c.steps)
			exec := &countingExec{Tx: tx}
			last := []outbox.Event{orderedOnK("last")}
			if _, err := b.store.Insert(ctx, exec, storage.InsertParams{Events: last}); err != nil {
				t.Fatal(err)
			}
			if guarded := exec.queries == 0; guarded != c.guarded || exec.execs != c.execs {
				t.Errorf("the write ran %d queries and %d execs; want the guarded INSERT alone: %v, %d execs", exec.queries, exec.execs, c.guarded, c.execs)
			}
			if last[0].Status != c.want || last[0].OrderSeq != c.seq {
				t.Errorf("Insert reported %s, OrderSeq %d; want %s, %d", last[0].Status, last[0].OrderSeq, c.want, c.seq)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if e, err := b.store.Get(ctx, "last"); err != nil || e.Status != c.want || e.OrderSeq != c.seq {
				t.Errorf("last stored as %s, OrderSeq %d (%v); want %s, %d", e.Status, e.OrderSeq, err, c.want, c.seq)
			}
			var carried int64
			if err := b.db.QueryRowContext(ctx, "SELECT last_seq FROM "+quoteTable(outbox.SQLite, b.table+"_key")+" WHERE order_key = 'K'").Scan(&carried); err != nil {
				t.Fatal(err)
			}
			if carried >= c.seq {
				t.Errorf("the key row carries %d, at or above the open event's number %d", carried, c.seq)
			}
		})
	}
}

// TestSQLiteKeysCarryTheirNumbers: on SQLite the numbers of a key go on across its
// events finishing in any order, being discarded or deleted, and the table being
// written by several stores (processes) at once: every key numbered 1, 2, 3, … in
// commit order with no repeat, whatever path each write took.
func TestSQLiteKeysCarryTheirNumbers(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	ctx := t.Context()
	stores := []sqlTestStore{b.store}
	for range 2 {
		s, err := sqlStore(b.db, outbox.SQLite, outbox.SQLStoreConfig{Table: b.table})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	const keys, rounds = 5, 12
	want := map[string]int64{}
	for r := range rounds {
		for k := range keys {
			s := stores[(r+k)%len(stores)]
			key := fmt.Sprint("K", k)
			e := testEvent(fmt.Sprintf("e-%d-%d", r, k), headsBase)
			e.OrderKey = key
			if _, err := s.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
				t.Fatal(err)
			}
			want[key]++
			got, err := s.Get(ctx, e.ID)
			if err != nil || got.OrderSeq != want[key] {
				t.Fatalf("round %d: %s numbered %d (%v), want %d", r, e.ID, got.OrderSeq, err, want[key])
			}
			// Finish it in one of several ways, or leave it open for a round.
			switch (r + k) % 4 {
			case 0:
				if _, err := s.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{e.ID}, DoneAt: headsBase}); err != nil {
					t.Fatal(err)
				}
			case 1:
				if _, err := s.(storage.DiscardStore).Discard(ctx, []string{e.ID}, headsBase); err != nil {
					t.Fatal(err)
				}
			case 2:
				if _, err := s.MarkDead(ctx, storage.MarkDeadParams{ID: e.ID, DeadAt: headsBase, Reason: "x"}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.(storage.DeadStore).DeleteDead(ctx, []string{e.ID}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Promote(ctx, storage.PromoteParams{Keys: []string{key}, Read: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSQLiteOrderedInsertsOutsideATransaction: ordered events given to Insert with the
// *sql.DB itself, from several goroutines at once, are numbered without a repeat or a
// gap: Insert writes each in a transaction of its own, so that no other write numbers
// the key between its key upsert's read and its INSERT.
func TestSQLiteOrderedInsertsOutsideATransaction(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	ctx := t.Context()
	const writers, each = 6, 20
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				e := testEvent(fmt.Sprintf("w%d-%d", w, i), headsBase)
				e.OrderKey = fmt.Sprint("K", i%2)
				if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rows, err := b.db.QueryContext(ctx, "SELECT order_key, COUNT(*), COUNT(DISTINCT order_seq), MAX(order_seq) FROM "+b.quoted()+" GROUP BY order_key")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var n, distinct, top int
		if err := rows.Scan(&key, &n, &distinct, &top); err != nil {
			t.Fatal(err)
		}
		if n != writers*each/2 || distinct != n || top != n {
			t.Errorf("key %s: %d events, %d numbers, highest %d; want %d numbered 1 to %d", key, n, distinct, top, writers*each/2, writers*each/2)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
