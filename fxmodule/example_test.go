package outboxfx_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"go.uber.org/fx"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// newExampleDB returns a constructor of a fresh SQLite database in dir with the outbox
// table: the place to run migrations, since fx builds it before the outbox. The DB is
// closed by its own stop hook, which fx runs after the outbox has drained.
func newExampleDB(dir string) func(fx.Lifecycle) (*sql.DB, error) {
	return func(lc fx.Lifecycle) (*sql.DB, error) {
		db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
		if err != nil {
			return nil, err
		}
		if err := outbox.Migrate(context.Background(), db, outbox.SQLite); err != nil {
			db.Close()
			return nil, err
		}
		lc.Append(fx.StopHook(db.Close))
		return db, nil
	}
}

// Broker stands for a message broker client that listeners publish to.
type Broker struct{ published chan string }

// Handle publishes the event: a Broker is an outbox.Listener.
func (b *Broker) Handle(_ context.Context, e *outbox.Event) error {
	b.published <- fmt.Sprintf("%s %s %s", e.Type, e.AggregateID, e.Payload)
	return nil
}

// NewOrderPlacedListener is a listener constructor for outboxfx.AsListener: it routes
// OrderPlaced events of Order aggregates to the broker.
func NewOrderPlacedListener(b *Broker) outboxfx.Listener {
	return outboxfx.Listener{AggregateType: "Order", EventType: "OrderPlaced", Listener: b}
}

// Example wires the outbox into an fx app: the module goes to fx.New, the listener
// constructor to fx.Provide through AsListener. An event written in a transaction is
// delivered right after the commit.
func Example() {
	dir, err := os.MkdirTemp("", "outboxfx-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	broker := &Broker{published: make(chan string, 1)}

	var (
		db *sql.DB
		w  *outbox.Writer
	)
	app := fx.New(
		fx.NopLogger,
		fx.Supply(outboxfx.Config{Dialect: outbox.SQLite}),
		outboxfx.Module,
		// The app's logger: the outbox logs to it as Config.Logger is nil (here it
		// discards, to keep the example's output clean).
		fx.Supply(slog.New(slog.DiscardHandler)),
		fx.Provide(newExampleDB(dir)),
		fx.Supply(broker),
		fx.Provide(outboxfx.AsListener(NewOrderPlacedListener)),
		fx.Populate(&db, &w), // in an app: the services that write events
	)
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		panic(err)
	}
	defer app.Stop(ctx)

	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := w.Write(ctx, tx, outbox.Envelope{
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
	fmt.Println(<-broker.published)
	// Output: OrderPlaced o-1 {"amount_cents":1999}
}
