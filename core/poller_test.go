package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

func TestNewPollerValidates(t *testing.T) {
	t.Parallel()
	store := outboxtest.NewMemoryStore()
	d, err := outbox.NewDispatcher(store, outbox.NewRegistry(), outbox.DispatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		store     storage.Store
		d         *outbox.Dispatcher
		cfg       outbox.PollerConfig
		wantField string
	}{
		{name: "zero value", store: store, d: d},
		{name: "disabled values", store: store, d: d, cfg: outbox.PollerConfig{SkipRecent: -1, QueryTimeout: -1}},
		{name: "nil store", d: d, wantField: "Store"},
		{name: "nil dispatcher", store: store, wantField: "Dispatcher"},
		{name: "negative interval", store: store, d: d, cfg: outbox.PollerConfig{Interval: -1}, wantField: "Interval"},
		{name: "negative batch size", store: store, d: d, cfg: outbox.PollerConfig{BatchSize: -1}, wantField: "BatchSize"},
		{name: "skip recent below -1", store: store, d: d, cfg: outbox.PollerConfig{SkipRecent: -2}, wantField: "SkipRecent"},
		{name: "query timeout below -1", store: store, d: d, cfg: outbox.PollerConfig{QueryTimeout: -time.Second}, wantField: "QueryTimeout"},
		{name: "claims", store: store, d: d, cfg: outbox.PollerConfig{ClaimTTL: time.Minute, NodeID: "node-1"}},
		{name: "negative claim ttl", store: store, d: d, cfg: outbox.PollerConfig{ClaimTTL: -time.Second}, wantField: "ClaimTTL"},
		{name: "bad node id", store: store, d: d, cfg: outbox.PollerConfig{ClaimTTL: time.Minute, NodeID: "a/b"}, wantField: "NodeID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := outbox.NewPoller(tt.store, tt.d, tt.cfg)
			if tt.wantField == "" {
				if err != nil || p == nil {
					t.Fatalf("NewPoller = %v, %v; want a poller", p, err)
				}
				return
			}
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField || !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Fatalf("NewPoller error = %v, want ConfigError on %s", err, tt.wantField)
			}
		})
	}
}

// pollBundle is a dispatcher whose single worker is held by a gate, so that what the
// poller queues stays in the cold queue until the gate opens.
type pollBundle struct {
	*dispatchBundle
	gate *gate
	rec  *outboxtest.RecordingListener
}

func setupBlockedDispatcher(t *testing.T, cfg outbox.DispatcherConfig) *pollBundle {
	t.Helper()
	cfg.Workers = 1
	b := &pollBundle{dispatchBundle: setupDispatcher(t, cfg), gate: newGate(), rec: &outboxtest.RecordingListener{}}
	b.listen(t, "Gate", b.gate)
	b.listen(t, "Thing", b.rec)
	b.write(t, newEvent("gate", "Gate"))
	synctest.Wait()
	t.Cleanup(func() {
		select {
		case <-b.gate.release:
		default:
			b.gate.open()
		}
	})
	return b
}

// seed stores n due events created age ago, one second apart, oldest first.
func (b *pollBundle) seed(t *testing.T, n int, age time.Duration) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		e := newEvent(fmt.Sprintf("e%02d", i), "Thing")
		e.CreatedAt = e.CreatedAt.Add(-age + time.Duration(i)*time.Second)
		e.AvailableAt = e.CreatedAt
		if _, err := b.store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
			t.Fatal(err)
		}
		ids[i] = e.ID
	}
	return ids
}

func TestPollerRespectsColdCapacity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{ColdQueueSize: 3})
		ids := b.seed(t, 10, time.Hour)
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{})
		n, err := p.Poll(t.Context())
		if err != nil || n != 3 {
			t.Fatalf("Poll = %d, %v; want 3, nil", n, err)
		}
		if got := b.store.limits(); !slices.Equal(got, []int{3}) {
			t.Errorf("Pending limits = %v, want [3]", got)
		}
		if _, cold := b.d.QueueDepths(); cold != 3 {
			t.Errorf("cold depth = %d, want 3", cold)
		}
		if n, err := p.Poll(t.Context()); err != nil || n != 0 {
			t.Errorf("Poll with a full queue = %d, %v; want 0, nil", n, err)
		}
		if got := len(b.store.limits()); got != 1 {
			t.Errorf("Pending called %d times, want no query when the queue is full", got)
		}
		if got := b.metrics.counts().coldEnqueued; got != 3 {
			t.Errorf("ColdEnqueued = %d, want 3", got)
		}
		b.gate.open()
		synctest.Wait()
		if got := b.rec.IDs(); !slices.Equal(got, ids[:3]) {
			t.Errorf("delivered %v, want the three oldest %v", got, ids[:3])
		}
	})
}

