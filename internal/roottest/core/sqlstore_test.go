package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/core/storetest"
	"github.com/outboxkit/outbox/internal/testdb"
)

// sqlBundle is a migrated, empty outbox table on one database.
type sqlBundle struct {
	db    *sql.DB
	d     outbox.Dialect
	table string // as configured, e.g. "outbox_test_ab12.outbox_event"
	store sqlTestStore
}

// quoted returns the table name quoted for raw SQL in tests.
func (b sqlBundle) quoted() string { return quoteTable(b.d, b.table) }

// quoteTable quotes a possibly schema-qualified table name for raw SQL in tests.
func quoteTable(d outbox.Dialect, table string) string {
	q := `"`
	if d == outbox.MySQL {
		q = "`"
	}
	parts := strings.Split(table, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// ph returns the n-th placeholder of the bundle's dialect.
func (b sqlBundle) ph(n int) string {
	if b.d == outbox.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func setupSQLite(t *testing.T) sqlBundle {
	t.Helper()
	db := testdb.NewSQLiteDB(t)
	return setupStore(t, db, outbox.SQLite, outbox.DefaultTable)
}

func setupPostgres(t *testing.T) sqlBundle {
	t.Helper()
	db := testdb.NewPostgresDB(t)
	return setupStore(t, db, outbox.Postgres, testdb.IsolatedTable(t, db, outbox.Postgres.Name()))
}

func setupMySQL(t *testing.T) sqlBundle {
	t.Helper()
	db := testdb.NewMySQLDB(t)
	return setupStore(t, db, outbox.MySQL, testdb.IsolatedTable(t, db, outbox.MySQL.Name()))
}

func setupStore(t testing.TB, db *sql.DB, d outbox.Dialect, table string) sqlBundle {
	t.Helper()
	if err := outbox.MigrateTable(t.Context(), db, d, table); err != nil {
		t.Fatalf("MigrateTable: %v", err)
	}
	s, err := sqlStore(db, d, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatalf("NewSQLStore: %v", err)
	}
	return sqlBundle{db: db, d: d, table: table, store: s}
}

var setups = []struct {
	name  string
	setup func(t *testing.T) sqlBundle
}{
	{"sqlite", setupSQLite},
	{"postgres", setupPostgres},
	{"mysql", setupMySQL},
}

func TestSQLStoreConformance(t *testing.T) {
	t.Parallel()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, storetest.Features{NoTakeOverCount: s.name == "sqlite"}, func(t *testing.T) storetest.Harness {
				b := s.setup(t)
				// The lists by aggregate read the opt-in aggregate index.
				if err := outbox.MigrateAggregateIndex(t.Context(), b.db, b.d, b.table); err != nil {
					t.Fatal(err)
				}
				return storetest.Harness{Store: b.store, DB: b.db}
			})
		})
	}
}

func testEvent(id string, created time.Time) outbox.Event {
	return outbox.Event{ID: id, Type: "T", AggregateType: "A", Payload: json.RawMessage(`{"n":1}`),
		CreatedAt: created, AvailableAt: created}
}

