package outboxprom

// Real dispatches on SQLite through outbox.New with a *Metrics: every hook metric must
// move for the event that causes it.

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// dispatchBundle is an Outbox on a fresh SQLite database reporting to its own registry.
type dispatchBundle struct {
	db  *sql.DB
	reg *prometheus.Registry
	m   *Metrics
	ob  *outbox.Outbox
}

// setupDispatch builds an Outbox with cfg (Dialect, Metrics and a quiet Logger filled in;
// one worker, an hourly poller and no SkipRecent unless cfg says otherwise), lets
// register add listeners, starts it and stops it at cleanup.
func setupDispatch(t *testing.T, cfg outbox.Config, register func(ob *outbox.Outbox) error) *dispatchBundle {
	t.Helper()
	db := newSQLiteDB(t)
	if err := outbox.Migrate(context.Background(), db, outbox.SQLite); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The poller's first cycle runs in the background right after Start; wait for it
	// (it reports OldestPendingLag at its end), so that only the test's Poll calls run
	// the poller afterwards.
	firstPoll := make(chan struct{})
	cfg.Dialect, cfg.Metrics = outbox.SQLite, &pollSignal{Metrics: m, polled: firstPoll}
	cfg.Logger = slog.New(slog.DiscardHandler)
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Hour // only the test's Poll calls run the poller
	}
	if cfg.SkipRecent == 0 {
		cfg.SkipRecent = -1
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		t.Fatalf("new outbox: %v", err)
	}
	if register != nil {
		if err := register(ob); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	if err := ob.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	select {
	case <-firstPoll:
	case <-time.After(30 * time.Second):
		t.Fatal("the poller's first cycle did not finish")
	}
	return &dispatchBundle{db: db, reg: reg, m: m, ob: ob}
}

// pollSignal passes every measurement to Metrics and closes polled at the end of the
// first poll cycle.
type pollSignal struct {
	*Metrics
	polled chan struct{}
	once   sync.Once
}

func (p *pollSignal) OldestPendingLag(lag time.Duration) {
	p.Metrics.OldestPendingLag(lag)
	p.once.Do(func() { close(p.polled) })
}

// write commits one event through RunInTx, so that it takes the hot path.
func (b *dispatchBundle) write(t *testing.T, env outbox.Envelope) string {
	t.Helper()
	var id string
	err := outbox.RunInTx(context.Background(), b.db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = b.ob.Writer().Write(ctx, tx, env)
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return id
}

// poll runs the poller once.
func (b *dispatchBundle) poll(t *testing.T) int {
	t.Helper()
	n, err := outboxtest.Poll(context.Background(), b.ob)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return n
}

// pollUntil runs the poller until outbox_dispatch_total{path, result} reaches want: an
// event rescheduled a moment ago may not be due at the first cycle.
func (b *dispatchBundle) pollUntil(t *testing.T, path, result string, want float64) {
	t.Helper()
	waitFor(t, "outbox_dispatch_total{"+path+","+result+"} after polls", func() bool {
		b.poll(t)
		time.Sleep(time.Millisecond) // let the worker finish before the next cycle
		return b.dispatched(path, result) == want
	})
}

// status returns the event's status.
func (b *dispatchBundle) status(t *testing.T, id string) outbox.Status {
	t.Helper()
	e, err := b.ob.Store().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return e.Status
}

// dispatched returns outbox_dispatch_total{path, outcome}.
func (b *dispatchBundle) dispatched(path, outcome string) float64 {
	return testutil.ToFloat64(b.m.dispatchVec.WithLabelValues(path, outcome))
}

// waitDispatched waits until outbox_dispatch_total{path, outcome} reaches want. The hook
// is called after the outcome is written, so waiting for the row is not enough.
func (b *dispatchBundle) waitDispatched(t *testing.T, path, outcome string, want float64) {
	t.Helper()
	waitValue(t, b.reg, want, "outbox_dispatch_total", "path", path, "outcome", outcome)
}

// wantDispatches checks every outbox_dispatch_total series: want lists the non-zero ones.
func (b *dispatchBundle) wantDispatches(t *testing.T, want map[[2]string]float64) {
	t.Helper()
	for _, path := range pathNames {
		for _, outcome := range outcomeNames {
			if got := b.dispatched(path, outcome); got != want[[2]string{path, outcome}] {
				t.Errorf("outbox_dispatch_total{path=%q,outcome=%q} = %v, want %v", path, outcome, got, want[[2]string{path, outcome}])
			}
		}
	}
}

var orderPlaced = outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: map[string]string{"k": "v"}}

