package outbox_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// TestHardStopReleasesQueuedClaims: a node whose Stop deadline passes while a listener
// ignores its context releases the claims of the events still queued, so another node
// takes them at once instead of after ClaimTTL; the event being delivered keeps its
// claim. The claim metrics count what was taken and released.
func TestHardStopReleasesQueuedClaims(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		ids := c.seed(t, "rel", 5)
		release := make(chan struct{})
		defer close(release)
		var started atomic.Int32
		var blockedID atomic.Value // the event whose attempt blocks (two concurrent polls may order the queue either way)
		blocking := outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			blockedID.CompareAndSwap(nil, e.ID)
			started.Add(1)
			<-release // ignores its context
			return nil
		})
		m := &countingMetrics{}
		a, err := outbox.New(c.db, outbox.Config{Mode: outbox.MultiNode, Dialect: b.dialect, Table: c.table, Workers: 1,
			ClaimTTL: time.Hour, PollInterval: time.Hour, SkipRecent: -1, Metrics: m, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Register("Thing", "Ping", blocking); err != nil {
			t.Fatal(err)
		}
		if err := a.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The first poll cycle runs at Start and claims all five; this one makes sure.
		if _, err := outboxtest.Poll(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the first attempt to start", func() bool { return started.Load() == 1 })
		if hot, cold := outboxtest.QueueDepths(a); hot+cold != 4 {
			t.Fatalf("queued %d+%d, want the 4 events behind the blocked one", hot, cold)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		if err := a.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the deadline's error", err)
		}
		if got := m.claims(outbox.ClaimTaken); got != 5 {
			t.Errorf("claims taken = %d, want 5", got)
		}
		if got := m.claims(outbox.ClaimReleased); got != 4 {
			t.Errorf("claims released = %d, want the 4 queued events", got)
		}
		// Node B claims the four released events now, not in an hour.
		var delivered atomic.Int32
		nodeB := c.node(t, outbox.Config{ClaimTTL: time.Hour, PollInterval: time.Hour, SkipRecent: -1},
			outbox.ListenerFunc(func(context.Context, *outbox.Event) error { delivered.Add(1); return nil }))
		// (Its poller's first cycle runs at Start; PollInterval is an hour, so only that
		// cycle, or this one, can find them before their claims would have expired.)
		if _, err := outboxtest.Poll(t.Context(), nodeB); err != nil {
			t.Fatal(err)
		}
		eventually(t, "node B to deliver the released events", func() bool { return delivered.Load() == 4 })
		// The event whose attempt was abandoned is still claimed by node A.
		id, _ := blockedID.Load().(string)
		if !slices.Contains(ids, id) {
			t.Fatalf("blocked event %q is not one of %v", id, ids)
		}
		e, err := c.store.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != outbox.StatusNew || e.LockedBy == "" {
			t.Errorf("%s: status %s, locked_by %q; want NEW and still claimed by node A", id, e.Status, e.LockedBy)
		}
	})
}
