package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// TestFairDeliveryAcrossSubscriptions is the starvation scene of docs/listeners.md
// ("Fair delivery"): with two workers, 20 events of a listener that takes 500 ms each
// are queued, then one event of a fast listener. The fast event is delivered within one
// slow attempt (the workers take the subscriptions' lanes in turn), not after all 20
// (5 s, when one queue was served in order).
func TestFairDeliveryAcrossSubscriptions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 2})
		const slowTime = 500 * time.Millisecond
		b.listen(t, "Slow", outbox.ListenerFunc(func(ctx context.Context, _ *outbox.Event) error {
			select {
			case <-time.After(slowTime):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
		fast := make(chan time.Time, 1)
		b.listen(t, "Fast", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			fast <- time.Now()
			return nil
		}))
		var events []outbox.Event
		for i := range 20 {
			events = append(events, newEvent(fmt.Sprintf("slow-%02d", i), "Slow"))
		}
		start := time.Now()
		b.write(t, events...)
		b.write(t, newEvent("fast", "Fast"))
		at := <-fast
		if waited := at.Sub(start); waited > slowTime {
			t.Fatalf("the fast event waited %s behind the slow ones, more than one slow attempt (%s)", waited, slowTime)
		}
	})
}

// TestMaxConcurrencyBoundsASubscription: a subscription with MaxConcurrency 1 runs one
// attempt at a time while four workers deliver the other subscription's events beside
// it; its queued events wait without an attempt and are all delivered once it is free.
func TestMaxConcurrencyBoundsASubscription(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 4})
		var (
			running, most atomic.Int32
			mu            sync.Mutex
		)
		release := make(chan struct{})
		limited := outbox.ListenerFunc(func(ctx context.Context, _ *outbox.Event) error {
			n := running.Add(1)
			defer running.Add(-1)
			mu.Lock()
			most.Store(max(most.Load(), n))
			mu.Unlock()
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err := b.reg.Subscribe(outbox.Subscription{EventType: "Limited", Listener: limited, MaxConcurrency: 1}); err != nil {
			t.Fatal(err)
		}
		other := newDeliveries(nil)
		b.listen(t, "Other", other)
		var events []outbox.Event
		for i := range 5 {
			events = append(events, newEvent(fmt.Sprintf("limited-%d", i), "Limited"), newEvent(fmt.Sprintf("other-%d", i), "Other"))
		}
		b.write(t, events...)
		synctest.Wait()
		if n := running.Load(); n != 1 {
			t.Fatalf("%d attempts of the limited subscription running, want 1", n)
		}
		if n := other.total(); n != 5 {
			t.Fatalf("%d of the other subscription's 5 events delivered beside the limited one", n)
		}
		for range 5 {
			release <- struct{}{}
			synctest.Wait()
		}
		time.Sleep(outbox.DefaultDoneBatchWindow)
		synctest.Wait()
		if m := most.Load(); m != 1 {
			t.Errorf("up to %d attempts of the limited subscription ran at once, want 1", m)
		}
		for i := range 5 {
			if e := b.row(t, fmt.Sprintf("limited-%d", i)); e.Status != outbox.StatusDone || e.Attempts != 0 {
				t.Errorf("limited-%d is %s after %d failed attempts, want DONE after none", i, e.Status, e.Attempts)
			}
		}
	})
}

// TestSubscribeRejectsNegativeMaxConcurrency: a negative bound is a ConfigError.
func TestSubscribeRejectsNegativeMaxConcurrency(t *testing.T) {
	t.Parallel()
	err := outbox.NewRegistry().Subscribe(outbox.Subscription{EventType: "T", Listener: newDeliveries(nil), MaxConcurrency: -1})
	var ce *outbox.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Subscription.MaxConcurrency" {
		t.Fatalf("Subscribe = %v, want a ConfigError on Subscription.MaxConcurrency", err)
	}
}