func TestSQLStoreUndecodableRows(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
	type corruption struct {
		id, set string
		// lenient is whether Get still returns the row.
		lenient bool
	}
	cases := map[string][]corruption{
		"sqlite": {
			{"bad-headers", `headers = 'not json'`, true},
			{"wrong-headers", `headers = '{"a": 1}'`, true},
			{"bad-payload", `payload = '{broken'`, true},
			{"bad-created", `created_at = '2031-02-30T12:00:00.000000Z'`, false}, // no Feb 30, sorts as due
			{"bad-available", `available_at = '2031-02-30T12:00:00.000000Z'`, false},
		},
		"postgres": {
			{"wrong-headers", `headers = '{"a": 1}'::jsonb`, true},
			{"array-headers", `headers = '[1, 2]'::jsonb`, true},
			{"null-type", `event_type = NULL`, false}, // by hand, dropping NOT NULL first
		},
		"mysql": { // JSON columns reject invalid JSON, DATETIME columns invalid times
			{"wrong-headers", `headers = '{"a": 1}'`, true},
			{"array-headers", `headers = '[1, 2]'`, true},
			{"null-type", `event_type = NULL`, false}, // by hand, dropping NOT NULL first
		},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t)
			ctx := t.Context()
			events := []outbox.Event{testEvent("good-1", t0), testEvent("good-2", t0.Add(time.Hour))}
			for i, c := range cases[s.name] {
				events = append(events, testEvent(c.id, t0.Add(time.Duration(i+1)*time.Minute)))
			}
			if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}
			dropNotNull := map[string]string{
				"postgres": `ALTER TABLE ` + b.quoted() + ` ALTER COLUMN event_type DROP NOT NULL`,
				"mysql":    `ALTER TABLE ` + b.quoted() + ` MODIFY event_type VARCHAR(128) NULL`,
			}
			if q := dropNotNull[s.name]; q != "" {
				if _, err := b.db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range cases[s.name] {
				if _, err := b.db.ExecContext(ctx, `UPDATE `+b.quoted()+` SET `+c.set+` WHERE event_id = `+b.ph(1), c.id); err != nil {
					t.Fatalf("corrupt %s: %v", c.id, err)
				}
			}

			batch, err := b.store.Pending(ctx, storage.PendingParams{Now: t0.Add(2 * time.Hour), Limit: 100})
			if err != nil {
				t.Fatalf("Pending failed because of corrupt rows: %v", err)
			}
			var got []string
			for _, e := range batch.Events {
				got = append(got, e.ID)
			}
			if strings.Join(got, ",") != "good-1,good-2" {
				t.Errorf("decoded events %v, want good-1,good-2", got)
			}
			bad := map[string]error{}
			for _, re := range batch.Undecodable {
				bad[re.EventID] = re
			}
			for _, c := range cases[s.name] {
				err, ok := bad[c.id]
				if !ok {
					t.Errorf("%s not reported undecodable (got %v)", c.id, batch.Undecodable)
					continue
				}
				t.Logf("%s: %v", c.id, err)

				e, err := b.store.Get(ctx, c.id)
				var rowErr outbox.RowError
				switch {
				case c.lenient && err != nil:
					t.Errorf("Get(%s): %v, want the row leniently decoded", c.id, err)
				case c.lenient && (e.Headers != nil || !json.Valid(e.Payload)):
					t.Errorf("Get(%s) = headers %v, payload %s", c.id, e.Headers, e.Payload)
				case !c.lenient && !errors.As(err, &rowErr):
					t.Errorf("Get(%s) = %v, want a RowError", c.id, err)
				}
			}
			if n := len(batch.Undecodable); n != len(cases[s.name]) {
				t.Errorf("%d undecodable rows, want %d", n, len(cases[s.name]))
			}

			// The poller moves such rows to DEAD; the dead-event API must still list them.
			for _, c := range cases[s.name] {
				if c.lenient {
					if _, err := b.store.MarkDead(ctx, storage.MarkDeadParams{DeadAt: time.Now(), ID: c.id, Reason: "undecodable"}); err != nil {
						t.Fatal(err)
					}
				}
			}
			dead, err := b.store.ListDead(ctx, storage.ListDeadParams{Limit: 10})
			if err != nil {
				t.Fatalf("ListDead: %v", err)
			}
			for _, e := range dead {
				if !json.Valid(e.Payload) {
					t.Errorf("ListDead returned invalid JSON payload for %s: %s", e.ID, e.Payload)
				}
				if e.ID == "bad-payload" && string(e.Payload) != `"{broken"` {
					t.Errorf("bad payload listed as %s, want the stored text as a JSON string", e.Payload)
				}
			}
		})
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t) // migrated once
			for range 2 {
				if err := outbox.MigrateTable(t.Context(), b.db, b.d, b.table); err != nil {
					t.Fatalf("MigrateTable again: %v", err)
				}
			}
			if _, err := b.store.Insert(t.Context(), b.db, storage.InsertParams{Events: []outbox.Event{testEvent("a", time.Now())}}); err != nil {
				t.Fatal(err)
			}
			if err := outbox.MigrateTable(t.Context(), b.db, b.d, b.table); err != nil {
				t.Fatalf("MigrateTable on a table with rows: %v", err)
			}
			if _, err := b.store.Get(t.Context(), "a"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMigrateDefaultTable(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLiteDB(t)
	for range 2 {
		if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM outbox_event`).Scan(&n); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateRejectsBadInput(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLiteDB(t)
	var ce *outbox.ConfigError
	if err := outbox.MigrateTable(t.Context(), db, outbox.SQLite, `x"; DROP TABLE y`); !errors.As(err, &ce) || ce.Field != "Table" {
		t.Errorf("bad table: %v", err)
	}
	if err := outbox.Migrate(t.Context(), nil, outbox.SQLite); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("nil db: %v", err)
	}
	if err := outbox.Migrate(t.Context(), db, nil); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("nil dialect: %v", err)
	}
}

// rawDatabases are the three databases with no table of the outbox's yet.
var rawDatabases = []struct {
	name string
	d    outbox.Dialect
	open func(testing.TB) *sql.DB
}{
	{"sqlite", outbox.SQLite, testdb.NewSQLiteDB},
	{"postgres", outbox.Postgres, testdb.NewPostgresDB},
	{"mysql", outbox.MySQL, testdb.NewMySQLDB},
}

