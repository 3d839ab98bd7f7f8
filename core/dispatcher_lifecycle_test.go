package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

func TestDispatcherStopDrainsQueues(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		b.listen(t, "Thing", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			time.Sleep(time.Second)
			return nil
		}))
		for i := range 3 {
			b.write(t, newEvent(fmt.Sprintf("h%d", i), "Thing"))
			cold := newEvent(fmt.Sprintf("c%d", i), "Thing")
			b.store.Put(cold)
			b.d.EnqueueCold(cold)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := b.d.Stop(ctx); err != nil {
			t.Fatalf("Stop = %v, want nil", err)
		}
		if took := time.Since(start); took != 6*time.Second {
			t.Errorf("Stop took %s, want 6s (six deliveries)", took)
		}
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusDone {
				t.Errorf("%s: status %s, want DONE", e.ID, e.Status)
			}
		}
		if b.d.EnqueueHot(newEvent("late", "Thing")) {
			t.Error("a stopped dispatcher accepted an event")
		}
	})
}

func TestDispatcherStopDeadlineLeavesEventsPending(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		g := newGate() // only returns when its context is cancelled
		b.listen(t, "Thing", g)
		for i := range 3 {
			b.write(t, newEvent(fmt.Sprintf("e%d", i), "Thing"))
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if err := b.d.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want DeadlineExceeded", err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("Stop took %s, want 1s", took)
		}
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusNew || e.Attempts != 0 || e.LastError != "" {
				t.Errorf("%s: %s attempts %d %q, want untouched NEW", e.ID, e.Status, e.Attempts, e.LastError)
			}
		}
		if got := g.delivered(); !slices.Equal(got, []string{"e0"}) {
			t.Errorf("delivered %v, want only the running one", got)
		}
		if len(b.metrics.dispatches()) != 0 {
			t.Error("an interrupted delivery was reported as dispatched")
		}
		if hot, cold := b.d.QueueDepths(); hot != 0 || cold != 0 {
			t.Errorf("QueueDepths after stop = %d, %d, want 0, 0", hot, cold)
		}

		// Restarted, the dispatcher has forgotten the interrupted and queued events.
		if err := b.d.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		g.open()
		for _, e := range b.store.Events() {
			if !b.d.EnqueueCold(e) {
				t.Errorf("after restart, EnqueueCold(%s) refused", e.ID)
			}
		}
		synctest.Wait()
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusDone {
				t.Errorf("%s: %s, want DONE after restart", e.ID, e.Status)
			}
		}
	})
}

func TestDispatcherStopWithExpiredContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		g := newGate()
		b.listen(t, "Thing", g)
		for i := range 3 {
			b.write(t, newEvent(fmt.Sprintf("e%d", i), "Thing"))
		}
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.d.Stop(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop = %v, want context.Canceled", err)
		}
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusNew {
				t.Errorf("%s: status %s, want NEW", e.ID, e.Status)
			}
		}
		if logs := b.logs.find(slog.LevelWarn, "stop deadline passed"); len(logs) != 1 {
			t.Errorf("warn logs = %+v, want one about the hard stop", logs)
		}
	})
}

func TestDispatcherStartStopIdempotent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		logs := newLogSink()
		d, err := outbox.NewDispatcher(outboxtest.NewMemoryStore(), outbox.NewRegistry(), outbox.DispatcherConfig{Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Stop(t.Context()); err != nil {
			t.Fatalf("Stop before Start = %v", err)
		}
		for range 2 {
			if err := d.Start(t.Context()); err != nil {
				t.Fatalf("Start = %v", err)
			}
		}
		for range 2 {
			if err := d.Stop(t.Context()); err != nil {
				t.Fatalf("Stop = %v", err)
			}
		}
		if n := len(logs.find(slog.LevelDebug, "dispatcher started")); n != 1 {
			t.Errorf("started logs = %d, want 1", n)
		}
		if n := len(logs.find(slog.LevelDebug, "dispatcher stopped")); n != 1 {
			t.Errorf("stopped logs = %d, want 1", n)
		}
	})
}

func TestDispatcherStartIgnoresStartContextCancellation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		l := &outboxtest.RecordingListener{}
		b.listen(t, "Thing", l)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if err := b.d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		time.Sleep(2 * time.Second)
		b.write(t, newEvent("e1", "Thing"))
		synctest.Wait()
		if l.Count() != 1 {
			t.Fatal("the dispatcher stopped when its start context ended")
		}
	})
}

func TestDispatcherStartStopStress(t *testing.T) {
	t.Parallel()
	store := outboxtest.NewMemoryStore()
	reg := outbox.NewRegistry()
	var delivered atomic.Int64
	if err := reg.Register("", "Thing", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		delivered.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{Workers: 3, HotQueueSize: 8, ColdQueueSize: 8, Logger: newLogSink().logger()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				e := newEvent(fmt.Sprintf("g%d-%d", g, i), "Thing")
				if _, err := store.Insert(context.Background(), nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
					t.Error(err)
					return
				}
				switch (g + i) % 4 {
				case 0:
					if err := d.Start(context.Background()); err != nil {
						t.Error(err)
					}
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond)
					if err := d.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
					}
					cancel()
				case 2:
					_ = d.WriterHook().AfterCommit(context.Background(), []outbox.Event{e})
				default:
					d.EnqueueCold(e)
					_ = d.ColdCapacity()
					_, _ = d.QueueDepths()
				}
			}
		})
	}
	wg.Wait()
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hot, cold := d.QueueDepths(); hot != 0 || cold != 0 {
		t.Errorf("QueueDepths after Stop = %d, %d", hot, cold)
	}
	for _, e := range store.Events() {
		if e.Status != outbox.StatusNew && e.Status != outbox.StatusDone {
			t.Errorf("%s: status %s", e.ID, e.Status)
		}
	}
	t.Logf("%d deliveries", delivered.Load())
}
