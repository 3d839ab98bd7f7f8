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
	"github.com/outboxkit/outbox/core/storage"
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
			if _, err := c.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
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
		batch, err := c.store.Claim(ctx, storage.ClaimParams{Token: "n2/1", TTL: time.Hour, Limit: 10})
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
		n, err := c.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{ids[10]}, DoneAt: time.Now(), Token: "n2/1"})
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
// the claim was before, and sees the writer's locks grow. The table is small: on a
// table of 20 rows MariaDB scanned it for the claim's UPDATE of ten IDs, and met the
// open row, until the statement forced the primary key.
func TestClaimTakesNoLockOfAnOpenWriter(t *testing.T) {
	t.Parallel()
	i := slices.IndexFunc(backends, func(b backend) bool { return b.dialect == outbox.MySQL })
	c := newClaimTable(t, backends[i])
	ctx := t.Context()
	ids := c.seed(t, "row-", 20)
	w := openWriter(t, c, ids[0])
	batch, err := c.store.Claim(ctx, storage.ClaimParams{Token: "n1/1", TTL: time.Hour, Limit: 10})
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
	w.unchanged(t, "the claim")
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
	if s, r := w.locks(t); s == w.structs && r == w.rows {
		t.Fatalf("control: a locking walk of the pending index left the open transaction at %d lock structs, %d row locks", s, r)
	} else {
		t.Logf("control: a locking walk of the pending index took the open transaction from %d lock structs, %d row locks to %d and %d", w.structs, w.rows, s, r)
	}
}

// TestByIDStatementsTakeNoLockOfAnOpenWriter (MariaDB): the statements that find rows by
// a list of IDs and lock or change them look the IDs up by primary key at any table
// size. On a table of 20 rows MariaDB estimated a scan cheaper than ten lookups, and a
// locking scan, even under READ COMMITTED, meets the row an open business transaction
// inserted and turns its writer's implicit lock into an explicit one (see
// TestClaimTakesNoLockOfAnOpenWriter): the DONE update of several IDs, the release of
// claims, the fan-out's marks, the read of existing IDs on a duplicate insert, promote,
// replay, discard and delete of dead events.
func TestByIDStatementsTakeNoLockOfAnOpenWriter(t *testing.T) {
	t.Parallel()
	i := slices.IndexFunc(backends, func(b backend) bool { return b.dialect == outbox.MySQL })
	ctx := t.Context()
	at := time.Now()
	ping := func(id string) outbox.Event {
		return outbox.Event{ID: id, Type: "Ping", AggregateType: "Thing", Payload: json.RawMessage(`{}`)}
	}
	markDead := func(c *claimTable, ids []string) error {
		for _, id := range ids {
			if _, err := c.store.MarkDead(ctx, storage.MarkDeadParams{ID: id, DeadAt: at, Reason: "x"}); err != nil {
				return err
			}
		}
		return nil
	}
	// Each step runs on a table of its own of 20 due rows, on the first ten; prepare
	// runs before the writer opens.
	steps := []struct {
		name    string
		prepare func(c *claimTable, ids []string) error
		run     func(c *claimTable, ids []string) (int64, error)
	}{
		{"MarkDone", nil, func(c *claimTable, ids []string) (int64, error) {
			return c.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, DoneAt: at})
		}},
		{"MarkDone fenced", func(c *claimTable, ids []string) error {
			_, err := c.store.Claim(ctx, storage.ClaimParams{Token: "n1/1", TTL: time.Hour, Limit: len(ids)})
			return err
		}, func(c *claimTable, ids []string) (int64, error) {
			return c.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, Token: "n1/1", DoneAt: at})
		}},
		{"MarkDone fenced row by row", func(c *claimTable, ids []string) error {
			_, err := c.store.Claim(ctx, storage.ClaimParams{Token: "n1/1", TTL: time.Hour, Limit: len(ids)})
			return err
		}, func(c *claimTable, ids []string) (int64, error) {
			tokens := slices.Repeat([]string{"n1/1"}, len(ids))
			return c.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, Tokens: tokens, DoneAt: at})
		}},
		{"FanOut", nil, func(c *claimTable, ids []string) (int64, error) {
			p := storage.FanOutParams{DoneAt: at}
			for _, id := range ids {
				d := ping(outbox.DeliveryID(id, "l1"))
				d.Listener = "l1"
				p.Events = append(p.Events, storage.FanOutEvent{ID: id, Deliveries: []outbox.Event{d}})
			}
			r, err := c.store.(storage.FanOutStore).FanOut(ctx, p)
			return int64(len(r.Split)), err
		}},
		{"Insert of existing IDs", nil, func(c *claimTable, ids []string) (int64, error) {
			var again []outbox.Event
			for _, id := range ids {
				again = append(again, ping(id))
			}
			// All of them exist. (For an ID that does not, this locking read takes
			// a gap lock on the next row of the primary key, and when that row is
			// the open writer's, InnoDB converts the writer's lock whatever the plan:
			// it does not wait, and an insert that repeats some IDs is rare.)
			r, err := c.store.Insert(ctx, c.db, storage.InsertParams{Events: again})
			return int64(len(r.Existing)), err
		}},
		{"Promote by IDs", func(c *claimTable, ids []string) error {
			// Ten keys, each with a DONE head and a WAITING second event, whose IDs
			// the step promotes.
			var heads, next []outbox.Event
			for i := range ids {
				h, w := ping(fmt.Sprint("h-", i)), ping(fmt.Sprint("w-", i))
				h.OrderKey, w.OrderKey = fmt.Sprint("K", i), fmt.Sprint("K", i)
				heads, next = append(heads, h), append(next, w)
				ids[i] = w.ID
			}
			if _, err := c.store.Insert(ctx, c.db, storage.InsertParams{Events: append(heads, next...)}); err != nil {
				return err
			}
			var done []string
			for _, h := range heads {
				done = append(done, h.ID)
			}
			_, err := c.store.MarkDone(ctx, storage.MarkDoneParams{IDs: done, DoneAt: at})
			return err
		}, func(c *claimTable, ids []string) (int64, error) {
			res, err := c.store.Promote(ctx, storage.PromoteParams{IDs: ids})
			return res.Promoted, err
		}},
		{"Replay", func(c *claimTable, ids []string) error { return markDead(c, ids) }, func(c *claimTable, ids []string) (int64, error) {
			return c.store.Replay(ctx, storage.ReplayParams{IDs: ids, Now: at})
		}},
		{"Discard", nil, func(c *claimTable, ids []string) (int64, error) {
			return c.store.(storage.DiscardStore).Discard(ctx, ids, at)
		}},
		{"DeleteDead", func(c *claimTable, ids []string) error { return markDead(c, ids) }, func(c *claimTable, ids []string) (int64, error) {
			return c.store.DeleteDead(ctx, ids)
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			c := newClaimTable(t, backends[i])
			all := c.seed(t, "row-", 20)
			ids := slices.Clone(all[:10])
			if s.prepare != nil {
				if err := s.prepare(c, ids); err != nil {
					t.Fatal(err)
				}
			}
			w := openWriter(t, c, all[0])
			n, err := s.run(c, ids)
			if err != nil || n != int64(len(ids)) {
				t.Fatalf("%s = %d, %v; want %d", s.name, n, err, len(ids))
			}
			w.unchanged(t, s.name)
		})
	}
}