// TestShippedMigrationFiles applies the embedded up file, the down file and the up file
// again, as a migration tool would, and checks the store works on the result.
func TestShippedMigrationFiles(t *testing.T) {
	t.Parallel()
	for _, s := range rawDatabases {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			db := s.open(t)
			conn, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The files name the table without a schema: run them in a fresh schema
			// (PostgreSQL) or database (MySQL).
			switch s.d {
			case outbox.Postgres:
				schema := strings.TrimSuffix(testdb.IsolatedTable(t, db, "postgres"), "."+outbox.DefaultTable)
				if _, err := conn.ExecContext(t.Context(), `SET search_path TO "`+schema+`"`); err != nil {
					t.Fatal(err)
				}
			case outbox.MySQL:
				schema := strings.TrimSuffix(testdb.IsolatedTable(t, db, "mysql"), "."+outbox.DefaultTable)
				if _, err := conn.ExecContext(t.Context(), "USE `"+schema+"`"); err != nil {
					t.Fatal(err)
				}
			}
			run := func(name string) { t.Helper(); runMigrationFile(t, conn, s.d, name) }
			run("0001_create_outbox_event.up.sql")
			run("0001_create_outbox_event.down.sql")
			run("0001_create_outbox_event.up.sql")
			run("0001_create_outbox_event.up.sql") // IF NOT EXISTS
			// The later versions (MySQL: 0002_poll_index) apply, undo and apply again.
			later, err := fs.Glob(outbox.Migrations(s.d), "*.up.sql")
			if err != nil {
				t.Fatal(err)
			}
			for _, up := range later[1:] {
				down := strings.TrimSuffix(up, ".up.sql") + ".down.sql"
				run(up)
				run(down)
				run(up)
			}
			if len(later) < 2 {
				t.Errorf("%s ships %v, want the 0002 migration too", s.name, later)
			}
			t0 := "'2031-01-01T00:00:00.000000Z'"
			if s.d == outbox.MySQL {
				t0 = "'2031-01-01 00:00:00.000000'"
			}
			if _, err := conn.ExecContext(t.Context(),
				`INSERT INTO outbox_event (event_id, event_type, aggregate_type, payload, status, available_at, created_at)
				 VALUES ('x', 't', 'a', '{}', 0, `+t0+`, `+t0+`)`); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMigrateUpgradesAVersionOneTableWithRows: on every database, a table made by the
// first migration alone, holding pending and finished rows, is refused by the
// connection check with a *ConfigError naming a missing column, and MigrateTable
// upgrades it in place: every row kept and still delivered, and ordered events work.
func TestMigrateUpgradesAVersionOneTableWithRows(t *testing.T) {
	t.Parallel()
	for _, s := range rawDatabases {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := s.open(t)
			table := testdb.IsolatedTable(t, db, s.d.Name())
			createVersionOne(t, db, s.d, table)
			store, err := sqlStore(db, s.d, outbox.SQLStoreConfig{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
			var events []outbox.Event
			for i := range 30 {
				events = append(events, testEvent(fmt.Sprintf("e-%02d", i), base.Add(time.Duration(i)*time.Second)))
			}
			if _, err := store.Insert(ctx, db, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"e-00", "e-01"}, DoneAt: base}); err != nil {
				t.Fatal(err)
			}
			var cfgErr *outbox.ConfigError
			if err := store.CheckConnection(ctx); !errors.As(err, &cfgErr) || cfgErr.Field != "Table" {
				t.Fatalf("CheckConnection on a version 1 table = %v, want a *ConfigError for Table", err)
			}
			for range 2 { // the second run changes nothing
				if err := outbox.MigrateTable(ctx, db, s.d, table); err != nil {
					t.Fatalf("MigrateTable upgrade: %v", err)
				}
			}
			if err := store.CheckConnection(ctx); err != nil {
				t.Fatalf("CheckConnection after the upgrade: %v", err)
			}
			batch, err := store.Pending(ctx, storage.PendingParams{Now: base.Add(time.Hour), Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(batch.Events) != 28 || batch.Events[0].ID != "e-02" || batch.Events[0].OrderKey != "" {
				t.Fatalf("Pending after the upgrade: %d events, first %+v; want the 28 pending rows", len(batch.Events), batch.Events[0])
			}
			if got, err := store.Get(ctx, "e-00"); err != nil || got.Status != outbox.StatusDone {
				t.Fatalf("a DONE row after the upgrade: %+v, %v", got, err)
			}
			o1, o2 := testEvent("o-1", base), testEvent("o-2", base)
			o1.OrderKey, o2.OrderKey = "K", "K"
			if _, err := store.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{o1, o2}}); err != nil {
				t.Fatalf("ordered insert after the upgrade: %v", err)
			}
			if _, err := store.Promote(ctx, storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: true}); err != nil {
				t.Fatalf("Promote after the upgrade: %v", err)
			}
			if got, err := store.Get(ctx, "o-1"); err != nil || got.Status != outbox.StatusNew || got.OrderSeq != 1 {
				t.Fatalf("o-1 after the upgrade: %+v, %v", got, err)
			}
			if got, err := store.Get(ctx, "o-2"); err != nil || got.Status != outbox.StatusWaiting || got.OrderSeq != 2 {
				t.Fatalf("o-2 after the upgrade: %+v, %v", got, err)
			}
		})
	}
}