// TestRateLimitSpacesASubscription: a subscription limited to 10 events per second
// (burst 1) starts its attempts 100 ms apart, counts no attempt for the waits, and holds
// no worker while it waits: with one worker the other subscription's events are all
// delivered before the limited one's second event.
func TestRateLimitSpacesASubscription(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		var (
			mu     sync.Mutex
			starts []time.Time
		)
		limited := outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return nil
		})
		if err := b.reg.Subscribe(outbox.Subscription{EventType: "Limited", Listener: limited, RateLimit: 10}); err != nil {
			t.Fatal(err)
		}
		other := newDeliveries(nil)
		b.listen(t, "Other", other)
		var events []outbox.Event
		for i := range 10 {
			events = append(events, newEvent(fmt.Sprintf("limited-%d", i), "Limited"))
		}
		for i := range 5 {
			events = append(events, newEvent(fmt.Sprintf("other-%d", i), "Other"))
		}
		begin := time.Now()
		b.write(t, events...)
		synctest.Wait()
		mu.Lock()
		first := len(starts)
		mu.Unlock()
		if n := other.total(); n != 5 || first != 1 {
			t.Fatalf("at once: %d of the other subscription's 5 events and %d limited ones delivered, want 5 and 1 (the burst)", n, first)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(starts) != 10 {
			t.Fatalf("%d of 10 limited events delivered in one second at 10 per second", len(starts))
		}
		for i := 1; i < len(starts); i++ {
			if gap := starts[i].Sub(starts[i-1]); gap < 100*time.Millisecond {
				t.Errorf("attempts %d and %d started %s apart, want 100 ms at 10 per second", i-1, i, gap)
			}
		}
		if last := starts[len(starts)-1].Sub(begin); last > 900*time.Millisecond+10*time.Millisecond {
			t.Errorf("the 10th attempt started %s after the write, want 900 ms", last)
		}
		time.Sleep(outbox.DefaultDoneBatchWindow)
		synctest.Wait()
		for i := range 10 {
			if e := b.row(t, fmt.Sprintf("limited-%d", i)); e.Status != outbox.StatusDone || e.Attempts != 0 {
				t.Errorf("limited-%d is %s after %d failed attempts, want DONE after none", i, e.Status, e.Attempts)
			}
		}
	})
}

// TestSubscribeRejectsBadRateLimit: a negative, infinite or NaN rate, a negative burst,
// or a burst without a rate is a ConfigError naming the field.
func TestSubscribeRejectsBadRateLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rate  float64
		burst int
		field string
	}{
		{-1, 0, "Subscription.RateLimit"},
		{math.Inf(1), 0, "Subscription.RateLimit"},
		{math.NaN(), 0, "Subscription.RateLimit"},
		{5, -1, "Subscription.RateBurst"},
		{0, 3, "Subscription.RateBurst"},
	} {
		err := outbox.NewRegistry().Subscribe(outbox.Subscription{EventType: "T", Listener: newDeliveries(nil), RateLimit: c.rate, RateBurst: c.burst})
		var ce *outbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("Subscribe(RateLimit %v, RateBurst %d) = %v, want a ConfigError on %s", c.rate, c.burst, err, c.field)
		}
	}
}

// TestGracefulStopWithABoundedLane: a graceful Stop while a MaxConcurrency-bounded lane
// holds events behind its running attempt and the other workers wait on the bound
// returns as soon as the lane is drained, not at its deadline. (The workers waiting on
// the bound saw Stopping, and nothing woke them once the last event was taken.)
func TestGracefulStopWithABoundedLane(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 4})
		release := make(chan struct{})
		started := make(chan struct{}, 10)
		l := outbox.ListenerFunc(func(ctx context.Context, _ *outbox.Event) error {
			started <- struct{}{}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err := b.reg.Subscribe(outbox.Subscription{EventType: "Bounded", Listener: l, MaxConcurrency: 1}); err != nil {
			t.Fatal(err)
		}
		b.write(t, newEvent("e1", "Bounded"), newEvent("e2", "Bounded"), newEvent("e3", "Bounded"))
		<-started
		synctest.Wait() // the three idle workers wait on the bound
		stopped := make(chan error, 1)
		begin := time.Now()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stopped <- b.d.Stop(ctx)
		}()
		synctest.Wait() // they saw Stopping
		close(release)
		if err := <-stopped; err != nil {
			t.Fatalf("graceful Stop = %v after %s, want nil once the lane drained", err, time.Since(begin))
		}
		if took := time.Since(begin); took > 0 {
			t.Fatalf("graceful Stop took %s of the simulated clock, want none (no attempt waits on a timer)", took)
		}
	})
}

