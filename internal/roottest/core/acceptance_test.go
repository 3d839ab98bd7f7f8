package outbox_test

// Acceptance tests of the composite Outbox on real databases: every test runs on SQLite,
// PostgreSQL and MariaDB (throwaway servers, see internal/testdb).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// backend is one database the acceptance tests run on.
type backend struct {
	name    string
	dialect outbox.Dialect
	open    func(t *testing.T) (*sql.DB, string) // database and an isolated outbox table
}

var backends = []backend{
	{"sqlite", outbox.SQLite, func(t *testing.T) (*sql.DB, string) {
		return testdb.NewSQLiteDB(t), outbox.DefaultTable
	}},
	{"postgres", outbox.Postgres, func(t *testing.T) (*sql.DB, string) {
		db := testdb.NewPostgresDB(t)
		return db, testdb.IsolatedTable(t, db, "postgres")
	}},
	{"mysql", outbox.MySQL, func(t *testing.T) (*sql.DB, string) {
		db := testdb.NewMySQLDB(t)
		return db, testdb.IsolatedTable(t, db, "mysql")
	}},
}

// ph1 returns the dialect's placeholder for a statement's first argument.
func ph1(d outbox.Dialect) string {
	if d == outbox.Postgres {
		return "$1"
	}
	return "?"
}

// forEachBackend runs fn as a parallel subtest per database.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// acceptanceBundle is an Outbox over a fresh table with a business table beside it.
type acceptanceBundle struct {
	db      *sql.DB
	dialect outbox.Dialect
	table   string
	orders  string // business table
	ob      *outbox.Outbox
	metrics *countingMetrics
}

// setupOutbox migrates a fresh table, builds an Outbox with cfg (Dialect, Table, Metrics
// and a quiet Logger filled in) and stops it at cleanup. It does not start it.
func setupOutbox(t *testing.T, b backend, cfg outbox.Config) *acceptanceBundle {
	t.Helper()
	db, table := b.open(t)
	ctx := context.Background()
	if err := outbox.MigrateTable(ctx, db, b.dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	orders := strings.TrimSuffix(table, outbox.DefaultTable) + "orders"
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+orders+` (id VARCHAR(64) PRIMARY KEY)`); err != nil {
		t.Fatalf("create orders: %v", err)
	}
	m := &countingMetrics{}
	cfg.Dialect, cfg.Table, cfg.Metrics = b.dialect, table, m
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &acceptanceBundle{db: db, dialect: b.dialect, table: table, orders: orders, ob: ob, metrics: m}
}

func (a *acceptanceBundle) start(t *testing.T) {
	t.Helper()
	if err := a.ob.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
}

// placeOrder inserts a business row and one event in a transaction; fail makes it roll back.
func (a *acceptanceBundle) placeOrder(ctx context.Context, id string, env outbox.Envelope, fail error) (string, error) {
	var eventID string
	err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
		q := `INSERT INTO ` + a.orders + ` (id) VALUES (` + ph1(a.dialect) + `)`
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return err
		}
		var err error
		eventID, err = a.ob.Writer().Write(ctx, tx, env)
		if err != nil {
			return err
		}
		return fail
	})
	return eventID, err
}

func (a *acceptanceBundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := a.db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (a *acceptanceBundle) event(t *testing.T, id string) outbox.Event {
	t.Helper()
	e, err := a.ob.Store().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return e
}

var orderPlaced = outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: map[string]string{"k": "v"}}

func TestAcceptanceRollbackWritesAndDeliversNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: time.Hour, SkipRecent: -1})
		rec := newDeliveries(nil)
		if err := a.ob.Register("Order", "OrderPlaced", rec); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := context.Background()
		boom := errors.New("business rule failed")
		if _, err := a.placeOrder(ctx, "o-1", orderPlaced, boom); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		// A panic inside the transaction rolls back too, and is re-raised.
		func() {
			defer func() {
				if r := recover(); r != "panic in tx" {
					t.Fatalf("recovered %v", r)
				}
			}()
			_ = outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
				if _, err := a.ob.Writer().Write(ctx, tx, orderPlaced); err != nil {
					return err
				}
				panic("panic in tx")
			})
		}()
		// A poll cycle finds nothing; stopping drains nothing.
		if n, err := outboxtest.Poll(ctx, a.ob); err != nil || n != 0 {
			t.Fatalf("poll = %d, %v", n, err)
		}
		if err := a.ob.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if n := a.count(t, a.table); n != 0 {
			t.Fatalf("%d outbox rows after rollback", n)
		}
		if n := a.count(t, a.orders); n != 0 {
			t.Fatalf("%d business rows after rollback", n)
		}
		if rec.total() != 0 {
			t.Fatalf("listener called %d times", rec.total())
		}
		if c := a.metrics.counts(); c.hotEnqueued != 0 {
			t.Fatalf("hot enqueued %d after rollback", c.hotEnqueued)
		}
	})
}