func TestCustomSchemaQualifiedTable(t *testing.T) {
	t.Parallel()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			var db *sql.DB
			var table, indexQuery string
			d := outbox.SQLite
			switch s.name {
			case "postgres":
				d = outbox.Postgres
				db = testdb.NewPostgresDB(t)
				schema := strings.TrimSuffix(testdb.IsolatedTable(t, db, "postgres"), "."+outbox.DefaultTable)
				table = schema + ".Order_Events" // mixed case: quoted everywhere
				indexQuery = `SELECT indexname FROM pg_indexes WHERE schemaname = '` + schema + `' ORDER BY indexname`
			case "mysql":
				d = outbox.MySQL
				db = testdb.NewMySQLDB(t)
				schema := strings.TrimSuffix(testdb.IsolatedTable(t, db, "mysql"), "."+outbox.DefaultTable)
				table = schema + ".Order_Events"
				indexQuery = `SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = '` + schema +
					`' AND table_name = 'Order_Events' ORDER BY index_name`
			default:
				db = testdb.NewSQLiteDB(t)
				table = "main.Order_Events"
				indexQuery = `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'Order_Events' AND sql IS NOT NULL ORDER BY name`
			}
			b := setupStore(t, db, d, table)
			ctx := t.Context()
			t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
			if _, err := b.store.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{testEvent("a", t0), testEvent("b", t0)}}); err != nil {
				t.Fatal(err)
			}
			if n, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"a"}, DoneAt: t0}); err != nil || n != 1 {
				t.Fatalf("MarkDone = %d, %v", n, err)
			}
			batch, err := b.store.Pending(ctx, storage.PendingParams{Now: t0, Limit: 10})
			if err != nil || len(batch.Events) != 1 || batch.Events[0].ID != "b" {
				t.Fatalf("Pending = %+v, %v", batch, err)
			}
			if n, err := b.store.Purge(ctx, storage.PurgeParams{Before: t0.Add(time.Second), Limit: 10}); err != nil || n != 1 {
				t.Fatalf("Purge = %d, %v", n, err)
			}
			got := strings.Join(queryStrings(t, db, indexQuery), ",")
			want := "Order_Events_claim_idx,Order_Events_dead_idx,Order_Events_finished_idx," +
				"Order_Events_order_idx,Order_Events_pending_idx,Order_Events_state_idx"
			switch s.name {
			case "postgres":
				// The key, audit, lease and pause tables' indexes are in the schema too;
				// the undelivered index replaced the pending index (version 10).
				want = "Order_Events_audit_pkey,Order_Events_claim_idx,Order_Events_dead_idx," +
					"Order_Events_finished_idx,Order_Events_key_pkey,Order_Events_lease_pkey,Order_Events_order_idx," +
					"Order_Events_pause_pkey,Order_Events_pkey,Order_Events_state_idx,Order_Events_undelivered_idx"
			case "mysql":
				// The pending index serves the claim and the poller's scan (see the MySQL
				// DDL; migration 0010 dropped the poll index), the status index
				// (dead_idx) the RETRY and WAITING lists.
				want = "Order_Events_dead_idx,Order_Events_finished_idx,Order_Events_order_idx," +
					"Order_Events_pending_idx,PRIMARY"
			}
			// The audit trail lives beside the qualified table.
			as := b.store.(storage.AuditStore)
			if err := as.RecordAudit(ctx, outbox.AuditEntry{ID: "01A", At: t0, Actor: "a", Action: outbox.AuditReplay, Target: "x", Count: 1}); err != nil {
				t.Fatalf("RecordAudit: %v", err)
			}
			if got, err := as.ListAudit(ctx, storage.ListAuditParams{Limit: 5}); err != nil || len(got) != 1 || got[0].ID != "01A" {
				t.Fatalf("ListAudit = %+v, %v", got, err)
			}
			// Ordered events use the key table beside the qualified table.
			o := testEvent("o", t0)
			o.OrderKey = "K"
			if _, err := b.store.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{o}}); err != nil {
				t.Fatalf("ordered insert: %v", err)
			}
			if _, err := b.store.Promote(ctx, storage.PromoteParams{Keys: []string{"K"}}); err != nil {
				t.Fatalf("Promote: %v", err)
			}
			if e, err := b.store.Get(ctx, "o"); err != nil || e.Status != outbox.StatusNew || e.OrderSeq != 1 {
				t.Fatalf("ordered event %+v, %v; want NEW with OrderSeq 1", e, err)
			}
			// The pause table lives beside the qualified table.
			ps := b.store.(storage.PauseStore)
			if _, err := ps.SetPaused(ctx, storage.SetPausedParams{Listener: "mail", Pause: true, Entry: outbox.AuditEntry{
				ID: "01P", At: t0, Actor: "a", Action: outbox.AuditPause, Target: "mail"}}); err != nil {
				t.Fatalf("SetPaused: %v", err)
			}
			if got, err := ps.Paused(ctx); err != nil || len(got) != 1 || got[0].Listener != "mail" {
				t.Fatalf("Paused = %+v, %v", got, err)
			}
			if got != want {
				t.Errorf("indexes %s, want %s", got, want)
			}
		})
	}
}