// TestFairDeliveryFromABacklogLargerThanTheColdQueue: the poller alone (no hot path),
// 100 due events of a listener that takes 500 ms each, more than the cold queue holds,
// older than one event of a fast listener. The slow lane may take the cold queue but a
// tenth; once it is full the poller reads on leaving its rows out, so the fast event is
// read in the same cycle and delivered within one slow attempt, not after the backlog
// (25 s with two workers). In both modes: reading, and claiming in batches.
func TestFairDeliveryFromABacklogLargerThanTheColdQueue(t *testing.T) {
	t.Parallel()
	for _, mode := range []outbox.Mode{outbox.SingleNode, outbox.MultiNode} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const slowTime = 500 * time.Millisecond
				slow := outbox.ListenerFunc(func(ctx context.Context, _ *outbox.Event) error {
					select {
					case <-time.After(slowTime):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				fast := make(chan time.Time, 1)
				cfg := outbox.Config{Mode: mode, Workers: 2, HotQueueSize: -1, ColdQueueSize: 20, PollBatchSize: 10,
					PollInterval: time.Second}
				if mode == outbox.MultiNode {
					cfg.ClaimTTL = time.Minute
				}
				b := newStoppedPauseBundle(t, cfg, outbox.Subscription{Name: "Slow", EventType: "Slow", Listener: slow},
					outbox.Subscription{Name: "Fast", EventType: "Fast", Listener: outbox.ListenerFunc(
						func(context.Context, *outbox.Event) error {
							fast <- time.Now()
							return nil
						})})
				// The rows are there before the first cycle: put after Start, a row could
				// miss a cycle that ran before it and land behind its low-water mark.
				for i := range 100 {
					b.put("Slow", fmt.Sprintf("slow-%03d", i))
				}
				b.put("Fast", "zz-fast") // created with the others: IDs order it last
				start := time.Now()
				b.start(t)
				at := <-fast
				if waited := at.Sub(start); waited > cfg.PollInterval+slowTime {
					t.Fatalf("the fast event waited %s behind the backlog, more than a poll and one slow attempt (%s)",
						waited, cfg.PollInterval+slowTime)
				}
			})
		})
	}
}

// leftOutReads counts the poller's reads that leave a full lane's rows out.
type leftOutReads struct {
	*outboxtest.MemoryStore
	mu    sync.Mutex
	times []time.Time
}

func (s *leftOutReads) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	if slices.Contains(p.Skip.Listeners, "Slow") {
		s.mu.Lock()
		s.times = append(s.times, time.Now())
		s.mu.Unlock()
	}
	return s.MemoryStore.Pending(ctx, p)
}

// TestLeftOutReadsAtMostOncePerPollInterval: a read that leaves a full lane's rows out
// makes the database walk them, so the poller makes one at most once per PollInterval,
// however often the full lane's draining wakes it (docs/listeners.md, fair delivery).
func TestLeftOutReadsAtMostOncePerPollInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &leftOutReads{MemoryStore: outboxtest.NewMemoryStore()}
		ob, err := outbox.New(nil, outbox.Config{Store: store, Logger: discardLogger(), PurgeInterval: -1, Workers: 2,
			HotQueueSize: -1, ColdQueueSize: 20, PollBatchSize: 10, PollInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		slow := outbox.ListenerFunc(func(ctx context.Context, _ *outbox.Event) error {
			select {
			case <-time.After(50 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		for _, s := range []outbox.Subscription{{Name: "Slow", EventType: "Slow", Listener: slow},
			{Name: "Other", EventType: "Other", Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })}} {
			if err := ob.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2000 {
			e := newEvent(fmt.Sprintf("slow-%04d", i), "Slow")
			e.CreatedAt = e.CreatedAt.Add(-time.Minute)
			e.AvailableAt = e.CreatedAt
			store.Put(e)
		}
		start := time.Now()
		if err := ob.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second) // the lane drains and is refilled about twenty times
		synctest.Wait()
		if err := ob.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if len(store.times) == 0 {
			t.Fatal("no read left the full lane out")
		}
		for i := 1; i < len(store.times); i++ {
			if gap := store.times[i].Sub(store.times[i-1]); gap < time.Second {
				t.Fatalf("left-out reads at %v after the start: %s apart, less than PollInterval",
					store.times[i-1].Sub(start), gap)
			}
		}
	})
}
