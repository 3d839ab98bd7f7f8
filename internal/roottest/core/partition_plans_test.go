package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	outboxpartition "github.com/outboxkit/outbox/core/partition"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestPartitionedPlans is a measurement, not a check: with OUTBOX_TEST_PARTITION_PLANS
// set (the rows, default 300000), it fills a partitioned table (the three days before
// today, see planNow; today's and tomorrow's partitions empty) and a plain one with the
// same rows, mostly DONE, some NEW, RETRY and DEAD, then runs
// the store's reads and writes on each through one connection that has auto_explain
// log every plan, with its actual rows, to the server's log
// (OUTBOX_TEST_POSTGRES_DIR/server.log), each preceded by SELECT 'MARK <table kind>
// <operation> <run>'. Each operation runs 7 times, so that the prepared statements
// that PostgreSQL plans generically from the 6th run on show that plan too.
func TestPartitionedPlans(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("OUTBOX_TEST_PARTITION_PLANS"))
	if n <= 0 {
		t.Skip("set OUTBOX_TEST_PARTITION_PLANS to the number of rows to measure the plans on a partitioned table")
	}
	ctx := t.Context()
	now := planNow()
	part := setupPartitioned(t, -3, 1, false)
	plainDB := testdb.NewPostgresDB(t)
	plain := setupStore(t, plainDB, outbox.Postgres, testdb.IsolatedTable(t, plainDB, outbox.Postgres.Name()))
	for _, b := range []sqlBundle{part, plain} {
		fillPlanRows(t, b, n, day(time.Now(), -3), now)
	}
	for _, c := range []struct {
		kind string
		b    sqlBundle
	}{{"partitioned", part}, {"plain", plain}} {
		explainOperations(t, c.kind, c.b, now)
	}
	// Cutoffs after every row: the partitions of the days before today go, each step
	// timed (no other load on the table).
	cut := time.Now().Add(time.Minute)
	rep, err := outboxpartition.Maintain(ctx, part.db, part.table, outboxpartition.Maintenance{
		Config: outboxpartition.Config{Period: testPeriod, Ahead: 1}, Now: now,
		Purge: storage.PurgeParams{Before: cut, DeadBefore: cut, UndeliveredBefore: cut},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("maintenance: dropped %v, kept %v, busy %v", rep.Dropped, rep.Kept, rep.Busy)
	for _, st := range rep.Steps {
		t.Logf("maintenance step %s %s: %s", st.Partition, st.Step, st.Took)
	}
}

// planNow is the time the plan tests take as now: an hour before today's partition
// begins, so that their rows, and the rows their operations write, lie in the three
// full partitions of the days before today whatever the time of day, and today's and
// tomorrow's partitions stay empty. With the real time, a run just after midnight put a
// few hundred rows in today's partition, which the planner rightly read sequentially.
func planNow() time.Time { return day(time.Now(), 0).Add(-time.Hour) }

// fillPlanRows writes n events to b's table, created from start to a minute before
// now, mostly DONE, some NEW (the newest 2,000), RETRY (one in 1,000) and DEAD (one in
// 1,000), then vacuums and analyzes it.
func fillPlanRows(t *testing.T, b sqlBundle, n int, start, now time.Time) {
	t.Helper()
	ctx := t.Context()
	span := now.Add(-time.Minute).Sub(start)
	for first := 0; first < n; first += 5000 {
		events := make([]outbox.Event, 0, 5000)
		for i := first; i < min(first+5000, n); i++ {
			created := start.Add(time.Duration(float64(span) * float64(i) / float64(n)))
			e := testEvent(ulidAt(created, i), created)
			e.AggregateID = "agg-" + strconv.Itoa(i%5000)
			events = append(events, e)
		}
		if _, err := b.store.Insert(ctx, b.db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{
		`UPDATE ` + b.quoted() + ` SET status = 1, done_at = created_at + INTERVAL '1 second'`,
		`UPDATE ` + b.quoted() + ` SET status = 3, done_at = NULL, last_error = 'x' WHERE right(event_id, 3) = '000'`,
		`UPDATE ` + b.quoted() + ` SET status = 2, done_at = NULL, available_at = created_at + INTERVAL '1 hour' WHERE right(event_id, 3) = '001'`,
		`UPDATE ` + b.quoted() + ` SET status = 0, done_at = NULL WHERE created_at > (SELECT created_at FROM ` + b.quoted() +
			` ORDER BY created_at DESC OFFSET 2000 LIMIT 1)`,
		`VACUUM ANALYZE ` + b.quoted(),
	} {
		if _, err := b.db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestPartitionedOperationsUseIndexes: every read and write of the store on a
// partitioned table with 200,000 rows in three partitions (the poll, the claim and
// MarkDone, a read by ID, the DEAD list and count, the admin's lists, a replay, an
// ordered key's writes and promotion, a fan-out split, the purge), each run 7 times so that PostgreSQL's generic plans run too, reads no row of
// any partition sequentially. Stats is left out: it counts every row, on a plain table
// too (one Seq Scan there). The planner may scan an empty partition (today's, the one ahead)
// sequentially, which reads no row: rows read are counted, not scans. The rows and
// the operations' writes are in the days before today (planNow), so that no partition
// that holds rows is small whatever the hour. It runs at 40,000 rows (about 13,000 a
// partition) and at 200,000: at 40,000 the claim's join read every
// partition sequentially (a hash join, cheaper by the planner's estimate than 100 probes
// of five primary keys) until the claim found its rows by an array of their IDs.
func TestPartitionedOperationsUseIndexes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{40000, 200000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			partitionedOperationsUseIndexes(t, n)
		})
	}
}

func partitionedOperationsUseIndexes(t *testing.T, n int) {
	ctx := t.Context()
	now := planNow()
	b := setupPartitioned(t, -3, 1, false)
	fillPlanRows(t, b, n, day(time.Now(), -3), now)
	seqRead := func() map[string]int64 {
		t.Helper()
		if _, err := b.db.ExecContext(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		rows, err := b.db.QueryContext(ctx, `SELECT s.relname, s.seq_tup_read FROM pg_stat_user_tables s
			JOIN pg_inherits i ON i.inhrelid = s.relid WHERE i.inhparent = to_regclass($1)`, b.quoted())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			out[name] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// One connection, so that its statistics are flushed before they are read.
	b.db.SetMaxOpenConns(1)
	before := seqRead()
	runOperations(t, "partitioned", b.db, b, now, func(op string) {
		after := seqRead()
		if len(after) != 5 {
			t.Fatalf("%d partitions, want 5", len(after))
		}
		for name, n := range after {
			if d := n - before[name]; d != 0 && op != "stats" {
				t.Errorf("%s: %d rows of partition %s read sequentially", op, d, name)
			}
		}
		before = after
	})
}

// explainOperations runs the store's operations on b's table through a store of one
// connection that logs each plan (see TestPartitionedPlans).
func explainOperations(t *testing.T, kind string, b sqlBundle, now time.Time) {
	ctx := t.Context()
	db, err := sql.Open("pgx", testdb.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	for _, s := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
		"SET auto_explain.log_level = warning", "SET auto_explain.log_buffers = on"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	runOperations(t, kind, db, b, now, nil)
}

// runOperations runs the store's operations on b's table through db, 7 times each,
// each preceded by SELECT 'MARK <kind> <operation> <run>', and calls after, when set,
// after each operation's runs.
func runOperations(t *testing.T, kind string, db *sql.DB, b sqlBundle, now time.Time, after func(op string)) {
	ctx := t.Context()
	s, err := sqlStore(db, outbox.Postgres, outbox.SQLStoreConfig{Table: b.table, QueryTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var dead []outbox.Event
	if dead, err = s.ListDead(ctx, storage.ListDeadParams{Limit: 20}); err != nil || len(dead) < 7 {
		t.Fatalf("ListDead = %d, %v", len(dead), err)
	}
	ops := []struct {
		name string
		run  func(i int) error
	}{
		{"pending", func(int) error {
			_, err := s.Pending(ctx, storage.PendingParams{Now: now, Limit: 100})
			return err
		}},
		{"claim+markdone", func(i int) error {
			tok := fmt.Sprintf("node/%d", i)
			batch, err := s.Claim(ctx, storage.ClaimParams{Token: tok, TTL: time.Minute, Limit: 100})
			if err != nil {
				return err
			}
			claimed := make([]string, len(batch.Events))
			for j, e := range batch.Events {
				claimed[j] = e.ID
			}
			_, err = s.MarkDone(ctx, storage.MarkDoneParams{IDs: claimed, DoneAt: now, Token: tok})
			return err
		}},
		{"get", func(i int) error {
			_, err := s.Get(ctx, dead[i].ID)
			return err
		}},
		{"listdead", func(int) error {
			_, err := s.ListDead(ctx, storage.ListDeadParams{Limit: 50})
			return err
		}},
		{"countdead", func(int) error {
			_, err := s.CountDead(ctx, outbox.DeadFilter{})
			return err
		}},
		{"list-new", func(int) error { return listEvents(ctx, s, outbox.StatusNew) }},
		{"list-retry", func(int) error { return listEvents(ctx, s, outbox.StatusRetry) }},
		{"list-done", func(int) error { return listEvents(ctx, s, outbox.StatusDone) }},
		{"replay", func(i int) error {
			_, err := s.Replay(ctx, storage.ReplayParams{IDs: []string{dead[i].ID}, Now: now})
			return err
		}},
		{"ordered+promote", func(i int) error {
			// Three events of a key (the first NEW, the others WAITING), the first
			// delivered, then the key's next one promoted.
			key := fmt.Sprintf("key-%d", i)
			events := make([]outbox.Event, 3)
			for j := range events {
				events[j] = testEvent(ulidAt(now.Add(-time.Minute), 1_000_000_000+i*10+j), now.Add(-time.Minute))
				events[j].OrderKey = key
			}
			if _, err := s.Insert(ctx, db, storage.InsertParams{Events: events}); err != nil {
				return err
			}
			if _, err := s.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{events[0].ID}, DoneAt: now}); err != nil {
				return err
			}
			_, err := s.Promote(ctx, storage.PromoteParams{Keys: []string{key}, Limit: 10})
			return err
		}},
		{"fanout", func(i int) error {
			// An event split into the deliveries of two listeners.
			e := testEvent(ulidAt(now.Add(-time.Minute), 2_000_000_000+i), now.Add(-time.Minute))
			if _, err := s.Insert(ctx, db, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
				return err
			}
			var deliveries []outbox.Event
			for _, l := range []string{"a", "b"} {
				d := e
				d.ID, d.Listener = e.ID+"."+l, l
				deliveries = append(deliveries, d)
			}
			_, err := s.(storage.FanOutStore).FanOut(ctx, storage.FanOutParams{Events: []storage.FanOutEvent{{ID: e.ID, Deliveries: deliveries}}, DoneAt: now})
			return err
		}},
		{"purge", func(int) error {
			_, err := s.Purge(ctx, storage.PurgeParams{Before: now.Add(-2 * testPeriod), Limit: 1000})
			return err
		}},
		{"stats", func(int) error {
			_, err := s.Stats(ctx)
			return err
		}},
	}
	for _, op := range ops {
		for i := range 7 {
			if _, err := db.ExecContext(ctx, fmt.Sprintf("SELECT 'MARK %s %s %d'", kind, op.name, i+1)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := op.run(i); err != nil {
				t.Fatalf("%s %s: %v", kind, op.name, err)
			}
			t.Logf("%s %s run %d: %s", kind, op.name, i+1, time.Since(start))
		}
		if after != nil {
			after(op.name)
		}
	}
}

// listEvents lists the first page of status's events, as the admin does.
func listEvents(ctx context.Context, s sqlTestStore, status outbox.Status) error {
	_, _, err := s.(storage.EventStore).ListEvents(ctx, storage.ListEventsParams{Status: status, Limit: 50, ScanLimit: 1000})
	return err
}
