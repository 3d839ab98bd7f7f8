package outbox_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestUndeliveredIndexMigrationUpgradesATableWithRows: a PostgreSQL table of the version
// before the undelivered index (that version undone with its own down file, which puts
// the pending index back), holding rows, is one the store starts on (the version is
// optional), and MigrateTable upgrades it in place: the pending index gone, the
// undelivered index there, the rows kept. With the claim index dropped, so that the
// planner has only the table and the partial index on (created_at, event_id) to
// choose from, the poller's reads and the claims walk the pending index before the
// upgrade (as PostgreSQL did now and then in a soak, with the claim index there) and
// never the undelivered index after it, whose attempts >= 0 their conditions do not
// imply; the admin's list of NEW events walks it.
func TestUndeliveredIndexMigrationUpgradesATableWithRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := testdb.NewPostgresDB(t)
	// One connection: the index statistics are flushed by the one that ran the reads.
	db.SetMaxOpenConns(1)
	table := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
	schema, _, _ := strings.Cut(table, ".")
	q := quoteTable(outbox.Postgres, table)
	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatal(err)
	}
	s, err := sqlStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var events []outbox.Event
	for i := range 20 {
		events = append(events, testEvent(fmt.Sprintf("n-%02d", i), now.Add(-time.Hour)))
	}
	if _, err := s.Insert(ctx, db, storage.InsertParams{Events: events}); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO ` + q + ` (event_id, event_type, aggregate_type, payload, status, attempts, available_at, created_at, done_at)
			SELECT 'd-' || lpad(i::text, 6, '0'), 'T', 'A', '{}', 1, 1, now() - interval '2 hours', now() - interval '2 hours', now() - interval '1 hour'
			FROM generate_series(1, 20000) i`,
		`DROP INDEX "` + schema + `"."outbox_event_claim_idx"`,
		`ANALYZE ` + q,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	// Back to the version before, on the pool's one connection, given back after.
	conn := schemaConn(t, db, outbox.Postgres, table)
	v := versionOf(t, outbox.Postgres, "undelivered_index")
	runMigrationFile(t, conn, outbox.Postgres, fmt.Sprintf("%04d_undelivered_index.down.sql", v))
	if _, err := conn.ExecContext(ctx, `SET search_path TO DEFAULT`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if have, latest, err := outbox.SchemaVersion(ctx, db, outbox.Postgres, table); err != nil || have != v-1 || latest != v {
		t.Fatalf("after the down file: version %d of %d, %v; want %d of %d", have, latest, err, v-1, v)
	}
	if err := s.CheckConnection(ctx); err != nil {
		t.Fatalf("CheckConnection before the upgrade: %v, want nil (the version is optional)", err)
	}

	// scans is the index's idx_scan, 0 for an index that is not there.
	scans := func(index string) int64 {
		t.Helper()
		if _, err := db.ExecContext(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(idx_scan), 0) FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = $2",
			schema, index).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// polls runs the poller's reads, from the oldest row and from a mark, and the
	// claims, from the oldest row and from a mark.
	polls := func() {
		t.Helper()
		mark := time.Now().Add(-3 * time.Hour)
		for _, p := range []storage.PendingParams{{Now: time.Now(), Limit: 100}, {Now: time.Now(), Limit: 100, After: outbox.Cursor{AvailableAt: mark}}} {
			if b, err := s.Pending(ctx, p); err != nil || len(b.Events) != 20 {
				t.Fatalf("Pending(%+v) = %d events, %v; want 20", p, len(b.Events), err)
			}
		}
		for i, from := range []time.Time{{}, mark} {
			if _, err := s.Claim(ctx, storage.ClaimParams{Token: fmt.Sprint("n/", i), TTL: time.Minute, Limit: 5, DueFrom: from}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := scans("outbox_event_pending_idx")
	polls()
	if n := scans("outbox_event_pending_idx") - before; n == 0 {
		t.Fatal("before the upgrade no read walked the pending index: the planner took the table, and the check below proves nothing")
	}

	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatalf("MigrateTable: %v", err)
	}
	if have, latest, err := outbox.SchemaVersion(ctx, db, outbox.Postgres, table); err != nil || have != latest {
		t.Fatalf("after MigrateTable: version %d of %d, %v", have, latest, err)
	}
	indexes := queryStrings(t, db, "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname IN ('outbox_event_pending_idx', 'outbox_event_undelivered_idx')", schema)
	if len(indexes) != 1 || indexes[0] != "outbox_event_undelivered_idx" {
		t.Fatalf("indexes after MigrateTable %q, want the undelivered index alone", indexes)
	}
	var newRows, doneRows int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FILTER (WHERE status = 0), COUNT(*) FILTER (WHERE status = 1) FROM "+q).Scan(&newRows, &doneRows); err != nil ||
		newRows != 20 || doneRows != 20000 {
		t.Fatalf("rows after MigrateTable: %d NEW, %d DONE, %v; want 20, 20000", newRows, doneRows, err)
	}
	// MigrateTable made the claim index again (the first version's statements run on
	// every call, IF NOT EXISTS).
	for _, stmt := range []string{`DROP INDEX "` + schema + `"."outbox_event_claim_idx"`, `ANALYZE ` + q} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	before = scans("outbox_event_undelivered_idx")
	polls()
	if n := scans("outbox_event_undelivered_idx") - before; n != 0 {
		t.Errorf("the poller's reads and the claims walked the undelivered index %d times, want never", n)
	}
	if err := listEvents(ctx, s, outbox.StatusNew); err != nil {
		t.Fatal(err)
	}
	if n := scans("outbox_event_undelivered_idx") - before; n == 0 {
		t.Error("the list of NEW events did not walk the undelivered index")
	}
}
