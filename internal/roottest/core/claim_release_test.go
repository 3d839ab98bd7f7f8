package outbox_test

import (
	"context"
	"errors"
	"slices"
	"sync"
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
		// cycle and the test's own polls can find them before their claims would have
		// expired.)
		if _, err := outboxtest.Poll(t.Context(), nodeB); err != nil {
			t.Fatal(err)
		}
		// Poll again while waiting: under a loaded CI machine one poll may run while
		// node B's first cycle still holds the rows (SKIP LOCKED) and find nothing;
		// without the release every poll would find nothing for an hour.
		deadline, polls := time.Now().Add(30*time.Second), 1
		for delivered.Load() < 4 {
			if hot, cold := outboxtest.QueueDepths(nodeB); hot+cold == 0 && polls < 300 {
				if _, err := outboxtest.Poll(t.Context(), nodeB); err != nil {
					t.Fatal(err)
				}
				polls++
			}
			if time.Now().After(deadline) {
				hot, cold := outboxtest.QueueDepths(nodeB)
				for _, id := range ids {
					e, err := c.store.Get(t.Context(), id)
					t.Logf("%s: status %s, locked_by %q, locked_until %v, attempts %d (err %v)", id, e.Status, e.LockedBy, e.LockedUntil, e.Attempts, err)
				}
				t.Fatalf("timed out waiting for node B to deliver the released events: delivered %d, node B queued %d+%d", delivered.Load(), hot, cold)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if polls > 2 {
			t.Logf("node B needed %d polls to find the released events", polls)
		}
		if got := delivered.Load(); got != 4 {
			t.Errorf("node B delivered %d times, want the 4 released events once", got)
		}
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

// TestRefusedPreClaimsAreReleased: in MultiNode mode an event the writer pre-claimed for
// the hot path but that the hot queue refused at commit (other writes filled it in
// between) has its claim released and is delivered now, not after ClaimTTL; a rolled
// back batch's release finds no row and counts nothing. PostgreSQL and MariaDB: two
// transactions open at once (SQLite's immediate transactions would serialise them).
func TestRefusedPreClaimsAreReleased(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.dialect == outbox.SQLite {
			t.Skip("needs two write transactions open at once")
		}
		c := newClaimTable(t, b)
		release := make(chan struct{})
		var delivered sync.Map
		l := outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			if e.AggregateID == "blocker" {
				<-release
			}
			delivered.Store(e.AggregateID, true)
			return nil
		})
		m := &countingMetrics{}
		ob := c.node(t, outbox.Config{ClaimTTL: time.Hour, PollInterval: time.Hour, Workers: 1, HotQueueSize: 1, Metrics: m}, l)
		defer close(release)
		begin := func(id string) *outbox.Tx {
			tx, err := outbox.BeginTx(t.Context(), c.db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ob.Writer().Write(t.Context(), tx, outbox.Envelope{Type: "Ping", AggregateType: "Thing", AggregateID: id, Payload: 1}); err != nil {
				t.Fatal(err)
			}
			return tx
		}
		if err := begin("blocker").Commit(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the worker to take the blocker", func() bool {
			hot, cold := outboxtest.QueueDepths(ob)
			return hot+cold == 0
		})
		queued, refused, rolledBack := begin("queued"), begin("refused"), begin("rolled-back")
		if err := queued.Commit(); err != nil { // fills the hot queue
			t.Fatal(err)
		}
		if err := refused.Commit(); err != nil { // refused: its claim must not wait an hour
			t.Fatal(err)
		}
		if err := rolledBack.Rollback(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the refused event's claim to be released and claimed again", func() bool {
			_, cold := outboxtest.QueueDepths(ob)
			return cold == 1
		})
		release <- struct{}{} // unblock once; the channel is closed at the end
		eventually(t, "every committed event to be delivered", func() bool {
			_, q := delivered.Load("queued")
			_, r := delivered.Load("refused")
			return q && r
		})
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil { // every release has run when Stop returns
			t.Fatal(err)
		}
		if got := m.claims(outbox.ClaimReleased); got != 1 {
			t.Errorf("claims released = %d, want 1 (the refused event; the rolled-back one has no row)", got)
		}
		if _, ok := delivered.Load("rolled-back"); ok {
			t.Error("the rolled-back event was delivered")
		}
	})
}