// TestQueriesUseIndexes checks that the partial and expression indexes serve the
// queries they were made for.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	for _, s := range setups {
		if s.name == "mysql" {
			continue // TestMySQLQueriesUseIndexes
		}
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t)
			ctx := t.Context()
			conn, err := b.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			explain := "EXPLAIN QUERY PLAN "
			if b.d == outbox.Postgres {
				explain = "EXPLAIN "
				// A near-empty table is cheapest to scan; make the planner show what it can use.
				if _, err := conn.ExecContext(ctx, "SET enable_seqscan = off"); err != nil {
					t.Fatal(err)
				}
			}
			// The statements as the dialect builds them (see the golden tests), with
			// literals for the arguments.
			t0, st, sortStep := "'2031-01-01T00:00:00.000000Z'", "status", "Sort"
			if b.d == outbox.SQLite {
				st, sortStep = "+status", "TEMP B-TREE"
			}
			type check struct{ use, avoid string }
			cases := map[string]check{
				`SELECT event_id FROM ` + b.quoted() + ` WHERE (` + st + ` IN (1, 3) OR ` + st + ` >= 5) AND COALESCE(done_at, created_at) < ` + t0 +
					` ORDER BY COALESCE(done_at, created_at), event_id LIMIT 10`: {"finished_idx", "claim_idx"},
				`SELECT event_id FROM ` + b.quoted() + ` WHERE ` + st + ` = 3 AND (created_at, event_id) > (` + t0 + `, 'x')` +
					` ORDER BY created_at, event_id LIMIT 10`: {"dead_idx", "claim_idx"},
				`SELECT event_id FROM ` + b.quoted() + ` WHERE ` + st + ` = 3 AND event_type = 'x' ORDER BY created_at, event_id LIMIT 10`: {"dead_idx", "claim_idx"},
				// The poller and the claim walk one index in the query's order and stop
				// after the LIMIT: no sort of every due row.
				`SELECT event_id FROM ` + b.quoted() + ` WHERE status IN (0, 2) AND available_at <= ` + t0 +
					` AND created_at <= ` + t0 + ` ORDER BY available_at, created_at, event_id LIMIT 10`: {"claim_idx", sortStep},
				// The next batch of a poll cycle reads on after the last row of the one before.
				`SELECT event_id FROM ` + b.quoted() + ` WHERE status IN (0, 2) AND available_at <= ` + t0 +
					` AND created_at <= ` + t0 + ` AND (available_at, created_at, event_id) > (` + t0 + `, ` + t0 + `, 'x')` +
					` ORDER BY available_at, created_at, event_id LIMIT 10`: {"claim_idx", sortStep},
				// A cycle starts at the low-water mark.
				`SELECT event_id FROM ` + b.quoted() + ` WHERE status IN (0, 2) AND available_at <= ` + t0 +
					` AND created_at <= ` + t0 + ` AND available_at >= ` + t0 +
					` ORDER BY available_at, created_at, event_id LIMIT 10`: {"claim_idx", sortStep},
				`SELECT event_id FROM ` + b.quoted() + ` WHERE status IN (0, 2) AND available_at <= ` + t0 +
					` AND created_at <= ` + t0 + ` AND (locked_until IS NULL OR locked_until < ` + t0 + `)` +
					` ORDER BY available_at, created_at, event_id LIMIT 10`: {"claim_idx", sortStep},
				// A MultiNode claim from the low-water mark (ClaimParams.DueFrom).
				`SELECT event_id FROM ` + b.quoted() + ` WHERE status IN (0, 2) AND available_at <= ` + t0 +
					` AND available_at >= ` + t0 + ` AND created_at <= ` + t0 + ` AND (locked_until IS NULL OR locked_until < ` + t0 + `)` +
					` ORDER BY available_at, created_at, event_id LIMIT 10`: {"claim_idx", sortStep},
			}
			// Promote reads a key's head and what holds it from the order index, by key
			// (and, in the sweep, walks it), never the whole table; purge of the key table
			// probes it per key.
			// PostgreSQL: each [NOT] EXISTS stays a per-row probe of the order index by key,
			// never an (anti-)join, whose inner side the planner may make a scan of the
			// whole index when the statistics predate the WAITING rows (avoid lists are
			// separated by "|").
			scan, probe := "Seq Scan|Anti Join|Semi Join", " OFFSET 0"
			if b.d == outbox.SQLite {
				scan, probe = "SCAN ", ""
			}
			heads := func(keys, limit string) string {
				sub := `SELECT w.event_id FROM ` + b.quoted() + ` w WHERE ` + keys +
					` AND w.status <> 1 AND w.status < 5 AND w.status = 4 AND w.order_seq = (SELECT MIN(m.order_seq) FROM ` + b.quoted() +
					` m WHERE m.order_key = w.order_key AND m.status <> 1 AND m.status < 5 AND m.status = 4) AND NOT EXISTS (SELECT 1 FROM ` + b.quoted() +
					` a WHERE a.order_key = w.order_key AND a.status <> 1 AND a.status < 5 AND a.status IN (0, 2, 3)` + probe + `) LIMIT ` + limit
				if b.d == outbox.Postgres {
					return `WITH h AS MATERIALIZED (SELECT event_id FROM ` + b.quoted() + ` WHERE event_id IN (` + sub +
						`) AND status = 4 ORDER BY event_id FOR UPDATE) UPDATE ` + b.quoted() + ` AS t SET status = 0 FROM h` +
						` WHERE t.event_id = h.event_id AND t.status = 4`
				}
				return `UPDATE ` + b.quoted() + ` SET status = 0 WHERE event_id IN (` + sub + `) AND status = 4`
			}
			keys := `w.order_key IN ('A', 'B')`
			if b.d == outbox.Postgres {
				keys = `w.order_key = ANY(CAST('{"A","B"}' AS TEXT[]))`
			}
			cases[heads(keys, "2")] = check{"order_idx", scan}
			sweepAvoid := scan
			if b.d == outbox.SQLite {
				sweepAvoid = "SCAN " + strings.Trim(b.quoted(), `"`)
			}
			cases[heads(`w.order_key IS NOT NULL`, "1000")] = check{"order_idx", sweepAvoid}
			kt := strings.TrimSuffix(b.quoted(), `"`) + `_key"`
			// A key purge walks the key table by primary key, a stretch a batch.
			cases[`DELETE FROM `+kt+` WHERE order_key IN (SELECT k.order_key FROM `+kt+` k WHERE k.order_key > 'A' AND k.order_key <= 'K'`+
				` AND k.updated_at < `+t0+` AND NOT EXISTS (SELECT 1 FROM `+b.quoted()+` e WHERE e.order_key = k.order_key AND e.status <> 1 AND e.status < 5`+probe+`))`+
				` AND updated_at < `+t0] = check{"order_idx", sortStep + "|Anti Join"}
			// The writer learns whether a key has an event that is not DONE from the
			// order index: inside the event INSERT on PostgreSQL, in the key upsert's
			// RETURNING on SQLite (with the highest number of those events), or in the
			// guarded INSERT of a key a promote read idle, whose other probe is the key
			// table's primary key; the promote's read of the idle keys probes both too.
			if b.d == outbox.SQLite {
				cases[`INSERT INTO `+kt+` (order_key, last_seq, updated_at) VALUES ('A', 0, `+t0+`), ('B', 0, `+t0+`)`+
					` ON CONFLICT (order_key) DO UPDATE SET last_seq = last_seq`+
					` RETURNING order_key, last_seq, (SELECT max(e.order_seq) FROM `+b.quoted()+` e WHERE e.order_key = `+kt+`.order_key AND e.status <> 1 AND e.status < 5)`] = check{"order_idx", "SCAN e"}
				cases[`INSERT OR IGNORE INTO `+b.quoted()+` (event_id, event_type, aggregate_type, payload, status, attempts, available_at, created_at, order_key, order_seq)`+
					` VALUES (CASE WHEN NOT EXISTS (SELECT 1 FROM `+b.quoted()+` o WHERE o.order_key = 'A' AND o.status <> 1 AND o.status < 5)`+
					` AND (SELECT k.last_seq FROM `+kt+` k WHERE k.order_key = 'A') = 3 THEN 'x' END, 'T', 'A', '{}', 0, 0, `+t0+`, `+t0+`, 'A', 4)`] = check{"order_idx", "SCAN "}
				cases[`SELECT k.order_key, k.last_seq FROM `+kt+` k WHERE k.order_key IN ('A', 'B')`+
					` AND NOT EXISTS (SELECT 1 FROM `+b.quoted()+` e WHERE e.order_key = k.order_key AND e.status <> 1 AND e.status < 5)`] = check{"order_idx", "SCAN "}
			} else {
				cases[`INSERT INTO `+b.quoted()+` (event_id, event_type, aggregate_type, payload, status, attempts, available_at, created_at, order_key, order_seq)`+
					` VALUES ('x', 'T', 'A', '{}', CASE WHEN EXISTS (SELECT 1 FROM `+b.quoted()+` WHERE order_key = 'A' AND status <> 1 AND status < 5) THEN 4 ELSE 0 END, 0, `+
					t0+`, `+t0+`, 'A', 1)`] = check{"order_idx", scan}
			}
			if b.d == outbox.Postgres {
				// The one statement of an ordered write: the key upsert's version check
				// probes the key table's primary key, the event's status the order index.
				cases[`WITH ks AS (INSERT INTO `+kt+` AS k (order_key, last_seq, updated_at) VALUES ('A', 1, statement_timestamp())`+
					` ON CONFLICT (order_key) DO UPDATE SET last_seq = k.last_seq + excluded.last_seq, updated_at = excluded.updated_at`+
					` WHERE (k.last_seq, k.updated_at) = (SELECT s.last_seq, s.updated_at FROM `+kt+` s WHERE s.order_key = excluded.order_key)`+
					` RETURNING order_key, last_seq) INSERT INTO `+b.quoted()+` (event_id, event_type, aggregate_type, payload, status, attempts, available_at, created_at, order_key, order_seq)`+
					` SELECT v.event_id, v.event_type, v.aggregate_type, v.payload, v.status, v.attempts, v.available_at, v.created_at, v.order_key, ks.last_seq - v.order_seq`+
					` FROM (VALUES ('x', 'T', 'A', CAST('{}' AS JSONB), CASE WHEN EXISTS (SELECT 1 FROM `+b.quoted()+` WHERE order_key = 'A' AND status <> 1 AND status < 5) THEN 4 ELSE 0 END, 0, `+
					`CAST(`+t0+` AS TIMESTAMPTZ), CAST(`+t0+` AS TIMESTAMPTZ), 'A', CAST(0 AS BIGINT))) AS v (event_id, event_type, aggregate_type, payload, status, attempts, available_at, created_at, order_key, order_seq)`+
					` JOIN ks ON ks.order_key = v.order_key ON CONFLICT (event_id) DO NOTHING RETURNING event_id, status, order_seq`] = check{"order_idx", scan}
			}
			if b.d == outbox.SQLite {
				cases[`UPDATE `+b.quoted()+` SET status = 0 WHERE event_id IN (SELECT event_id FROM `+b.quoted()+
					` WHERE +status = 3 ORDER BY created_at, event_id LIMIT 10) AND +status = 3`] = check{"dead_idx", "claim_idx"}
				cases[`DELETE FROM `+b.quoted()+` WHERE event_id IN (SELECT event_id FROM `+b.quoted()+
					` WHERE (+status IN (1, 3) OR +status >= 5) AND COALESCE(done_at, created_at) < `+t0+` ORDER BY COALESCE(done_at, created_at), event_id LIMIT 10)`+
					` AND (+status IN (1, 3) OR +status >= 5) AND COALESCE(done_at, created_at) < `+t0] = check{"finished_idx", "claim_idx"}
			}
			for q, c := range cases {
				rows, err := conn.QueryContext(ctx, explain+q)
				if err != nil {
					t.Fatal(err)
				}
				var plan strings.Builder
				for rows.Next() {
					cols, _ := rows.Columns()
					vals := make([]any, len(cols))
					for i := range vals {
						vals[i] = new(any)
					}
					if err := rows.Scan(vals...); err != nil {
						t.Fatal(err)
					}
					for _, v := range vals {
						fmt.Fprintf(&plan, "%v ", *(v.(*any)))
					}
					plan.WriteString("\n")
				}
				rows.Close()
				if p := plan.String(); !strings.Contains(p, c.use) || slices.ContainsFunc(strings.Split(c.avoid, "|"), func(a string) bool { return strings.Contains(p, a) }) {
					t.Errorf("%s does not use %s (or uses %s):\n%s", q, c.use, c.avoid, p)
				}
			}
		})
	}
}

