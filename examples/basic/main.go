// Command basic is the smallest complete program: an order and its event are written
// in one SQLite transaction, and the event reaches its listener after the commit. It
// uses database/sql and the core alone, no framework.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, "sqlite"

	outbox "github.com/outboxkit/outbox/core"
)

// OrderPlaced is the event's payload, stored as JSON.
type OrderPlaced struct {
	OrderID    string `json:"order_id"`
	TotalCents int    `json:"total_cents"`
}

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "outbox-basic-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // SQLite has one writer: let callers queue in Go

	// The outbox table, and the application's own.
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total_cents INTEGER NOT NULL)`); err != nil {
		return err
	}

	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		return err
	}
	delivered := make(chan struct{})
	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		var p OrderPlaced
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return err
		}
		fmt.Printf("delivered %s %s: order %s, %d cents\n", e.Type, e.ID, p.OrderID, p.TotalCents)
		close(delivered)
		return nil // the event is DONE; an error would retry it with backoff
	}))
	if err != nil {
		return err
	}
	if err := ob.Start(ctx); err != nil {
		return err
	}

	// The business row and the event commit together, or not at all.
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total_cents) VALUES (?, ?)`, "o-1", 4200); err != nil {
			return err
		}
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{
			Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1",
			Payload: OrderPlaced{OrderID: "o-1", TotalCents: 4200},
		})
		return err
	})
	if err != nil {
		return err
	}

	select {
	case <-delivered:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the event was not delivered within 10 s")
	}
	return ob.Stop(ctx) // delivers what is queued, then returns
}
