package pgnotify_test

import (
	"context"
	"database/sql"
	"log"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/outboxkit/outbox/adapters/pgnotify"
	outbox "github.com/outboxkit/outbox/core"
)

// Example gives a dispatching outbox a Notifier, so that events written by other
// processes (WriterOnly ones, other MultiNode nodes, replays) reach it at once instead
// of at its next poll. Every process on the table gets a Notifier on the same channel.
func Example() {
	ctx := context.Background()
	dsn := os.Getenv("DATABASE_URL") // postgres://app@db:5432/app
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	n, err := pgnotify.New(pgnotify.Config{DSN: dsn}) // connects nothing yet
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close() // runs after ob.Stop: Stop may send the last notification

	ob, err := outbox.New(db, outbox.Config{
		Dialect:  outbox.Postgres,
		Mode:     outbox.MultiNode,
		ClaimTTL: 2 * time.Minute,
		Notifier: n,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := ob.Start(ctx); err != nil {
		log.Fatal(err)
	}
	// ... serve requests that write events ...
	if err := ob.Stop(ctx); err != nil {
		log.Print(err)
	}
}

// Example_pooler sends notifications through a transaction-mode pooler such as
// PgBouncer, and listens on a direct connection to the server: LISTEN needs a session of
// its own, which a transaction-mode pooler does not give.
func Example_pooler() {
	n, err := pgnotify.New(pgnotify.Config{
		DSN:       "postgres://app@pgbouncer:6432/app", // NOTIFY works through the pooler
		ListenDSN: "postgres://app@db:5432/app",        // LISTEN goes to the server itself
		Channel:   "billing.outbox_event",              // one channel per table: here, the table's name
	})
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()
	_ = outbox.Config{Dialect: outbox.Postgres, Table: "billing.outbox_event", Notifier: n}
}
