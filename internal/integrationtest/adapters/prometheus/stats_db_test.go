package outboxprom_test

// The stats collector on real databases: SQLite, PostgreSQL and MariaDB (throwaway
// servers, see internal/testdb).

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// dbBackend is one database the stats tests run on.
type dbBackend struct {
	name    string
	dialect outbox.Dialect
	open    func(t *testing.T) *sql.DB
}

var dbBackends = []dbBackend{
	{"sqlite", outbox.SQLite, func(t *testing.T) *sql.DB { return testdb.NewSQLiteDB(t) }},
	{"postgres", outbox.Postgres, func(t *testing.T) *sql.DB { return testdb.NewPostgresDB(t) }},
	{"mysql", outbox.MySQL, func(t *testing.T) *sql.DB { return testdb.NewMySQLDB(t) }},
}

// forEachDB runs fn as a parallel subtest per database.
func forEachDB(t *testing.T, fn func(t *testing.T, b dbBackend)) {
	t.Helper()
	for _, b := range dbBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// statsTable is a migrated outbox table on a fresh database or schema.
type statsTable struct {
	db    *sql.DB
	table string
	ob    *outbox.Outbox // WriterOnly: writes, runs nothing
}

func setupStatsTable(t *testing.T, b dbBackend) *statsTable {
	t.Helper()
	db := b.open(t)
	table := testdb.IsolatedTable(t, db, b.name)
	if err := outbox.MigrateTable(context.Background(), db, b.dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	ob, err := outbox.New(db, outbox.Config{
		Mode: outbox.WriterOnly, Dialect: b.dialect, Table: table, PurgeInterval: -1,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &statsTable{db: db, table: table, ob: ob}
}

// insert writes an event with the given ID that occurred ago, and sets its status.
func (s *statsTable) insert(t *testing.T, id string, ago time.Duration, status outbox.Status) {
	t.Helper()
	ctx := context.Background()
	err := outbox.RunInTx(ctx, s.db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := s.ob.Writer().Write(ctx, tx, outbox.Envelope{
			ID: id, Type: "OrderPlaced", AggregateType: "Order", Payload: 1, OccurredAt: time.Now().Add(-ago),
		})
		return err
	})
	if err != nil {
		t.Fatalf("write %s: %v", id, err)
	}
	if status != outbox.StatusNew {
		q := fmt.Sprintf(`UPDATE %s SET status = %d WHERE event_id = '%s'`, s.table, int(status), id)
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("set status of %s: %v", id, err)
		}
	}
}

func TestStatsCollectorOnDatabases(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, b dbBackend) {
		s := setupStatsTable(t, b)
		sc, reg, logs := newStats(t, s.ob.Events(), outboxprom.StatsOptions{Instance: "orders", CacheTTL: -1})

		// An empty table.
		err := testutil.CollectAndCompare(sc, strings.NewReader(`
# HELP outbox_events Rows in the outbox table by status (new, retry, done, dead, waiting, fallback, discarded), read at scrape time.
# TYPE outbox_events gauge
outbox_events{outbox="orders",status="dead"} 0
outbox_events{outbox="orders",status="discarded"} 0
outbox_events{outbox="orders",status="done"} 0
outbox_events{outbox="orders",status="fallback"} 0
outbox_events{outbox="orders",status="new"} 0
outbox_events{outbox="orders",status="retry"} 0
outbox_events{outbox="orders",status="waiting"} 0
# HELP outbox_oldest_pending_age_seconds Age of the oldest NEW or RETRY event (now minus its created_at, delayed and deferred events included), read at scrape time; 0 when none is pending.
# TYPE outbox_oldest_pending_age_seconds gauge
outbox_oldest_pending_age_seconds{outbox="orders"} 0
`), "outbox_events", "outbox_oldest_pending_age_seconds")
		if err != nil {
			t.Fatalf("empty table: %v", err)
		}

		// Finished rows older than every pending one do not count for the age.
		s.insert(t, "e-done", 5*time.Hour, outbox.StatusDone)
		s.insert(t, "e-dead-1", 4*time.Hour, outbox.StatusDead)
		s.insert(t, "e-dead-2", 3*time.Hour, outbox.StatusDead)
		s.insert(t, "e-retry", 2*time.Hour, outbox.StatusRetry)
		s.insert(t, "e-new-1", time.Hour, outbox.StatusNew)
		s.insert(t, "e-new-2", time.Minute, outbox.StatusNew)
		err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP outbox_dead_events DEAD events in the outbox table, read at scrape time; they wait for a replay.
# TYPE outbox_dead_events gauge
outbox_dead_events{outbox="orders"} 2
# HELP outbox_events Rows in the outbox table by status (new, retry, done, dead, waiting, fallback, discarded), read at scrape time.
# TYPE outbox_events gauge
outbox_events{outbox="orders",status="dead"} 2
outbox_events{outbox="orders",status="discarded"} 0
outbox_events{outbox="orders",status="done"} 1
outbox_events{outbox="orders",status="fallback"} 0
outbox_events{outbox="orders",status="new"} 2
outbox_events{outbox="orders",status="retry"} 1
outbox_events{outbox="orders",status="waiting"} 0
# HELP outbox_stats_errors_total Reads of the outbox table statistics that failed or timed out.
# TYPE outbox_stats_errors_total counter
outbox_stats_errors_total{outbox="orders"} 0
# HELP outbox_stats_up 1 if the last read of the outbox table statistics succeeded, 0 if it failed or timed out.
# TYPE outbox_stats_up gauge
outbox_stats_up{outbox="orders"} 1
`), "outbox_dead_events", "outbox_events", "outbox_stats_errors_total", "outbox_stats_up")
		if err != nil {
			t.Fatalf("populated table: %v", err)
		}
		// The oldest pending event is the RETRY one, two hours old (the bound allows for
		// a slow test machine, not for a wrong row: the next candidates are 1 h and 3 h).
		if age := value(t, reg, "outbox_oldest_pending_age_seconds", "outbox", "orders"); age < 7200 || age > 7200+600 {
			t.Fatalf("oldest pending age = %v s, want about 7200", age)
		}
		// A StatsStore is a source too.
		_, storeReg, _ := newStats(t, s.ob.Store().(storage.StatsStore), outboxprom.StatsOptions{})
		if n := value(t, storeReg, "outbox_events", "status", "new"); n != 2 {
			t.Fatalf("store source: new = %v", n)
		}
		if l := logs.lines(); len(l) != 0 {
			t.Fatalf("logs: %q", l)
		}
	})
}

// TestStatsCollectorDatabaseErrors: a database error during a scrape drops the table
// series and reports stats_up 0; the scrape still succeeds.
func TestStatsCollectorDatabaseErrors(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, b dbBackend) {
		s := setupStatsTable(t, b)
		s.insert(t, "e-1", time.Minute, outbox.StatusDead)

		t.Run("closed DB", func(t *testing.T) {
			t.Parallel()
			db := b.open(t) // a handle of its own to close; the cleanup's Close is a no-op
			if b.name == "sqlite" {
				// A SQLite handle opens a database of its own: give it the table.
				if err := outbox.MigrateTable(context.Background(), db, b.dialect, s.table); err != nil {
					t.Fatal(err)
				}
			}
			store, err := outbox.NewSQLStore(db, b.dialect, outbox.SQLStoreConfig{Table: s.table})
			if err != nil {
				t.Fatal(err)
			}
			_, reg, logs := newStats(t, store.(storage.StatsStore), outboxprom.StatsOptions{CacheTTL: -1})
			if up := value(t, reg, "outbox_stats_up"); up != 1 {
				t.Fatalf("before Close: up %v", up)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			g := scrape(t, reg)
			if up, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_stats_errors_total"); up != 0 || errs != 1 {
				t.Fatalf("closed DB: up %v, errors %v", up, errs)
			}
			if hasTableSeries(t, g) {
				t.Fatal("closed DB: table series reported")
			}
			if l := logs.lines(); len(l) != 1 || !strings.Contains(l[0], "database is closed") {
				t.Fatalf("logs: %q", l)
			}
		})

		t.Run("missing table", func(t *testing.T) {
			t.Parallel()
			missing := strings.TrimSuffix(s.table, outbox.DefaultTable) + "no_such_table"
			store, err := outbox.NewSQLStore(s.db, b.dialect, outbox.SQLStoreConfig{Table: missing})
			if err != nil {
				t.Fatal(err)
			}
			_, reg, _ := newStats(t, store.(storage.StatsStore), outboxprom.StatsOptions{})
			g := scrape(t, reg)
			if up, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_stats_errors_total"); up != 0 || errs != 1 || hasTableSeries(t, g) {
				t.Fatalf("missing table: up %v, errors %v", up, errs)
			}
		})
	})
}

// TestStatsCollectorLockedTablePostgres: a read blocked by a lock held elsewhere ends at
// the timeout. The scrape returns while the lock is still held, so it cannot have waited
// for the lock; once the lock is gone, reads succeed again.
func TestStatsCollectorLockedTablePostgres(t *testing.T) {
	t.Parallel()
	b := dbBackends[1]
	s := setupStatsTable(t, b)
	s.insert(t, "e-1", time.Minute, outbox.StatusNew)
	_, reg, logs := newStats(t, s.ob.Events(), outboxprom.StatsOptions{Timeout: 300 * time.Millisecond, CacheTTL: -1})

	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE `+s.table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	g := scrape(t, reg)
	if up, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_stats_errors_total"); up != 0 || errs != 1 || hasTableSeries(t, g) {
		t.Fatalf("locked table: up %v, errors %v", up, errs)
	}
	if l := logs.lines(); len(l) != 1 {
		t.Fatalf("logs: %q", l)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a successful read after the lock is released", func() bool {
		return value(t, scrape(t, reg), "outbox_stats_up") == 1
	})
	if n := value(t, reg, "outbox_events", "status", "new"); n != 1 {
		t.Fatalf("new = %v", n)
	}
}
