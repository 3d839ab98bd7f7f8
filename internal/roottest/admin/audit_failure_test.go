package outboxadmin_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestChangeWithoutAuditTrailChangesNothing: on each database, with the audit table
// dropped, or (PostgreSQL, MySQL) with the right to write it revoked, every change of
// the admin API (replay, discard and delete of one event and of several, replay-all)
// answers 500 "audit_failed" with a message that names the cause and says that nothing
// was changed, and nothing was: every event keeps its status.
func TestChangeWithoutAuditTrailChangesNothing(t *testing.T) {
	t.Parallel()
	type breaker struct {
		name, reason string
		backends     []string
	}
	for _, b := range []breaker{
		{"dropped", "the audit table does not exist", []string{"sqlite", "postgres", "mysql"}},
		{"revoked", "no permission to write the audit table", []string{"postgres", "mysql"}},
	} {
		for _, backend := range b.backends {
			t.Run(b.name+"/"+backend, func(t *testing.T) {
				t.Parallel()
				db, d, table := auditFailureTable(t, backend)
				changer := db
				switch b.name {
				case "dropped":
					if _, err := db.ExecContext(t.Context(), "DROP TABLE "+quoteTable(d, table+"_audit")); err != nil {
						t.Fatal(err)
					}
				case "revoked":
					changer = withoutAuditRights(t, db, d, table)
				}
				ob, err := outbox.New(changer, outbox.Config{Dialect: d, Table: table, Mode: outbox.WriterOnly, PurgeInterval: -1,
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				store, err := outbox.NewSQLStore(db, d, outbox.SQLStoreConfig{Table: table})
				if err != nil {
					t.Fatal(err)
				}
				want := seedAuditFailure(t, db, store)
				for _, c := range [][2]string{
					{"api/dead-events/d1/replay", `{}`},
					{"api/dead-events/d1/discard", `{}`},
					{"api/dead-events/n1/discard", `{}`},
					{"api/dead-events/d1/delete", `{}`},
					{"api/events/replay", `{"ids": ["d1", "d2"]}`},
					{"api/events/discard", `{"ids": ["d1", "n1"]}`},
					{"api/events/delete", `{"ids": ["d1", "d2"]}`},
					{"api/dead-events/replay", `{}`},
					{"api/dead-events/replay", `{"event_type": "Broken"}`},
				} {
					req := httptest.NewRequest(http.MethodPost, "/"+c[0], strings.NewReader(c[1]))
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					var body struct {
						Error struct{ Code, Message string } `json:"error"`
					}
					if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
						t.Fatalf("POST %s: %d %s", c[0], rec.Code, rec.Body)
					}
					msg := body.Error.Message
					if rec.Code != http.StatusInternalServerError || body.Error.Code != "audit_failed" ||
						!strings.Contains(msg, "audit trail could not be written ("+b.reason) || !strings.HasSuffix(msg, "; nothing was changed") {
						t.Errorf("POST %s %s: %d %s; want 500 audit_failed naming %q and nothing changed", c[0], c[1], rec.Code, rec.Body, b.reason)
					}
					for _, leak := range []string{"SELECT", "INSERT", "SQLSTATE", "Error 1"} {
						if strings.Contains(msg, leak) {
							t.Errorf("POST %s: the message %q holds %q", c[0], msg, leak)
						}
					}
					for id, st := range want {
						e, err := store.Get(t.Context(), id)
						if err != nil || e.Status != st || e.Attempts != 1 {
							t.Fatalf("after POST %s %s: %s = %+v, %v; want %s, unchanged", c[0], c[1], id, e, err, st)
						}
					}
				}
			})
		}
	}
}

// auditFailureTable migrates a fresh outbox table on backend and returns its database,
// dialect and (schema-qualified) table name.
func auditFailureTable(t *testing.T, backend string) (*sql.DB, outbox.Dialect, string) {
	t.Helper()
	var db *sql.DB
	var d outbox.Dialect
	switch backend {
	case "sqlite":
		db, d = testdb.NewSQLiteDB(t), outbox.SQLite
	case "postgres":
		db, d = testdb.NewPostgresDB(t), outbox.Postgres
	default:
		db, d = testdb.NewMySQLDB(t), outbox.MySQL
	}
	table := testdb.IsolatedTable(t, db, d.Name())
	if err := outbox.MigrateTable(t.Context(), db, d, table); err != nil {
		t.Fatal(err)
	}
	return db, d, table
}

// seedAuditFailure stores the events the changes act on: d1 and d2 DEAD, of type
// Broken, and n1 NEW, each with one attempt; it returns their statuses.
func seedAuditFailure(t *testing.T, db *sql.DB, store storage.Store) map[string]outbox.Status {
	t.Helper()
	created := time.Now().Add(-time.Hour).UTC()
	var events []outbox.Event
	for _, id := range []string{"d1", "d2", "n1"} {
		events = append(events, outbox.Event{ID: id, Type: "Broken", AggregateType: "Thing", Payload: json.RawMessage(`{}`),
			CreatedAt: created, AvailableAt: created})
	}
	if _, err := store.Insert(t.Context(), db, storage.InsertParams{Events: events}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"d1", "d2"} {
		if _, err := store.MarkDead(t.Context(), storage.MarkDeadParams{ID: id, DeadAt: time.Now(), Reason: "poison", CountAttempt: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Reschedule(t.Context(), storage.RescheduleParams{ID: "n1", Status: outbox.StatusNew, AvailableAt: created.Add(48 * time.Hour),
		CountAttempt: true}); err != nil {
		t.Fatal(err)
	}
	return map[string]outbox.Status{"d1": outbox.StatusDead, "d2": outbox.StatusDead, "n1": outbox.StatusNew}
}

// quoteTable quotes a possibly schema-qualified table name for d.
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

// withoutAuditRights creates a database user who may read and change the outbox table
// and read its audit table, but not write the audit table, and returns a database
// handle that connects as that user. The user is dropped when the test ends.
func withoutAuditRights(t *testing.T, admin *sql.DB, d outbox.Dialect, table string) *sql.DB {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	user := "outbox_no_audit_" + hex.EncodeToString(b[:])
	schema, _, _ := strings.Cut(table, ".")
	events, audit := quoteTable(d, table), quoteTable(d, table+"_audit")
	var setup, teardown []string
	var dsn, driver string
	switch d {
	case outbox.Postgres:
		setup = []string{
			`CREATE ROLE "` + user + `" LOGIN`,
			`GRANT USAGE ON SCHEMA "` + schema + `" TO "` + user + `"`,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON " + events + " TO \"" + user + `"`,
			"GRANT SELECT ON " + audit + " TO \"" + user + `"`,
		}
		teardown = []string{`DROP OWNED BY "` + user + `"`, `DROP ROLE "` + user + `"`}
		u, err := url.Parse(testdb.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(user)
		dsn, driver = u.String(), "pgx"
	default:
		setup = []string{
			"CREATE USER '" + user + "'@'%' IDENTIFIED BY 'no-audit'",
			"GRANT SELECT, INSERT, UPDATE, DELETE ON " + events + " TO '" + user + "'@'%'",
			"GRANT SELECT ON " + audit + " TO '" + user + "'@'%'",
		}
		teardown = []string{"DROP USER '" + user + "'@'%'"}
		cfg, err := mysql.ParseDSN(testdb.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Passwd, cfg.DBName = user, "no-audit", schema
		dsn, driver = cfg.FormatDSN(), "mysql"
	}
	for _, q := range setup {
		if _, err := admin.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range teardown {
			if _, err := admin.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatal(fmt.Errorf("connect as %s: %w", user, err))
	}
	return db
}

// TestAggregateFilterWithoutTheIndex: on a table without the opt-in aggregate index, the
// events list filtered by aggregate ID answers 501 with code no_aggregate_index and the
// advice to create it, rather than read every row; other lists are not affected.
func TestAggregateFilterWithoutTheIndex(t *testing.T) {
	t.Parallel()
	db, d, table := auditFailureTable(t, "sqlite")
	ob, err := outbox.New(db, outbox.Config{Dialect: d, Table: table, Mode: outbox.WriterOnly, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(query string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/events?"+query, nil))
		return w
	}
	if w := get("status=new&aggregate_id=order-1"); w.Code != http.StatusNotImplemented ||
		!strings.Contains(w.Body.String(), `"no_aggregate_index"`) || !strings.Contains(w.Body.String(), "outbox migrate -aggregate-index") {
		t.Fatalf("filtered by aggregate ID: %d %s; want 501 no_aggregate_index naming the fix", w.Code, w.Body)
	}
	if w := get("status=new&aggregate_type=Order"); w.Code != http.StatusOK {
		t.Fatalf("filtered by aggregate type: %d %s; want 200", w.Code, w.Body)
	}
	if err := outbox.MigrateAggregateIndex(t.Context(), db, d, table); err != nil {
		t.Fatal(err)
	}
	if w := get("status=new&aggregate_id=order-1"); w.Code != http.StatusOK {
		t.Fatalf("filtered by aggregate ID with the index: %d %s; want 200", w.Code, w.Body)
	}
}