func TestDispatchSuccessOnTheHotPath(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, outbox.Config{}, func(ob *outbox.Outbox) error {
		return ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
	})
	id := b.write(t, orderPlaced)
	b.waitDispatched(t, "hot", "done", 1)
	if s := b.status(t, id); s != outbox.StatusDone {
		t.Fatalf("status %s", s)
	}
	if got := testutil.ToFloat64(b.m.hotEnqueued); got != 1 {
		t.Errorf("hot_enqueued_total = %v", got)
	}
	for name, c := range map[string]prometheus.Counter{"hot_dropped": b.m.hotDropped, "cold_enqueued": b.m.coldEnqueued, "delayed_skipped": b.m.delayedSkipped} {
		if got := testutil.ToFloat64(c); got != 0 {
			t.Errorf("%s = %v", name, got)
		}
	}
	b.wantDispatches(t, map[[2]string]float64{{"hot", "done"}: 1})
	if n := value(t, b.reg, "outbox_dispatch_latency_seconds", "path", "hot"); n != 1 {
		t.Errorf("hot latency observations = %v", n)
	}
	if n := value(t, b.reg, "outbox_dispatch_latency_seconds", "path", "cold"); n != 0 {
		t.Errorf("cold latency observations = %v", n)
	}
	if n := value(t, b.reg, "outbox_listener_duration_seconds", "outcome", "done"); n != 1 {
		t.Errorf("done duration observations = %v", n)
	}
}

// TestDispatchPausedSubscription: a pause (outbox.Events.Pause) sets
// outbox_subscription_paused of the subscription to 1 while its event stays pending,
// and a resume sets it back to 0 and lets the poller deliver the event.
func TestDispatchPausedSubscription(t *testing.T) {
	t.Parallel()
	const name = "Order/mailer"
	b := setupDispatch(t, outbox.Config{}, func(ob *outbox.Outbox) error {
		return ob.Subscribe(outbox.Subscription{Name: name, AggregateType: "Order", EventType: "OrderPlaced",
			Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })})
	})
	ctx := context.Background()
	if err := b.ob.Events().Pause(ctx, name, "smtp down"); err != nil {
		t.Fatal(err)
	}
	waitValue(t, b.reg, 1, "outbox_subscription_paused", "listener", name)
	id := b.write(t, orderPlaced)
	b.poll(t)
	if s := b.status(t, id); s != outbox.StatusNew {
		t.Fatalf("an event of the paused subscription is %s, want NEW", s)
	}
	if q := value(t, b.reg, "outbox_subscription_queued", "listener", name); q != 0 {
		t.Errorf("outbox_subscription_queued of the paused subscription = %v, want 0", q)
	}
	b.wantDispatches(t, nil)
	if err := b.ob.Events().Resume(ctx, name); err != nil {
		t.Fatal(err)
	}
	waitValue(t, b.reg, 0, "outbox_subscription_paused", "listener", name)
	b.pollUntil(t, "cold", "done", 1)
	if s := b.status(t, id); s != outbox.StatusDone {
		t.Fatalf("status after the resume: %s", s)
	}
}