// openWriterTx is an open business transaction (REPEATABLE READ, the server's default)
// that inserted one due row, and the lock counts the InnoDB monitor showed for it then.
type openWriterTx struct {
	db            *sql.DB
	thread        int64
	structs, rows int64
	entry         string // the monitor's last entry of the transaction
}

// openWriter opens a writer on c's table whose row is due before the row first, so
// that a walk of the pending index meets it first; it rolls back at cleanup.
func openWriter(t *testing.T, c *claimTable, first string) *openWriterTx {
	t.Helper()
	ctx := t.Context()
	e, err := c.store.Get(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	w := &openWriterTx{db: c.db}
	if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&w.thread); err != nil {
		t.Fatal(err)
	}
	open := outbox.Event{ID: "open-1", Type: "Ping", AggregateType: "Thing", Payload: json.RawMessage(`{}`),
		CreatedAt: e.CreatedAt.Add(-time.Minute), AvailableAt: e.AvailableAt.Add(-time.Minute)}
	if _, err := c.store.Insert(ctx, tx, storage.InsertParams{Events: []outbox.Event{open}}); err != nil {
		t.Fatal(err)
	}
	w.structs, w.rows = w.locks(t)
	return w
}

var innodbLockCounts = regexp.MustCompile(`(\d+) lock struct\(s\), heap size \d+, (\d+) row lock\(s\)`)

// locks reads the open transaction's lock structs and row locks from the InnoDB
// monitor (information_schema.INNODB_TRX is a cache refreshed at most every 0.1 s).
func (w *openWriterTx) locks(t *testing.T) (structs, rows int64) {
	t.Helper()
	var typ, name, status string
	if err := w.db.QueryRowContext(t.Context(), "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		t.Fatal(err)
	}
	for _, trx := range strings.Split(status, "---TRANSACTION ") {
		if !strings.Contains(trx, fmt.Sprintf(" thread id %d,", w.thread)) { // "MariaDB thread id …" or "MySQL thread id …"
			continue
		}
		w.entry = trx
		m := innodbLockCounts.FindStringSubmatch(trx)
		if m == nil {
			t.Fatalf("no lock counts in the monitor's entry of the open transaction:\n%s", trx)
		}
		structs, _ = strconv.ParseInt(m[1], 10, 64)
		rows, _ = strconv.ParseInt(m[2], 10, 64)
		return structs, rows
	}
	t.Fatalf("the open transaction (thread %d) is not in the InnoDB monitor:\n%s", w.thread, status)
	return 0, 0
}

// unchanged fails t unless the open transaction holds the locks it held after its insert.
func (w *openWriterTx) unchanged(t *testing.T, after string) {
	t.Helper()
	if s, r := w.locks(t); s != w.structs || r != w.rows {
		t.Fatalf("after %s the open transaction holds %d lock structs, %d row locks; before, %d and %d:\n%s", after, s, r, w.structs, w.rows, w.entry)
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
		batch, err := c.store.Claim(ctx, storage.ClaimParams{Token: "n1/1", TTL: time.Hour, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(batch.Events) != 2 || len(batch.Undecodable) != 1 || batch.Undecodable[0].EventID != ids[1] {
			t.Fatalf("claimed %d events, undecodable %v; want 2 and %s", len(batch.Events), batch.Undecodable, ids[1])
		}
		n, err := c.store.MarkDead(ctx, storage.MarkDeadParams{ID: ids[1], DeadAt: time.Now(), Reason: "undecodable", Token: "n1/1"})
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
		l := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			n, _ := calls.LoadOrStore(e.ID, new(atomic.Int32))
			switch n.(*atomic.Int32).Add(1) {
			case 1:
				return outbox.RetryAfter(errors.New("flaky"), 100*time.Millisecond)
			case 2:
				return outbox.Defer(100 * time.Millisecond)
			default:
				return nil
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
