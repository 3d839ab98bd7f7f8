package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// ExampleDispatcher delivers one committed event through the hot path. In an
// application the writer inserts the event in the business transaction and calls the
// dispatcher's WriterHook after the commit; here both steps are spelled out.
func ExampleDispatcher() {
	ctx := context.Background()
	store := outboxtest.NewMemoryStore()

	reg := outbox.NewRegistry()
	err := reg.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		fmt.Printf("publish %s %s\n", e.Type, e.Payload)
		return nil
	}))
	if err != nil {
		panic(err)
	}

	d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := d.Start(ctx); err != nil {
		panic(err)
	}

	now := time.Now()
	e := outbox.Event{ID: "evt-1", Type: "OrderPlaced", AggregateType: "Order",
		Payload: json.RawMessage(`{"order_id":42}`), CreatedAt: now, AvailableAt: now}
	if err := store.Insert(ctx, nil, outbox.InsertParams{Events: []outbox.Event{e}}); err != nil { // Writer.Write, in the transaction
		panic(err)
	}
	_ = d.WriterHook().AfterCommit(ctx, []outbox.Event{e}) // after the commit

	// Stop drains the queues before it returns.
	if err := d.Stop(ctx); err != nil {
		panic(err)
	}
	got, err := store.Get(ctx, "evt-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Status)
	// Output:
	// publish OrderPlaced {"order_id":42}
	// DONE
}

// ExampleResultListenerFunc shows the richer listener form: defer an event without
// counting an attempt, or send it straight to DEAD.
func ExampleResultListenerFunc_outcomes() {
	l := outbox.ResultListenerFunc(func(ctx context.Context, e *outbox.Event) (outbox.Result, error) {
		var body struct{ Amount int }
		if err := json.Unmarshal(e.Payload, &body); err != nil {
			return outbox.Dead("malformed payload: " + err.Error()), nil
		}
		if body.Amount > 1000 {
			return outbox.Defer(time.Hour), nil // wait for manual approval
		}
		return outbox.Done(), nil
	})
	reg := outbox.NewRegistry()
	fmt.Println(reg.Register("Payment", "PaymentRequested", l))
	// Output: <nil>
}
