package outbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// listCase is one entry of core/internal/sqlstore/testdata/list_queries.json: a statement of the admin's
// lists exactly as the dialect builds it (core's TestListQueriesGolden keeps the file
// in step with the builder) and the index its plan must use.
type listCase struct {
	Dialect string `json:"dialect"`
	Name    string `json:"name"`
	SQL     string `json:"sql"`
	Args    []struct {
		S *string    `json:"s"`
		I *int64     `json:"i"`
		T *time.Time `json:"t"`
	} `json:"args"`
	Use string `json:"use"`
}

// listRows is the table size of TestEventListsUseIndexes: a million rows (about ten
// seconds to write on each database), 100,000 with -short, where PostgreSQL may well
// sort the few thousand rows of a status instead of walking its index.
func listRows() int {
	if testing.Short() {
		return 100_000
	}
	return 1_000_000
}

// fillSQL returns the statement that fills the outbox table of b with n rows: created a
// millisecond apart from 2031-01-01 in ID order, of 5 types and 100,000 aggregates; by
// i % 100: 0-89 DONE, 90-94 NEW, 95-96 RETRY, 97 DEAD, 98 WAITING, 99 DISCARDED.
func fillSQL(b sqlBundle, n int) string {
	status := "CASE WHEN m < 90 THEN 1 WHEN m < 95 THEN 0 WHEN m < 97 THEN 2 WHEN m = 97 THEN 3 WHEN m = 98 THEN 4 ELSE 6 END"
	cols := "event_id, event_type, aggregate_type, aggregate_id, payload, status, attempts, last_error, available_at, created_at, done_at, order_key, order_seq"
	switch b.d {
	case outbox.Postgres:
		created := "TIMESTAMPTZ '2031-01-01 00:00:00+00' + i * INTERVAL '1 millisecond'"
		return "INSERT INTO " + b.quoted() + " (" + cols + ") SELECT 'e-' || lpad(i::text, 7, '0'), 'T' || (i % 5), 'Thing', 'agg-' || (i % 100000), '{}', " +
			status + ", 0, CASE WHEN m = 97 THEN 'connection timeout' END, " + created + ", " + created +
			", CASE WHEN m < 90 OR m >= 97 THEN " + created + " + INTERVAL '1 second' END, CASE WHEN m = 98 THEN 'k-' || i END, CASE WHEN m = 98 THEN 1 END" +
			fmt.Sprintf(" FROM (SELECT i, i %% 100 AS m FROM generate_series(0, %d) AS i) s", n-1)
	case outbox.MySQL:
		created := "TIMESTAMP '2031-01-01 00:00:00' + INTERVAL i * 1000 MICROSECOND"
		return "INSERT INTO " + b.quoted() + " (" + cols + ") SELECT CONCAT('e-', LPAD(i, 7, '0')), CONCAT('T', i % 5), 'Thing', CONCAT('agg-', i % 100000), '{}', " +
			status + ", 0, CASE WHEN m = 97 THEN 'connection timeout' END, " + created + ", " + created +
			", CASE WHEN m < 90 OR m >= 97 THEN " + created + " + INTERVAL 1 SECOND END, CASE WHEN m = 98 THEN CONCAT('k-', i) END, CASE WHEN m = 98 THEN 1 END" +
			fmt.Sprintf(" FROM (SELECT seq AS i, seq %% 100 AS m FROM seq_0_to_%d) s", n-1)
	default:
		created := "strftime('%Y-%m-%dT%H:%M:%f', '2031-01-01', '+' || (i / 1000.0) || ' seconds') || '000Z'"
		done := "strftime('%Y-%m-%dT%H:%M:%f', '2031-01-01', '+' || (i / 1000.0 + 1) || ' seconds') || '000Z'"
		return fmt.Sprintf("WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d) ", n-1) +
			"INSERT INTO " + b.quoted() + " (" + cols + ") SELECT 'e-' || printf('%07d', i), 'T' || (i % 5), 'Thing', 'agg-' || (i % 100000), '{}', " +
			status + ", 0, CASE WHEN m = 97 THEN 'connection timeout' END, " + created + ", " + created +
			", CASE WHEN m < 90 OR m >= 97 THEN " + done + " END, CASE WHEN m = 98 THEN 'k-' || i END, CASE WHEN m = 98 THEN 1 END" +
			" FROM (SELECT i, i % 100 AS m FROM c) s"
	}
}

