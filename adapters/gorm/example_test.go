package outboxgorm_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver behind the examples' *sql.DB

	outboxgorm "github.com/outboxkit/outbox/adapters/gorm"
	outbox "github.com/outboxkit/outbox/core"
)

// Order is the examples' business model.
type Order struct {
	ID string
}

// exampleApp is what an application sets up once: the database, GORM over it, and a
// started Outbox whose listener reports each delivery on a channel.
type exampleApp struct {
	gdb       *gorm.DB
	ob        *outbox.Outbox
	delivered chan string
	close     func()
}

func newExampleApp() *exampleApp {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "outboxgorm-example-*")
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		panic(err)
	}
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	// GORM runs on the same *sql.DB as the outbox.
	gdb, err := gorm.Open(sqlite.New(sqlite.Config{Conn: db}), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		panic(err)
	}
	if err := gdb.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY)`).Error; err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{
		Dialect: outbox.SQLite,
		Mode:    outbox.SingleNode,
		Logger:  slog.New(slog.DiscardHandler), // keep the example's output to its result
	})
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 10)
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
	return &exampleApp{gdb: gdb, ob: ob, delivered: delivered, close: func() {
		_ = ob.Stop(ctx)
		_ = db.Close()
		_ = os.RemoveAll(dir)
	}}
}

func orderPlaced(id string, cents int) outbox.Envelope {
	return outbox.Envelope{
		Type:          "OrderPlaced",
		AggregateType: "Order",
		AggregateID:   id,
		Payload:       map[string]int{"amount_cents": cents},
	}
}

// ExampleTransaction writes an order and its event in one GORM transaction; the event
// is delivered right after the commit.
func ExampleTransaction() {
	app := newExampleApp()
	defer app.close()
	ctx := context.Background()

	err := outboxgorm.Transaction(ctx, app.gdb, func(tx *gorm.DB) error {
		if err := tx.Create(&Order{ID: "o-1"}).Error; err != nil {
			return err
		}
		_, err := outboxgorm.Write(tx, app.ob.Writer(), orderPlaced("o-1", 1999))
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-app.delivered)
	// Output: OrderPlaced o-1 {"amount_cents":1999}
}

// ExampleTransaction_nested rolls back a nested transaction (a savepoint): its event is
// discarded with it, and the outer transaction's event is delivered after the commit.
func ExampleTransaction_nested() {
	app := newExampleApp()
	defer app.close()
	ctx := context.Background()

	err := outboxgorm.Transaction(ctx, app.gdb, func(tx *gorm.DB) error {
		if err := tx.Create(&Order{ID: "o-1"}).Error; err != nil {
			return err
		}
		if _, err := outboxgorm.Write(tx, app.ob.Writer(), orderPlaced("o-1", 1999)); err != nil {
			return err
		}
		err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
			if _, err := outboxgorm.Write(tx, app.ob.Writer(), orderPlaced("o-2", 500)); err != nil {
				return err
			}
			return errors.New("out of stock")
		})
		fmt.Println("nested:", err)
		return nil // the outer transaction goes on and commits
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-app.delivered)
	var rows int64
	app.gdb.Table(outbox.DefaultTable).Count(&rows)
	fmt.Println("outbox rows:", rows)
	// Output:
	// nested: out of stock
	// OrderPlaced o-1 {"amount_cents":1999}
	// outbox rows: 1
}

// ExampleWrite shows that a write needs a transaction: outside one it fails and
// inserts nothing.
func ExampleWrite() {
	app := newExampleApp()
	defer app.close()

	id, err := outboxgorm.Write(app.gdb, app.ob.Writer(), orderPlaced("o-1", 1999))
	fmt.Printf("%q %v\n", id, errors.Is(err, outbox.ErrNoTransaction))
	// Output: "" true
}

// ExampleWriteAll writes two events with one INSERT; WriteAll returns their IDs in the
// order of the envelopes.
func ExampleWriteAll() {
	app := newExampleApp()
	defer app.close()
	ctx := context.Background()

	var ids []string
	err := outboxgorm.Transaction(ctx, app.gdb, func(tx *gorm.DB) error {
		var err error
		ids, err = outboxgorm.WriteAll(tx, app.ob.Writer(), []outbox.Envelope{
			orderPlaced("o-1", 1999),
			orderPlaced("o-2", 500),
		})
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("IDs:", len(ids))
	fmt.Println(<-app.delivered)
	fmt.Println(<-app.delivered)
	// Unordered output:
	// IDs: 2
	// OrderPlaced o-1 {"amount_cents":1999}
	// OrderPlaced o-2 {"amount_cents":500}
}

// ExampleExecutor passes the transaction to the writer itself, as code written against
// outbox.Executor does.
func ExampleExecutor() {
	app := newExampleApp()
	defer app.close()
	ctx := context.Background()

	var id string
	err := outboxgorm.Transaction(ctx, app.gdb, func(tx *gorm.DB) error {
		exec, err := outboxgorm.Executor(tx)
		if err != nil {
			return err
		}
		id, err = app.ob.Writer().Write(ctx, exec, orderPlaced("o-1", 1999))
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(id != "", <-app.delivered)
	// Output: true OrderPlaced o-1 {"amount_cents":1999}
}
