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

func TestDispatcherDrainsHotAndColdTwoToOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		g := newGate()
		b.listen(t, "Gate", g)
		var (
			mu    sync.Mutex
			order []string
		)
		b.listen(t, "Thing", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, e.ID[:1])
			return nil
		}))
		b.write(t, newEvent("gate", "Gate"))
		synctest.Wait() // the only worker is busy
		for i := range 12 {
			b.d.EnqueueHot(newEvent(fmt.Sprintf("h%02d", i), "Thing"))
			b.d.EnqueueCold(newEvent(fmt.Sprintf("c%02d", i), "Thing"))
		}
		g.open()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// While both queues have work, every window of three takes two hot and one cold.
		got := strings.Join(order[:18], "")
		for i := 0; i+3 <= 18; i += 3 {
			w := got[i : i+3]
			if strings.Count(w, "h") != 2 || strings.Count(w, "c") != 1 {
				t.Fatalf("delivery order %s: window %q is not 2 hot : 1 cold", got, w)
			}
		}
		if rest := strings.Join(order[18:], ""); rest != "cccccc" {
			t.Errorf("after the hot queue emptied: %q, want the 6 remaining cold events", rest)
		}
	})
}

func TestDispatcherDedupesInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 2})
		g := newGate()
		b.listen(t, "Thing", g)
		e := newEvent("e1", "Thing")
		queued := newEvent("e2", "Thing")
		b.write(t, e)
		synctest.Wait() // e1 running
		if b.d.EnqueueHot(e) || b.d.EnqueueCold(e) {
			t.Fatal("a running event was accepted again")
		}
		b.store.Put(queued)
		if !b.d.EnqueueCold(queued) {
			t.Fatal("EnqueueCold refused a new event")
		}
		synctest.Wait() // e2 running on the second worker
		if b.d.EnqueueCold(queued) || b.d.EnqueueHot(queued) {
			t.Fatal("a queued event was accepted again")
		}
		g.open()
		synctest.Wait()
		if got := g.delivered(); !slices.Equal(got, []string{"e1", "e2"}) {
			t.Fatalf("deliveries = %v, want each event once", got)
		}
	})
}