func TestAcceptanceCommitDeliversThroughHotPath(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		// The poller would not run for an hour: only the hot path can deliver.
		a := setupOutbox(t, b, outbox.Config{PollInterval: time.Hour})
		var businessRowSeen atomic.Bool
		rec := newDeliveries(func(ctx context.Context, e *outbox.Event) error {
			var n int
			q := `SELECT COUNT(*) FROM ` + a.orders + ` WHERE id = ` + ph1(a.dialect)
			if err := a.db.QueryRowContext(ctx, q, e.AggregateID).Scan(&n); err == nil && n == 1 {
				businessRowSeen.Store(true)
			}
			return nil
		})
		if err := a.ob.Register("Order", "OrderPlaced", rec); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		env := orderPlaced
		env.AggregateID = "o-1"
		env.Headers = map[string]string{"trace_id": "abc"}
		id, err := a.placeOrder(context.Background(), "o-1", env, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "row DONE", func() bool { return a.event(t, id).Status == outbox.StatusDone })
		got := a.event(t, id)
		if got.DoneAt.IsZero() || got.DoneAt.Before(got.CreatedAt) || got.Attempts != 0 {
			t.Fatalf("row = %+v", got)
		}
		if rec.of(id) != 1 || !businessRowSeen.Load() {
			t.Fatalf("deliveries %d, business row seen %v", rec.of(id), businessRowSeen.Load())
		}
		seen := rec.seen()[0]
		if seen.Headers["trace_id"] != "abc" || seen.AggregateID != "o-1" || string(seen.Payload) != `{"k":"v"}` {
			t.Fatalf("listener saw %+v", seen)
		}
		if c := a.metrics.counts(); c.hotEnqueued != 1 || c.coldEnqueued != 0 {
			t.Fatalf("metrics %+v", c)
		}
	})
}

func TestAcceptanceHotQueueOverflowFallsBackToPoller(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{
			HotQueueSize: 1, Workers: 1, PollInterval: 50 * time.Millisecond, SkipRecent: -1,
		})
		// A listener slower than the writers: deliveries wait until the hot queue has
		// overflowed (one event in delivery, one queued, the next dropped). A fixed
		// sleep in the listener overflowed it only while the writes were faster than
		// the sleep, which a loaded machine does not promise.
		rec := newDeliveries(func(ctx context.Context, _ *outbox.Event) error {
			for a.metrics.counts().hotDropped == 0 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		if err := a.ob.Register("Order", "OrderPlaced", rec); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		const n = 200
		ids := make([]string, 0, n)
		for i := range n {
			id, err := a.placeOrder(context.Background(), fmt.Sprintf("o-%d", i), orderPlaced, nil)
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			ids = append(ids, id)
		}
		eventually(t, "all 200 delivered", func() bool { return rec.total() >= n })
		eventually(t, "all 200 DONE", func() bool {
			s, err := a.ob.Events().Stats(context.Background())
			return err == nil && s.Counts[outbox.StatusDone] == n
		})
		if c := a.metrics.counts(); c.hotDropped == 0 || c.coldEnqueued == 0 {
			t.Fatalf("want drops and cold deliveries, metrics %+v", c)
		}
		for _, id := range ids {
			if got := rec.of(id); got != 1 {
				t.Fatalf("event %s delivered %d times", id, got)
			}
		}
	})
}