func TestNewSQLStoreValidatesConfig(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLiteDB(t)
	cases := map[string]struct {
		db    *sql.DB
		d     outbox.Dialect
		cfg   outbox.SQLStoreConfig
		field string
	}{
		"nil db":           {nil, outbox.SQLite, outbox.SQLStoreConfig{}, "DB"},
		"nil dialect":      {db, nil, outbox.SQLStoreConfig{}, "Dialect"},
		"bad table":        {db, outbox.SQLite, outbox.SQLStoreConfig{Table: "a-b"}, "Table"},
		"negative timeout": {db, outbox.SQLite, outbox.SQLStoreConfig{QueryTimeout: -time.Second}, "QueryTimeout"},
	}
	for name, c := range cases {
		_, err := outbox.NewSQLStore(c.db, c.d, c.cfg)
		var ce *outbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: err = %v, want ConfigError on %s", name, err, c.field)
		}
	}
	if _, err := outbox.NewSQLStore(db, outbox.SQLite, outbox.SQLStoreConfig{QueryTimeout: -1}); err != nil {
		t.Errorf("QueryTimeout -1: %v", err)
	}
}

func TestSQLStoreInsertEdgeCases(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	ctx := t.Context()
	if _, err := b.store.Insert(ctx, nil, storage.InsertParams{Events: []outbox.Event{testEvent("a", time.Now())}}); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("nil executor: %v", err)
	}
	if _, err := b.store.Insert(ctx, nil, storage.InsertParams{}); err != nil {
		t.Errorf("no events: %v", err)
	}
	// Zero times default like the in-memory store's: CreatedAt now, AvailableAt CreatedAt.
	before := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{{ID: "z", Type: "T", AggregateType: "A", Payload: json.RawMessage(`1`)}}}); err != nil {
		t.Fatal(err)
	}
	e, err := b.store.Get(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	if e.CreatedAt.Before(before) || e.CreatedAt.After(time.Now()) || !e.AvailableAt.Equal(e.CreatedAt) {
		t.Errorf("defaulted times: created %v, available %v", e.CreatedAt, e.AvailableAt)
	}
}