// TestEventListsUseIndexes: on a table of a million rows (listRows), every statement of
// the admin's lists (Events.List) and counts (Events.Count and
// Overview) reads the index of its list in the list's order and stops after its LIMIT
// or at its window's end: the plan names the index and has no sort (but of a windowed
// page's or a count's rows, see windowed below) and no scan of the table. It also runs
// each statement and logs how long it took (not asserted).
//
// It does not run beside the package's other tests (no t.Parallel at the top): writing
// three million rows would slow down the tests that measure time against a deadline.
func TestEventListsUseIndexes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "core", "internal", "sqlstore", "testdata", "list_queries.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []listCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t)
			ctx := t.Context()
			// The aggregate lists read the opt-in aggregate index.
			if err := outbox.MigrateAggregateIndex(ctx, b.db, b.d, b.table); err != nil {
				t.Fatal(err)
			}
			n := listRows()
			start := time.Now()
			if _, err := b.db.ExecContext(ctx, fillSQL(b, n)); err != nil {
				t.Fatalf("fill: %v", err)
			}
			// VACUUM too on PostgreSQL, as autovacuum would on a table this size: an
			// index-only read is cheap only on pages the visibility map marks all
			// visible, and a table just written has none, so that the planner sorted the
			// 10,000 WAITING rows for a count's window rather than read their index.
			analyze := "VACUUM ANALYZE " + b.quoted()
			switch b.d {
			case outbox.SQLite:
				analyze = "ANALYZE"
			case outbox.MySQL:
				analyze = "ANALYZE TABLE " + b.quoted()
			}
			if _, err := b.db.ExecContext(ctx, analyze); err != nil {
				t.Fatal(err)
			}
			if b.d == outbox.Postgres {
				vacuumAllVisible(t, b, analyze)
			}
			t.Logf("%d rows written and analyzed in %s", n, time.Since(start).Round(time.Millisecond))
			table := `"outbox_event"`
			if b.d == outbox.MySQL {
				table = "`outbox_event`"
			}
			// A page whose list has a window (a filter outside its index) reads at most
			// ScanLimit rows of the index, between the cursor and the window's end: a
			// sort of those is bounded, so it may sort them (SQLite, with statistics,
			// did for a filtered RETRY page); its window statement may not.
			// So may a count: a windowed one counts at most ScanLimit rows of the index
			// up to its window's end, another at most ScanLimit rows in a subquery with
			// that LIMIT, and either may group what it counted.
			windowed := map[string]bool{}
			for _, c := range cases {
				if name, ok := strings.CutSuffix(c.Name, " (window)"); ok && c.Dialect == b.d.Name() {
					windowed[name+" (page)"] = true
				}
				if strings.HasSuffix(c.Name, " (count)") {
					windowed[c.Name] = true
				}
			}
			ran := 0
			for _, c := range cases {
				if c.Dialect != b.d.Name() {
					continue
				}
				ran++
				q := strings.ReplaceAll(c.SQL, table, b.quoted())
				var args []any
				for _, a := range c.Args {
					switch {
					case a.S != nil:
						args = append(args, *a.S)
					case a.I != nil:
						args = append(args, *a.I)
					default:
						args = append(args, *a.T)
					}
				}
				plan := explain(t, b, q, args)
				used := false
				for _, use := range strings.Split(c.Use, "|") {
					used = used || strings.Contains(plan, "outbox_event"+use)
				}
				if !used {
					t.Errorf("%s: the plan does not use %s:\n%s\n%s", c.Name, c.Use, q, plan)
				}
				for _, bad := range avoidInPlan(b.d) {
					if testing.Short() && bad != "Seq Scan" && b.d == outbox.Postgres {
						continue
					}
					// One aggregate's rows, found by the index, may be sorted: there are few.
					// So may one order key's rows of one order_seq (fan-out rows) by
					// event_id, after the index gave them in order_seq order.
					if (strings.HasPrefix(c.Name, "aggregate") || strings.HasPrefix(c.Name, "order key") || windowed[c.Name]) &&
						(bad == "Sort" || bad == "Bitmap" || bad == "TEMP B-TREE") {
						continue
					}
					// A count's window may sort a status whose rows are about as many as
					// the window (PostgreSQL sorted the 10,000 WAITING rows for the
					// 10,000th rather than read their index): the plan's estimate of
					// what it sorts bounds it.
					// So may the blocked keys' statement, which reads at most MaxCountRows rows
					// of the order index and wants each row's status and created_at from the
					// heap: PostgreSQL, estimating the open ordered rows as the product of
					// two selectivities (about 1,000 of the 10,000 WAITING rows here), may
					// read them by bitmap and sort them instead of walking the index (1 CI
					// run of many did). As for a count's window, the estimate bounds what
					// it sorts; with an estimate above the LIMIT it walks the index.
					if (strings.HasPrefix(c.Name, "count ") && strings.HasSuffix(c.Name, " (window)") || strings.HasPrefix(c.Name, "blocked keys")) &&
						b.d == outbox.Postgres &&
						(bad == "Sort" || bad == "Bitmap") && planRowsAtMost(plan, 2*outbox.MaxCountRows) {
						continue
					}
					if inPlan(b.d, plan, bad) {
						t.Errorf("%s: the plan has %q:\n%s\n%s", c.Name, bad, q, plan)
					}
				}
				began := time.Now()
				rows, err := b.db.QueryContext(ctx, q, args...)
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				k := 0
				for rows.Next() {
					k++
				}
				if err := rows.Close(); err != nil {
					t.Fatal(err)
				}
				t.Logf("%-40s %3d rows in %s", c.Name, k, time.Since(began).Round(time.Microsecond))
			}
			if ran == 0 {
				t.Fatal("no list statement for this dialect in list_queries.json")
			}
			checkPageLoadBounded(t, b)
		})
	}
}