func TestAcceptanceRetryThenDead(t *testing.T) {
	t.Parallel()
	fast := outbox.Config{
		MaxAttempts:  3,
		Retry:        outbox.ExponentialBackoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond},
		PollInterval: 20 * time.Millisecond,
		SkipRecent:   -1,
	}
	for name, fail := range map[string]func(){
		"error": func() {},
		"panic": func() { panic("listener exploded") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, b backend) {
				a := setupOutbox(t, b, fast)
				var attemptsSeen []int
				var mu sync.Mutex
				rec := newDeliveries(func(_ context.Context, e *outbox.Event) error {
					mu.Lock()
					attemptsSeen = append(attemptsSeen, e.Attempts)
					mu.Unlock()
					fail()
					return errors.New("downstream unavailable")
				})
				if err := a.ob.Register("Order", "OrderPlaced", rec); err != nil {
					t.Fatal(err)
				}
				a.start(t)
				id, err := a.placeOrder(context.Background(), "o-1", orderPlaced, nil)
				if err != nil {
					t.Fatal(err)
				}
				eventually(t, "DEAD", func() bool { return a.event(t, id).Status == outbox.StatusDead })
				got := a.event(t, id)
				mu.Lock()
				defer mu.Unlock()
				if fmt.Sprint(attemptsSeen) != "[0 1 2]" || got.Attempts != 3 {
					t.Fatalf("attempts seen %v, stored %d", attemptsSeen, got.Attempts)
				}
				wantErr := "downstream unavailable"
				if name == "panic" {
					wantErr = "panic: listener exploded"
				}
				if !strings.Contains(got.LastError, wantErr) {
					t.Fatalf("last_error = %q, want %q", got.LastError, wantErr)
				}
			})
		})
	}
}

func TestAcceptanceUnroutableDeferredAndDelayed(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 20 * time.Millisecond, SkipRecent: -1})
		var deferrals atomic.Int32
		if err := a.ob.Register("Order", "Deferred", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			if deferrals.Add(1) <= 2 {
				return outbox.Defer(10 * time.Millisecond)
			}
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		var delayedAt atomic.Int64
		if err := a.ob.Register("Order", "Delayed", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			delayedAt.Store(time.Now().UnixNano())
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := context.Background()
		unroutable, err := a.placeOrder(ctx, "o-1", outbox.Envelope{Type: "NobodyListens", Payload: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		deferred, err := a.placeOrder(ctx, "o-2", outbox.Envelope{Type: "Deferred", AggregateType: "Order", Payload: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		delayed, err := a.placeOrder(ctx, "o-3", outbox.Envelope{Type: "Delayed", AggregateType: "Order", Payload: 1, DeliverAfter: 300 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}

		eventually(t, "unroutable DEAD", func() bool { return a.event(t, unroutable).Status == outbox.StatusDead })
		if e := a.event(t, unroutable); !strings.Contains(e.LastError, "no listener") {
			t.Fatalf("unroutable last_error %q", e.LastError)
		}
		eventually(t, "deferred DONE", func() bool { return a.event(t, deferred).Status == outbox.StatusDone })
		if e := a.event(t, deferred); e.Attempts != 0 || deferrals.Load() != 3 {
			t.Fatalf("deferred: attempts %d after %d calls; RetryAfter must not count", e.Attempts, deferrals.Load())
		}
		eventually(t, "delayed DONE", func() bool { return a.event(t, delayed).Status == outbox.StatusDone })
		e := a.event(t, delayed)
		if at := time.Unix(0, delayedAt.Load()); at.Before(e.AvailableAt) {
			t.Fatalf("delayed event delivered at %v, before its time %v", at, e.AvailableAt)
		}
		if c := a.metrics.counts(); c.delayedSkipped != 1 {
			t.Fatalf("delayed skipped = %d", c.delayedSkipped)
		}
	})
}

// TestDelayedEventWakesIdlePoller: an event written with DeliverAfter is delivered when it
// falls due, not at the idle poller's next tick. With the default PollInterval the poller's
// first cycle (at Start) finds nothing and doubles its wait, so its next tick is
// 2 × DefaultPollInterval away; the writing process remembers the due time instead.
func TestDelayedEventWakesIdlePoller(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	// Far enough from both the due time and the next regular tick: half the poll
	// interval, which the default configuration sets, not this machine's speed.
	bound := delay + outbox.DefaultPollInterval/2
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{})
		delivered := make(chan time.Time, 1)
		if err := a.ob.Register("Order", "Delayed", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			delivered <- time.Now()
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		id, err := a.placeOrder(context.Background(), "o-1", outbox.Envelope{Type: "Delayed", AggregateType: "Order", Payload: 1, DeliverAfter: delay}, nil)
		if err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		select {
		case at := <-delivered:
			e := a.event(t, id)
			if at.Before(e.AvailableAt) {
				t.Fatalf("delivered at %v, before its time %v", at, e.AvailableAt)
			}
			if took := at.Sub(committed); took > bound {
				t.Fatalf("delivered %s after the commit, more than %s: the idle poller's tick, not the due time, delivered it", took, bound)
			}
		case <-time.After(4 * outbox.DefaultPollMaxInterval):
			t.Fatal("the delayed event was never delivered")
		}
	})
}

func TestAcceptancePurgeDeletesOnlyOldFinishedRows(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{Mode: outbox.WriterOnly, PurgeRetention: 24 * time.Hour, PurgeBatchSize: 2})
		ctx := context.Background()
		st := a.ob.Store()
		now := time.Now()
		old, recent := now.Add(-48*time.Hour), now.Add(-time.Hour)
		mk := func(id string, created time.Time) outbox.Event {
			return outbox.Event{ID: id, Type: "T", AggregateType: outbox.GlobalAggregateType, Payload: []byte(`{}`), CreatedAt: created, AvailableAt: created}
		}
		var events []outbox.Event
		for _, id := range []string{"done-old-1", "done-old-2", "done-old-3", "dead-old", "new-old", "retry-old", "done-recent", "dead-recent"} {
			created := old
			if strings.HasSuffix(id, "recent") {
				created = recent
			}
			events = append(events, mk(id, created))
		}
		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Insert(ctx, tx, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		mustN := func(n int64, err error) {
			t.Helper()
			if err != nil || n != 1 {
				t.Fatalf("n=%d err=%v", n, err)
			}
		}
		for _, id := range []string{"done-old-1", "done-old-2", "done-old-3"} {
			mustN(st.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{id}, DoneAt: old}))
		}
		mustN(st.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"done-recent"}, DoneAt: recent}))
		mustN(st.MarkDead(ctx, storage.MarkDeadParams{DeadAt: old, ID: "dead-old", Reason: "x"}))
		mustN(st.MarkDead(ctx, storage.MarkDeadParams{DeadAt: recent, ID: "dead-recent", Reason: "x"}))
		mustN(st.Reschedule(ctx, storage.RescheduleParams{ID: "retry-old", Status: outbox.StatusRetry, AvailableAt: old, CountAttempt: true, LastError: "x"}))

		n, err := outboxtest.Purge(ctx, a.ob)
		if err != nil || n != 4 {
			t.Fatalf("purged %d, %v; want 4 (3 old DONE + 1 old DEAD) in batches of 2", n, err)
		}
		for _, id := range []string{"new-old", "retry-old", "done-recent", "dead-recent"} {
			if _, err := st.Get(ctx, id); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		if c := a.count(t, a.table); c != 4 {
			t.Fatalf("%d rows left", c)
		}
	})
}

