// Command quickstart shows the outbox on SQLite with no server: orders are written
// together with their events in one transaction, committed events are delivered at once
// through the hot path, a rolled-back order publishes nothing, a delayed event waits for
// its time, a failing listener retries until the event is DEAD, and the dead event is
// replayed and delivered after the "fix".
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	outbox "github.com/outboxkit/outbox/core"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run tells the story, printing to out.
func run(out io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "outbox-quickstart-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "quickstart.db")
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(path))
	if err != nil {
		return err
	}
	defer db.Close()

	// The outbox table, then the application's own table.
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, amount_cents INTEGER NOT NULL)`); err != nil {
		return err
	}
	fmt.Fprintf(out, "database: %s\n", path)

	ob, err := outbox.New(db, outbox.Config{
		Dialect:      outbox.SQLite,
		PollInterval: 100 * time.Millisecond, // the fallback poller; 5 s by default
		MaxAttempts:  3,
		Retry:        outbox.ExponentialBackoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1})),
	})
	if err != nil {
		return err
	}

	var finished atomic.Int64 // deliveries that ended in DONE
	if err := ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		fmt.Fprintf(out, "delivered  %-14s id=%s order=%s payload=%s\n", e.Type, e.ID, e.AggregateID, e.Payload)
		finished.Add(1)
		return nil
	})); err != nil {
		return err
	}
	if err := ob.Register("Order", "ReminderDue", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		fmt.Fprintf(out, "delivered  %-14s id=%s order=%s (delayed, %s after it was written)\n",
			e.Type, e.ID, e.AggregateID, time.Since(e.CreatedAt).Round(100*time.Millisecond))
		finished.Add(1)
		return nil
	})); err != nil {
		return err
	}
	var fixed atomic.Bool // the payment service is "down" until we fix it
	if err := ob.Register("Order", "PaymentRequested", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		if !fixed.Load() {
			fmt.Fprintf(out, "failed     %-14s id=%s attempt=%d\n", e.Type, e.ID, e.Attempts+1)
			return errors.New("payment service unavailable")
		}
		fmt.Fprintf(out, "delivered  %-14s id=%s after replay\n", e.Type, e.ID)
		finished.Add(1)
		return nil
	})); err != nil {
		return err
	}

	if err := ob.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := ob.Stop(stopCtx); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()

	// 1. Two orders, each committed with its event: delivered right after commit.
	for i, cents := range []int{1999, 4250} {
		id := fmt.Sprintf("order-%d", i+1)
		if err := placeOrder(ctx, db, ob.Writer(), id, cents, nil); err != nil {
			return err
		}
	}
	// 2. An order whose transaction fails: neither the order nor its event exists.
	err = placeOrder(ctx, db, ob.Writer(), "order-bad", 100, errors.New("card declined"))
	fmt.Fprintf(out, "rolled back order-bad: %v (nothing is published)\n", err)
	// 3. A delayed event and an event whose listener keeps failing.
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := ob.Writer().WriteAll(ctx, tx, []outbox.Envelope{
			{Type: "ReminderDue", AggregateType: "Order", AggregateID: "order-1", Payload: map[string]string{"note": "rate your order"}, DeliverAfter: 500 * time.Millisecond},
			{Type: "PaymentRequested", AggregateType: "Order", AggregateID: "order-2", Payload: map[string]int{"amount_cents": 4250}},
		})
		return err
	})
	if err != nil {
		return err
	}

	// Wait for the failing event to be DEAD after 3 attempts.
	if err := waitFor(ctx, func() (bool, error) {
		n, err := ob.Dead().Count(ctx, outbox.DeadFilter{})
		return n == 1 && finished.Load() == 3, err
	}); err != nil {
		return err
	}
	page, err := ob.Dead().List(ctx, outbox.DeadQuery{})
	if err != nil {
		return err
	}
	for _, e := range page.Events {
		fmt.Fprintf(out, "dead       %-14s id=%s attempts=%d last_error=%q\n", e.Type, e.ID, e.Attempts, e.LastError)
	}

	// Fix the cause, replay the dead event, and watch it delivered.
	fixed.Store(true)
	n, err := ob.Dead().ReplayAll(ctx, outbox.DeadFilter{}, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "replayed %d dead event(s)\n", n)
	// The listener has run once the counter moves; the row is DONE a moment later.
	var stats outbox.Stats
	if err := waitFor(ctx, func() (bool, error) {
		var err error
		stats, err = ob.Dead().Stats(ctx)
		return finished.Load() == 4 && stats.Counts[outbox.StatusDone] == 4, err
	}); err != nil {
		return err
	}
	var orders int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&orders); err != nil {
		return err
	}
	fmt.Fprintf(out, "orders: %d, outbox rows: DONE=%d DEAD=%d NEW=%d RETRY=%d\n", orders,
		stats.Counts[outbox.StatusDone], stats.Counts[outbox.StatusDead],
		stats.Counts[outbox.StatusNew], stats.Counts[outbox.StatusRetry])
	return nil
}

// placeOrder inserts an order and its OrderPlaced event in one transaction. A non-nil
// fail makes the transaction roll back after both writes.
func placeOrder(ctx context.Context, db *sql.DB, w *outbox.Writer, id string, cents int, fail error) error {
	return outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, amount_cents) VALUES (?, ?)`, id, cents); err != nil {
			return err
		}
		if _, err := w.Write(ctx, tx, outbox.Envelope{
			Type:          "OrderPlaced",
			AggregateType: "Order",
			AggregateID:   id,
			Payload:       map[string]any{"order_id": id, "amount_cents": cents},
		}); err != nil {
			return err
		}
		return fail
	})
}

// waitFor polls cond until it is true, for at most 15 seconds.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
