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

	"github.com/go-sql-driver/mysql"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// openMySQL opens the test database with the driver configuration changed by edit.
func openMySQL(t *testing.T, edit func(cfg *mysql.Config)) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestMySQLConnectionCheck opens the database with DSNs that would store wrong times or
// text and checks that CheckConnection and Outbox.Start reject them with a ConfigError
// naming the fix, and that the documented DSN passes.
func TestMySQLConnectionCheck(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		edit func(cfg *mysql.Config)
		fix  string // in the error; "" for a good configuration
	}{
		"documented DSN":       {func(*mysql.Config) {}, ""},
		"interpolated params":  {func(cfg *mysql.Config) { cfg.InterpolateParams = true }, ""},
		"client found rows":    {func(cfg *mysql.Config) { cfg.ClientFoundRows = true }, ""},
		"no parseTime":         {func(cfg *mysql.Config) { cfg.ParseTime = false }, "parseTime=true"},
		"loc Local":            {func(cfg *mysql.Config) { cfg.Loc = time.Local }, "loc=UTC"},
		"loc east of UTC":      {func(cfg *mysql.Config) { cfg.Loc = time.FixedZone("UTC+2", 2*3600) }, "loc=UTC"},
		"loc west of UTC":      {func(cfg *mysql.Config) { cfg.Loc = time.FixedZone("UTC-5", -5*3600) }, "loc=UTC"},
		"no parseTime, loc +2": {func(cfg *mysql.Config) { cfg.ParseTime, cfg.Loc = false, time.FixedZone("UTC+2", 2*3600) }, "parseTime=true"},
		"latin1":               {func(cfg *mysql.Config) { cfg.Collation = "latin1_swedish_ci" }, "utf8mb4"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := openMySQL(t, c.edit)
			table := testdb.IsolatedTable(t, db, outbox.MySQL.Name())
			if err := outbox.MigrateTable(t.Context(), db, outbox.MySQL, table); err != nil {
				t.Fatal(err)
			}
			s, err := outbox.NewSQLStore(db, outbox.MySQL, outbox.SQLStoreConfig{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			err = s.(storage.ConnectionChecker).CheckConnection(t.Context())
			ob, nerr := outbox.New(db, outbox.Config{Dialect: outbox.MySQL, Table: table, Logger: discardLogger()})
			if nerr != nil {
				t.Fatal(nerr)
			}
			startErr := ob.Start(t.Context())
			t.Cleanup(func() { _ = ob.Stop(context.Background()) })
			if c.fix == "" {
				if err != nil || startErr != nil {
					t.Fatalf("CheckConnection = %v, Start = %v; want nil", err, startErr)
				}
				return
			}
			for what, err := range map[string]error{"CheckConnection": err, "Start": startErr} {
				var ce *outbox.ConfigError
				if !errors.As(err, &ce) || ce.Field != "DSN" || !errors.Is(err, outbox.ErrInvalidConfig) {
					t.Fatalf("%s = %v, want a *ConfigError on DSN", what, err)
				}
				if !strings.Contains(ce.Reason, c.fix) {
					t.Errorf("%s = %v, want it to name %s", what, err, c.fix)
				}
			}
			t.Log(err)
		})
	}
}

