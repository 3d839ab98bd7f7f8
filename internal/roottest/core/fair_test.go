package outbox_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
)

// TestFairDeliveryOnEveryDatabase is the starvation scene of docs/listeners.md ("Fair
// delivery") on each database, from the hot path and from the poller: two workers, 20
// events of a slow listener written before one event of a fast one, in one
// transaction. The slow listener runs until the test lets it return, so the check
// counts attempts, not time: the fast event runs while at most the two workers' first
// slow attempts have started and at most one of them has returned. (Queues'
// TestPickServesTheLaneWaitingLongest replays the order of takes a loaded machine gave
// this scene, deterministically.)
func TestFairDeliveryOnEveryDatabase(t *testing.T) {
	t.Parallel()
	paths := []struct {
		name string
		cfg  outbox.Config
	}{
		{"hot", outbox.Config{Workers: 2}},
		// The poller alone: it reads the 21 rows in one batch.
		{"poller", outbox.Config{Workers: 2, HotQueueSize: -1, SkipRecent: -1}},
		// The poller alone, with a cold queue smaller than the slow backlog: the slow
		// lane fills all of it but a tenth, and the poller reads on leaving its rows out.
		{"backlog", outbox.Config{Workers: 2, HotQueueSize: -1, SkipRecent: -1, ColdQueueSize: 10, PollBatchSize: 5}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, b backend) {
				a := setupOutbox(t, b, p.cfg)
				var (
					mu                    sync.Mutex
					started, returned     int
					fastRan               bool
					startedAt, returnedAt int
					release               = make(chan struct{})
					releaseAll            sync.Once
				)
				t.Cleanup(func() { releaseAll.Do(func() { close(release) }) })
				slow := newDeliveries(func(ctx context.Context, _ *outbox.Event) error {
					mu.Lock()
					started++
					mu.Unlock()
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
					mu.Lock()
					returned++
					mu.Unlock()
					return nil
				})
				fast := newDeliveries(func(context.Context, *outbox.Event) error {
					mu.Lock()
					fastRan, startedAt, returnedAt = true, started, returned
					mu.Unlock()
					return nil
				})
				if err := a.ob.Register("Order", "Slow", slow); err != nil {
					t.Fatal(err)
				}
				if err := a.ob.Register("Order", "Fast", fast); err != nil {
					t.Fatal(err)
				}
				a.start(t)
				envs := make([]outbox.Envelope, 0, 21)
				for range 20 {
					envs = append(envs, outbox.Envelope{Type: "Slow", AggregateType: "Order", Payload: 1})
				}
				envs = append(envs, outbox.Envelope{Type: "Fast", AggregateType: "Order", Payload: 1})
				err := outbox.RunInTx(t.Context(), a.db, func(ctx context.Context, tx *outbox.Tx) error {
					_, err := a.ob.Writer().WriteAll(ctx, tx, envs)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				state := func() (int, int, bool) {
					mu.Lock()
					defer mu.Unlock()
					return started, returned, fastRan
				}
				fastQueued := func() bool {
					loads, err := a.ob.Events().Subscriptions(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range loads {
						if l.Listener == "Order/Fast" {
							return l.Queued == 1
						}
					}
					return false
				}
				// Both workers hold a slow attempt and the fast event is queued: after the
				// slow ones, which the hot path queues one by one (the workers take the
				// first ones meanwhile) and a poll reads first; or it already ran.
				eventually(t, "both workers busy and the fast event queued, or delivered", func() bool {
					s, _, f := state()
					return f || s == 2 && fastQueued()
				})
				// One slow attempt returns: its worker must take the fast event, the
				// lane served longest ago, not a third slow one. The old single queue
				// fails this by 18 attempts.
				if _, _, f := state(); !f {
					release <- struct{}{}
					eventually(t, "the fast event delivered, or a third slow attempt", func() bool {
						s, _, f := state()
						return s == 3 || f
					})
				}
				mu.Lock()
				ran, s, r := fastRan, startedAt, returnedAt
				mu.Unlock()
				if !ran || s > 2 || r > 1 {
					t.Fatalf("the fast event ran %v, after %d slow attempts started and %d returned; want it run after at most 2 and 1",
						ran, s, r)
				}
				releaseAll.Do(func() { close(release) })
				eventually(t, "all 21 delivered", func() bool { return slow.total() == 20 && fast.total() == 1 })
			})
		})
	}
}

// loadMetrics records the subscription loads an outbox reports.
type loadMetrics struct {
	outbox.NopMetrics
	mu   sync.Mutex
	last map[string]outbox.SubscriptionLoad
}

func (m *loadMetrics) SubscriptionLoad(l outbox.SubscriptionLoad) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[string]outbox.SubscriptionLoad{}
	}
	m.last[l.Listener] = l
}

func (m *loadMetrics) of(name string) outbox.SubscriptionLoad {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[name]
}

// TestSubscriptionLoads: Events.Subscriptions and a SubscriptionMetrics show, per
// subscription, the events queued here and the workers running them, its limits, and
// whether its queued events wait for those limits; a subscription without events shows
// its limits and zeros.
func TestSubscriptionLoads(t *testing.T) {
	t.Parallel()
	db, table := backends[0].open(t) // SQLite: the loads are the process's, whatever the database
	if err := outbox.MigrateTable(t.Context(), db, outbox.SQLite, table); err != nil {
		t.Fatal(err)
	}
	m := &loadMetrics{}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Table: table, Workers: 4, Metrics: m, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() {
		open()
		if err := ob.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	slow := newDeliveries(func(ctx context.Context, _ *outbox.Event) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	for _, s := range []outbox.Subscription{
		{Name: "slow", EventType: "Slow", Listener: slow, MaxConcurrency: 1},
		{Name: "idle", EventType: "Idle", Listener: newDeliveries(nil), RateLimit: 5, RateBurst: 2},
	} {
		if err := ob.Subscribe(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := ob.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = outbox.RunInTx(t.Context(), db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := ob.Writer().WriteAll(ctx, tx, []outbox.Envelope{{Type: "Slow", Payload: 1}, {Type: "Slow", Payload: 2}, {Type: "Slow", Payload: 3}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := outbox.SubscriptionLoad{Listener: "slow", Queued: 2, Running: 1, MaxConcurrency: 1, Limited: true}
	eventually(t, "the slow subscription's load reported", func() bool { return m.of("slow") == want })
	loads, err := ob.Events().Subscriptions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantAll := []outbox.SubscriptionLoad{{Listener: "idle", RateLimit: 5}, want}
	if !slices.Equal(loads, wantAll) {
		t.Fatalf("Subscriptions = %+v, want %+v", loads, wantAll)
	}
	open()
	eventually(t, "the slow subscription drained", func() bool {
		return m.of("slow") == outbox.SubscriptionLoad{Listener: "slow", MaxConcurrency: 1}
	})
}
