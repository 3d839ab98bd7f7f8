package outboxfx_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	outbox "github.com/outboxkit/outbox/core"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// TestAsListenerRegistersEveryShape checks that New registers listeners from
// constructors of every accepted shape: with dependencies, with an error result,
// returning a slice, and provided from inside another fx.Module.
func TestAsListenerRegistersEveryShape(t *testing.T) {
	t.Parallel()
	db := backends[0].open(t)
	type deps struct {
		fx.In
		Publisher *publisher
	}
	var ob *outbox.Outbox
	fxtest.New(t,
		fx.Supply(outboxfx.Config{Dialect: outbox.SQLite, Logger: quietLogger()}),
		outboxfx.Module,
		fx.Provide(func() *sql.DB { return db }),
		fx.Supply(&publisher{}),
		fx.Provide(
			outboxfx.AsListener(newPublishingListener), // Order/OrderPlaced
			outboxfx.AsListener(func(p *publisher) (outboxfx.Listener, error) {
				return outboxfx.Listener{AggregateType: "Order", EventType: "OrderCancelled", Listener: p}, nil
			}),
			outboxfx.AsListener(func(d deps) []outboxfx.Listener {
				return []outboxfx.Listener{
					{AggregateType: "Invoice", EventType: "InvoiceIssued", Listener: d.Publisher},
					{AggregateType: "Invoice", EventType: "InvoicePaid", Listener: d.Publisher},
				}
			}),
			outboxfx.AsListener(func(p *publisher) ([]outboxfx.Listener, error) { return nil, nil }),
		),
		fx.Module("billing",
			fx.Provide(outboxfx.AsListener(func(p *publisher) outboxfx.Listener {
				return outboxfx.Listener{EventType: "Tick", Listener: p} // the global aggregate type
			})),
		),
		fx.Populate(&ob),
	)
	routes := [][2]string{
		{"Order", "OrderPlaced"},
		{"Order", "OrderCancelled"},
		{"Invoice", "InvoiceIssued"},
		{"Invoice", "InvoicePaid"},
		{outbox.GlobalAggregateType, "Tick"},
	}
	for _, r := range routes {
		// A route is taken exactly when a listener is registered for it.
		if err := ob.Register(r[0], r[1], outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })); !errors.Is(err, outbox.ErrDuplicateListener) {
			t.Errorf("no listener for %s/%s: registering another returned %v", r[0], r[1], err)
		}
	}
}

// TestLoggerFromGraph checks that the app's *slog.Logger is used when Config.Logger
// is nil, and only then.
func TestLoggerFromGraph(t *testing.T) {
	t.Parallel()
	for _, own := range []bool{false, true} {
		t.Run(map[bool]string{false: "ConfigLoggerNil", true: "ConfigLoggerSet"}[own], func(t *testing.T) {
			t.Parallel()
			db := backends[0].open(t)
			if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
				t.Fatal(err)
			}
			graph, configured := newSignalHandler("outbox started"), newSignalHandler("outbox started")
			cfg := outboxfx.Config{Dialect: outbox.SQLite}
			if own {
				cfg.Logger = slog.New(configured)
			}
			app := fxtest.New(t,
				fx.Supply(cfg),
				outboxfx.Module,
				fx.Provide(func() *sql.DB { return db }),
				fx.Supply(slog.New(graph)),
			)
			app.RequireStart()
			app.RequireStop()
			want, other := graph, configured
			if own {
				want, other = configured, graph
			}
			select {
			case <-want.ch:
			default:
				t.Error("the expected logger got no \"outbox started\"")
			}
			select {
			case <-other.ch:
				t.Error("the other logger got \"outbox started\"")
			default:
			}
		})
	}
}

// TestListenerPolicyFromGraph: a Listener's name and policy fields reach the outbox; its
// MaxAttempts of 1 makes the first failure final while the Config allows ten.
func TestListenerPolicyFromGraph(t *testing.T) {
	t.Parallel()
	db := backends[0].open(t)
	if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
	var ob *outbox.Outbox
	app := fxtest.New(t,
		fx.Supply(outboxfx.Config{Dialect: outbox.SQLite, Logger: quietLogger(), MaxAttempts: 10}),
		outboxfx.Module,
		fx.Provide(func() *sql.DB { return db }),
		fx.Provide(outboxfx.AsListener(func() outboxfx.Listener {
			return outboxfx.Listener{Name: "mailer", AggregateType: "Order", EventType: "OrderPlaced", MaxAttempts: 1,
				Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return errors.New("smtp down") })}
		})),
		fx.Populate(&ob),
	)
	app.RequireStart()
	defer app.RequireStop()
	if err := ob.Subscribe(outbox.Subscription{Name: "mailer", EventType: "Other",
		Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })}); !errors.Is(err, outbox.ErrDuplicateListener) {
		t.Fatalf("a second listener named mailer: %v, want ErrDuplicateListener", err)
	}
	var id string
	err := outbox.RunInTx(context.Background(), db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err := ob.Store().Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == outbox.StatusDead {
			if e.Attempts != 1 {
				t.Fatalf("DEAD after %d attempts, want 1", e.Attempts)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event still %s after 30s", e.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFanOutFromGraph: two Listeners of one route, named, and a catch-all, given
// through the value group, each get the event (fan-out), and the failing one's delivery
// ends DEAD under its name while the others are DONE.
func TestFanOutFromGraph(t *testing.T) {
	t.Parallel()
	db := backends[0].open(t)
	if err := outbox.Migrate(t.Context(), db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 3)
	listen := func(name, agg, typ string, fail bool) func() outboxfx.Listener {
		return func() outboxfx.Listener {
			return outboxfx.Listener{Name: name, AggregateType: agg, EventType: typ, MaxAttempts: 1,
				Listener: outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
					got <- e.Listener
					if fail {
						return errors.New("smtp down")
					}
					return nil
				})}
		}
	}
	var ob *outbox.Outbox
	app := fxtest.New(t,
		fx.Supply(outboxfx.Config{Dialect: outbox.SQLite, Logger: quietLogger()}),
		outboxfx.Module,
		fx.Provide(func() *sql.DB { return db }),
		fx.Provide(outboxfx.AsListener(listen("read-model", "Order", "OrderPlaced", false))),
		fx.Provide(outboxfx.AsListener(listen("mailer", "Order", "OrderPlaced", true))),
		fx.Provide(outboxfx.AsListener(listen("relay", outbox.AnyType, outbox.AnyType, false))),
		fx.Populate(&ob),
	)
	app.RequireStart()
	defer app.RequireStop()
	var id string
	err := outbox.RunInTx(context.Background(), db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		select {
		case name := <-got:
			seen[name] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("listeners that got the event: %v, want three", seen)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err := ob.Store().Get(context.Background(), outbox.DeliveryID(id, "mailer"))
		if err == nil && e.Status == outbox.StatusDead && e.Listener == "mailer" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mailer's delivery: %+v, %v; want DEAD", e, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := ob.Events().CountDead(context.Background(), outbox.DeadFilter{Listener: "read-model"}); err != nil || n != 0 {
		t.Fatalf("dead deliveries of the read model: %d, %v", n, err)
	}
}