func TestAcceptanceReplayOnlyFromDeadAndRedelivers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{MaxAttempts: 1, PollInterval: 20 * time.Millisecond, SkipRecent: -1})
		var healthy atomic.Bool
		rec := newDeliveries(func(context.Context, *outbox.Event) error {
			if !healthy.Load() {
				return errors.New("not yet")
			}
			return nil
		})
		if err := a.ob.Register("Order", "OrderPlaced", rec); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := context.Background()
		id, err := a.placeOrder(ctx, "o-1", orderPlaced, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "DEAD", func() bool { return a.event(t, id).Status == outbox.StatusDead })
		if n, err := a.ob.Events().CountDead(ctx, outbox.DeadFilter{EventType: "OrderPlaced"}); err != nil || n != 1 {
			t.Fatalf("count = %d, %v", n, err)
		}
		if err := a.ob.Events().Replay(ctx, "no-such-id"); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		healthy.Store(true)
		if err := a.ob.Events().Replay(ctx, id); err != nil {
			t.Fatal(err)
		}
		eventually(t, "replayed event DONE", func() bool { return a.event(t, id).Status == outbox.StatusDone })
		if rec.of(id) != 2 {
			t.Fatalf("delivered %d times, want 2 (failure, then after replay)", rec.of(id))
		}
		if err := a.ob.Events().Replay(ctx, id); !errors.Is(err, outbox.ErrNotDead) {
			t.Fatalf("replay of a DONE event: %v, want ErrNotDead", err)
		}
		if e := a.event(t, id); e.Status != outbox.StatusDone {
			t.Fatalf("replay changed a DONE row to %v", e.Status)
		}
	})
}

func TestAcceptanceWriteWithoutTransaction(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{})
		if _, err := a.ob.Writer().Write(context.Background(), a.db, orderPlaced); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Fatalf("err = %v", err)
		}
		if n := a.count(t, a.table); n != 0 {
			t.Fatalf("%d rows inserted", n)
		}
	})
}

