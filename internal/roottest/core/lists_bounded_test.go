package outbox_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
)

// pageLoadReadBound is how many rows one load of the admin page (adminPageLoad) may
// read by any one way (index entries in order, lookups, rows fetched, temporary
// rows), from the configuration: at most 30 statements (the overview's window and
// count per status, its oldest pending event and blocked keys; two counts, three list
// pages), each of which reads at most MaxCountRows (= MaxScanRows) rows of an index
// and groups at most as many.
const pageLoadReadBound = 30 * outbox.MaxCountRows

// adminPageLoad makes the reads of one load of the admin page with the Dead tab open
// and a type filter set, through dead: the overview, the Dead tab's count with its
// groups, unfiltered and filtered, its first page, the list of the type and a search of
// the error text. It checks what a million-row table (fillSQL) must give: counts that
// stopped at MaxCountRows.
func adminPageLoad(t *testing.T, dead *outbox.Events) {
	t.Helper()
	ctx := t.Context()
	o, err := dead.Overview(ctx)
	if err != nil {
		t.Fatalf("Overview: %v", err)
	}
	for st, c := range o.Counts {
		if c.N > outbox.MaxCountRows {
			t.Errorf("Overview: %s counted %d, more than MaxCountRows", st, c.N)
		}
	}
	if c := o.Counts[outbox.StatusDone]; !c.AtLeast || c.N == 0 {
		t.Errorf("Overview: DONE %+v; want a count that stopped at its bound", c)
	}
	if o.OldestPending.IsZero() {
		t.Error("Overview: no oldest pending event")
	}
	for _, f := range []outbox.EventFilter{{}, {EventType: "T3"}} {
		c, err := dead.Count(ctx, outbox.EventCountQuery{Status: outbox.StatusDead, EventFilter: f, Groups: true})
		if err != nil || c.N > outbox.MaxCountRows {
			t.Fatalf("CountEvents(DEAD, %+v) = %+v, %v", f, c.EventCount, err)
		}
	}
	if _, err := dead.List(ctx, outbox.EventQuery{Status: outbox.StatusDead}); err != nil {
		t.Fatalf("Events: %v", err)
	}
	if _, err := dead.ListDead(ctx, outbox.DeadQuery{DeadFilter: outbox.DeadFilter{EventType: "T3"}}); err != nil {
		t.Fatalf("List: %v", err)
	}
	if _, err := dead.List(ctx, outbox.EventQuery{Status: outbox.StatusDead, EventFilter: outbox.EventFilter{ErrorContains: "TIMEOUT"}}); err != nil {
		t.Fatalf("Events by error: %v", err)
	}
}

// checkPageLoadBounded runs adminPageLoad on b's filled table and counts the rows the
// database read for it, each way at most pageLoadReadBound: on MariaDB its session's
// handler reads (Handler_read_rnd_next would count a full scan's rows), on PostgreSQL
// the table's statistics (no sequential scan at all; tuples fetched and index entries
// read). SQLite reports neither; its plans are checked by TestEventListsUseIndexes.
func checkPageLoadBounded(t *testing.T, b sqlBundle) {
	t.Helper()
	ob, err := outbox.New(nil, outbox.Config{Store: b.store, Mode: outbox.WriterOnly, PurgeInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if b.d == outbox.SQLite {
		adminPageLoad(t, ob.Events())
		return
	}
	// One connection: the reads and the counters of its session are the same.
	b.db.SetMaxOpenConns(1)
	ctx := t.Context()
	before := readCounters(ctx, t, b)
	adminPageLoad(t, ob.Events())
	after := readCounters(ctx, t, b)
	for name, v := range after {
		d := v - before[name]
		t.Logf("page load: %s %d", name, d)
		switch {
		case name == "seq_scan" && d != 0:
			t.Errorf("page load: %d sequential scans of the table", d)
		case d > pageLoadReadBound:
			t.Errorf("page load: %s %d, more than %d", name, d, pageLoadReadBound)
		}
	}
}

// readCounters returns the read counters of b's database: MariaDB's Handler_read_*
// of the session (the pool's one connection; a GROUP BY's temporary table counts
// too), PostgreSQL's statistics of the table.
func readCounters(ctx context.Context, t *testing.T, b sqlBundle) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if b.d == outbox.MySQL {
		rows, err := b.db.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name, value string
			if err := rows.Scan(&name, &value); err != nil {
				t.Fatal(err)
			}
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The backend's statistics reach shared memory when it is idle after this call;
	// the next statement reads them afresh (each statement is a transaction).
	if _, err := b.db.ExecContext(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	schema, table, _ := strings.Cut(b.table, ".")
	var seqScan, seqRead, fetched, indexRead sql.NullInt64
	err := b.db.QueryRowContext(ctx, `SELECT t.seq_scan, t.seq_tup_read, t.idx_tup_fetch,
		(SELECT SUM(i.idx_tup_read) FROM pg_stat_user_indexes i WHERE i.relid = t.relid)
		FROM pg_stat_user_tables t WHERE t.schemaname = $1 AND t.relname = $2`, schema, table).Scan(&seqScan, &seqRead, &fetched, &indexRead)
	if err != nil {
		t.Fatal(err)
	}
	out["seq_scan"], out["seq_tup_read"], out["idx_tup_fetch"], out["idx_tup_read"] = seqScan.Int64, seqRead.Int64, fetched.Int64, indexRead.Int64
	return out
}
