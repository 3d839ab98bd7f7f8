package outbox_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

func TestPollerRefillsTheColdQueueWithoutWaitingForTheTick(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{HotQueueSize: -1, ColdQueueSize: 3, Workers: 1})
		l := &outboxtest.RecordingListener{}
		b.listen(t, "Thing", l)
		var ids []string
		for i := range 10 {
			e := newEvent("e"+string(rune('a'+i)), "Thing")
			e.CreatedAt = e.CreatedAt.Add(-time.Hour + time.Duration(i)*time.Second)
			e.AvailableAt = e.CreatedAt
			b.store.Put(e)
			ids = append(ids, e.ID)
		}
		start := time.Now()
		startPoller(t, b, outbox.PollerConfig{BatchSize: 2})
		synctest.Wait()
		// A backlog larger than the cold queue is read as fast as it is delivered: each
		// cycle that fills the queue is followed by the next once the queue has drained,
		// with no time passing.
		if got := l.IDs(); !slices.Equal(got, ids) {
			t.Fatalf("delivered %v, want all ten in order %v", got, ids)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("draining took %s, want no wait for the poll interval", took)
		}
		// Once the backlog is gone the loop waits for its ticker again.
		limits := len(b.store.limits())
		time.Sleep(outbox.DefaultPollInterval - time.Nanosecond)
		synctest.Wait()
		if got := len(b.store.limits()); got != limits {
			t.Errorf("the poller queried %d more times before the next tick", got-limits)
		}
	})
}

func TestPollerReadsPastEventsInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{ColdQueueSize: 10})
		ids := b.seed(t, 5, time.Hour)
		// The two oldest rows are queued already (behind the blocked worker).
		for _, id := range ids[:2] {
			if !b.d.EnqueueCold(b.row(t, id)) {
				t.Fatalf("EnqueueCold refused %s", id)
			}
		}
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{BatchSize: 2})
		n, err := p.Poll(t.Context())
		if err != nil || n != 3 {
			t.Fatalf("Poll = %d, %v; want the 3 rows behind the queued ones", n, err)
		}
		// The first batch holds only queued events; the cycle reads on after them.
		if got := b.store.limits(); !slices.Equal(got, []int{2, 2, 2}) {
			t.Errorf("Pending limits = %v, want [2 2 2]", got)
		}
		if got, want := b.store.cursors(), []string{"", ids[1], ids[3]}; !slices.Equal(got, want) {
			t.Errorf("Pending cursors = %v, want %v", got, want)
		}
		b.gate.open()
		synctest.Wait()
		if got := b.rec.IDs(); !slices.Equal(got, ids) {
			t.Errorf("delivered %v, want %v", got, ids)
		}
	})
}

func TestPollerCatchesUpAfterHotDrops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{HotQueueSize: 1})
		startPoller(t, b.dispatchBundle, outbox.PollerConfig{Interval: time.Hour})
		synctest.Wait()
		b.write(t, newEvent("queued", "Thing"))  // fills the hot queue behind the gate
		b.write(t, newEvent("dropped", "Thing")) // left for the poller
		if got := b.metrics.counts().hotDropped; got != 1 {
			t.Fatalf("HotDropped = %d, want 1", got)
		}
		start := time.Now()
		b.gate.open()
		synctest.Wait()
		// The poller reads the dropped event at once, young as it is, instead of at its
		// next tick (an hour away) or after SkipRecent: no time passes.
		if got := b.rec.IDs(); !slices.Equal(got, []string{"queued", "dropped"}) {
			t.Fatalf("delivered %v, want the queued and the dropped event", got)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("the catch-up took %s, want no wait", took)
		}
		// Catching up is over once a cycle found nothing more: the next cycles respect
		// SkipRecent again and run at the tick.
		limits := len(b.store.limits())
		time.Sleep(time.Hour - time.Nanosecond)
		synctest.Wait()
		if got := len(b.store.limits()); got != limits {
			t.Errorf("the poller queried %d more times before the next tick", got-limits)
		}
	})
}

func TestPollerReadsOnWhenSeenRowsFinishDuringTheCycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBlockedDispatcher(t, outbox.DispatcherConfig{ColdQueueSize: 10})
		ids := b.seed(t, 5, time.Hour)
		calls := 0
		b.store.afterPending = func(storage.PendingBatch) {
			calls++
			if calls == 1 {
				// The first batch's rows finish (elsewhere) before the second query: it
				// comes back short although it left a row for the next batch.
				if _, err := b.store.MemoryStore.MarkDone(t.Context(), storage.MarkDoneParams{IDs: ids[:2], DoneAt: time.Now()}); err != nil {
					t.Error(err)
				}
			}
		}
		p := newPoller(t, b.dispatchBundle, outbox.PollerConfig{BatchSize: 2})
		if n, err := p.Poll(t.Context()); err != nil || n != 5 {
			t.Fatalf("Poll = %d, %v; want all 5 rows queued", n, err)
		}
		if got := b.store.limits(); !slices.Equal(got, []int{2, 2, 2}) {
			t.Errorf("Pending limits = %v, want [2 2 2]", got)
		}
	})
}
