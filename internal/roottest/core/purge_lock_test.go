package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPurgesDoNotWaitForEachOther: on MySQL/MariaDB one purge of a table runs at a time
// (a named lock): a purge that starts while another is running, here held up by a row
// lock, returns at once having deleted nothing, instead of waiting behind it; the first
// finishes once the row is free. (PostgreSQL's purges skip each other's rows:
// TestPurgeSkipsLockedRows.)
func TestPurgesDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.dialect != outbox.MySQL {
			return // see above
		}
		c := newClaimTable(t, b)
		ctx := t.Context()
		now := time.Now()
		var ids []string
		var events []outbox.Event
		for i := range 10 {
			id := fmt.Sprintf("p%02d", i)
			ids = append(ids, id)
			events = append(events, outbox.Event{ID: id, Type: "T", AggregateType: "A", Payload: json.RawMessage(`{}`),
				CreatedAt: now.Add(-time.Hour), AvailableAt: now.Add(-time.Hour)})
		}
		if _, err := c.store.Insert(ctx, c.db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		if n, err := c.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: now.Add(-time.Minute)}); err != nil || n != 10 {
			t.Fatalf("MarkDone = %d, %v", n, err)
		}
		// A business transaction holds the oldest row: the first purge waits for it.
		tx, err := c.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var locked string
		if err := tx.QueryRowContext(ctx, "SELECT event_id FROM "+quoteTable(b.dialect, c.table)+" WHERE event_id = 'p00' FOR UPDATE").Scan(&locked); err != nil {
			t.Fatal(err)
		}
		params := storage.PurgeParams{Before: now.Add(time.Hour), Limit: 100}
		type result struct {
			n   int64
			err error
		}
		first := make(chan result, 1)
		go func() {
			pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			n, err := c.store.Purge(pctx, params)
			first <- result{n, err}
		}()
		eventually(t, "the first purge waits for the row lock", func() bool {
			select {
			case r := <-first:
				t.Fatalf("the first purge returned (%d, %v) while the row was locked", r.n, r.err)
			default:
			}
			var waiting int
			// The DELETE on this test's table is running: it can only be waiting. The
			// statement is matched by the table's own schema: other tests purge tables
			// of the same name in theirs, and a match on one of those (a run at load 22
			// did) let the second purge take the named lock before the first.
			schema := c.table[:max(strings.LastIndex(c.table, "."), 0)]
			err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?",
				"DELETE FROM %"+schema+"%").Scan(&waiting)
			return err == nil && waiting > 0
		})
		// A second purge, as another node's: it does not wait behind the first.
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		n, err := c.store.Purge(pctx, params)
		cancel()
		if err != nil || n != 0 {
			t.Fatalf("second purge = %d, %v; want 0 at once (another purge runs)", n, err)
		}
		select {
		case r := <-first:
			t.Fatalf("the first purge returned (%d, %v) while the row was locked", r.n, r.err)
		default:
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if r := <-first; r.err != nil || r.n != 10 {
			t.Fatalf("first purge = %d, %v; want 10", r.n, r.err)
		}
		// The lock is free again: a purge runs.
		if n, err := c.store.Purge(ctx, params); err != nil || n != 0 {
			t.Fatalf("third purge = %d, %v", n, err)
		}
	})
}
