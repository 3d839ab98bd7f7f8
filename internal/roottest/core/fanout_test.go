package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestFanOutThreeListeners: events written by a process that knows no listener
// (WriterOnly) go to the three listeners of a dispatching process, each delivery with
// its own outcome; one listener's dead deliveries are listed, counted and replayed on
// their own, and the replay re-runs that listener alone. A listener registered later
// gets the events split after it, not the ones before.
func TestFanOutThreeListeners(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 20 * time.Millisecond, SkipRecent: -1, MaxAttempts: 2,
			Retry: outbox.FixedBackoff{Wait: time.Millisecond}})
		writer, err := outbox.New(a.db, outbox.Config{Mode: outbox.WriterOnly, Dialect: b.dialect, Table: a.table,
			Logger: discardLogger(), PurgeInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		var mailUp atomic.Bool
		broker, readModel := newDeliveries(nil), newDeliveries(nil)
		mail := newDeliveries(func(context.Context, *outbox.Event) error {
			if !mailUp.Load() {
				return errors.New("smtp down")
			}
			return nil
		})
		for _, s := range []outbox.Subscription{
			{Name: "broker", AggregateType: outbox.AnyType, EventType: outbox.AnyType, Listener: broker},
			{Name: "read-model", AggregateType: "Order", EventType: "OrderPlaced", Listener: readModel},
			{Name: "mail", AggregateType: "Order", EventType: "OrderPlaced", Listener: mail},
		} {
			if err := a.ob.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		a.start(t)
		ctx := context.Background()
		const n = 5
		var ids []string
		for i := range n {
			err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
				id, err := writer.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order",
					AggregateID: fmt.Sprint("o-", i), Payload: map[string]int{"n": i}})
				ids = append(ids, id)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		dead := a.ob.Events()
		eventually(t, "every delivery settled", func() bool {
			c, err := dead.CountDead(ctx, outbox.DeadFilter{Listener: "mail"})
			return err == nil && c == n && broker.total() == n && readModel.total() == n
		})
		// A listener's return comes before its DONE is written (the recorder batches).
		eventually(t, "every successful delivery recorded", func() bool {
			for _, id := range ids {
				for _, name := range []string{"broker", "read-model"} {
					if a.event(t, outbox.DeliveryID(id, name)).Status != outbox.StatusDone {
						return false
					}
				}
			}
			return true
		})
		for _, id := range ids {
			if e := a.event(t, id); e.Status != outbox.StatusDone {
				t.Errorf("event %s is %s, want DONE once split", id, e.Status)
			}
			for _, name := range []string{"broker", "read-model"} {
				if e := a.event(t, outbox.DeliveryID(id, name)); e.Status != outbox.StatusDone || e.Listener != name {
					t.Errorf("delivery of %s to %s: %s, listener %q", id, name, e.Status, e.Listener)
				}
			}
			e := a.event(t, outbox.DeliveryID(id, "mail"))
			if e.Status != outbox.StatusDead || e.Attempts != 2 || e.Listener != "mail" {
				t.Errorf("delivery of %s to mail: %s after %d attempts", id, e.Status, e.Attempts)
			}
		}
		page, err := dead.ListDead(ctx, outbox.DeadQuery{DeadFilter: outbox.DeadFilter{Listener: "mail"}})
		if err != nil || len(page.Events) != n {
			t.Fatalf("dead deliveries of mail: %d, %v", len(page.Events), err)
		}
		if c, err := dead.CountDead(ctx, outbox.DeadFilter{Listener: "broker"}); err != nil || c != 0 {
			t.Fatalf("dead deliveries of broker: %d, %v", c, err)
		}
		mailUp.Store(true)
		if r, err := dead.ReplayAll(ctx, outbox.DeadFilter{Listener: "mail"}, 0); err != nil || r != n {
			t.Fatalf("replay mail: %d, %v", r, err)
		}
		// Replay turns every dead delivery PENDING at once, so the dead count is 0
		// before they run: wait for each delivery's own DONE.
		eventually(t, "replayed mail deliveries done", func() bool {
			for _, id := range ids {
				if a.event(t, outbox.DeliveryID(id, "mail")).Status != outbox.StatusDone {
					return false
				}
			}
			return true
		})
		if broker.total() != n || readModel.total() != n || mail.total() != 3*n {
			t.Errorf("calls: broker %d, read model %d, mail %d; want %d, %d, %d", broker.total(), readModel.total(), mail.total(), n, n, 3*n)
		}

		// A listener registered now sees the events split from now on.
		late := newDeliveries(nil)
		if err := a.ob.Subscribe(outbox.Subscription{Name: "late", AggregateType: "Order", EventType: "OrderPlaced", Listener: late}); err != nil {
			t.Fatal(err)
		}
		id, err := a.placeOrder(ctx, "o-late", orderPlaced, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the new event reaches four listeners", func() bool {
			return late.total() == 1 && broker.total() == n+1 && readModel.total() == n+1 && mail.total() == 3*n+1
		})
		if late.of(outbox.DeliveryID(id, "late")) != 1 {
			t.Errorf("late listener got %v", late.seen())
		}
	})
}