func TestPollerStopsWhenTheQueueSaysFull(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{ColdQueueSize: 5})
		b.seed(t, 10, time.Hour)
		// Someone else fills three slots between the capacity check and the enqueues.
		var once sync.Once
		b.store.afterPending = func(storage.PendingBatch) {
			once.Do(func() {
				for i := range 3 {
					b.d.EnqueueCold(newEvent(fmt.Sprintf("other-%d", i), "Thing"))
				}
			})
		}
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{})
		if n, err := p.Poll(t.Context()); err != nil || n != 2 {
			t.Fatalf("Poll = %d, %v; want 2, nil", n, err)
		}
		if got := b.store.limits(); !slices.Equal(got, []int{5}) {
			t.Errorf("Pending limits = %v, want one query of 5", got)
		}
	})
}

func TestPollerReadsBatchesWhileCapacityRemains(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{ColdQueueSize: 10})
		ids := b.seed(t, 5, time.Hour)
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{BatchSize: 2})
		if n, err := p.Poll(t.Context()); err != nil || n != 5 {
			t.Fatalf("Poll = %d, %v; want 5, nil", n, err)
		}
		// Each query reads on after the last row of the one before; the short third
		// batch ends the cycle.
		if got := b.store.limits(); !slices.Equal(got, []int{2, 2, 2}) {
			t.Errorf("Pending limits = %v, want [2 2 2]", got)
		}
		if got, want := b.store.cursors(), []string{"", ids[1], ids[3]}; !slices.Equal(got, want) {
			t.Errorf("Pending cursors = %v, want %v", got, want)
		}
		b.gate.open()
		synctest.Wait()
		if got := b.rec.IDs(); !slices.Equal(got, ids) {
			t.Errorf("delivered %v, want %v in order", got, ids)
		}
	})
}

func TestPollerBudgetIsTheCapacityAtCycleStart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{ColdQueueSize: 5})
		b.seed(t, 20, time.Hour)
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{BatchSize: 2})
		if n, err := p.Poll(t.Context()); err != nil || n != 5 {
			t.Fatalf("Poll = %d, %v; want 5, nil", n, err)
		}
		if got := b.store.limits(); !slices.Equal(got, []int{2, 2, 1}) {
			t.Errorf("Pending limits = %v, want [2 2 1]", got)
		}
	})
}

func TestPollerSkipsEventsInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{})
		// The running gate event is the oldest pending row.
		b.store.Put(func() outbox.Event {
			e, _ := b.store.Event("gate")
			e.CreatedAt = e.CreatedAt.Add(-2 * time.Hour)
			e.AvailableAt = e.CreatedAt
			return e
		}())
		ids := b.seed(t, 3, time.Hour)
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{SkipRecent: -1})
		if n, err := p.Poll(t.Context()); err != nil || n != 3 {
			t.Fatalf("Poll = %d, %v; want 3, nil", n, err)
		}
		b.gate.open()
		synctest.Wait()
		if got := b.rec.IDs(); !slices.Equal(got, ids) {
			t.Errorf("delivered %v, want %v", got, ids)
		}
		if got := b.gate.delivered(); len(got) != 1 {
			t.Errorf("gate delivered %d times, want once", len(got))
		}
	})
}

func TestPollerMovesUndecodableRowsToDead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{})
		ids := b.seed(t, 3, time.Hour)
		b.store.Corrupt(ids[1], errors.New("headers: invalid JSON"))
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{})
		if n, err := p.Poll(t.Context()); err != nil || n != 2 {
			t.Fatalf("Poll = %d, %v; want 2, nil", n, err)
		}
		got := b.row(t, ids[1])
		if got.Status != outbox.StatusDead || !strings.Contains(got.LastError, "headers: invalid JSON") {
			t.Errorf("undecodable row: %s %q, want DEAD with the decode error", got.Status, got.LastError)
		}
		if ds := b.metrics.dispatches(); len(ds) != 1 || ds[0].Outcome != outbox.OutcomeDead || ds[0].Path != outbox.PathCold {
			t.Errorf("Dispatched = %+v, want one dead on the cold path", ds)
		}
		if logs := b.logs.find(slog.LevelError, "event that cannot be read or decoded moved to dead"); len(logs) != 1 ||
			logs[0].attrs["event_id"] != ids[1] || logs[0].attrs["component"] != "poller" {
			t.Errorf("error logs = %+v, want one for %s", logs, ids[1])
		}
	})
}

func TestPollerReportsOldestPendingLag(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{})
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{})
		now := time.Now()
		// Created long ago but only due a second ago: its lag is 1s.
		delayed := newEvent("delayed", "Thing")
		delayed.CreatedAt, delayed.AvailableAt = now.Add(-time.Hour), now.Add(-time.Second)
		old := newEvent("old", "Thing")
		old.CreatedAt, old.AvailableAt = now.Add(-10*time.Second), now.Add(-10*time.Second)
		notDue := newEvent("not-due", "Thing")
		notDue.AvailableAt = now.Add(time.Hour)
		b.store.Put(delayed, old, notDue)
		if _, err := p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.gate.open()
		synctest.Wait()
		if _, err := p.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := b.metrics.lagReports(); !slices.Equal(got, []time.Duration{10 * time.Second, 0}) {
			t.Errorf("OldestPendingLag reports = %v, want [10s 0s]", got)
		}
	})
}

