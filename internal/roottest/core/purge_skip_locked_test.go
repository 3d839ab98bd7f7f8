package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPurgeSkipsLockedRows: on PostgreSQL, a purge never waits for the rows or order
// keys another node's purge holds: it deletes the rest and leaves those for a later run,
// which deletes them once they are free. A purge that waited would run into its
// context's deadline and fail. (The other purge's locks are taken here by the same
// locking reads, SKIP LOCKED, which the store runs.) On MariaDB one purge runs at a
// time instead (TestPurgesDoNotWaitForEachOther); SQLite has one writer at a time.
func TestPurgeSkipsLockedRows(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.dialect != outbox.Postgres {
			return // see above: only PostgreSQL purges skip locked rows
		}
		c := newClaimTable(t, b)
		ctx := t.Context()
		now := time.Now()
		var events []outbox.Event
		for i := range 10 {
			e := outbox.Event{ID: fmt.Sprintf("p%02d", i), Type: "T", AggregateType: "A", Payload: json.RawMessage(`{}`),
				CreatedAt: now.Add(-time.Hour), AvailableAt: now.Add(-time.Hour)}
			if i < 2 {
				e.OrderKey = fmt.Sprint("K", i) // p00 on K0, p01 on K1
			}
			events = append(events, e)
		}
		if _, err := c.store.Insert(ctx, c.db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.store.Promote(ctx, storage.PromoteParams{Limit: 10}); err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		if n, err := c.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: now.Add(-time.Minute)}); err != nil || n != 10 {
			t.Fatalf("MarkDone = %d, %v", n, err)
		}

		// Another node's purge holds the first batch of one row and one key row: its
		// locking reads, in a READ COMMITTED transaction as the store runs them.
		tx, err := c.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		table, keys := quoteTable(b.dialect, c.table), quoteTable(b.dialect, c.table+"_key")
		cutoff := now.Add(time.Hour).UTC()
		lockRow := "SELECT event_id FROM " + table + " WHERE (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < $1" +
			" ORDER BY COALESCE(done_at, created_at), event_id LIMIT 1 FOR UPDATE SKIP LOCKED"
		lockKey := "SELECT order_key FROM " + keys + " WHERE updated_at < $1 ORDER BY updated_at LIMIT 1 FOR UPDATE SKIP LOCKED"
		var lockedID, lockedKey string
		if err := tx.QueryRowContext(ctx, lockRow, cutoff).Scan(&lockedID); err != nil {
			t.Fatalf("lock a row: %v", err)
		}
		if err := tx.QueryRowContext(ctx, lockKey, cutoff).Scan(&lockedKey); err != nil {
			t.Fatalf("lock a key: %v", err)
		}

		purge := func() int64 {
			t.Helper()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			n, err := c.store.Purge(pctx, storage.PurgeParams{Before: now.Add(time.Hour), Limit: 100})
			if err != nil {
				t.Fatalf("Purge: %v (it waited for a locked row?)", err)
			}
			return n
		}
		if n := purge(); n != 9 {
			t.Fatalf("Purge deleted %d rows, want the 9 that are not locked", n)
		}
		if _, err := c.store.Get(ctx, lockedID); err != nil {
			t.Fatalf("the locked row %s: %v", lockedID, err)
		}
		if ks := orderKeyRows(t, c.db, b.dialect, c.table); len(ks) != 1 || ks[0] != lockedKey {
			t.Fatalf("key rows %v, want the locked key %s only", ks, lockedKey)
		}

		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := purge(); n != 1 {
			t.Fatalf("second Purge deleted %d rows, want %s", n, lockedID)
		}
		if ks := orderKeyRows(t, c.db, b.dialect, c.table); len(ks) != 0 {
			t.Fatalf("key rows %v after the lock ended, want none", ks)
		}
	})
}

// TestDoneWritesDoNotWaitForWriters: recording DONE outcomes (marking or, with
// DeleteDone, deleting a batch of rows) never waits for a business transaction that
// has inserted a newer event and not committed yet. On MariaDB a DELETE with an IN list
// would: it reads the row after its last key, the uncommitted one.
func TestDoneWritesDoNotWaitForWriters(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.dialect == outbox.SQLite {
			t.Skip("SQLite's writer holds the database until it commits: every writer waits for it")
		}
		for _, del := range []bool{false, true} {
			c := newClaimTable(t, b)
			ctx := t.Context()
			created := time.Now().Add(-time.Hour)
			var events []outbox.Event
			var ids []string
			for i := 1; i <= 9; i++ {
				id := fmt.Sprint("d", i)
				ids = append(ids, id)
				events = append(events, outbox.Event{ID: id, Type: "T", AggregateType: "A", Payload: json.RawMessage(`{}`),
					CreatedAt: created, AvailableAt: created})
			}
			if _, err := c.store.Insert(ctx, c.db, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}
			tx, err := c.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			newer := outbox.Event{ID: "d99", Type: "T", AggregateType: "A", Payload: json.RawMessage(`{}`), CreatedAt: created, AvailableAt: created}
			if _, err := c.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{newer}}); err != nil {
				t.Fatal(err)
			}
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := c.store.MarkDone(dctx, storage.MarkDoneParams{IDs: ids, DoneAt: time.Now(), Delete: del})
			cancel()
			if err != nil || n != 9 {
				t.Errorf("MarkDone (delete %v) = %d, %v; want 9 rows without waiting for the open insert", del, n, err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