// TestDispatchDropOnAFullHotQueue holds the only worker in the listener so that the hot
// queue (size 1) fills up: the third event is dropped and delivered by the poller.
func TestDispatchDropOnAFullHotQueue(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	b := setupDispatch(t, outbox.Config{HotQueueSize: 1}, func(ob *outbox.Outbox) error {
		return ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			if first { // one worker: no concurrent calls
				first = false
				close(entered)
				<-release
			}
			return nil
		}))
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release) // let Stop drain if the test failed early
		}
	}()
	b.write(t, orderPlaced) // taken by the worker, which blocks
	<-entered
	b.write(t, orderPlaced) // waits in the queue
	dropped := b.write(t, orderPlaced)
	if got := testutil.ToFloat64(b.m.hotEnqueued); got != 2 {
		t.Errorf("hot_enqueued_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(b.m.hotDropped); got != 1 {
		t.Errorf("hot_dropped_total = %v, want 1", got)
	}
	// The poll loop catches up with the drop at once: the dropped event may already wait
	// in the cold queue (the worker is still blocked).
	if hot, cold := testutil.ToFloat64(b.m.depth[0]), testutil.ToFloat64(b.m.depth[1]); hot != 1 || cold > 1 {
		t.Errorf("queue_depth hot %v, cold %v; want 1, and 0 or 1", hot, cold)
	}
	close(release)
	b.waitDispatched(t, "hot", "done", 2)

	// The poll loop catches up with a drop at once, so it may have queued the dropped
	// event already (0); either way the cold path delivers it, once.
	if n := b.poll(t); n > 1 {
		t.Fatalf("poll queued %d events, want at most the dropped one", n)
	}
	b.waitDispatched(t, "cold", "done", 1)
	if s := b.status(t, dropped); s != outbox.StatusDone {
		t.Fatalf("dropped event %s", s)
	}
	if got := testutil.ToFloat64(b.m.coldEnqueued); got != 1 {
		t.Errorf("cold_enqueued_total = %v, want 1", got)
	}
	b.wantDispatches(t, map[[2]string]float64{{"hot", "done"}: 2, {"cold", "done"}: 1})
	if n := value(t, b.reg, "outbox_dispatch_latency_seconds", "path", "cold"); n != 1 {
		t.Errorf("cold latency observations = %v", n)
	}
}

// TestDispatchRetryThenDead: a failing listener is retried (failure) and DEAD at
// MaxAttempts (dead); the table then shows the DEAD row at scrape time.
func TestDispatchRetryThenDead(t *testing.T) {
	t.Parallel()
	var second outbox.Event // the row as the second attempt read it; one worker
	b := setupDispatch(t, outbox.Config{
		MaxAttempts: 2,
		Retry:       outbox.RetryPolicyFunc(func(int) time.Duration { return time.Millisecond }),
	}, func(ob *outbox.Outbox) error {
		return ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			if e.Attempts == 1 {
				second = *e
			}
			return errors.New("downstream unavailable")
		}))
	})
	id := b.write(t, orderPlaced)
	b.waitDispatched(t, "hot", "retry", 1)
	// The poller reads the retry when it falls due (1 ms later), if the test's poll does
	// not first.
	b.pollUntil(t, "cold", "dead", 1)
	if second.Status != outbox.StatusRetry {
		t.Fatalf("after the first attempt: %s, want RETRY", second.Status)
	}
	if s := b.status(t, id); s != outbox.StatusDead {
		t.Fatalf("after the second attempt: %s", s)
	}
	b.wantDispatches(t, map[[2]string]float64{{"hot", "retry"}: 1, {"cold", "dead"}: 1})
	if got := testutil.ToFloat64(b.m.coldEnqueued); got != 1 {
		t.Errorf("cold_enqueued_total = %v", got)
	}
	for result, want := range map[string]float64{"retry": 1, "dead": 1, "done": 0} {
		if n := value(t, b.reg, "outbox_listener_duration_seconds", "outcome", result); n != want {
			t.Errorf("%s duration observations = %v, want %v", result, n, want)
		}
	}

	_, reg, _ := newStats(t, b.ob.Events(), StatsOptions{})
	g := scrape(t, reg)
	if dead, up := value(t, g, "outbox_dead_events"), value(t, g, "outbox_stats_up"); dead != 1 || up != 1 {
		t.Fatalf("stats: dead %v, up %v", dead, up)
	}
}

