package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// stuckBundle is an Outbox over a memory store with a listener that ignores its context
// ("Block", until release is closed) and a healthy one ("Healthy").
type stuckBundle struct {
	ob      *outbox.Outbox
	store   *outboxtest.MemoryStore
	logs    *logSink
	metrics *countingMetrics
	release chan struct{}
	healthy atomic.Int32
	stuck   atomic.Int32 // OnStuck calls
	blocked atomic.Int32 // Block attempts that started
}

func newStuckBundle(t *testing.T, cfg outbox.Config) *stuckBundle {
	t.Helper()
	b := &stuckBundle{store: outboxtest.NewMemoryStore(), logs: newLogSink(), metrics: &countingMetrics{}, release: make(chan struct{})}
	cfg.Store, cfg.Logger, cfg.Metrics = b.store, b.logs.logger(), b.metrics
	cfg.SkipRecent, cfg.PollInterval = -1, time.Hour // only the test's Poll calls poll
	cfg.OnStuck = func(outbox.Event, time.Duration) { b.stuck.Add(1) }
	ob, err := outbox.New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.ob = ob
	mustOK(t, ob.Register("", "Block", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		b.blocked.Add(1)
		<-b.release // ignores its context
		return nil
	})))
	mustOK(t, ob.Register("", "Healthy", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		b.healthy.Add(1)
		return nil
	})))
	return b
}

// put stores n due events of typ, created one microsecond apart after base.
func (b *stuckBundle) put(typ string, n int, base time.Time) {
	for i := range n {
		at := base.Add(time.Duration(i) * time.Microsecond)
		b.store.Put(outbox.Event{ID: fmt.Sprintf("%s-%03d", typ, i), Type: typ, AggregateType: outbox.GlobalAggregateType,
			Payload: json.RawMessage(`{}`), Status: outbox.StatusNew, CreatedAt: at, AvailableAt: at})
	}
}

func (b *stuckBundle) poll(t *testing.T) {
	t.Helper()
	if _, err := outboxtest.Poll(t.Context(), b.ob); err != nil {
		t.Fatal(err)
	}
}

func (b *stuckBundle) status(t *testing.T, id string) outbox.Status {
	t.Helper()
	e, ok := b.store.Event(id)
	if !ok {
		t.Fatalf("no event %s", id)
	}
	return e.Status
}

// TestStuckListenersDoNotWedgeTheOutbox: with two workers and two listeners that ignore
// their context, the 200 healthy events behind them are delivered, the stuck attempts
// are logged at Warn, counted and reported, and Stop returns.
func TestStuckListenersDoNotWedgeTheOutbox(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newStuckBundle(t, outbox.Config{Workers: 2, ListenerTimeout: time.Second})
		mustOK(t, b.ob.Start(t.Context()))
		now := time.Now()
		b.put("Block", 2, now.Add(-time.Hour)) // oldest first: both workers take one (see below)
		b.put("Healthy", 200, now.Add(-time.Minute))
		b.poll(t)
		synctest.Wait()
		if n := b.blocked.Load(); n != 2 {
			t.Fatalf("%d blocking attempts started, want 2", n)
		}
		// The workers take the two listeners' lanes in turn, so one healthy event may
		// be delivered between the two blocking ones (when the poller queued it before
		// a worker took Block-001), never more.
		if n := b.healthy.Load(); n > 1 {
			t.Fatalf("%d healthy events delivered while both workers are blocked, want at most 1", n)
		}
		time.Sleep(time.Second + time.Second) // ListenerTimeout and the stuck grace
		synctest.Wait()
		if n := b.healthy.Load(); n != 200 {
			t.Fatalf("%d of 200 healthy events delivered past two stuck listeners", n)
		}
		if n := b.stuck.Load(); n != 2 {
			t.Fatalf("OnStuck called %d times, want 2", n)
		}
		if w := b.logs.find(slog.LevelWarn, "listener attempt stuck past ListenerTimeout"); len(w) != 2 {
			t.Fatalf("%d stuck warnings, want 2", len(w))
		}
		if r := b.metrics.stuck(); len(r) == 0 || r[len(r)-1] != 2 {
			t.Fatalf("StuckAttempts reports %v, want the last to be 2", r)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := b.ob.Stop(ctx); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		close(b.release)
		synctest.Wait()
		// The abandoned attempts outlived the dispatcher: their rows stay pending.
		for _, id := range []string{"Block-000", "Block-001"} {
			if s := b.status(t, id); s != outbox.StatusNew {
				t.Errorf("%s is %s after its stuck attempt returned past Stop, want NEW", id, s)
			}
		}
		if r := b.metrics.stuck(); r[len(r)-1] != 0 {
			t.Fatalf("StuckAttempts reports %v, want the last to be 0", r)
		}
	})
}

