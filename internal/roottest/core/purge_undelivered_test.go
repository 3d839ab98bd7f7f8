package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPurgeUndeliveredInWriterOnlyMode: a WriterOnly outbox with PurgeUndeliveredAfter
// purges the NEW, RETRY and WAITING rows created longer ago, with the finished rows
// past PurgeRetention, and keeps the younger ones; an outbox of a dispatching mode on the
// same table deletes no undelivered row; and a key whose earlier events were purged is
// not held by them: a later dispatcher delivers its young event.
func TestPurgeUndeliveredInWriterOnlyMode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		day := 24 * time.Hour
		a := setupOutbox(t, b, outbox.Config{Mode: outbox.WriterOnly, PurgeRetention: day, PurgeUndeliveredAfter: 3 * day, PurgeBatchSize: 2})
		ctx := context.Background()
		now := time.Now()
		old, mid, young := now.Add(-4*day), now.Add(-2*day), now.Add(-time.Hour)
		write := func(id, key string, occurred time.Time) {
			t.Helper()
			tx, err := a.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := a.ob.Writer().Write(ctx, tx, outbox.Envelope{ID: id, Type: "OrderPlaced", AggregateType: "Order",
				Payload: map[string]string{"id": id}, OccurredAt: occurred, OrderKey: key}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		write("new-old", "", old)
		write("retry-old", "", old)
		write("done-old", "", old)
		write("k1", "K", old)   // NEW, head of K
		write("k2", "K", old)   // WAITING behind k1
		write("k3", "K", young) // WAITING behind k2
		write("new-mid", "", mid)
		write("new-young", "", young)
		st := a.ob.Store()
		if n, err := st.Reschedule(ctx, storage.RescheduleParams{ID: "retry-old", Status: outbox.StatusRetry, AvailableAt: old,
			CountAttempt: true, LastError: "x"}); err != nil || n != 1 {
			t.Fatalf("Reschedule = %d, %v", n, err)
		}
		if n, err := st.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"done-old"}, DoneAt: mid}); err != nil || n != 1 {
			t.Fatalf("MarkDone = %d, %v", n, err)
		}
		for id, want := range map[string]outbox.Status{"retry-old": outbox.StatusRetry, "k1": outbox.StatusNew, "k2": outbox.StatusWaiting,
			"k3": outbox.StatusWaiting} {
			if e := a.event(t, id); e.Status != want {
				t.Fatalf("%s is %s, want %s", id, e.Status, want)
			}
		}

		// A process that dispatches deletes finished rows only (and done-old finished
		// within its retention).
		for _, mode := range []outbox.Mode{outbox.SingleNode, outbox.MultiNode} {
			cfg := outbox.Config{Mode: mode, Dialect: b.dialect, Table: a.table, PurgeRetention: 3 * day, Logger: discardLogger()}
			if mode == outbox.MultiNode {
				cfg.ClaimTTL = time.Minute
			}
			ob, err := outbox.New(a.db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := outboxtest.Purge(ctx, ob); err != nil || n != 0 {
				t.Fatalf("%s purge = %d, %v; want nothing", mode, n, err)
			}
		}

		n, err := outboxtest.Purge(ctx, a.ob)
		if err != nil || n != 5 {
			t.Fatalf("purged %d, %v; want 5 (done-old, new-old, retry-old, k1, k2) in batches of 2", n, err)
		}
		var left []string
		page, err := a.ob.Events().List(ctx, outbox.EventQuery{Status: outbox.StatusNew, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			left = append(left, e.ID)
		}
		slices.Sort(left)
		if want := []string{"new-mid", "new-young"}; !slices.Equal(left, want) {
			t.Fatalf("NEW rows left %v, want %v", left, want)
		}
		if c := a.count(t, quoteTable(b.dialect, a.table)); c != 3 {
			t.Fatalf("%d rows left, want new-mid, new-young and k3", c)
		}
		if e := a.event(t, "k3"); e.Status != outbox.StatusWaiting || e.OrderSeq != 3 {
			t.Fatalf("k3 = %s, seq %d; want WAITING, 3", e.Status, e.OrderSeq)
		}

		// A dispatcher started later delivers k3: its key's earlier events are gone, and
		// nothing holds it.
		ob, err := outbox.New(a.db, outbox.Config{Dialect: b.dialect, Table: a.table, PollInterval: 20 * time.Millisecond,
			SkipRecent: -1, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		rec := newDeliveries(nil)
		if err := ob.Register("Order", "OrderPlaced", rec); err != nil {
			t.Fatal(err)
		}
		if err := ob.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := ob.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
		eventually(t, "k3, new-mid and new-young delivered", func() bool {
			return rec.of("k3") == 1 && rec.of("new-mid") == 1 && rec.of("new-young") == 1
		})
	})
}

// fillUndeliveredSQL returns the statement that fills b's table with n rows created a
// millisecond apart from 2031-01-01 in ID order, by i % 100: 0-39 NEW, 40-49 RETRY,
// 50-89 WAITING (ordered, in 100 keys), 90-99 DONE: a table a change data capture reader
// consumes, which nothing marks DONE.
func fillUndeliveredSQL(b sqlBundle, n int) string {
	status := "CASE WHEN m < 40 THEN 0 WHEN m < 50 THEN 2 WHEN m < 90 THEN 4 ELSE 1 END"
	cols := "event_id, event_type, aggregate_type, payload, status, attempts, available_at, created_at, done_at, order_key, order_seq"
	switch b.d {
	case outbox.Postgres:
		created := "TIMESTAMPTZ '2031-01-01 00:00:00+00' + i * INTERVAL '1 millisecond'"
		return "INSERT INTO " + b.quoted() + " (" + cols + ") SELECT 'e-' || lpad(i::text, 7, '0'), 'T', 'Thing', '{}', " + status + ", 0, " +
			created + ", " + created + ", CASE WHEN m >= 90 THEN " + created + " + INTERVAL '1 second' END, " +
			"CASE WHEN m >= 50 AND m < 90 THEN 'k-' || (i % 100) END, CASE WHEN m >= 50 AND m < 90 THEN i END" +
			fmt.Sprintf(" FROM (SELECT i, i %% 100 AS m FROM generate_series(0, %d) AS i) s", n-1)
	case outbox.MySQL:
		created := "TIMESTAMP '2031-01-01 00:00:00' + INTERVAL i * 1000 MICROSECOND"
		return "INSERT INTO " + b.quoted() + " (" + cols + ") SELECT CONCAT('e-', LPAD(i, 7, '0')), 'T', 'Thing', '{}', " + status + ", 0, " +
			created + ", " + created + ", CASE WHEN m >= 90 THEN " + created + " + INTERVAL 1 SECOND END, " +
			"CASE WHEN m >= 50 AND m < 90 THEN CONCAT('k-', i % 100) END, CASE WHEN m >= 50 AND m < 90 THEN i END" +
			fmt.Sprintf(" FROM (SELECT seq AS i, seq %% 100 AS m FROM seq_0_to_%d) s", n-1)
	default:
		created := "strftime('%Y-%m-%dT%H:%M:%f', '2031-01-01', '+' || (i / 1000.0) || ' seconds') || '000Z'"
		done := "strftime('%Y-%m-%dT%H:%M:%f', '2031-01-01', '+' || (i / 1000.0 + 1) || ' seconds') || '000Z'"
		return fmt.Sprintf("WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < %d) ", n-1) +
			"INSERT INTO " + b.quoted() + " (" + cols + ") SELECT 'e-' || printf('%07d', i), 'T', 'Thing', '{}', " + status + ", 0, " +
			created + ", " + created + ", CASE WHEN m >= 90 THEN " + done + " END, " +
			"CASE WHEN m >= 50 AND m < 90 THEN 'k-' || (i % 100) END, CASE WHEN m >= 50 AND m < 90 THEN i END" +
			" FROM (SELECT i, i % 100 AS m FROM c) s"
	}
}

// TestPurgeUndeliveredUsesIndexes: on a table of 20,000 rows, analyzed, each statement
// of the undelivered purge (as the dialect builds it, see the golden tests, with
// literals for the arguments) walks its index in its order from the oldest row and stops
// after its LIMIT: NEW and RETRY rows along the pending index, WAITING rows along the
// state index (MySQL/MariaDB: both along the status index, dead_idx, since migration
// 0010 dropped the poll index); no sort, no scan of the table. Then a purge deletes the rows
// up to the cutoff and no other.
func TestPurgeUndeliveredUsesIndexes(t *testing.T) {
	t.Parallel()
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := s.setup(t)
			ctx := t.Context()
			const rows = 20_000
			if _, err := b.db.ExecContext(ctx, fillUndeliveredSQL(b, rows)); err != nil {
				t.Fatalf("fill: %v", err)
			}
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
			// Three quarters of the rows were created before the cutoff.
			cutoff := time.Date(2031, 1, 1, 0, 0, 15, 0, time.UTC)
			t0 := "'2031-01-01 00:00:15.000000'"
			table := b.quoted()
			var stmts map[string]string // the index each statement must use
			switch b.d {
			case outbox.Postgres:
				t0 = "'2031-01-01 00:00:15+00'"
				stmts = map[string]string{
					`DELETE FROM ` + table + ` WHERE event_id = ANY(ARRAY(SELECT event_id FROM ` + table + ` WHERE status IN (0, 2) AND attempts >= 0 AND created_at < ` + t0 +
						` ORDER BY created_at, event_id LIMIT 500 FOR UPDATE SKIP LOCKED)) AND status IN (0, 2) AND created_at < ` + t0: "undelivered_idx",
					`DELETE FROM ` + table + ` WHERE event_id = ANY(ARRAY(SELECT event_id FROM ` + table + ` WHERE status = 4 AND created_at IS NOT NULL AND created_at < ` + t0 +
						` ORDER BY created_at, event_id LIMIT 500 FOR UPDATE SKIP LOCKED)) AND status = 4 AND created_at < ` + t0: "state_idx",
					// The finished rows' purge, as purgeQuery builds it. Written with IN (…),
					// PostgreSQL made it a hash semi-join over a bitmap scan of every finished
					// row before the cutoff (per batch of 500); by ANY(ARRAY(…)) the batch's
					// IDs drive the DELETE by primary key.
					`DELETE FROM ` + table + ` WHERE event_id = ANY(ARRAY(SELECT event_id FROM ` + table + ` WHERE (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < ` + t0 +
						` ORDER BY COALESCE(done_at, created_at), event_id LIMIT 500 FOR UPDATE SKIP LOCKED)) AND (status IN (1, 3) OR status >= 5) AND COALESCE(done_at, created_at) < ` + t0: "finished_idx",
				}
			case outbox.SQLite:
				t0 = "'2031-01-01T00:00:15.000000Z'"
				stmts = map[string]string{
					`DELETE FROM ` + table + ` WHERE event_id IN (SELECT event_id FROM ` + table + ` WHERE status IN (0, 2) AND created_at < ` + t0 +
						` ORDER BY created_at, event_id LIMIT 500) AND +status IN (0, 2) AND created_at < ` + t0: "pending_idx",
					`DELETE FROM ` + table + ` WHERE event_id IN (SELECT event_id FROM ` + table + ` WHERE status IN (2, 4) AND status = 4 AND created_at < ` + t0 +
						` ORDER BY created_at, event_id LIMIT 500) AND +status = 4 AND created_at < ` + t0: "state_idx",
				}
			default:
				stmts = map[string]string{
					`DELETE FROM ` + table + ` WHERE status IN (0, 2) AND created_at < ` + t0 + ` ORDER BY status, created_at, event_id LIMIT 500`: "dead_idx",
					`DELETE FROM ` + table + ` WHERE status = 4 AND created_at < ` + t0 + ` ORDER BY created_at, event_id LIMIT 500`:               "dead_idx",
				}
			}
			for q, index := range stmts {
				plan := explain(t, b, q, nil)
				t.Logf("%s\n%s", q, plan)
				if !strings.Contains(plan, "_"+index) {
					t.Errorf("the plan does not use %s:\n%s\n%s", index, q, plan)
				}
				finished := index == "finished_idx"
				if finished && (!strings.Contains(plan, "Index Scan using outbox_event_pkey") || strings.Contains(plan, "Semi Join")) {
					t.Errorf("the finished rows' DELETE is not driven by the primary key:\n%s\n%s", q, plan)
				}
				for _, bad := range avoidInPlan(b.d) {
					// The finished batch's subquery may sort the rows the planner estimates
					// before the cutoff when they are about as many as its LIMIT (667 on
					// this table); the DELETE itself may not.
					if finished && (bad == "Sort" || bad == "Bitmap") && planRowsAtMost(plan, 2*500) {
						continue
					}
					if inPlan(b.d, plan, bad) {
						t.Errorf("the plan has %q:\n%s\n%s", bad, q, plan)
					}
				}
				if b.d == outbox.MySQL && !strings.Contains(plan, " range ") {
					t.Errorf("the plan is not a range scan of %s:\n%s\n%s", index, q, plan)
				}
			}

			// The purge: the DONE rows finished before the cutoff, and the undelivered
			// rows created before it.
			var total int64
			for {
				n, err := b.store.Purge(ctx, storage.PurgeParams{Before: cutoff, UndeliveredBefore: cutoff, Limit: 500})
				if err != nil {
					t.Fatal(err)
				}
				total += n
				if n < 500 {
					break
				}
			}
			// 15,000 rows were created before the cutoff; of their 1,500 DONE rows, the
			// last 100 finished after it (a second after they were created).
			if total != 15_000-100 {
				t.Errorf("purged %d rows, want %d", total, 15_000-100)
			}
			var left, oldest int
			if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(CASE WHEN status <> 1 AND created_at < `+t0+` THEN 1 ELSE 0 END) FROM `+table).
				Scan(&left, &oldest); err != nil {
				t.Fatal(err)
			}
			if left != rows-int(total) || oldest != 0 {
				t.Errorf("%d rows left (%d undelivered created before the cutoff), want %d and 0", left, oldest, rows-int(total))
			}
		})
	}
}