// TestFanOutOrdered: the deliveries of ordered events keep their key's order per
// listener, and one listener's retry holds back only its own later deliveries.
func TestFanOutOrdered(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 20 * time.Millisecond, MaxAttempts: 5,
			Retry: outbox.FixedBackoff{Wait: 300 * time.Millisecond}})
		var mu sync.Mutex
		seen := map[string][]int{}
		record := func(name string, fail func(n int, attempts int) bool) outbox.Listener {
			return outbox.Typed(func(_ context.Context, e *outbox.Event, p map[string]int) error {
				if fail(p["n"], e.Attempts) {
					return errors.New("not yet")
				}
				mu.Lock()
				seen[name] = append(seen[name], p["n"])
				mu.Unlock()
				return nil
			})
		}
		for _, s := range []outbox.Subscription{
			{Name: "steady", AggregateType: "Order", EventType: "Changed", Listener: record("steady", func(int, int) bool { return false })},
			{Name: "flaky", AggregateType: "Order", EventType: "Changed", Listener: record("flaky", func(n, attempts int) bool { return n == 0 && attempts == 0 })},
		} {
			if err := a.ob.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		a.start(t)
		ctx := context.Background()
		const n = 4
		for i := range n {
			err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
				_, err := a.ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "Changed", AggregateType: "Order", AggregateID: "o-1",
					OrderKey: "Order:o-1", Payload: map[string]int{"n": i}})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "both listeners got every event", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen["steady"]) == n && len(seen["flaky"]) == n
		})
		mu.Lock()
		defer mu.Unlock()
		for name, got := range seen {
			for i, v := range got {
				if v != i {
					t.Fatalf("%s saw %v, want 0..%d in order", name, got, n-1)
				}
			}
		}
	})
}

// TestFanOutMultiNode: two nodes dispatch fan-out events from one table; every event
// reaches each of its three listeners, and no split creates a delivery twice.
func TestFanOutMultiNode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.name == "sqlite" {
			t.Skip("MultiNode needs PostgreSQL or MySQL")
		}
		a := setupOutbox(t, b, outbox.Config{Mode: outbox.MultiNode, NodeID: "n1", ClaimTTL: time.Minute, PollInterval: 20 * time.Millisecond})
		other, err := outbox.New(a.db, outbox.Config{Mode: outbox.MultiNode, NodeID: "n2", ClaimTTL: time.Minute, Dialect: b.dialect, Table: a.table,
			Logger: discardLogger(), PollInterval: 20 * time.Millisecond, PurgeInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"a", "b", "c"}
		got := map[string]*deliveries{}
		for _, name := range names {
			got[name] = newDeliveries(nil)
		}
		for _, ob := range []*outbox.Outbox{a.ob, other} {
			for _, name := range names {
				if err := ob.Subscribe(outbox.Subscription{Name: name, AggregateType: "Order", EventType: "OrderPlaced", Listener: got[name]}); err != nil {
					t.Fatal(err)
				}
			}
		}
		a.start(t)
		if err := other.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Stop(context.Background()) })
		ctx := context.Background()
		const n = 40
		var ids []string
		for i := range n {
			w := a.ob
			if i%2 == 1 {
				w = other
			}
			err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
				id, err := w.Writer().Write(ctx, tx, orderPlaced)
				ids = append(ids, id)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "every delivery done", func() bool {
			for _, name := range names {
				if got[name].total() < n {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			for _, name := range names {
				if c := got[name].of(outbox.DeliveryID(id, name)); c != 1 {
					t.Errorf("%s got event %s %d times", name, id, c)
				}
			}
		}
		if rows := a.count(t, a.table); rows != n*4 {
			t.Errorf("%d rows, want %d: each event and three deliveries", rows, n*4)
		}
	})
}