// TestPostgresStoresTypedColumns checks the PostgreSQL column contents: jsonb objects
// (not strings or bytea) and NULL headers, so that SQL users can query them.
func TestPostgresStoresTypedColumns(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)
	ctx := t.Context()
	e := testEvent("typed", time.Now())
	e.Headers = map[string]string{"k": "v"}
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{e, testEvent("bare", time.Now())}}); err != nil {
		t.Fatal(err)
	}
	var payloadType, headerValue string
	var bareHeadersNull bool
	err := b.db.QueryRowContext(ctx, `SELECT jsonb_typeof(payload), headers->>'k', (SELECT headers IS NULL FROM `+
		b.quoted()+` WHERE event_id = 'bare') FROM `+b.quoted()+` WHERE event_id = 'typed'`).
		Scan(&payloadType, &headerValue, &bareHeadersNull)
	if err != nil {
		t.Fatal(err)
	}
	if payloadType != "object" || headerValue != "v" || !bareHeadersNull {
		t.Errorf("payload type %s, header k %q, bare headers NULL %v", payloadType, headerValue, bareHeadersNull)
	}
}

func TestQueryTimeoutBoundsStatements(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(*testing.T) sqlBundle{"postgres": setupPostgres, "mysql": setupMySQL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			s, err := sqlStore(b.db, b.d, outbox.SQLStoreConfig{Table: b.table, QueryTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Insert(t.Context(), b.db, storage.InsertParams{Events: []outbox.Event{testEvent("locked", time.Now())}}); err != nil {
				t.Fatal(err)
			}
			// Hold a lock on the row so the update has to wait past the timeout.
			tx, err := b.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(t.Context(), `SELECT 1 FROM `+b.quoted()+` WHERE event_id = 'locked' FOR UPDATE`); err != nil {
				t.Fatal(err)
			}
			// Without QueryTimeout, MarkDone would wait for the lock until the transaction
			// ends (PostgreSQL) or InnoDB's lock wait timeout (50 s) fails it: 20 s tells
			// that apart from the 50 ms timeout on a loaded machine too.
			start := time.Now()
			_, err = s.MarkDone(context.Background(), storage.MarkDoneParams{IDs: []string{"locked"}, DoneAt: time.Now()})
			if took := time.Since(start); err == nil || took > 20*time.Second {
				t.Errorf("MarkDone on a locked row = %v after %s, want a timeout (QueryTimeout 50ms)", err, took)
			}
		})
	}
}