// TestDispatchDeferredAndDeadResults: RetryAfter defers without counting an attempt;
// a Dead result and an unroutable event go to DEAD at once.
func TestDispatchDeferredAndDeadResults(t *testing.T) {
	t.Parallel()
	calls := 0
	b := setupDispatch(t, outbox.Config{}, func(ob *outbox.Outbox) error {
		return errors.Join(
			ob.Register("Order", "Deferred", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
				calls++ // one worker: no concurrent calls
				if calls == 1 {
					return outbox.Defer(time.Millisecond)
				}
				return nil
			})),
			ob.Register("Order", "Poison", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
				return outbox.Dead(errors.New("cannot be processed"))
			})),
		)
	})
	deferred := b.write(t, outbox.Envelope{Type: "Deferred", AggregateType: "Order", Payload: 1})
	b.waitDispatched(t, "hot", "deferred", 1)
	// The poller reads it when it falls due (1 ms later), if the test's poll does not first.
	b.pollUntil(t, "cold", "done", 1)
	if e, err := b.ob.Store().Get(t.Context(), deferred); err != nil || e.Status != outbox.StatusDone || e.Attempts != 0 {
		t.Fatalf("deferred event %+v, %v; want DONE with no attempt counted", e, err)
	}

	poison := b.write(t, outbox.Envelope{Type: "Poison", AggregateType: "Order", Payload: 1})
	b.waitDispatched(t, "hot", "dead", 1)
	unroutable := b.write(t, outbox.Envelope{Type: "NobodyListens", Payload: 1})
	b.waitDispatched(t, "hot", "dead", 2)
	for _, id := range []string{poison, unroutable} {
		if s := b.status(t, id); s != outbox.StatusDead {
			t.Fatalf("event %s is %s, want DEAD", id, s)
		}
	}
	b.wantDispatches(t, map[[2]string]float64{{"hot", "deferred"}: 1, {"cold", "done"}: 1, {"hot", "dead"}: 2})
	if got := testutil.ToFloat64(b.m.hotEnqueued); got != 3 {
		t.Errorf("hot_enqueued_total = %v, want 3", got)
	}
}

// TestDispatchDelayedSkipsTheHotPath: a delayed event is counted and left to the poller.
func TestDispatchDelayedSkipsTheHotPath(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, outbox.Config{}, nil)
	env := orderPlaced
	env.DeliverAfter = time.Hour
	b.write(t, env)
	if got := testutil.ToFloat64(b.m.delayedSkipped); got != 1 {
		t.Fatalf("hot_delayed_skipped_total = %v", got)
	}
	if got := testutil.ToFloat64(b.m.hotEnqueued) + testutil.ToFloat64(b.m.hotDropped); got != 0 {
		t.Fatalf("hot enqueued + dropped = %v", got)
	}
}

// TestDispatchColdLatencyAndPollLag: with the hot path disabled, an event that became
// due an hour ago (a row left by a process that was down) is found by the poller: the
// poll lag and the cold latency show the hour. (An event written now is due from its
// write, whatever its OccurredAt.)
func TestDispatchColdLatencyAndPollLag(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t, outbox.Config{HotQueueSize: -1}, func(ob *outbox.Outbox) error {
		return ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
	})
	env := orderPlaced
	env.OccurredAt = time.Now().Add(-time.Hour)
	id := b.write(t, env)
	due := env.OccurredAt.UTC().Format("2006-01-02T15:04:05.000000Z") // SQLite's time text
	if _, err := b.db.ExecContext(t.Context(), "UPDATE outbox_event SET available_at = ? WHERE event_id = ?", due, id); err != nil {
		t.Fatal(err)
	}
	if n := b.poll(t); n != 1 {
		t.Fatalf("poll queued %d", n)
	}
	if lag := testutil.ToFloat64(b.m.pollLag); lag < 3600 || lag > 3600+300 {
		t.Fatalf("poll_lag_seconds = %v, want about an hour", lag)
	}
	b.waitDispatched(t, "cold", "done", 1)
	if sum := histSum(t, b.reg, "outbox_dispatch_latency_seconds", "path", "cold"); sum < 3600 {
		t.Fatalf("cold latency sum = %v, want at least an hour", sum)
	}
	if got := testutil.ToFloat64(b.m.coldEnqueued); got != 1 {
		t.Fatalf("cold_enqueued_total = %v", got)
	}
	// A cycle that sees nothing due resets the lag.
	b.poll(t)
	if lag := testutil.ToFloat64(b.m.pollLag); lag != 0 {
		t.Fatalf("poll_lag_seconds = %v after an empty cycle", lag)
	}
}

// newSQLiteDB opens a new SQLite database file in the test's temp dir and closes it
// when the test ends.
func newSQLiteDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close sqlite: %v", err)
		}
	})
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("ping sqlite: %v", err)
	}
	return db
}