func TestDispatcherTombstones(t *testing.T) {
	t.Parallel()
	t.Run("DONE refuses stale copies for at most a minute", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			defer b.d.BeginRead()() // a poll read that began before the delivery, still open
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			e := newEvent("e1", "Thing")
			b.write(t, e)
			synctest.Wait()
			if b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold accepted an event that just finished")
			}
			time.Sleep(time.Minute - time.Nanosecond)
			if b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold accepted the event before the tombstone expired")
			}
			time.Sleep(time.Nanosecond)
			if !b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold refused the event after the tombstone expired")
			}
			synctest.Wait()
			if l.Count() != 2 {
				t.Fatalf("deliveries = %d, want 2", l.Count())
			}
		})
	})
	t.Run("an event the poller delivered first is refused by the hot path", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			// With no SkipRecent the poller may read a committed row and deliver it
			// before the writer's after-commit hook hands the event to the hot path.
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			defer b.d.BeginRead()() // the write's read, open until its after-commit hook ran
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			e := newEvent("e1", "Thing")
			if !b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold refused a new event")
			}
			synctest.Wait()
			if b.d.EnqueueHot(e) {
				t.Fatal("EnqueueHot accepted an event the cold path just delivered")
			}
			synctest.Wait()
			if l.Count() != 1 {
				t.Fatalf("deliveries = %d, want 1", l.Count())
			}
		})
	})
	t.Run("stale copies of a retry are refused, the due retry is not", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{Retry: fixedDelay(2 * time.Second)})
			defer b.d.BeginRead()() // the stale copy's read, still open
			l := &outboxtest.RecordingListener{Func: func(context.Context, *outbox.Event) error { return errors.New("no") }}
			b.listen(t, "Thing", l)
			stale := newEvent("e1", "Thing")
			b.write(t, stale)
			synctest.Wait()
			time.Sleep(2 * time.Second)
			if b.d.EnqueueCold(stale) {
				t.Fatal("EnqueueCold accepted a copy read before the retry was scheduled")
			}
			fresh := b.row(t, "e1")
			if !b.d.EnqueueCold(fresh) {
				t.Fatal("EnqueueCold refused the due retry")
			}
			synctest.Wait()
			if got := l.Events(); len(got) != 2 || got[1].Attempts != 1 {
				t.Fatalf("deliveries %+v, want the retry to see attempts 1", got)
			}
		})
	})
	t.Run("a replayed DEAD event is accepted at once", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: 1})
			defer b.d.BeginRead()() // the stale copy's read, still open
			stale := newEvent("e1", "Thing")
			l, heal := b.deadOnce(t, stale)
			time.Sleep(time.Second)
			heal()
			if _, err := b.store.Replay(t.Context(), storage.ReplayParams{IDs: []string{"e1"}, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if b.d.EnqueueCold(stale) {
				t.Fatal("EnqueueCold accepted a copy read before the event died")
			}
			if !b.d.EnqueueCold(b.row(t, "e1")) {
				t.Fatal("EnqueueCold refused the replayed event")
			}
			synctest.Wait()
			if got := b.row(t, "e1"); got.Status != outbox.StatusDone || l.Count() != 2 {
				t.Fatalf("status %s after %d deliveries, want DONE after 2", got.Status, l.Count())
			}
		})
	})
	t.Run("a replay behind the delivered copy's clock is polled at once", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			// The replaying process's clock is behind this one, so the replayed row's
			// available_at is before the delivered copy's. The poller read it after the
			// DEAD outcome was written, so it is not a stale copy.
			b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: 1})
			l, heal := b.deadOnce(t, newEvent("e1", "Thing"))
			time.Sleep(time.Millisecond)
			heal()
			if _, err := b.store.Replay(t.Context(), storage.ReplayParams{IDs: []string{"e1"}, Now: time.Now().Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			p := newPoller(t, b, outbox.PollerConfig{SkipRecent: -1})
			if n, err := p.Poll(t.Context()); err != nil || n != 1 {
				t.Fatalf("Poll = %d, %v; want the replayed event queued", n, err)
			}
			synctest.Wait()
			if got := b.row(t, "e1"); got.Status != outbox.StatusDone || l.Count() != 2 {
				t.Fatalf("status %s after %d deliveries, want DONE after 2", got.Status, l.Count())
			}
		})
	})
	t.Run("poll racing a completion does not deliver twice", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			e := newEvent("e1", "Thing")
			if _, err := b.store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
				t.Fatal(err)
			}
			// The poller reads the row, then stalls before queueing it.
			read, resume := make(chan struct{}), make(chan struct{})
			b.store.afterPending = func(storage.PendingBatch) {
				close(read)
				<-resume
			}
			p := newPoller(t, b, outbox.PollerConfig{SkipRecent: -1})
			polled := make(chan int)
			go func() {
				n, err := p.Poll(t.Context())
				if err != nil {
					t.Errorf("Poll: %v", err)
				}
				polled <- n
			}()
			<-read
			// Meanwhile the hot path delivers the event and marks it DONE.
			if err := b.d.WriterHook().AfterCommit(t.Context(), []outbox.Event{e}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if got := b.row(t, "e1"); got.Status != outbox.StatusDone {
				t.Fatalf("status %s, want DONE", got.Status)
			}
			close(resume)
			if n := <-polled; n != 0 {
				t.Errorf("Poll queued %d events, want 0", n)
			}
			synctest.Wait()
			if l.Count() != 1 {
				t.Fatalf("deliveries = %d, want 1", l.Count())
			}
		})
	})
}

func TestDispatcherStatusUpdateFailures(t *testing.T) {
	t.Parallel()
	t.Run("failed update is logged and left for the poller", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			b.store.markDoneErr = errors.New("connection reset")
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			e := newEvent("e1", "Thing")
			b.write(t, e)
			synctest.Wait()
			logs := b.logs.find(slog.LevelError, "status update failed")
			if len(logs) != 1 || !strings.Contains(logs[0].attrs["error"], "mark done: connection reset") {
				t.Fatalf("error logs = %+v, want one wrapping the store error", logs)
			}
			if got := b.row(t, "e1"); got.Status != outbox.StatusNew {
				t.Fatalf("status %s, want NEW", got.Status)
			}
			// No tombstone: the poller may deliver it again at once.
			if !b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold refused an event whose outcome was not written")
			}
			synctest.Wait()
		})
	})
	t.Run("fenced update that changed nothing is a warning", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			b.store.markDoneZero = true
			b.listen(t, "Thing", &outboxtest.RecordingListener{})
			b.write(t, newEvent("e1", "Thing"))
			synctest.Wait()
			if logs := b.logs.find(slog.LevelWarn, "changed no row"); len(logs) != 1 {
				t.Fatalf("warn logs = %+v, want one", logs)
			}
		})
	})
}