// sqlTestStore is what NewSQLStore returns: a Store with every optional interface.
type sqlTestStore interface {
	storage.Store
	storage.ClaimStore
	storage.DeadStore
	storage.StatsStore
	storage.ConnectionChecker
	storage.OrderStore
}

// sqlStore is outbox.NewSQLStore with the optional interfaces the tests call directly.
func sqlStore(db *sql.DB, d outbox.Dialect, cfg outbox.SQLStoreConfig) (sqlTestStore, error) {
	s, err := outbox.NewSQLStore(db, d, cfg)
	if err != nil {
		return nil, err
	}
	return s.(sqlTestStore), nil
}

// createVersionOne creates table as the shipped version 1 file does.
func createVersionOne(t *testing.T, db *sql.DB, d outbox.Dialect, table string) {
	t.Helper()
	v1, err := fs.ReadFile(outbox.Migrations(d), "0001_create_outbox_event.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(strings.ReplaceAll(string(v1), quoteTable(d, outbox.DefaultTable), quoteTable(d, table)), ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("version 1 DDL: %v", err)
		}
	}
}

// TestSchemaVersion: 0 before the table exists, the latest version after Migrate, and on
// a version 1 table, 1 until MigrateTable upgrades it.
func TestSchemaVersion(t *testing.T) {
	t.Parallel()
	for _, s := range rawDatabases {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := s.open(t)
			table := testdb.IsolatedTable(t, db, s.d.Name())
			have, latest, err := outbox.SchemaVersion(ctx, db, s.d, table)
			if err != nil || have != 0 || latest < 3 {
				t.Fatalf("before the table: %d of %d, %v", have, latest, err)
			}
			createVersionOne(t, db, s.d, table)
			if have, _, err := outbox.SchemaVersion(ctx, db, s.d, table); err != nil || have != 1 {
				t.Fatalf("a version 1 table: %d, %v", have, err)
			}
			if err := outbox.MigrateTable(ctx, db, s.d, table); err != nil {
				t.Fatal(err)
			}
			if have, l, err := outbox.SchemaVersion(ctx, db, s.d, table); err != nil || have != latest || l != latest {
				t.Fatalf("after MigrateTable: %d of %d, %v; want %d", have, l, err, latest)
			}
		})
	}
}
