package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// Example_inMemoryStore runs an Outbox over the in-memory store of package outboxtest,
// as a unit test of a listener can: no database, the hot path, and the row's outcome.
// The memory store takes no part in transactions, so the test plays the transaction
// with adapterkit: Join gives the writer a handle with after-commit callbacks, and
// Committed runs them.
func Example_inMemoryStore() {
	ctx := context.Background()
	store := outboxtest.NewMemoryStore()
	ob, err := outbox.New(nil, outbox.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		fmt.Printf("publish %s %s\n", e.Type, e.Payload)
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}

	var tx adapterkit.Callbacks
	id, err := ob.Writer().Write(ctx, adapterkit.Join(nil, &tx), outbox.Envelope{
		Type: "OrderPlaced", AggregateType: "Order", Payload: json.RawMessage(`{"order_id":42}`)})
	if err != nil {
		panic(err)
	}
	tx.Committed() // the commit: the event takes the hot path

	// Stop drains the queues before it returns.
	if err := ob.Stop(ctx); err != nil {
		panic(err)
	}
	got, err := store.Get(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Status)
	// Output:
	// publish OrderPlaced {"order_id":42}
	// DONE
}

// ExampleListenerFunc_outcomes shows the outcomes a listener chooses: defer an event
// without counting an attempt, or send it straight to DEAD.
func ExampleListenerFunc_outcomes() {
	l := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		var body struct{ Amount int }
		if err := json.Unmarshal(e.Payload, &body); err != nil {
			return outbox.Dead(fmt.Errorf("malformed payload: %w", err))
		}
		if body.Amount > 1000 {
			return outbox.Defer(time.Hour) // wait for manual approval
		}
		return nil
	})
	ob, err := outbox.New(nil, outbox.Config{Store: outboxtest.NewMemoryStore()})
	if err != nil {
		panic(err)
	}
	fmt.Println(ob.Register("Payment", "PaymentRequested", l))
	// Output: <nil>
}