func TestDispatcherMetricsLatency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		b.listen(t, "Thing", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			time.Sleep(3 * time.Second)
			return nil
		}))
		// Hot: latency from enqueue. The second event waits 3s behind the first.
		b.write(t, newEvent("h1", "Thing"), newEvent("h2", "Thing"))
		synctest.Wait()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		// Cold: latency from max(CreatedAt, AvailableAt).
		cold := newEvent("c1", "Thing")
		cold.CreatedAt = time.Now().Add(-time.Minute)
		cold.AvailableAt = time.Now().Add(-5 * time.Second)
		b.store.Put(cold)
		b.d.EnqueueCold(cold)
		synctest.Wait()
		time.Sleep(3 * time.Second)
		synctest.Wait()

		type lat struct {
			path              outbox.Path
			latency, duration time.Duration
		}
		var got []lat
		for _, d := range b.metrics.dispatches() {
			got = append(got, lat{d.Path, d.Latency, d.Duration})
		}
		want := []lat{
			{outbox.PathHot, 0, 3 * time.Second},
			{outbox.PathHot, 3 * time.Second, 3 * time.Second},
			{outbox.PathCold, 5 * time.Second, 3 * time.Second},
		}
		if !slices.Equal(got, want) {
			t.Errorf("dispatches = %+v, want %+v", got, want)
		}
		if hot, cold := b.d.QueueDepths(); hot != 0 || cold != 0 {
			t.Errorf("QueueDepths = %d, %d, want 0, 0", hot, cold)
		}
		b.metrics.mu.Lock()
		defer b.metrics.mu.Unlock()
		if b.metrics.depthCalls == 0 || b.metrics.lastDepths != [2]int{0, 0} {
			t.Errorf("QueueDepths metric: %d calls, last %v; want calls ending at 0, 0", b.metrics.depthCalls, b.metrics.lastDepths)
		}
	})
}

