package outbox_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMigrateDropsTheKeyIndexOfATableWithRows: a table at the version before the key
// table's updated_at index was dropped (the last shipped migration undone with its own
// down file), holding ordered events and key rows, is upgraded in place by
// MigrateTable (Start does not refuse it before: the queries work with the index there):
// the keys go on numbering where they were, and a purge, which walks the
// key table by primary key a batch at a time now, deletes the key rows of the keys with
// nothing left to order and keeps the others.
func TestMigrateDropsTheKeyIndexOfATableWithRows(t *testing.T) {
	t.Parallel()
	for _, s := range rawDatabases {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := s.open(t)
			table := testdb.IsolatedTable(t, db, s.d.Name())
			if err := outbox.MigrateTable(ctx, db, s.d, table); err != nil {
				t.Fatal(err)
			}
			store, err := sqlStore(db, s.d, outbox.SQLStoreConfig{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			// Seven keys with two events each; both of K0…K4 DONE, the first of K5, K6.
			now := time.Now()
			var events []outbox.Event
			for i := range 14 {
				e := testEvent(fmt.Sprintf("o-%02d", i), now.Add(-time.Hour))
				e.OrderKey = fmt.Sprint("K", i%7)
				events = append(events, e)
			}
			if _, err := store.Insert(ctx, db, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}
			done := func(ids ...string) {
				t.Helper()
				if n, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: now.Add(-time.Minute)}); err != nil || n != int64(len(ids)) {
					t.Fatalf("MarkDone(%v) = %d, %v", ids, n, err)
				}
				if _, err := store.Promote(ctx, storage.PromoteParams{Limit: 100}); err != nil {
					t.Fatal(err)
				}
			}
			done("o-00", "o-01", "o-02", "o-03", "o-04", "o-05", "o-06")
			done("o-07", "o-08", "o-09", "o-10", "o-11")

			// Back to the version before.
			conn := schemaConn(t, db, s.d, table)
			downs, err := fs.Glob(outbox.Migrations(s.d), "*.down.sql")
			if err != nil {
				t.Fatal(err)
			}
			// Undo the versions from the last one down to the one that drops the key
			// index (SQLite has one more after it, key_carry).
			slices.Sort(downs)
			undone := 0
			for i := len(downs) - 1; i >= 0; i-- {
				runMigrationFile(t, conn, s.d, downs[i])
				undone++
				if strings.Contains(downs[i], "key_index_dropped") {
					break
				}
				if i == 0 {
					t.Fatalf("no migration drops the key index in %v", downs)
				}
			}
			have, latest, err := outbox.SchemaVersion(ctx, db, s.d, table)
			if err != nil || have != latest-undone {
				t.Fatalf("after undoing %d versions: version %d of %d, %v; want %d", undone, have, latest, err, latest-undone)
			}
			if s.d == outbox.SQLite {
				// key_carry's down file raised K5's row, which carried 1 (o-05 DONE), to
				// o-12's 2: the earlier release numbers from the row alone.
				var last int64
				if err := db.QueryRowContext(ctx, "SELECT last_seq FROM "+quoteTable(s.d, table+"_key")+" WHERE order_key = 'K5'").Scan(&last); err != nil || last != 2 {
					t.Fatalf("K5's key row after key_carry's down file: last_seq %d, %v; want 2", last, err)
				}
			}
			// The queries work with the index there: an upgraded library starts on the
			// table before it is migrated. On SQLite it does not before key_carry:
			// without its triggers the keys' counters would not be carried.
			if err := store.CheckConnection(ctx); s.d == outbox.SQLite {
				var ce *outbox.ConfigError
				if !errors.As(err, &ce) || ce.Field != "Table" || !strings.Contains(ce.Reason, "trigger") {
					t.Fatalf("CheckConnection before the upgrade: %v; want a *ConfigError naming the missing trigger", err)
				}
			} else if err != nil {
				t.Fatalf("CheckConnection before the upgrade: %v", err)
			}
			for range 2 { // the second run changes nothing
				if err := outbox.MigrateTable(ctx, db, s.d, table); err != nil {
					t.Fatalf("MigrateTable upgrade: %v", err)
				}
			}
			if have, _, err := outbox.SchemaVersion(ctx, db, s.d, table); err != nil || have != latest {
				t.Fatalf("after MigrateTable: version %d of %d, %v", have, latest, err)
			}
			if err := store.CheckConnection(ctx); err != nil {
				t.Fatalf("CheckConnection after the upgrade: %v", err)
			}

			// K5 goes on numbering after its two events.
			next := testEvent("o-next", now)
			next.OrderKey = "K5"
			if _, err := store.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{next}}); err != nil {
				t.Fatal(err)
			}
			if got, err := store.Get(ctx, "o-next"); err != nil || got.OrderSeq != 3 || got.Status != outbox.StatusWaiting {
				t.Fatalf("the next event of K5: %+v, %v; want seq 3, WAITING behind o-12", got, err)
			}

			// A purge in batches of 2 walks the key table in four stretches; the key
			// rows written before its cutoff whose keys have nothing open go.
			for {
				n, err := store.Purge(ctx, storage.PurgeParams{Before: now.Add(time.Hour), Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				if n < 2 {
					break
				}
			}
			left := orderKeyRows(t, db, s.d, table)
			if strings.Join(left, ",") != "K5,K6" {
				t.Fatalf("key rows after the purge: %v; want K5 and K6, whose events are open", left)
			}
		})
	}
}

// orderKeyRows returns the keys of the rows of table's key table, in order.
func orderKeyRows(t *testing.T, db *sql.DB, d outbox.Dialect, table string) []string {
	t.Helper()
	return queryStrings(t, db, "SELECT order_key FROM "+quoteTable(d, table+"_key")+" ORDER BY order_key")
}

// schemaConn returns a connection of db on which the unqualified names are those of
// table's schema (PostgreSQL) or database (MySQL), where the shipped migration files,
// which name the default table without a schema, apply to table. It is closed at the
// test's end, or by the caller.
func schemaConn(t *testing.T, db *sql.DB, d outbox.Dialect, table string) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if schema, _, ok := strings.Cut(table, "."); ok {
		use := `SET search_path TO "` + schema + `"`
		if d == outbox.MySQL {
			use = "USE `" + schema + "`"
		}
		if _, err := conn.ExecContext(t.Context(), use); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// runMigrationFile runs d's shipped migration file name on conn, statement by statement.
func runMigrationFile(t *testing.T, conn *sql.Conn, d outbox.Dialect, name string) {
	t.Helper()
	text, err := fs.ReadFile(outbox.Migrations(d), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range splitMigration(string(text)) {
		if _, err := conn.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, stmt)
		}
	}
}
