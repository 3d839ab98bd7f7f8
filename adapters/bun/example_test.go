package outboxbun_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	_ "modernc.org/sqlite"

	outboxbun "github.com/outboxkit/outbox/adapters/bun"
	outbox "github.com/outboxkit/outbox/core"
)

// startExample opens a fresh SQLite database in a temporary directory, creates the
// outbox and orders tables, and starts an Outbox whose listener sends each delivered
// OrderPlaced event's aggregate ID to the returned channel.
func startExample(ctx context.Context) (*bun.DB, *outbox.Outbox, <-chan string, func()) {
	dir, err := os.MkdirTemp("", "outboxbun-example-*")
	if err != nil {
		panic(err)
	}
	sqldb, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "example.db")))
	if err != nil {
		panic(err)
	}
	db := bun.NewDB(sqldb, sqlitedialect.New())
	if err := outbox.Migrate(ctx, sqldb, outbox.SQLite); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		panic(err)
	}
	ob, err := outbox.New(sqldb, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 10)
	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		delivered <- e.AggregateID
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	return db, ob, delivered, func() {
		_ = ob.Stop(ctx)
		_ = db.Close() // closes sqldb
		_ = os.RemoveAll(dir)
	}
}

// placeOrder inserts an order and its OrderPlaced event in tx.
func placeOrder(ctx context.Context, tx bun.Tx, w *outbox.Writer, id string) error {
	if _, err := tx.NewRaw(`INSERT INTO orders (id) VALUES (?)`, id).Exec(ctx); err != nil {
		return err
	}
	_, err := outboxbun.Write(ctx, tx, w, outbox.Envelope{
		Type:          "OrderPlaced",
		AggregateType: "Order",
		AggregateID:   id,
		Payload:       map[string]string{"order_id": id},
	})
	return err
}

// ExampleRunInTx writes an order and its event in one bun transaction; the event is
// delivered right after the commit.
func ExampleRunInTx() {
	ctx := context.Background()
	db, ob, delivered, stop := startExample(ctx)
	defer stop()

	err := outboxbun.RunInTx(ctx, db, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`INSERT INTO orders (id) VALUES (?)`, "o-1").Exec(ctx); err != nil {
			return err
		}
		_, err := outboxbun.Write(ctx, tx, ob.Writer(), outbox.Envelope{
			Type:          "OrderPlaced",
			AggregateType: "Order",
			AggregateID:   "o-1",
			Payload:       map[string]int{"amount_cents": 1999},
		})
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("delivered:", <-delivered)
	// Output: delivered: o-1
}

// ExampleRunInTx_nested nests RunInTx: the failed savepoint's order and event are rolled
// back and never delivered, while the enclosing transaction commits its own.
func ExampleRunInTx_nested() {
	ctx := context.Background()
	db, ob, delivered, stop := startExample(ctx)
	defer stop()

	errDeclined := errors.New("card declined")
	err := outboxbun.RunInTx(ctx, db, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := placeOrder(ctx, tx, ob.Writer(), "o-1"); err != nil {
			return err
		}
		err := outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := placeOrder(ctx, tx, ob.Writer(), "o-2"); err != nil {
				return err
			}
			return errDeclined // rolls back to the savepoint
		})
		fmt.Println("nested:", err)
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("delivered:", <-delivered)
	var orders, events int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&orders); err != nil {
		panic(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox_event`).Scan(&events); err != nil {
		panic(err)
	}
	fmt.Println("orders:", orders, "events:", events)
	// Output:
	// nested: card declined
	// delivered: o-1
	// orders: 1 events: 1
}