func TestWriterHookHotPath(t *testing.T) {
	t.Parallel()
	t.Run("full queue drops without blocking", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1, HotQueueSize: 2})
			g := newGate()
			b.listen(t, "Thing", g)
			b.write(t, newEvent("running", "Thing"))
			synctest.Wait()
			events := []outbox.Event{newEvent("a", "Thing"), newEvent("b", "Thing"), newEvent("c", "Thing"), newEvent("d", "Thing")}
			if err := b.d.WriterHook().AfterCommit(t.Context(), events); err != nil {
				t.Fatalf("AfterCommit = %v, want nil", err)
			}
			if got, want := b.metrics.counts(), (metricCounts{hotEnqueued: 3, hotDropped: 2}); got != want {
				t.Errorf("metrics = %+v, want %+v", got, want)
			}
			if logs := b.logs.find(slog.LevelWarn, "left for the poller"); len(logs) != 1 || logs[0].attrs["dropped"] != "2" {
				t.Errorf("warn logs = %+v, want one reporting 2 dropped", logs)
			}
			g.open()
			synctest.Wait()
			if got := g.delivered(); !slices.Equal(got, []string{"running", "a", "b"}) {
				t.Errorf("delivered %v, want running, a, b", got)
			}
		})
	})
	t.Run("a burst logs one warning", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1, HotQueueSize: 1})
			g := newGate()
			b.listen(t, "Thing", g)
			b.write(t, newEvent("running", "Thing"))
			synctest.Wait()
			b.write(t, newEvent("queued", "Thing"))
			for i := range 5 { // five transactions of a burst, each dropped
				if err := b.d.WriterHook().AfterCommit(t.Context(), []outbox.Event{newEvent(fmt.Sprint("d", i), "Thing")}); err != nil {
					t.Fatal(err)
				}
			}
			if logs := b.logs.find(slog.LevelWarn, "left for the poller"); len(logs) != 1 || logs[0].attrs["dropped"] != "1" {
				t.Errorf("warn logs = %+v, want one for the burst", logs)
			}
			g.open()
			synctest.Wait()
			b.write(t, newEvent("after", "Thing")) // the queue takes events again
			synctest.Wait()
			if logs := b.logs.find(slog.LevelInfo, "hot queue takes committed events again"); len(logs) != 1 || logs[0].attrs["dropped"] != "5" {
				t.Errorf("info logs = %+v, want one counting the burst's 5 drops", logs)
			}
			if got := b.metrics.counts().hotDropped; got != 5 {
				t.Errorf("hot dropped = %d, want 5", got)
			}
		})
	})
	t.Run("delayed events skip the hot path", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			later := newEvent("later", "Thing")
			later.AvailableAt = later.AvailableAt.Add(time.Minute)
			b.write(t, later, newEvent("now", "Thing"))
			synctest.Wait()
			if got, want := b.metrics.counts(), (metricCounts{hotEnqueued: 1, delayedSkipped: 1}); got != want {
				t.Errorf("metrics = %+v, want %+v", got, want)
			}
			if got := l.IDs(); !slices.Equal(got, []string{"now"}) {
				t.Errorf("delivered %v, want only the due event", got)
			}
		})
	})
	t.Run("stopped dispatcher drops", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d, err := outbox.NewDispatcher(outboxtest.NewMemoryStore(), outbox.NewRegistry(), outbox.DispatcherConfig{
				Metrics: &countingMetrics{}, Logger: newLogSink().logger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.WriterHook().AfterCommit(t.Context(), []outbox.Event{newEvent("e1", "Thing")}); err != nil {
				t.Fatalf("AfterCommit before Start = %v", err)
			}
			if d.ColdCapacity() != 0 || d.EnqueueCold(newEvent("e2", "Thing")) {
				t.Error("a dispatcher that is not running accepts events")
			}
		})
	})
	t.Run("disabled hot path does nothing", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{HotQueueSize: -1})
			b.listen(t, "Thing", &outboxtest.RecordingListener{})
			b.write(t, newEvent("e1", "Thing"))
			synctest.Wait()
			if got := b.metrics.counts(); got != (metricCounts{}) {
				t.Errorf("metrics = %+v, want none", got)
			}
			if b.d.EnqueueHot(newEvent("e2", "Thing")) {
				t.Error("EnqueueHot accepted an event with the hot path disabled")
			}
			if got := b.row(t, "e1"); got.Status != outbox.StatusNew {
				t.Errorf("status %s, want NEW (left for the poller)", got.Status)
			}
		})
	})
}

// deadOnce registers for e's type a listener that fails until heal is called, writes
// e and waits until it is DEAD (the dispatcher must have MaxAttempts 1).
func (b *dispatchBundle) deadOnce(t *testing.T, e outbox.Event) (l *outboxtest.RecordingListener, heal func()) {
	t.Helper()
	var healthy atomic.Bool
	l = &outboxtest.RecordingListener{Func: func(context.Context, *outbox.Event) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("no")
	}}
	b.listen(t, e.Type, l)
	b.write(t, e)
	synctest.Wait()
	if got := b.row(t, e.ID); got.Status != outbox.StatusDead {
		t.Fatalf("status %s, want DEAD", got.Status)
	}
	return l, func() { healthy.Store(true) }
}

// TestTombstonesAreKeptOnlyForOpenReads: a tombstone exists to refuse a stale copy,
// which only a read still open can return, so none is kept when no read is open and
// those a read needed go when it closes: memory follows the completions during one
// read, not a minute of completions.
func TestTombstonesAreKeptOnlyForOpenReads(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		b.listen(t, "Thing", &outboxtest.RecordingListener{})
		for i := range 100 {
			b.write(t, newEvent(fmt.Sprintf("a%03d", i), "Thing"))
		}
		synctest.Wait()
		if n := b.d.TombstoneCount(); n != 0 {
			t.Fatalf("%d tombstones kept with no read open, want 0", n)
		}
		end := b.d.BeginRead()
		for i := range 100 {
			b.write(t, newEvent(fmt.Sprintf("b%03d", i), "Thing"))
		}
		synctest.Wait()
		if n := b.d.TombstoneCount(); n != 100 {
			t.Fatalf("%d tombstones kept while a read is open, want the 100 settled since it began", n)
		}
		time.Sleep(time.Nanosecond)
		later := b.d.BeginRead() // begins after those 100 were settled: needs none of them
		end()
		if n := b.d.TombstoneCount(); n != 0 {
			t.Fatalf("%d tombstones kept after the read that needed them closed, want 0", n)
		}
		later()
	})
}