// vacuumAllVisible repeats vacuum until PostgreSQL's visibility map marks nearly every
// page of b's table all-visible, as autovacuum leaves a table that is not being
// written. A VACUUM cannot mark a page while a transaction older than its rows is
// open anywhere on the server, and the tests of this package run in parallel on one
// server: under the race detector their transactions last long enough that a single
// VACUUM left pages unmarked, and the planner, costing the index-only reads of those
// pages as heap reads, sorted (the blocked keys' statement got Sort and Bitmap). The
// bound is that of the other tests' transactions, which end.
func vacuumAllVisible(t *testing.T, b sqlBundle, vacuum string) {
	t.Helper()
	ctx := t.Context()
	for attempt := 1; ; attempt++ {
		var visible float64
		err := b.db.QueryRowContext(ctx, `SELECT relallvisible::float8 / GREATEST(relpages, 1) FROM pg_class WHERE oid = $1::regclass`,
			b.quoted()).Scan(&visible)
		if err != nil {
			t.Fatal(err)
		}
		if visible >= 0.95 {
			if attempt > 1 {
				t.Logf("VACUUM ran %d times before %.0f%% of the pages were all-visible", attempt, 100*visible)
			}
			return
		}
		if attempt == 60 {
			t.Fatalf("after %d VACUUMs only %.0f%% of the pages are all-visible: a transaction stays open on the server", attempt, 100*visible)
		}
		time.Sleep(time.Second)
		if _, err := b.db.ExecContext(ctx, vacuum); err != nil {
			t.Fatal(err)
		}
	}
}

// avoidInPlan is what a list plan must not show: a sort (of a status's rows), or a read
// of the whole table.
func avoidInPlan(d outbox.Dialect) []string {
	switch d {
	case outbox.Postgres:
		return []string{"Sort", "Seq Scan", "Bitmap"}
	case outbox.MySQL:
		return []string{"filesort", "ALL"}
	default:
		return []string{"TEMP B-TREE", "SCAN outbox_event\n", "SCAN outbox_event;"}
	}
}

// planRowsAtMost reports whether every node of a PostgreSQL plan estimates at most n
// rows.
func planRowsAtMost(plan string, n int) bool {
	for _, m := range regexp.MustCompile(`rows=(\d+)`).FindAllStringSubmatch(plan, -1) {
		if k, err := strconv.Atoi(m[1]); err != nil || k > n {
			return false
		}
	}
	return true
}

// inPlan reports whether plan has bad. On MySQL a full scan ("ALL") counts on a table
// only, not on a derived table (a subquery's rows, "<derived2>"), which a count's
// LIMIT bounds.
func inPlan(d outbox.Dialect, plan, bad string) bool {
	if d != outbox.MySQL || bad != "ALL" {
		return strings.Contains(plan, bad)
	}
	for _, line := range strings.Split(plan, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "ALL" && !strings.HasPrefix(f[0], "<") {
			return true
		}
	}
	return false
}

