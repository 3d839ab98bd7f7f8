package outboxnats_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"

	outboxnats "github.com/outboxkit/outbox/adapters/nats"
	outbox "github.com/outboxkit/outbox/core"
)

// Example publishes the events of an outbox to a JetStream stream. A nats-server runs
// inside the example so that it runs anywhere; in production, connect to your servers
// with nats.Connect and create the stream once (or let your infrastructure do it).
func Example() {
	dir, err := os.MkdirTemp("", "outboxnats-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true,
	})
	if err != nil {
		panic(err)
	}
	srv.Start()
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}

	ctx := context.Background()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close() // after ob.Stop: the outbox may publish until it has stopped
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	// One stream for every default subject, "outbox.<aggregate type>.<event type>".
	// Duplicates (2 minutes by default) must outlast the outbox's retry delays.
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       "OUTBOX",
		Subjects:   []string{"outbox.>"},
		Storage:    jetstream.FileStorage,
		Duplicates: 10 * time.Minute,
	})
	if err != nil {
		panic(err)
	}

	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // SQLite has one write lock: let writers queue in Go
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		panic(err)
	}
	relay, err := outboxnats.New(js, outboxnats.Config{})
	if err != nil {
		panic(err)
	}
	if err := ob.Register("Order", "OrderPlaced", relay); err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)

	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		// ... insert the order in the same transaction ...
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{
			Type:          "OrderPlaced",
			AggregateType: "Order",
			AggregateID:   "o-1",
			Payload:       json.RawMessage(`{"total_cents":1999}`),
		})
		return err
	})
	if err != nil {
		panic(err)
	}

	// A consumer of the stream sees the event once JetStream has stored it.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		panic(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		panic(err)
	}
	h := msg.Headers()
	fmt.Println(msg.Subject(), string(msg.Data()))
	fmt.Println(h.Get(outboxnats.HeaderEventType), h.Get(outboxnats.HeaderAggregateID),
		h.Get(jetstream.MsgIDHeader) == h.Get(outboxnats.HeaderEventID))
	// Output:
	// outbox.Order.OrderPlaced {"total_cents":1999}
	// OrderPlaced o-1 true
}
