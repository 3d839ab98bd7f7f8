// Command fanout delivers one event to three listeners, each with its own outcome: a
// catch-all relay, a read model and a mailer whose server is down. The mailer's
// delivery ends DEAD while the other two are DONE; once the server is back, replaying
// the mailer's dead deliveries runs the mailer alone. SQLite, no server needed: run it
// with go run ./examples/fanout.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
)

// OrderPlaced is the event's payload.
type OrderPlaced struct {
	OrderID string `json:"order_id"`
	Email   string `json:"email"`
}

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "outbox-fanout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		return err
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		return err
	}

	var smtpUp atomic.Bool
	relayed, projected, mailed := make(chan string, 1), make(chan string, 1), make(chan string, 1)
	subs := []outbox.Subscription{{
		// Every event of every aggregate: a broker relay would go here.
		Name: "relay", AggregateType: outbox.AnyType, EventType: outbox.AnyType,
		Listener: outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			relayed <- e.Type
			return nil
		}),
	}, {
		Name: "read-model", AggregateType: "Order", EventType: "OrderPlaced",
		Listener: outbox.Typed(func(ctx context.Context, e *outbox.Event, p OrderPlaced) error {
			projected <- p.OrderID
			return nil
		}),
	}, {
		Name: "mailer", AggregateType: "Order", EventType: "OrderPlaced", MaxAttempts: 2,
		Retry: outbox.FixedBackoff{Wait: 10 * time.Millisecond},
		Listener: outbox.Typed(func(ctx context.Context, e *outbox.Event, p OrderPlaced) error {
			if !smtpUp.Load() {
				return errors.New("smtp: connection refused")
			}
			mailed <- p.Email
			return nil
		}),
	}}
	for _, s := range subs {
		if err := ob.Subscribe(s); err != nil {
			return err
		}
	}
	if err := ob.Start(ctx); err != nil {
		return err
	}
	defer ob.Stop(context.WithoutCancel(ctx)) // on an early return; Stop twice is a no-op

	var id string
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		id, err = ob.Writer().Write(ctx, tx, outbox.Envelope{
			Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1",
			Payload: OrderPlaced{OrderID: "o-1", Email: "ada@example.com"},
		})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("relay got %s\n", <-relayed)
	fmt.Printf("read model got order %s\n", <-projected)

	// The mailer's delivery is a row of its own: it ends DEAD after two attempts,
	// and the other two listeners are not run again.
	dead := ob.Events()
	mailer := outbox.DeadFilter{Listener: "mailer"}
	if err := waitFor(ctx, func() bool { n, err := dead.CountDead(ctx, mailer); return err == nil && n == 1 }); err != nil {
		return fmt.Errorf("the mailer's delivery did not end DEAD: %w", err)
	}
	e, err := dead.Get(ctx, outbox.DeliveryID(id, "mailer"))
	if err != nil {
		return err
	}
	fmt.Printf("mailer: %s after %d attempts: %s\n", e.Status, e.Attempts, e.LastError)

	// The server is back: replay the mailer's dead deliveries, and only those.
	smtpUp.Store(true)
	if _, err := dead.ReplayAll(ctx, mailer, 0); err != nil {
		return err
	}
	fmt.Printf("mailer sent to %s after the replay\n", <-mailed)
	if err := ob.Stop(ctx); err != nil {
		return err
	}
	select {
	case t := <-relayed:
		return fmt.Errorf("the relay ran again (%s)", t)
	case o := <-projected:
		return fmt.Errorf("the read model ran again (%s)", o)
	default:
		return nil
	}
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