// explain returns the plan of q: its lines (PostgreSQL, SQLite) or, on MySQL, the
// table, type, key and Extra columns of each row.
func explain(t *testing.T, b sqlBundle, q string, args []any) string {
	t.Helper()
	prefix := "EXPLAIN "
	if b.d == outbox.SQLite {
		prefix = "EXPLAIN QUERY PLAN "
	}
	rows, err := b.db.QueryContext(t.Context(), prefix+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var sb strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			switch {
			case b.d == outbox.MySQL && c != "table" && c != "type" && c != "key" && c != "Extra":
				continue
			case b.d == outbox.SQLite && c != "detail":
				continue
			}
			fmt.Fprintf(&sb, "%v ", asText(vals[i]))
		}
		sb.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func asText(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// TestAggregateIndexIsOptIn: the schema has no aggregate index (version
// aggregate_index_dropped dropped the admin version's), so a list or count of one
// aggregate's events is refused with an error matching errors.ErrUnsupported that
// names the fix, where it would read every row; MigrateAggregateIndex (idempotent)
// creates it, and the list reads it. A table migrated before that version, with rows,
// keeps its lists by aggregate on the old index until MigrateTable drops it.
func TestAggregateIndexIsOptIn(t *testing.T) {
	t.Parallel()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t)
			ctx := t.Context()
			base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
			var events []outbox.Event
			for i := range 6 {
				events = append(events, outbox.Event{ID: fmt.Sprintf("a-%d", i), Type: "T", AggregateType: "Order", AggregateID: fmt.Sprint("o-", i%2),
					Payload: json.RawMessage(`{}`), CreatedAt: base.Add(time.Duration(i) * time.Second)})
			}
			if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}
			ob, err := outbox.New(b.db, outbox.Config{Dialect: b.d, Table: b.table, Mode: outbox.WriterOnly, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			q := outbox.EventQuery{Status: outbox.StatusNew, EventFilter: outbox.EventFilter{AggregateID: "o-1"}}
			list := func() (string, error) {
				page, err := ob.Events().List(ctx, q)
				var ids []string
				for _, e := range page.Events {
					ids = append(ids, e.ID)
				}
				return strings.Join(ids, " "), err
			}
			if _, err := list(); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "outbox.MigrateAggregateIndex") {
				t.Fatalf("list by aggregate without the index: %v; want errors.ErrUnsupported naming outbox.MigrateAggregateIndex", err)
			}
			if _, err := ob.Events().Count(ctx, outbox.EventCountQuery{Status: q.Status, EventFilter: q.EventFilter}); !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("count by aggregate without the index: %v; want errors.ErrUnsupported", err)
			}
			// Lists without an aggregate are not affected.
			if page, err := ob.Events().List(ctx, outbox.EventQuery{Status: outbox.StatusNew}); err != nil || len(page.Events) != 6 {
				t.Fatalf("list without an aggregate: %d events, %v", len(page.Events), err)
			}
			for range 2 {
				if err := outbox.MigrateAggregateIndex(ctx, b.db, b.d, b.table); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := list(); err != nil || got != "a-1 a-3 a-5" {
				t.Fatalf("list by aggregate with the index: %q, %v", got, err)
			}
			if have, latest, err := outbox.SchemaVersion(ctx, b.db, b.d, b.table); err != nil || have != latest {
				t.Fatalf("with the opt-in index: version %d of %d, %v", have, latest, err)
			}

			// A table of the version before, with rows: the admin version's index serves
			// the lists until MigrateTable drops it.
			old := b.table + "_old"
			if err := outbox.MigrateTable(ctx, b.db, b.d, old); err != nil {
				t.Fatal(err)
			}
			create := map[string]string{
				"postgres": `CREATE INDEX "outbox_event_old_aggregate_idx" ON ` + quoteTable(b.d, old) + ` (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL`,
				"sqlite":   `CREATE INDEX "outbox_event_old_aggregate_idx" ON "outbox_event_old" (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL`,
				"mysql":    "ALTER TABLE " + quoteTable(b.d, old) + " ADD INDEX `outbox_event_old_aggregate_idx` (aggregate_id, created_at, event_id)",
			}[b.d.Name()]
			if b.d == outbox.SQLite && strings.Contains(old, ".") {
				t.Fatalf("table %s: the SQLite statement assumes no schema", old)
			}
			if _, err := b.db.ExecContext(ctx, create); err != nil {
				t.Fatal(err)
			}
			oldStore, err := outbox.NewSQLStore(b.db, b.d, outbox.SQLStoreConfig{Table: old})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := oldStore.Insert(ctx, b.db, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}
			have, latest, err := outbox.SchemaVersion(ctx, b.db, b.d, old)
			if want := versionOf(t, b.d, "aggregate_index_dropped") - 1; err != nil || have != want {
				t.Fatalf("with the admin version's aggregate index: version %d of %d, %v; want %d", have, latest, err, want)
			}
			obOld, err := outbox.New(b.db, outbox.Config{Dialect: b.d, Table: old, Mode: outbox.WriterOnly, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if page, err := obOld.Events().List(ctx, q); err != nil || len(page.Events) != 3 {
				t.Fatalf("list by aggregate on the old index: %d events, %v", len(page.Events), err)
			}
			if err := outbox.MigrateTable(ctx, b.db, b.d, old); err != nil {
				t.Fatal(err)
			}
			if have, latest, err := outbox.SchemaVersion(ctx, b.db, b.d, old); err != nil || have != latest {
				t.Fatalf("after MigrateTable: version %d of %d, %v", have, latest, err)
			}
			if _, err := obOld.Events().List(ctx, q); !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("list by aggregate after the upgrade dropped the index: %v; want errors.ErrUnsupported", err)
			}
			if page, err := obOld.Events().List(ctx, outbox.EventQuery{Status: outbox.StatusNew}); err != nil || len(page.Events) != 6 {
				t.Fatalf("the rows after the upgrade: %d, %v", len(page.Events), err)
			}
		})
	}
}
