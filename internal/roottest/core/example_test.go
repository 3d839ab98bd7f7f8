package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
)

// openExampleDB opens a fresh SQLite database in a temporary directory.
func openExampleDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "outbox-example-*")
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "example.db")))
	if err != nil {
		panic(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// Example shows the whole flow: an event written in the business transaction is
// delivered right after the commit.
func Example() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY)`); err != nil {
		panic(err)
	}

	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
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

	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (?)`, "o-1"); err != nil {
			return err
		}
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{
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
	fmt.Println(<-delivered)
	// Output: OrderPlaced o-1 {"amount_cents":1999}
}

// ExampleRunInTx shows that a rolled-back transaction leaves no event behind.
func Example_runInTx() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.WriterOnly})
	if err != nil {
		panic(err)
	}
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		tx.AfterRollback(func() { fmt.Println("rolled back: nothing is delivered") })
		if _, err := ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		return fmt.Errorf("card declined")
	})
	fmt.Println("error:", err)
	stats, err := ob.Events().Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("rows:", stats.Counts[outbox.StatusNew])
	// Output:
	// rolled back: nothing is delivered
	// error: card declined
	// rows: 0
}

// ExampleWriter_WriteAll writes a batch, one of them delayed, with a single INSERT.
func Example_writer_WriteAll() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Mode: outbox.WriterOnly})
	if err != nil {
		panic(err)
	}
	var ids []string
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		ids, err = ob.Writer().WriteAll(ctx, tx, []outbox.Envelope{
			{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Payload: []byte(`{"n":1}`)},
			{Type: "ReminderDue", AggregateType: "Order", AggregateID: "o-1", Payload: []byte(`{}`), DeliverAfter: 24 * time.Hour},
		})
		return err
	})
	if err != nil {
		panic(err)
	}
	e, err := ob.Store().Get(ctx, ids[1])
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ids), "events; delayed by", e.AvailableAt.Sub(e.CreatedAt))
	// Output: 2 events; delayed by 24h0m0s
}

// Example_events_Replay replays an event that went DEAD.
func Example_events_Replay() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	// No listener is registered for this event, so the dispatcher sends it to DEAD.
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)
	var id string
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		id, err = ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "Unrouted", Payload: []byte(`{}`)})
		return err
	})
	if err != nil {
		panic(err)
	}
	for {
		if e, err := ob.Events().Get(ctx, id); err == nil && e.Status == outbox.StatusDead {
			fmt.Println("dead:", e.LastError != "")
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	delivered := make(chan struct{}, 1)
	_ = ob.Register("", "Unrouted", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		select {
		case delivered <- struct{}{}:
		default:
		}
		return nil
	}))
	if err := ob.Events().Replay(ctx, id); err != nil {
		panic(err)
	}
	<-delivered
	fmt.Println("delivered after replay")
	// Output:
	// dead: true
	// delivered after replay
}

// Example_multiNode runs two nodes on one table, as two replicas of a service would.
// The event written through node A is claimed by node A in the business transaction and
// delivered by its hot path; node B's poller, polling every 10 ms, never takes it.
func Example_multiNode() {
	db, cleanup := openExampleDB()
	defer cleanup()
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	delivered := make(chan string, 2)
	node := func(id string) *outbox.Outbox {
		ob, err := outbox.New(db, outbox.Config{
			Dialect:         outbox.SQLite,
			Mode:            outbox.MultiNode,
			NodeID:          id,
			ClaimTTL:        time.Minute, // > ListenerTimeout + StatusTimeout
			ListenerTimeout: 10 * time.Second,
			StatusTimeout:   5 * time.Second,
			PollInterval:    10 * time.Millisecond,
			SkipRecent:      -1,
		})
		if err != nil {
			panic(err)
		}
		err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			delivered <- fmt.Sprintf("%s delivered %s, claimed by %s", id, e.Type, claimOwner(e.LockedBy))
			return nil
		}))
		if err != nil {
			panic(err)
		}
		if err := ob.Start(ctx); err != nil {
			panic(err)
		}
		return ob
	}
	a, b := node("node-a"), node("node-b")
	defer b.Stop(ctx)
	defer a.Stop(ctx)

	err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := a.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: map[string]int{"total": 42}})
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(<-delivered)
	time.Sleep(100 * time.Millisecond) // ten polls of node B
	fmt.Println("deliveries pending:", len(delivered))
	// Output:
	// node-a delivered OrderPlaced, claimed by node-a
	// deliveries pending: 0
}

// claimOwner is the node ID part of a claim token ("<node ID>/<ULID>").
func claimOwner(token string) string {
	owner, _, _ := strings.Cut(token, "/")
	return owner
}
