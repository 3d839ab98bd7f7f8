package outbox_test

import (
	"database/sql"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// headsStep is one step of the tests of how a write after a promote decides its key's
// head (TestMySQLHeadsFollowThePromotesRead, TestSQLiteHeadsFollowThePromotesRead): run
// with this process's store (s) or another process's (other), which shares the table
// but not what this one's promotes read.
type headsStep func(t *testing.T, s, other sqlTestStore, db *sql.DB)

// headsInsert writes the event id ordered by K, with other when byOther.
func headsInsert(id string, byOther bool) headsStep {
	return func(t *testing.T, s, other sqlTestStore, db *sql.DB) {
		t.Helper()
		if byOther {
			s = other
		}
		if _, err := s.Insert(t.Context(), db, storage.InsertParams{Events: []outbox.Event{orderedOnK(id)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// headsDone records the event id DONE.
func headsDone(id string) headsStep {
	return func(t *testing.T, s, _ sqlTestStore, _ *sql.DB) {
		t.Helper()
		if n, err := s.MarkDone(t.Context(), storage.MarkDoneParams{IDs: []string{id}, DoneAt: headsBase}); err != nil || n != 1 {
			t.Fatalf("MarkDone(%s) = %d, %v", id, n, err)
		}
	}
}

// headsPromote promotes K as the dispatcher does after a DONE outcome, under
// DeadKeyWaits (deadBlocks) or DeadKeySkips.
func headsPromote(deadBlocks bool) headsStep {
	return func(t *testing.T, s, _ sqlTestStore, _ *sql.DB) {
		t.Helper()
		if _, err := s.Promote(t.Context(), storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: deadBlocks, Read: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// headsDead records the event id DEAD.
func headsDead(id string) headsStep {
	return func(t *testing.T, s, _ sqlTestStore, _ *sql.DB) {
		t.Helper()
		if _, err := s.MarkDead(t.Context(), storage.MarkDeadParams{ID: id, DeadAt: headsBase, Reason: "x"}); err != nil {
			t.Fatal(err)
		}
	}
}

// headsDiscard discards the event id.
func headsDiscard(id string) headsStep {
	return func(t *testing.T, s, _ sqlTestStore, _ *sql.DB) {
		t.Helper()
		if n, err := s.(storage.DiscardStore).Discard(t.Context(), []string{id}, headsBase); err != nil || n != 1 {
			t.Fatalf("discard: %d rows, %v", n, err)
		}
	}
}

// headsPurge purges, with the other store, the finished rows and the key rows of idle
// keys written before an hour from now.
func headsPurge(t *testing.T, _, other sqlTestStore, _ *sql.DB) {
	t.Helper()
	if _, err := other.Purge(t.Context(), storage.PurgeParams{Before: time.Now().Add(time.Hour), Limit: 100}); err != nil {
		t.Fatal(err)
	}
}

// headsRolledBack is a writer that takes the promote's read, then rolls back.
func headsRolledBack(t *testing.T, s, _ sqlTestStore, db *sql.DB) {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Insert(t.Context(), tx, storage.InsertParams{Events: []outbox.Event{orderedOnK("undone")}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
}

// runHeadsSteps runs steps with b's store and another store of b's table, then begins
// the transaction of the write under test, rolled back when the test ends unless
// committed.
func runHeadsSteps(t *testing.T, b sqlBundle, steps []headsStep) *sql.Tx {
	t.Helper()
	other, err := sqlStore(b.db, b.d, outbox.SQLStoreConfig{Table: b.table})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		s(t, b.store, other, b.db)
	}
	tx, err := b.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}