func TestAcceptancePlainSQLTxIsDeliveredByPoller(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 20 * time.Millisecond, SkipRecent: -1})
		rec := newDeliveries(nil)
		if err := a.ob.Register("Order", "OrderPlaced", rec); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := context.Background()
		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := a.ob.Writer().Write(ctx, tx, orderPlaced)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "delivered by the poller", func() bool { return a.event(t, id).Status == outbox.StatusDone })
		if c := a.metrics.counts(); c.hotEnqueued != 0 || c.coldEnqueued == 0 || rec.of(id) != 1 {
			t.Fatalf("metrics %+v, deliveries %d", c, rec.of(id))
		}
	})
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLiteDB(t)
	cases := []struct {
		name  string
		db    *sql.DB
		cfg   outbox.Config
		field string
	}{
		{"multi node without ttl", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode}, "ClaimTTL"},
		{"multi node negative ttl", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode, ClaimTTL: -time.Second}, "ClaimTTL"},
		{"multi node ttl below default timeouts", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode,
			ClaimTTL: 40 * time.Second}, "ClaimTTL"}, // 30 s listener + 10 s status
		{"multi node ttl below timeouts", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode,
			ClaimTTL: 2 * time.Second, ListenerTimeout: time.Second, StatusTimeout: time.Second}, "ClaimTTL"},
		{"multi node without listener timeout", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode,
			ClaimTTL: time.Hour, ListenerTimeout: -1}, "ListenerTimeout"},
		{"multi node without status timeout", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode,
			ClaimTTL: time.Hour, StatusTimeout: -1}, "StatusTimeout"},
		{"multi node node id with slash", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode,
			ClaimTTL: time.Hour, NodeID: "a/b"}, "NodeID"},
		{"multi node node id with space", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode,
			ClaimTTL: time.Hour, NodeID: "a b"}, "NodeID"},
		{"multi node node id too long", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.MultiNode,
			ClaimTTL: time.Hour, NodeID: strings.Repeat("n", 97) /* documented limit: 96 bytes */}, "NodeID"},
		{"claim ttl outside multi node", db, outbox.Config{Dialect: outbox.SQLite, ClaimTTL: time.Hour}, "ClaimTTL"},
		{"node id outside multi node", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.WriterOnly, NodeID: "n1"}, "NodeID"},
		{"unknown mode", db, outbox.Config{Dialect: outbox.SQLite, Mode: 42}, "Mode"},
		{"no dialect", db, outbox.Config{}, "Dialect"},
		{"no db", nil, outbox.Config{Dialect: outbox.SQLite}, "DB"},
		{"bad table", db, outbox.Config{Dialect: outbox.SQLite, Table: "x; DROP TABLE y"}, "Table"},
		{"unknown dead key policy", db, outbox.Config{Dialect: outbox.SQLite, DeadKeyPolicy: 7}, "DeadKeyPolicy"},
		{"negative workers", db, outbox.Config{Dialect: outbox.SQLite, Workers: -3}, "Workers"},
		{"bad purge interval", db, outbox.Config{Dialect: outbox.SQLite, PurgeInterval: -5}, "PurgeInterval"},
		{"undelivered retention outside writer only", db, outbox.Config{Dialect: outbox.SQLite, PurgeUndeliveredAfter: time.Hour}, "PurgeUndeliveredAfter"},
		{"negative undelivered retention", db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.WriterOnly, PurgeUndeliveredAfter: -time.Hour}, "PurgeUndeliveredAfter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := outbox.New(tc.db, tc.cfg)
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Fatalf("err = %v, want *ConfigError", err)
			}
			if ce.Field != tc.field {
				t.Fatalf("field = %q, want %q (%v)", ce.Field, tc.field, err)
			}
		})
	}
}

func TestStartFailsClearlyWithoutTable(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		db, table := b.open(t) // not migrated
		ob, err := outbox.New(db, outbox.Config{Dialect: b.dialect, Table: table, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Start(context.Background()); err == nil {
			_ = ob.Stop(context.Background())
			t.Fatal("Start succeeded without the outbox table")
		}
		if err := ob.Stop(context.Background()); err != nil {
			t.Fatalf("stop after failed start: %v", err)
		}
	})
}

func TestOutboxStartStopIdempotent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{})
		ctx := context.Background()
		if err := a.ob.Stop(ctx); err != nil {
			t.Fatalf("stop before start: %v", err)
		}
		a.start(t)
		a.start(t)
		if err := a.ob.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.ob.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
