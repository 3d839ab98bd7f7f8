package outboxsqlx_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite"

	outboxsqlx "github.com/outboxkit/outbox/adapters/sqlx"
	outbox "github.com/outboxkit/outbox/core"
)

// Order is a business row.
type Order struct {
	ID         string `db:"id"`
	TotalCents int    `db:"total_cents"`
}

// ExampleRunInTx writes an order and its event in one sqlx transaction; the event is
// delivered right after the commit. A second transaction fails and leaves nothing behind.
func ExampleRunInTx() {
	dir, err := os.MkdirTemp("", "outboxsqlx-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlx.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db.DB, outbox.SQLite); err != nil {
		panic(err)
	}
	db.MustExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total_cents INTEGER NOT NULL)`)

	ob, err := outbox.New(db.DB, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 1)
	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		delivered <- fmt.Sprintf("%s %s %s", e.Type, e.AggregateID, e.Payload)
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)

	placeOrder := func(order Order, fail error) error {
		return outboxsqlx.RunInTx(ctx, db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
			if _, err := tx.NamedExecContext(ctx, `INSERT INTO orders (id, total_cents) VALUES (:id, :total_cents)`, order); err != nil {
				return err
			}
			_, err := outboxsqlx.Write(ctx, tx, ob.Writer(), outbox.Envelope{
				Type:          "OrderPlaced",
				AggregateType: "Order",
				AggregateID:   order.ID,
				Payload:       map[string]int{"total_cents": order.TotalCents},
			})
			if err != nil {
				return err
			}
			return fail
		})
	}

	if err := placeOrder(Order{ID: "o-1", TotalCents: 1999}, nil); err != nil {
		panic(err)
	}
	fmt.Println(<-delivered)

	err = placeOrder(Order{ID: "o-2", TotalCents: 500}, errors.New("payment declined"))
	var orders, events int
	db.GetContext(ctx, &orders, `SELECT COUNT(*) FROM orders`)
	db.GetContext(ctx, &events, `SELECT COUNT(*) FROM outbox_event`)
	fmt.Printf("%v; orders: %d, events: %d\n", err, orders, events)
	// Output:
	// OrderPlaced o-1 {"total_cents":1999}
	// payment declined; orders: 1, events: 1
}
