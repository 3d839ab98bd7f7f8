package outbox_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"plain.db", "we?ird #name%20.db", "spaced name.db"} {
		path := filepath.Join(t.TempDir(), name)
		dsn := outbox.SQLiteDSN(path)
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		check := func(pragma, want string) {
			t.Helper()
			var got string
			if err := db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", dsn, pragma, err)
			}
			if got != want {
				t.Errorf("%s: PRAGMA %s = %s, want %s", dsn, pragma, got, want)
			}
		}
		check("journal_mode", "wal")
		check("busy_timeout", "10000")
		check("synchronous", "1")
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: database not created at %q: %v", dsn, path, err)
		}
	}
	if got := outbox.SQLiteDSN("/tmp/a?b.db"); got != "file:///tmp/a%3Fb.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate" {
		t.Errorf("SQLiteDSN = %s", got)
	}
}

// TestSQLiteConcurrentWriters runs many short write transactions at once, each with a
// business row and an outbox insert, while another goroutine polls and marks events
// done, the way an application on SQLite does. No statement may fail with
// "database is locked".
func TestSQLiteConcurrentWriters(t *testing.T) {
	t.Parallel()
	const writers, txPerWriter = 16, 50
	b := setupSQLite(t)
	ctx := t.Context()
	if _, err := b.db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		errCount atomic.Int64
		errMu    sync.Mutex
		firstErr []string
		done     = make(chan struct{})
		marked   atomic.Int64
	)
	report := func(err error) {
		errCount.Add(1)
		errMu.Lock()
		defer errMu.Unlock()
		if len(firstErr) < 5 {
			firstErr = append(firstErr, err.Error())
		}
	}
	for w := range writers {
		wg.Go(func() {
			for i := range txPerWriter {
				id := fmt.Sprintf("w%02d-%03d", w, i)
				err := func() error {
					tx, err := b.db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer func() { _ = tx.Rollback() }()
					if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, id, i); err != nil {
						return err
					}
					ev := outbox.Event{ID: id, Type: "OrderPlaced", AggregateType: "Order", AggregateID: id,
						Payload: json.RawMessage(`{"total":1}`), CreatedAt: time.Now()}
					if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{ev}}); err != nil {
						return err
					}
					return tx.Commit()
				}()
				if err != nil {
					report(fmt.Errorf("writer %s: %w", id, err))
				}
			}
		})
	}
	var pollers sync.WaitGroup
	pollers.Go(func() {
		for {
			batch, err := b.store.Pending(ctx, storage.PendingParams{Now: time.Now(), Limit: 100})
			if err != nil {
				report(fmt.Errorf("pending: %w", err))
			} else if len(batch.Events) > 0 {
				ids := make([]string, len(batch.Events))
				for i, e := range batch.Events {
					ids[i] = e.ID
				}
				n, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: time.Now()})
				if err != nil {
					report(fmt.Errorf("mark done: %w", err))
				}
				marked.Add(n)
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	wg.Wait()
	close(done)
	pollers.Wait()
	if n := errCount.Load(); n > 0 {
		t.Fatalf("%d errors, first: %s", n, strings.Join(firstErr, "\n"))
	}
	var orders int
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := st.Counts[outbox.StatusNew] + st.Counts[outbox.StatusDone]
	if orders != writers*txPerWriter || total != writers*txPerWriter {
		t.Errorf("%d orders and %d events, want %d each", orders, total, writers*txPerWriter)
	}
	t.Logf("%d events marked done while writing", marked.Load())
}
