package outbox_test

// Claims on real databases: what a held claim must not block, undecodable rows, and
// retries under claims.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestClaimLocksBlockNoWriter holds a claim's locking read open (as a slow claim
// transaction would) and checks what it must not block: another claim (it skips the
// locked rows), an INSERT into the locked index range by a business transaction under the
// database's default isolation level, and an outcome update of another node.
func TestClaimLocksBlockNoWriter(t *testing.T) {
	t.Parallel()
	forEachServerBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		ctx := t.Context()
		ids := c.seed(t, "row-", 100)
		q := quoteTable(b.dialect, c.table)
		// The claim's locking read, as the golden SQL pins it, without the TTL column.
		lockSQL := `SELECT event_id FROM ` + q + ` WHERE status IN (0, 2) AND available_at <= statement_timestamp() ` +
			`AND created_at <= statement_timestamp() AND (locked_until IS NULL OR locked_until < statement_timestamp()) ` +
			`ORDER BY available_at, created_at, event_id LIMIT 10 FOR UPDATE SKIP LOCKED`
		if b.dialect == outbox.MySQL {
			// The claim's second statement, on the IDs its plain read of the pending index
			// returns (claimReadQuery).
			lockSQL = `SELECT event_id FROM ` + q + " FORCE INDEX (PRIMARY) WHERE due_at <= UTC_TIMESTAMP(6) " +
				`AND created_at <= UTC_TIMESTAMP(6) AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6)) ` +
				`AND event_id IN ('` + strings.Join(ids[:10], "', '") + `') ORDER BY due_at, created_at, event_id FOR UPDATE SKIP LOCKED`
		}
		holdClaim := func(level sql.IsolationLevel) (*sql.Tx, []string) {
			t.Helper()
			tx, err := c.db.BeginTx(ctx, &sql.TxOptions{Isolation: level})
			if err != nil {
				t.Fatal(err)
			}
			rows, err := tx.QueryContext(ctx, lockSQL)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				got = append(got, id)
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				t.Fatal(err)
			}
			return tx, got
		}
		// businessInsert inserts a row whose claim position lies between row-00003 and
		// row-00004, inside the locked range, in a transaction of the default isolation
		// level that waits at most a second for a lock.
		seeded, err := c.store.Get(ctx, "row-00003")
		if err != nil {
			t.Fatal(err)
		}
		businessInsert := func(id string) (time.Duration, error) {
			conn, err := c.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			wait := `SET lock_timeout = '1s'`
			if b.dialect == outbox.MySQL {
				wait = `SET SESSION innodb_lock_wait_timeout = 1`
			}
			if _, err := conn.ExecContext(ctx, wait); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			e := outbox.Event{ID: id, Type: "Ping", AggregateType: "Thing", Payload: json.RawMessage(`{}`),
				CreatedAt: seeded.CreatedAt, AvailableAt: seeded.AvailableAt}
			if _, err := c.store.Insert(ctx, tx, outbox.InsertParams{Events: []outbox.Event{e}}); err != nil {
				_ = tx.Rollback()
				return time.Since(start), err
			}
			return time.Since(start), tx.Commit()
		}

		tx, held := holdClaim(sql.LevelReadCommitted)
		if strings.Join(held, ",") != strings.Join(ids[:10], ",") {
			t.Fatalf("held claim locked %v, want the first 10 rows", held)
		}
		start := time.Now()
		batch, err := c.store.Claim(ctx, outbox.ClaimParams{Token: "n2/1", TTL: time.Hour, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range batch.Events {
			got = append(got, e.ID)
		}
		if strings.Join(got, ",") != strings.Join(ids[10:20], ",") {
			t.Fatalf("concurrent claim got %v, want the next 10 rows", got)
		}
		t.Logf("%s: a claim beside a held claim took %s", b.name, time.Since(start).Round(time.Microsecond))
		// An INSERT that waited for the held claim's locks would fail with the
		// session's 1 s lock timeout (as the control below does): the error, not the
		// INSERT's duration, is the check, since a loaded machine stretches the
		// duration but not the lock wait.
		if took, err := businessInsert("row-00003x"); err != nil {
			t.Fatalf("business INSERT into the range of a held claim failed after %s: %v", took, err)
		} else {
			t.Logf("%s: business INSERT into the locked range took %s", b.name, took.Round(time.Microsecond))
		}
		n, err := c.store.MarkDone(ctx, outbox.MarkDoneParams{IDs: []string{ids[10]}, DoneAt: time.Now(), Token: "n2/1"})
		if err != nil || n != 1 {
			t.Fatalf("MarkDone beside a held claim = %d, %v", n, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}

	})
}

