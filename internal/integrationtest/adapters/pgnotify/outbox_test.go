package pgnotify_test

// End to end through the outbox: a WriterOnly process writes, a SingleNode process that
// polls once an hour dispatches, and only a notification can bring the event across.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/outboxkit/outbox/adapters/pgnotify"
	outbox "github.com/outboxkit/outbox/core"
)

// countingNotifier is a real Notifier whose Listen also counts the wakes it passes on.
type countingNotifier struct {
	*pgnotify.Notifier
	wakes *signal
}

func (c *countingNotifier) Listen(ctx context.Context, wake func()) error {
	return c.Notifier.Listen(ctx, func() {
		wake()
		c.wakes.add()
	})
}

// pollCounter counts the dispatcher's finished poll cycles: the poller reports the
// oldest pending event's lag once per cycle.
type pollCounter struct {
	outbox.NopMetrics
	cycles *signal
}

func (p *pollCounter) OldestPendingLag(time.Duration) { p.cycles.add() }

// e2eBundle is a writer and a dispatcher on one table, each with its own Notifier.
type e2eBundle struct {
	*testBundle
	writer     *outbox.Outbox // WriterOnly
	dispatcher *outbox.Outbox // SingleNode, PollInterval an hour
	wakes      *signal        // the dispatcher's Listen wakes
	deliveries chan string    // IDs of the events the dispatcher's listener was called with

	mu       sync.Mutex
	deadOnce map[string]bool // IDs whose first delivery returns Dead
}

func setupE2E(t *testing.T) *e2eBundle {
	t.Helper()
	b := &e2eBundle{testBundle: setup(t), deliveries: make(chan string, 16), deadOnce: map[string]bool{}, wakes: newSignal()}
	quiet := slog.New(slog.DiscardHandler)
	var err error
	b.writer, err = outbox.New(b.db, outbox.Config{
		Mode: outbox.WriterOnly, Dialect: outbox.Postgres, Table: b.table, PurgeInterval: -1, Logger: quiet,
		Notifier: newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: b.channel}),
	})
	if err != nil {
		t.Fatal(err)
	}
	polls := &pollCounter{cycles: newSignal()}
	b.dispatcher, err = outbox.New(b.db, outbox.Config{
		Mode: outbox.SingleNode, Dialect: outbox.Postgres, Table: b.table, PurgeInterval: -1, Logger: quiet,
		PollInterval: time.Hour, // the first cycle runs at Start; the next only when woken
		Notifier:     &countingNotifier{Notifier: newNotifier(t, pgnotify.Config{DSN: b.dsn, Channel: b.channel}), wakes: b.wakes},
		Metrics:      polls,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = b.dispatcher.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		b.deliveries <- e.ID
		b.mu.Lock()
		dead := b.deadOnce[e.ID]
		delete(b.deadOnce, e.ID)
		b.mu.Unlock()
		if dead {
			return outbox.Dead(errors.New("the test fails the first delivery"))
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, o := range []*outbox.Outbox{b.writer, b.dispatcher} {
		if err := o.Start(ctx); err != nil {
			t.Fatalf("start %s: %v", o.Mode(), err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			if err := o.Stop(ctx); err != nil {
				t.Errorf("stop %s: %v", o.Mode(), err)
			}
		})
	}
	// The dispatcher listens, and the poll cycle its first wake asked for is over (the
	// first runs at Start, the second for that wake, whichever came first): from now on
	// only a notification makes it read the table before an hour has passed.
	b.wakes.waitAtLeast(t, "the dispatcher's wake after LISTEN", 1)
	polls.cycles.waitAtLeast(t, "the dispatcher's first two poll cycles", 2)
	return b
}

// write writes the OrderPlaced event id through the writer, in a transaction.
func (b *e2eBundle) write(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err := outbox.RunInTx(ctx, b.db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := b.writer.Writer().Write(ctx, tx, outbox.Envelope{ID: id, Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
		return err
	})
	if err != nil {
		t.Fatalf("write %s: %v", id, err)
	}
}

// awaitDelivery waits until the dispatcher's listener is called with the event id, and
// logs how long that took (for information: nothing is asserted about it).
func (b *e2eBundle) awaitDelivery(t *testing.T, id string) {
	t.Helper()
	began := time.Now()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case got := <-b.deliveries:
			if got == id {
				t.Logf("%s delivered %s after the write or replay returned", id, time.Since(began).Round(time.Microsecond))
				return
			}
			t.Logf("delivered %s while waiting for %s", got, id)
		case <-timer.C:
			t.Fatalf("event %s was not delivered within %s (the dispatcher polls once an hour: was it notified?)", id, waitTimeout)
		}
	}
}

// awaitStatus waits until the event id has status want. It polls the table: the
// outcome is written after the listener returns.
func (b *e2eBundle) awaitStatus(t *testing.T, id string, want outbox.Status) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		e, err := b.dispatcher.Events().Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s is %s, want %s", id, e.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOutboxDeliversOtherProcessesEventsOnNotification: an event committed by a
// WriterOnly outbox, and a DEAD event it replays, reach a dispatcher that polls once an
// hour: only the notifications can bring them.
func TestOutboxDeliversOtherProcessesEventsOnNotification(t *testing.T) {
	t.Parallel()
	b := setupE2E(t)

	wakes := b.wakes.n.Load()
	b.write(t, "order-1")
	b.awaitDelivery(t, "order-1")
	b.wakes.waitAtLeast(t, "the wake of the write's notification", wakes+1)
	b.awaitStatus(t, "order-1", outbox.StatusDone)

	// The first delivery of order-2 sends it to DEAD; a replay in the writer's process
	// notifies too, and the dispatcher delivers it again.
	b.mu.Lock()
	b.deadOnce["order-2"] = true
	b.mu.Unlock()
	b.write(t, "order-2")
	b.awaitDelivery(t, "order-2")
	b.awaitStatus(t, "order-2", outbox.StatusDead)
	wakes = b.wakes.n.Load()
	if err := b.writer.Events().Replay(context.Background(), "order-2"); err != nil {
		t.Fatalf("replay: %v", err)
	}
	b.awaitDelivery(t, "order-2")
	b.wakes.waitAtLeast(t, "the wake of the replay's notification", wakes+1)
	b.awaitStatus(t, "order-2", outbox.StatusDone)
}

// TestOutboxListensAgainAfterConnectionLoss: when the dispatcher's listening connection
// is terminated, the outbox calls Listen again, and a notification sent afterwards still
// brings an event across.
func TestOutboxListensAgainAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	b := setupE2E(t)
	wakes := b.wakes.n.Load()
	if got := terminate(t, b.db, "outbox-pgnotify-listen", b.channel); got != 1 {
		t.Fatalf("terminated %d listening backends, want 1", got)
	}
	// The wake after the new LISTEN: the outbox listens again.
	b.wakes.waitAtLeast(t, "the wake after LISTEN on a new connection", wakes+1)

	wakes = b.wakes.n.Load()
	b.write(t, "order-after-reconnect")
	b.awaitDelivery(t, "order-after-reconnect")
	b.wakes.waitAtLeast(t, "the wake of the write's notification", wakes+1)
	b.awaitStatus(t, "order-after-reconnect", outbox.StatusDone)
}