func TestPollerSkipRecent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		b.listen(t, "Thing", &outboxtest.RecordingListener{})
		if _, err := b.store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{newEvent("e1", "Thing")}}); err != nil {
			t.Fatal(err)
		}
		p := newPoller(t, b, outbox.PollerConfig{})
		if n, _ := p.Poll(t.Context()); n != 0 {
			t.Fatalf("Poll = %d, want 0 for an event younger than SkipRecent", n)
		}
		time.Sleep(outbox.DefaultSkipRecent)
		if n, _ := p.Poll(t.Context()); n != 1 {
			t.Fatalf("Poll = %d, want 1 once SkipRecent has passed", n)
		}
		synctest.Wait()
	})
}

func TestPollerLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{HotQueueSize: -1})
		l := &outboxtest.RecordingListener{}
		b.listen(t, "Thing", l)
		old := newEvent("old", "Thing")
		old.CreatedAt = old.CreatedAt.Add(-time.Minute)
		b.store.Put(old)
		startPoller(t, b, outbox.PollerConfig{})
		synctest.Wait()
		if got := l.IDs(); !slices.Equal(got, []string{"old"}) {
			t.Fatalf("after Start: delivered %v, want the first cycle to run at once", got)
		}
		b.write(t, newEvent("new", "Thing")) // hot path disabled: only the poller delivers
		time.Sleep(outbox.DefaultPollInterval - time.Nanosecond)
		synctest.Wait()
		if l.Count() != 1 {
			t.Fatalf("delivered %v before the next tick", l.IDs())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := l.IDs(); !slices.Equal(got, []string{"old", "new"}) {
			t.Fatalf("after one interval: delivered %v", got)
		}
	})
}

func TestPollerLoopLogsErrorsAndContinues(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		var calls atomic.Int32
		b.store.beforePending = func(context.Context, storage.PendingParams) error {
			switch calls.Add(1) {
			case 1:
				return errors.New("db down")
			case 2:
				return fmt.Errorf("wrapped: %w", context.Canceled)
			}
			return nil
		}
		startPoller(t, b, outbox.PollerConfig{Interval: time.Second})
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if n := calls.Load(); n != 3 {
			t.Errorf("Pending calls = %d, want 3 (the loop goes on after errors)", n)
		}
		logs := b.logs.atLevel(slog.LevelError)
		if len(logs) != 1 || logs[0].msg != "poll failed" || logs[0].attrs["error"] != "read pending events: db down" {
			t.Errorf("error logs = %+v, want one for the failure and none for context.Canceled", logs)
		}
	})
}

func TestPollerQueryTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		b.store.beforePending = func(ctx context.Context, _ storage.PendingParams) error {
			<-ctx.Done()
			return ctx.Err()
		}
		p := newPoller(t, b, outbox.PollerConfig{QueryTimeout: 3 * time.Second})
		start := time.Now()
		_, err := p.Poll(t.Context())
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
			t.Fatalf("Poll = %v after %s, want DeadlineExceeded after 3s", err, time.Since(start))
		}
	})
}

func TestPollerStartStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		p := newPoller(t, b, outbox.PollerConfig{})
		if err := p.Stop(t.Context()); err != nil {
			t.Fatalf("Stop before Start = %v", err)
		}
		for range 2 {
			if err := p.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		for range 2 {
			if err := p.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(b.store.limits()); n != 1 {
			t.Errorf("Pending calls = %d, want 1 (one cycle at Start)", n)
		}
		// Hard stop: a query that never returns is cancelled.
		b.store.beforePending = func(ctx context.Context, _ storage.PendingParams) error {
			<-ctx.Done()
			return ctx.Err()
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want DeadlineExceeded", err)
		}
		if logs := b.logs.atLevel(slog.LevelError); len(logs) != 0 {
			t.Errorf("error logs after a hard stop: %+v", logs)
		}
	})
}

func TestPollerPollWithStoppedDispatcher(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		if err := b.d.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		p := newPoller(t, b, outbox.PollerConfig{})
		if n, err := p.Poll(t.Context()); n != 0 || err != nil {
			t.Fatalf("Poll = %d, %v; want 0, nil", n, err)
		}
		if n := len(b.store.limits()); n != 0 {
			t.Errorf("Pending called %d times with the dispatcher stopped", n)
		}
	})
}

func TestPollerStartStopStress(t *testing.T) {
	t.Parallel()
	store := outboxtest.NewMemoryStore()
	reg := outbox.NewRegistry()
	if err := reg.Register("", "Thing", &outboxtest.RecordingListener{}); err != nil {
		t.Fatal(err)
	}
	logger := newLogSink().logger()
	d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := outbox.NewPoller(store, d, outbox.PollerConfig{Interval: time.Millisecond, SkipRecent: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				_, _ = store.Insert(context.Background(), nil, storage.InsertParams{Events: []outbox.Event{newEvent(fmt.Sprintf("g%d-%d", g, i), "Thing")}})
				if (g+i)%2 == 0 {
					_ = p.Start(context.Background())
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond)
					_ = p.Stop(ctx)
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