// TestClaimTakesNoLockOfAnOpenWriter (MariaDB): a claim must not lock, nor make InnoDB
// lock on their writer's behalf, the rows that an open business transaction inserted.
// A locking read that meets such a row turns the writer's implicit lock on it into an
// explicit one, which InnoDB passes on as a gap lock when the row's page splits (the
// writer runs REPEATABLE READ); DONE updates inserting into that gap then waited until
// the business transaction ended (seconds, in TestInprocLateCommit's MultiNode run,
// with the events redelivered). The claim reads the due rows' IDs with a plain read and
// locks them by primary key. A control runs a locking walk of the pending index, which
// the claim was before, and sees the writer's locks grow.
func TestClaimTakesNoLockOfAnOpenWriter(t *testing.T) {
	t.Parallel()
	i := slices.IndexFunc(backends, func(b backend) bool { return b.dialect == outbox.MySQL })
	c := newClaimTable(t, backends[i])
	ctx := t.Context()
	// Enough rows that the optimizer looks up the claimed rows by primary key, as on a
	// table in service: on a table of a few rows, MariaDB prefers scanning all of them,
	// and a locking scan meets the open row too.
	ids := c.seed(t, "row-", 1000)
	first, err := c.store.Get(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil) // the server's default, REPEATABLE READ
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var thread int64
	if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&thread); err != nil {
		t.Fatal(err)
	}
	// Due before every seeded row: a walk of the pending index meets it first.
	open := outbox.Event{ID: "open-1", Type: "Ping", AggregateType: "Thing", Payload: json.RawMessage(`{}`),
		CreatedAt: first.CreatedAt.Add(-time.Minute), AvailableAt: first.AvailableAt.Add(-time.Minute)}
	if _, err := c.store.Insert(ctx, tx, outbox.InsertParams{Events: []outbox.Event{open}}); err != nil {
		t.Fatal(err)
	}
	// The open transaction's lock structs and row locks, from the InnoDB monitor
	// (information_schema.INNODB_TRX is a cache refreshed at most every 0.1 s).
	counts := regexp.MustCompile(`(\d+) lock struct\(s\), heap size \d+, (\d+) row lock\(s\)`)
	var entry string // the monitor's last entry of the open transaction
	locks := func() (structs, rows int64) {
		t.Helper()
		var typ, name, status string
		if err := c.db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
			t.Fatal(err)
		}
		for _, trx := range strings.Split(status, "---TRANSACTION ") {
			if !strings.Contains(trx, fmt.Sprintf(" thread id %d,", thread)) { // "MariaDB thread id …" or "MySQL thread id …"
				continue
			}
			entry = trx
			m := counts.FindStringSubmatch(trx)
			if m == nil {
				t.Fatalf("no lock counts in the monitor's entry of the open transaction:\n%s", trx)
			}
			structs, _ = strconv.ParseInt(m[1], 10, 64)
			rows, _ = strconv.ParseInt(m[2], 10, 64)
			return structs, rows
		}
		t.Fatalf("the open transaction (thread %d) is not in the InnoDB monitor:\n%s", thread, status)
		return 0, 0
	}
	structs, rows := locks()
	batch, err := c.store.Claim(ctx, outbox.ClaimParams{Token: "n1/1", TTL: time.Hour, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range batch.Events {
		got = append(got, e.ID)
	}
	if strings.Join(got, ",") != strings.Join(ids[:10], ",") {
		t.Fatalf("claimed %v, want the first 10 seeded rows", got)
	}
	if s, r := locks(); s != structs || r != rows {
		t.Fatalf("after the claim the open transaction holds %d lock structs, %d row locks; before, %d and %d:\n%s", s, r, structs, rows, entry)
	}
	// Control: a locking walk of the pending index makes InnoDB lock the open row.
	walk, err := c.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = walk.Rollback() }()
	r, err := walk.QueryContext(ctx, "SELECT event_id, locked_by FROM "+quoteTable(outbox.MySQL, c.table)+" FORCE INDEX (`outbox_event_pending_idx`) "+
		"WHERE due_at <= UTC_TIMESTAMP(6) AND created_at <= UTC_TIMESTAMP(6) AND (locked_until IS NULL OR locked_until < UTC_TIMESTAMP(6)) "+
		"ORDER BY due_at, created_at, event_id LIMIT 10 FOR UPDATE SKIP LOCKED")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if s, r := locks(); s == structs && r == rows {
		t.Fatalf("control: a locking walk of the pending index left the open transaction at %d lock structs, %d row locks", s, r)
	} else {
		t.Logf("control: a locking walk of the pending index took the open transaction from %d lock structs, %d row locks to %d and %d", structs, rows, s, r)
	}
}