// TestStuckAttemptOutcomeIsWrittenWhenItReturns: a stuck listener that returns while
// the dispatcher runs gets its outcome written, once, and is no longer counted.
func TestStuckAttemptOutcomeIsWrittenWhenItReturns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newStuckBundle(t, outbox.Config{Workers: 1, ListenerTimeout: time.Second})
		mustOK(t, b.ob.Start(t.Context()))
		t.Cleanup(func() { _ = b.ob.Stop(context.Background()) })
		now := time.Now()
		b.put("Block", 1, now.Add(-time.Hour))
		b.put("Healthy", 10, now.Add(-time.Minute))
		b.poll(t)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := b.healthy.Load(); n != 10 {
			t.Fatalf("%d of 10 healthy events delivered past a stuck listener", n)
		}
		if s := b.status(t, "Block-000"); s != outbox.StatusNew {
			t.Fatalf("Block-000 is %s while its listener still runs, want NEW", s)
		}
		// A poll while the stuck attempt runs does not queue the event again.
		b.poll(t)
		synctest.Wait()
		if n := b.blocked.Load(); n != 1 {
			t.Fatalf("%d attempts of the stuck event, want 1", n)
		}
		close(b.release)
		synctest.Wait()
		if s := b.status(t, "Block-000"); s != outbox.StatusDone {
			t.Fatalf("Block-000 is %s after its stuck listener returned nil, want DONE", s)
		}
		if r := b.metrics.stuck(); len(r) < 2 || r[len(r)-1] != 0 {
			t.Fatalf("StuckAttempts reports %v, want 1 then 0", r)
		}
	})
}

// TestStuckAttemptsAreBoundedByWorkers: at most Workers attempts are stuck at once;
// past that a worker waits for its own attempt, so the listener goroutines stay within
// twice the workers.
func TestStuckAttemptsAreBoundedByWorkers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newStuckBundle(t, outbox.Config{Workers: 1, ListenerTimeout: time.Second})
		mustOK(t, b.ob.Start(t.Context()))
		t.Cleanup(func() { _ = b.ob.Stop(context.Background()) })
		now := time.Now()
		b.put("Block", 2, now.Add(-time.Hour))
		b.put("Healthy", 5, now.Add(-time.Minute))
		b.poll(t)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := b.blocked.Load(); n != 2 {
			t.Fatalf("%d blocking attempts started, want 2 (the first was replaced)", n)
		}
		if n := b.stuck.Load(); n != 1 {
			t.Fatalf("OnStuck called %d times, want 1: the second stuck attempt is past the bound", n)
		}
		// The worker takes the two listeners' lanes in turn: Block-000 (left stuck),
		// Healthy-000, Block-001 (stuck past the bound: the worker waits for it), and
		// no other healthy event while it waits.
		if n := b.healthy.Load(); n != 1 {
			t.Fatalf("%d healthy events delivered while the only worker waits for a stuck attempt, want the 1 between the blocking ones", n)
		}
		if w := b.logs.find(slog.LevelWarn, "bound on stuck attempts"); len(w) != 1 {
			t.Fatalf("%d bound warnings, want 1", len(w))
		}
		close(b.release)
		synctest.Wait()
		time.Sleep(outbox.DefaultDoneBatchWindow) // the DONE outcomes' batch
		synctest.Wait()
		if n := b.healthy.Load(); n != 5 {
			t.Fatalf("%d of 5 healthy events delivered after the stuck listeners returned", n)
		}
		for _, id := range []string{"Block-000", "Block-001"} {
			if s := b.status(t, id); s != outbox.StatusDone {
				t.Errorf("%s is %s, want DONE", id, s)
			}
		}
	})
}

// TestStopReturnsByItsDeadlineWhateverListenersDo: listeners that ignore their context
// and no ListenerTimeout at all: Stop still returns when its context ends, and so does a
// second Stop; the interrupted rows stay pending.
func TestStopReturnsByItsDeadlineWhateverListenersDo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newStuckBundle(t, outbox.Config{Workers: 2, ListenerTimeout: -1})
		mustOK(t, b.ob.Start(t.Context()))
		b.put("Block", 2, time.Now().Add(-time.Hour))
		b.poll(t)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		errs := make(chan error, 2)
		go func() { errs <- b.ob.Stop(ctx) }()
		go func() { errs <- b.ob.Stop(ctx) }()
		for range 2 {
			if err := <-errs; err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Stop = %v", err)
			}
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("Stop took %s past its 100ms deadline", took)
		}
		close(b.release)
		synctest.Wait()
		for _, id := range []string{"Block-000", "Block-001"} {
			if s := b.status(t, id); s != outbox.StatusNew {
				t.Errorf("%s is %s after a hard stop, want NEW (left for a later delivery)", id, s)
			}
		}
	})
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoListenerStartsAfterAHardStop: an attempt parked between its worker taking the
// event and its listener starting (here in an interceptor's Before) when a hard stop
// returns never calls its listener afterwards, and its row stays pending.
func TestNoListenerStartsAfterAHardStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		parked, resume := make(chan struct{}), make(chan struct{})
		var afterErr error
		b := newStuckBundle(t, outbox.Config{Workers: 1, Interceptors: []outbox.Interceptor{outbox.InterceptorFuncs{
			BeforeFunc: func(ctx context.Context, _ *outbox.Event) (context.Context, error) {
				close(parked)
				<-resume
				return ctx, nil
			},
			AfterFunc: func(_ context.Context, _ *outbox.Event, err error) error {
				afterErr = err
				return nil
			},
		}}})
		mustOK(t, b.ob.Start(t.Context()))
		b.put("Healthy", 1, time.Now().Add(-time.Hour))
		b.poll(t)
		<-parked
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.ob.Stop(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop = %v, want context.Canceled", err)
		}
		close(resume)
		synctest.Wait()
		if n := b.healthy.Load(); n != 0 {
			t.Fatalf("the listener started %d time(s) after Stop returned", n)
		}
		if !errors.Is(afterErr, context.Canceled) {
			t.Errorf("the interceptor's After saw %v, want the run's cancellation", afterErr)
		}
		if s := b.status(t, "Healthy-000"); s != outbox.StatusNew {
			t.Errorf("Healthy-000 is %s after a hard stop, want NEW", s)
		}
	})
}