// TestConnectionCheckElsewhere: on SQLite and PostgreSQL, where the connection needs no
// setting, the check only looks at the table: nil on a migrated one (a table lacking a
// version is TestMigrateUpgradesAVersionOneTableWithRows's), and the database's error,
// not a *ConfigError, when it cannot look.
func TestConnectionCheckElsewhere(t *testing.T) {
	t.Parallel()
	for _, setup := range []func(*testing.T) sqlBundle{setupSQLite, setupPostgres} {
		b := setup(t)
		if err := b.store.CheckConnection(t.Context()); err != nil {
			t.Errorf("%s: CheckConnection = %v", b.d, err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var ce *outbox.ConfigError
		if err := b.store.CheckConnection(ctx); err == nil || errors.As(err, &ce) {
			t.Errorf("%s: CheckConnection with a canceled context = %v, want the context's error", b.d, err)
		}
	}
}

// TestMySQLStoresTypedColumns checks the MySQL column contents: JSON documents, NULL
// headers, byte-exact IDs and case-sensitive text, and the generated finished_at.
func TestMySQLStoresTypedColumns(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx := t.Context()
	e := testEvent("typed", time.Now())
	e.Headers = map[string]string{"k": "v"}
	spaced := testEvent("typed ", time.Now()) // differs only by a trailing space
	spaced.Type = "t"                         // differs only by case
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: []outbox.Event{e, spaced}}); err != nil {
		t.Fatal(err)
	}
	var payloadType, headerValue string
	var spacedHeadersNull bool
	err := b.db.QueryRowContext(ctx, `SELECT JSON_TYPE(payload), JSON_UNQUOTE(JSON_EXTRACT(headers, '$.k')), (SELECT headers IS NULL FROM `+
		b.quoted()+` WHERE event_id = 'typed ') FROM `+b.quoted()+` WHERE event_id = 'typed'`).
		Scan(&payloadType, &headerValue, &spacedHeadersNull)
	if err != nil {
		t.Fatal(err)
	}
	if payloadType != "OBJECT" || headerValue != "v" || !spacedHeadersNull {
		t.Errorf("payload type %s, header k %q, spaced headers NULL %v", payloadType, headerValue, spacedHeadersNull)
	}
	for id, typ := range map[string]string{"typed": "T", "typed ": "t"} {
		if got, err := b.store.Get(ctx, id); err != nil || got.Type != typ {
			t.Errorf("Get(%q) = %q, %v; want type %s", id, got.Type, err, typ)
		}
	}
	if _, err := b.store.Get(ctx, "TYPED"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Get(TYPED) = %v, want ErrNotFound", err)
	}
	if n, err := b.store.CountDead(ctx, outbox.DeadFilter{EventType: "t"}); err != nil || n != 0 {
		t.Errorf("CountDead(t) = %d, %v", n, err)
	}

	// finished_at is set on DONE and DEAD rows only.
	doneAt := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	if _, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"typed"}, DoneAt: doneAt}); err != nil {
		t.Fatal(err)
	}
	finished := map[string]sql.NullTime{}
	rows, err := b.db.QueryContext(ctx, `SELECT event_id, finished_at FROM `+b.quoted())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var at sql.NullTime
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		finished[id] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if f := finished["typed"]; !f.Valid || !f.Time.Equal(doneAt) || finished["typed "].Valid {
		t.Errorf("finished_at = %v", finished)
	}
}

