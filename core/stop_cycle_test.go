package outbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// A cycle that ends after Stop was called must be the last: Go's select picks at random
// among ready cases, so a loop that waits on Stopping and a ticker together may start
// another cycle when a tick is pending too (one is, after a cycle longer than the
// interval). During an outage each such cycle waits for its query timeout, and a
// graceful Stop took several of them. Twenty stops make the random pick show.

func TestPollerStopStartsNoNewCycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		p := newPoller(t, b, outbox.PollerConfig{Interval: 10 * time.Millisecond})
		var stopping atomic.Bool
		var late atomic.Int32
		b.store.beforePending = func(ctx context.Context, _ storage.PendingParams) error {
			if stopping.Load() {
				late.Add(1)
			}
			time.Sleep(time.Second) // a slow query; ticks are pending when it returns
			return nil
		}
		for range 20 {
			stopping.Store(false)
			if err := p.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the first cycle is in its query
			stopping.Store(true)
			if err := p.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if n := late.Load(); n > 0 {
			t.Errorf("%d poll cycles began after Stop was called", n)
		}
	})
}

func TestPurgerStopStartsNoNewCycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		var stopping atomic.Bool
		var late atomic.Int32
		store.purgeErr = func(ctx context.Context, _ int) error {
			if stopping.Load() {
				late.Add(1)
			}
			time.Sleep(time.Second) // a slow statement; ticks are pending when it returns
			return nil
		}
		p, err := outbox.NewPurger(store, outbox.PurgerConfig{Interval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			stopping.Store(false)
			if err := p.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the first purge is in its statement
			stopping.Store(true)
			if err := p.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if n := late.Load(); n > 0 {
			t.Errorf("%d purge cycles began after Stop was called", n)
		}
	})
}