// TestClaimReportsUndecodableRows: a due row that cannot be decoded is claimed like the
// others and reported, so that the poller can move it to DEAD under the claim.
func TestClaimReportsUndecodableRows(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		ctx := t.Context()
		ids := c.seed(t, "u-", 3)
		q := `UPDATE ` + quoteTable(b.dialect, c.table) + ` SET headers = '{"a": 1}' WHERE event_id = ` + ph1(b.dialect)
		if _, err := c.db.ExecContext(ctx, q, ids[1]); err != nil {
			t.Fatal(err)
		}
		batch, err := c.store.Claim(ctx, outbox.ClaimParams{Token: "n1/1", TTL: time.Hour, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(batch.Events) != 2 || len(batch.Undecodable) != 1 || batch.Undecodable[0].EventID != ids[1] {
			t.Fatalf("claimed %d events, undecodable %v; want 2 and %s", len(batch.Events), batch.Undecodable, ids[1])
		}
		n, err := c.store.MarkDead(ctx, outbox.MarkDeadParams{ID: ids[1], DeadAt: time.Now(), Reason: "undecodable", Token: "n1/1"})
		if err != nil || n != 1 {
			t.Fatalf("MarkDead under the claim = %d, %v", n, err)
		}
	})
}

// TestMultiNodeRetriesAndDefers: in MultiNode mode a failed attempt releases the claim
// and the row is claimed again when due, by any node.
func TestMultiNodeRetriesAndDefers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		var calls sync.Map
		l := outbox.ResultListenerFunc(func(ctx context.Context, e *outbox.Event) (outbox.Result, error) {
			n, _ := calls.LoadOrStore(e.ID, new(atomic.Int32))
			switch n.(*atomic.Int32).Add(1) {
			case 1:
				return outbox.Result{}, outbox.RetryAfter(errors.New("flaky"), 100*time.Millisecond)
			case 2:
				return outbox.Defer(100 * time.Millisecond), nil
			default:
				return outbox.Done(), nil
			}
		})
		cfg := outbox.Config{ClaimTTL: 5 * time.Second, ListenerTimeout: time.Second, StatusTimeout: time.Second,
			PollInterval: 20 * time.Millisecond, SkipRecent: -1}
		cfg.NodeID = "r1"
		a := c.node(t, cfg, l)
		cfg.NodeID = "r2"
		c.node(t, cfg, l)
		id, err := writeVia(t.Context(), c.db, a.Writer())
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "done after a retry and a deferral", func() bool {
			e, err := c.store.Get(t.Context(), id)
			return err == nil && e.Status == outbox.StatusDone
		})
		e, _ := c.store.Get(t.Context(), id)
		n, _ := calls.Load(id)
		if got := n.(*atomic.Int32).Load(); got != 3 || e.Attempts != 1 || e.LockedBy != "" {
			t.Fatalf("%d calls, row %+v; want 3 calls, 1 counted attempt, no claim", got, e)
		}
	})
}