// TestMySQLLargeBatch writes a batch larger than the server's max_allowed_packet with the
// driver's client-side interpolation, where each statement is one packet: the store
// splits it into statements that fit.
func TestMySQLLargeBatch(t *testing.T) {
	t.Parallel()
	db := openMySQL(t, func(cfg *mysql.Config) { cfg.InterpolateParams = true })
	b := setupStore(t, db, outbox.MySQL, testdb.IsolatedTable(t, db, outbox.MySQL.Name()))
	ctx := t.Context()
	var maxPacket int64
	if err := db.QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&maxPacket); err != nil {
		t.Fatal(err)
	}
	// 1 MiB payloads full of quotes, which interpolation escapes.
	payload := json.RawMessage(`{"q":"` + strings.Repeat(`\"`, (outbox.DefaultMaxPayloadBytes-8)/2) + `"}`)
	n := int(maxPacket/int64(len(payload))) + 4
	events := make([]outbox.Event, n)
	for i := range events {
		events[i] = testEvent(fmt.Sprintf("big-%03d", i), time.Now())
		events[i].Payload = payload
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: events}); err != nil {
		t.Fatalf("Insert of %d events of %d bytes (max_allowed_packet %d): %v", n, len(payload), maxPacket, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.Stats(ctx)
	if err != nil || st.Counts[outbox.StatusNew] != int64(n) {
		t.Fatalf("Stats = %+v, %v; want %d NEW", st, err, n)
	}
	got, err := b.store.Get(ctx, events[n-1].ID)
	if err != nil || !json.Valid(got.Payload) || len(got.Payload) < len(payload)-8 {
		t.Fatalf("Get = %d bytes, %v", len(got.Payload), err)
	}
}

// TestMySQLQueriesUseIndexes checks that the indexes serve the queries they were made
// for, as the MySQL dialect builds them (see the golden tests), on a table with enough
// rows in every status for the optimizer to choose.
func TestMySQLQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx := t.Context()
	base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []outbox.Event
	var done []string
	for i := range 2000 {
		e := testEvent(fmt.Sprintf("e-%05d", i), base.Add(time.Duration(i)*time.Second))
		e.Type = fmt.Sprint("T", i%5)
		events = append(events, e)
		if i%10 < 7 {
			done = append(done, e.ID)
		}
	}
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: events}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: done, DoneAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i := 7; i < 2000; i += 10 {
		if _, err := b.store.MarkDead(ctx, storage.MarkDeadParams{ID: events[i].ID, DeadAt: base, Reason: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	var ordered []outbox.Event
	for i := range 400 {
		e := testEvent(fmt.Sprintf("o-%05d", i), base)
		e.OrderKey = fmt.Sprint("K", i%40)
		ordered = append(ordered, e)
	}
	if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: ordered}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.ExecContext(ctx, `ANALYZE TABLE `+b.quoted()); err != nil {
		t.Fatal(err)
	}
	t0 := "'2031-01-01 00:10:00.000000'"
	type check struct {
		key       string
		rangeScan bool // the keyset condition must bound the scan, not only filter it
	}
	cases := map[string]check{
		// The poller's scan walks the pending index (the claim's) in its order: no sort of
		// the due rows.
		`SELECT event_id FROM ` + b.quoted() + " FORCE INDEX (`outbox_event_pending_idx`) WHERE due_at <= " + t0 +
			` AND created_at <= ` + t0 + ` ORDER BY due_at, created_at, event_id LIMIT 10`: {key: "pending_idx", rangeScan: true},
		// The next batch of a poll cycle reads on after the last row of the one before.
		`SELECT event_id FROM ` + b.quoted() + " FORCE INDEX (`outbox_event_pending_idx`) WHERE due_at <= " + t0 +
			` AND created_at <= ` + t0 + ` AND (due_at > ` + t0 + ` OR due_at = ` + t0 + ` AND (created_at > ` + t0 +
			` OR created_at = ` + t0 + ` AND event_id > 'x')) ORDER BY due_at, created_at, event_id LIMIT 10`: {key: "pending_idx", rangeScan: true},
		// A cycle starts at the low-water mark.
		`SELECT event_id FROM ` + b.quoted() + " FORCE INDEX (`outbox_event_pending_idx`) WHERE due_at <= " + t0 +
			` AND created_at <= ` + t0 + ` AND due_at >= ` + t0 + ` ORDER BY due_at, created_at, event_id LIMIT 10`: {key: "pending_idx", rangeScan: true},
		// A MultiNode claim's read from the low-water mark (ClaimParams.DueFrom).
		`SELECT event_id FROM ` + b.quoted() + " FORCE INDEX (`outbox_event_pending_idx`) WHERE due_at <= " + t0 + ` AND due_at >= ` + t0 +
			` AND created_at <= ` + t0 + ` AND (locked_until IS NULL OR locked_until < ` + t0 + `) ORDER BY due_at, created_at, event_id LIMIT 10`: {key: "pending_idx", rangeScan: true},
		`SELECT status, COUNT(*), MIN(created_at) FROM ` + b.quoted() + ` GROUP BY status`:                {key: "dead_idx"},
		`SELECT event_id FROM ` + b.quoted() + ` WHERE status = 3 ORDER BY created_at, event_id LIMIT 10`: {key: "dead_idx"},
		`SELECT event_id FROM ` + b.quoted() + ` WHERE status = 3 AND (created_at > ` + t0 + ` OR (created_at = ` + t0 +
			` AND event_id > 'x')) ORDER BY created_at, event_id LIMIT 10`: {key: "dead_idx", rangeScan: true},
		`SELECT event_id FROM ` + b.quoted() + ` WHERE status = 3 AND event_type = 'T2' ORDER BY created_at, event_id LIMIT 10`:  {key: "dead_idx"},
		`SELECT COUNT(*) FROM ` + b.quoted() + ` WHERE status = 3`:                                                               {key: "dead_idx"},
		`UPDATE ` + b.quoted() + ` SET status = 0 WHERE status = 3 AND event_type = 'T2' ORDER BY created_at, event_id LIMIT 10`: {key: "dead_idx"},
		`DELETE FROM ` + b.quoted() + ` WHERE finished_at < ` + t0 + ` ORDER BY finished_at, event_id LIMIT 10`:                  {key: "finished_idx", rangeScan: true},
		`UPDATE ` + b.quoted() + ` SET status = 1 WHERE event_id IN ('e-00001', 'e-00002') AND status <> 1`:                      {key: "PRIMARY"},
	}
	for q, c := range cases {
		plan := mysqlPlan(t, b.db, q)
		if len(plan) != 1 || !strings.HasSuffix(plan[0]["key"], c.key) || c.rangeScan && plan[0]["type"] != "range" ||
			strings.Contains(plan[0]["Extra"], "filesort") {
			t.Errorf("%s\nplan %v, want key %s (range scan %v) without a sort", q, plan, c.key, c.rangeScan)
		}
	}
	// Promote (with keys, and the sweep) reads every key's head and blocker through order_idx,
	// then updates the heads by primary key; a writer probes its keys there: no table scan.
	heads := func(keys, limit string) string {
		return `SELECT w.event_id FROM ` + b.quoted() + ` w WHERE ` + keys +
			` AND w.status = 4 AND w.order_seq = (SELECT MIN(m.order_seq) FROM ` + b.quoted() +
			" m FORCE INDEX (`outbox_event_order_idx`) WHERE m.order_open_key = w.order_open_key AND m.status = 4) AND NOT EXISTS (SELECT 1 FROM " + b.quoted() +
			" a FORCE INDEX (`outbox_event_order_idx`) WHERE a.order_open_key = w.order_open_key AND a.status IN (0, 2, 3)) LIMIT " + limit
	}
	keyTable := strings.TrimSuffix(b.quoted(), "`") + "_key`"
	for _, q := range []string{heads(`w.order_open_key IN ('K1', 'K2')`, "2"), heads(`w.order_open_key IS NOT NULL`, "1000"),
		// A writer's read of its keys before it locks them.
		"SELECT k.order_key, k.last_seq, TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', k.updated_at), EXISTS (SELECT 1 FROM " + b.quoted() +
			" e FORCE INDEX (`outbox_event_order_idx`) WHERE e.order_open_key = k.order_key) FROM " + keyTable + " k WHERE k.order_key IN ('K1', 'K2')",
		`UPDATE ` + b.quoted() + ` SET status = 0 WHERE event_id IN ('e-00001', 'e-00002') AND status = 4`,
		// The promote of finished keys, which also reads the keys it finds idle.
		"SELECT p.event_id, NULL, NULL, NULL FROM (SELECT w.event_id FROM (SELECT (SELECT f.event_id FROM " + b.quoted() +
			" f FORCE INDEX (`outbox_event_order_idx`) WHERE f.order_open_key = k.order_key ORDER BY f.order_seq LIMIT 1) AS id FROM " + keyTable +
			" k WHERE k.order_key IN ('K1', 'K2')) h JOIN " + b.quoted() + " w ON w.event_id = h.id WHERE w.status = 4 AND NOT EXISTS (SELECT 1 FROM " +
			b.quoted() + " a FORCE INDEX (`outbox_event_order_idx`) WHERE a.order_open_key = w.order_open_key AND a.status IN (0, 2, 3)) LIMIT 2) p" +
			" UNION ALL SELECT NULL, k.order_key, k.last_seq, TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', k.updated_at) FROM " + keyTable +
			" k WHERE k.order_key IN ('K1', 'K2') AND NOT EXISTS (SELECT 1 FROM " + b.quoted() +
			" e FORCE INDEX (`outbox_event_order_idx`) WHERE e.order_open_key = k.order_key)",
		// A key purge's batch: a stretch of the key table's primary key.
		"DELETE FROM " + keyTable + " WHERE order_key > 'K1' AND order_key <= 'K3' AND updated_at < " + t0 + " AND NOT EXISTS (SELECT 1 FROM " +
			b.quoted() + " e WHERE e.order_open_key = " + keyTable + ".order_key)"} {
		plan := mysqlPlan(t, b.db, q)
		for _, row := range plan {
			switch row["table"] {
			case "m", "a", "e", "f":
				if !strings.HasSuffix(row["key"], "order_idx") {
					t.Errorf("%s\nplan %v: table %s does not use order_idx", q, plan, row["table"])
				}
			}
			// w may read the WAITING rows through dead_idx (status first); the key table
			// is scanned when it is tiny.
			if row["type"] == "ALL" && !strings.HasPrefix(row["table"], "<derived") && !strings.HasSuffix(row["table"], "_key") {
				t.Errorf("%s\nplan %v: full scan of %s", q, plan, row["table"])
			}
		}
	}
}

// mysqlPlan returns the rows of EXPLAIN q, each by column name.
func mysqlPlan(t *testing.T, db *sql.DB, q string) []map[string]string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN "+q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var plan []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, col := range cols {
			row[col] = vals[i].String
		}
		plan = append(plan, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestMySQLMigrateUpgradesAVersionOneTable: a table made by the first migration alone
// (as an earlier release made it), holding rows, is refused by Start's connection check
// with a *ConfigError naming the missing column, and MigrateTable upgrades it in place:
// every row kept, the poller's scan in order.
func TestMySQLMigrateUpgradesAVersionOneTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := testdb.NewMySQLDB(t)
	table := testdb.IsolatedTable(t, db, outbox.MySQL.Name())
	v1, err := fs.ReadFile(outbox.Migrations(outbox.MySQL), "0001_create_outbox_event.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	create := strings.ReplaceAll(string(v1), "`outbox_event`", quoteTable(outbox.MySQL, table))
	for _, stmt := range strings.Split(create, ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("version 1 DDL: %v", err)
		}
	}
	store, err := sqlStore(db, outbox.MySQL, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []outbox.Event
	for i := range 50 {
		// Created in reverse ID order, so that the scan's order is created_at's.
		events = append(events, testEvent(fmt.Sprintf("e-%02d", 49-i), base.Add(time.Duration(i)*time.Second)))
	}
	if _, err := store.Insert(ctx, db, storage.InsertParams{Events: events}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"e-49", "e-48"}, DoneAt: base}); err != nil {
		t.Fatal(err)
	}
	var cfgErr *outbox.ConfigError
	if err := store.CheckConnection(ctx); !errors.As(err, &cfgErr) || cfgErr.Field != "Table" ||
		!strings.Contains(err.Error(), "pending_created_at") {
		t.Fatalf("CheckConnection on a version 1 table = %v, want a *ConfigError for Table naming pending_created_at", err)
	}
	if err := outbox.MigrateTable(ctx, db, outbox.MySQL, table); err != nil {
		t.Fatalf("MigrateTable upgrade: %v", err)
	}
	if err := outbox.MigrateTable(ctx, db, outbox.MySQL, table); err != nil {
		t.Fatalf("MigrateTable again: %v", err)
	}
	if err := store.CheckConnection(ctx); err != nil {
		t.Fatalf("CheckConnection after the upgrade: %v", err)
	}
	batch, err := store.Pending(ctx, storage.PendingParams{Now: base.Add(time.Hour), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range batch.Events {
		got = append(got, e.ID)
	}
	want := []string{}
	for i := 2; i < 50; i++ {
		want = append(want, fmt.Sprintf("e-%02d", 49-i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Pending after the upgrade = %v, want the 48 pending rows oldest first %v", got, want)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quoteTable(outbox.MySQL, table)).Scan(&n); err != nil || n != 50 {
		t.Fatalf("rows after the upgrade: %d, %v; want 50", n, err)
	}
}

// stripComments removes the "-- " comment lines of a migration statement.
// splitMigration splits a migration file into its statements the way goose does: at
// each semicolon that ends a line, except inside a StatementBegin … StatementEnd block
// (a trigger, whose body has semicolons of its own), which is one statement.
func splitMigration(text string) []string {
	var stmts []string
	var cur strings.Builder
	block := false
	for line := range strings.SplitSeq(text, "\n") {
		switch strings.TrimSpace(line) {
		case "-- +goose StatementBegin":
			block = true
			continue
		case "-- +goose StatementEnd":
			block = false
			if s := strings.TrimSpace(cur.String()); s != "" {
				stmts = append(stmts, s)
			}
			cur.Reset()
			continue
		}
		cur.WriteString(line + "\n")
		if !block && strings.HasSuffix(line, ";") {
			if s := strings.TrimSpace(cur.String()); s != "" {
				stmts = append(stmts, s)
			}
			cur.Reset()
		}
	}
	if s := cur.String(); strings.TrimSpace(stripComments(s)) != "" {
		stmts = append(stmts, strings.TrimSpace(s))
	}
	return stmts
}

func stripComments(stmt string) string {
	var out []string
	for line := range strings.SplitSeq(stmt, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
