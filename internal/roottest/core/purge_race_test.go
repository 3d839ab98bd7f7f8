package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPurgeSkipsRowReplayedMeanwhile: a purge whose statement has already picked a
// DEAD row waits for a replay of that row (here held open in a transaction); once the
// replay commits, the row is NEW and pending again, and the purge must leave it. On
// PostgreSQL the DELETE's IN (SELECT … LIMIT) subquery is not re-run on the updated
// row, so without a status test of its own the DELETE removed the replayed event.
func TestPurgeSkipsRowReplayedMeanwhile(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(*testing.T) sqlBundle{
		"sqlite": setupSQLite, "postgres": setupPostgres, "mysql": setupMySQL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			old := time.Now().Add(-time.Hour)
			e := outbox.Event{ID: "x", Type: "T", AggregateType: "A", Payload: []byte(`{}`), CreatedAt: old, AvailableAt: old}
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n, err := b.store.MarkDead(ctx, storage.MarkDeadParams{ID: "x", DeadAt: old, Reason: "r"}); err != nil || n != 1 {
				t.Fatalf("MarkDead = %d, %v", n, err)
			}

			// The replay, held open: it has changed the row but not committed.
			replay, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer replay.Rollback()
			if _, err := replay.ExecContext(ctx, "UPDATE "+b.quoted()+" SET status = 0, done_at = NULL WHERE event_id = "+b.ph(1), "x"); err != nil {
				t.Fatal(err)
			}
			type result struct {
				n   int64
				err error
			}
			purged := make(chan result, 1)
			go func() {
				n, err := b.store.Purge(ctx, storage.PurgeParams{Before: time.Now(), Limit: 10})
				purged <- result{n, err}
			}()
			time.Sleep(300 * time.Millisecond) // the purge picks the row and waits for its lock
			if err := replay.Commit(); err != nil {
				t.Fatal(err)
			}
			r := <-purged
			if r.err != nil && !errors.Is(r.err, context.DeadlineExceeded) {
				t.Fatalf("Purge: %v", r.err)
			}
			got, err := b.store.Get(ctx, "x")
			if err != nil {
				t.Fatalf("the replayed event was purged (Purge deleted %d row(s)): %v", r.n, err)
			}
			if got.Status != outbox.StatusNew {
				t.Errorf("status %v, want NEW", got.Status)
			}
		})
	}
}
