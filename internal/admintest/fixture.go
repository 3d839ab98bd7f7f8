package admintest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/internal/testdb"
)

// The (aggregate type, event type) routes the fixture's listener is registered for.
const (
	AggregateOrder   = "Order"
	AggregatePayment = "Payment"
	TypeOrderPlaced  = "OrderPlaced"
	TypeOrderShipped = "OrderShipped"
	TypePaymentTaken = "PaymentTaken"
	// DefaultReason is the last_error of a seeded event whose Seed has no Reason.
	DefaultReason = "payment service unavailable"
)

// The fan-out route: an event of TypeOrderCancelled on AggregateOrder goes to two named
// listeners, ListenerBilling and ListenerMail, as one delivery row each (its own ID,
// outbox.DeliveryID, and the listener's name in its listener column), each of which dies
// and is replayed on its own. Write such events with [Fixture.SeedDeadFanOut].
const (
	TypeOrderCancelled = "OrderCancelled"
	ListenerBilling    = "billing"
	ListenerMail       = "mail"
)

var routes = [...][2]string{
	{AggregateOrder, TypeOrderPlaced},
	{AggregateOrder, TypeOrderShipped},
	{AggregatePayment, TypePaymentTaken},
}

// fanOutListeners are the subscriptions of the fan-out route, in registration order.
var fanOutListeners = [...]string{ListenerBilling, ListenerMail}

// RouteListener is the name of the only listener of a route of the fixture other than
// the fan-out one, which a DEAD event of the route names as its listener: outbox's
// default, "aggregateType/eventType".
func RouteListener(aggregateType, eventType string) string { return aggregateType + "/" + eventType }

// FixtureOptions configures [NewFixture].
type FixtureOptions struct {
	// Backend is "sqlite", "postgres" or "mysql" (MySQL or MariaDB). Defaults to "sqlite".
	Backend string
	// PollInterval is the Outbox's poll interval: replayed events are delivered by the
	// poller only. Defaults to an hour, so tests call [Fixture.Poll].
	PollInterval time.Duration
}

// Fixture is a started [outbox.Outbox] over a fresh table whose listener makes every
// event DEAD (with the reason of its [Seed]) until [Fixture.Fix] is called, and then
// delivers and counts them. It is how the suite gets real DEAD events.
type Fixture struct {
	DB     *sql.DB
	Outbox *outbox.Outbox
	// Table is the outbox table, schema-qualified on PostgreSQL and MySQL.
	Table string

	mu         sync.Mutex
	fixed      bool
	reasons    map[string]string
	retries    map[string]bool // events that fail with a retry, not DEAD, until Fix
	deliveries map[string]int
}

// NewFixture migrates a fresh outbox table on the backend, starts an Outbox with one
// worker and stops it when the test ends. PostgreSQL and MySQL follow the rule of
// [testdb.PostgresDSN]: skipped when unavailable, a failure under CI.
func NewFixture(t *testing.T, o FixtureOptions) *Fixture {
	t.Helper()
	var db *sql.DB
	var dialect outbox.Dialect
	switch cmp.Or(o.Backend, "sqlite") {
	case "sqlite":
		db, dialect = testdb.NewSQLiteDB(t), outbox.SQLite
	case "postgres":
		db, dialect = testdb.NewPostgresDB(t), outbox.Postgres
	case "mysql":
		db, dialect = testdb.NewMySQLDB(t), outbox.MySQL
	default:
		t.Fatalf("admintest: unknown backend %q", o.Backend)
	}
	table := testdb.IsolatedTable(t, db, dialect.Name())
	ctx := context.Background()
	if err := outbox.MigrateTable(ctx, db, dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	// The admin's aggregate filter reads the opt-in aggregate index.
	if err := outbox.MigrateAggregateIndex(ctx, db, dialect, table); err != nil {
		t.Fatalf("migrate the aggregate index: %v", err)
	}
	f := &Fixture{DB: db, Table: table, reasons: map[string]string{}, retries: map[string]bool{}, deliveries: map[string]int{}}
	ob, err := outbox.New(db, outbox.Config{
		Dialect:      dialect,
		Table:        table,
		Workers:      1,
		PollInterval: cmp.Or(o.PollInterval, time.Hour),
		SkipRecent:   -1, // a replayed event is due for the next poll at once
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("new outbox: %v", err)
	}
	for _, r := range routes {
		if err := ob.Register(r[0], r[1], outbox.ListenerFunc(f.handle)); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	for _, name := range fanOutListeners {
		err := ob.Subscribe(outbox.Subscription{Name: name, AggregateType: AggregateOrder, EventType: TypeOrderCancelled,
			Listener: outbox.ListenerFunc(f.handle)})
		if err != nil {
			t.Fatalf("subscribe %s: %v", name, err)
		}
	}
	if err := ob.Start(ctx); err != nil {
		t.Fatalf("start outbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop outbox: %v", err)
		}
	})
	f.Outbox = ob
	return f
}

// handle is the listener: DEAD with the seed's reason until Fix (or a failure retried
// in an hour, for a Seed with Retry), then a delivery.
func (f *Fixture) handle(_ context.Context, e *outbox.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.fixed {
		reason := cmp.Or(f.reasons[e.ID], DefaultReason)
		if f.retries[e.ID] {
			return outbox.RetryAfter(errors.New(reason), time.Hour)
		}
		return outbox.Dead(errors.New(reason))
	}
	f.deliveries[e.ID]++
	return nil
}

// Fix makes the listener deliver every event from now on: the fix of the bug that
// killed them, after which they are replayed.
func (f *Fixture) Fix() {
	f.mu.Lock()
	f.fixed = true
	f.mu.Unlock()
}

// Deliveries returns how many times the event was delivered since [Fixture.Fix].
func (f *Fixture) Deliveries(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deliveries[id]
}

// Seed describes an event to write. The zero value is an OrderPlaced event of an Order.
type Seed struct {
	// AggregateType and Type must be one of the fixture's routes. Default to
	// AggregateOrder and TypeOrderPlaced (TypeOrderCancelled for SeedDeadFanOut).
	AggregateType, Type string
	AggregateID         string
	// Reason becomes last_error when the event dies. Defaults to DefaultReason.
	Reason  string
	Headers map[string]string
	// Payload defaults to {"seed": <index>}.
	Payload any
	// OccurredAt defaults to the time of the write.
	OccurredAt time.Time
	// AvailableAt delays delivery; with a time in the future the event stays NEW.
	AvailableAt time.Time
	// OrderKey orders the event ([outbox.Envelope.OrderKey]): while an earlier event of
	// its key is pending or DEAD, it is WAITING.
	OrderKey string
	// Retry makes the listener fail it with Reason and a retry in an hour, until Fix:
	// it is RETRY rather than DEAD. See [Fixture.SeedRetry].
	Retry bool
}

// Write writes the seeds in one transaction and returns their IDs, without waiting for
// their delivery.
func (f *Fixture) Write(t *testing.T, seeds ...Seed) []string {
	t.Helper()
	envs := make([]outbox.Envelope, len(seeds))
	ids := make([]string, len(seeds))
	f.mu.Lock()
	for i, s := range seeds {
		ids[i] = outbox.NewID()
		var payload any = map[string]int{"seed": i}
		if s.Payload != nil {
			payload = s.Payload
		}
		envs[i] = outbox.Envelope{
			ID: ids[i], Type: cmp.Or(s.Type, TypeOrderPlaced), AggregateType: cmp.Or(s.AggregateType, AggregateOrder),
			AggregateID: s.AggregateID, Headers: s.Headers, Payload: payload,
			OccurredAt: s.OccurredAt, AvailableAt: s.AvailableAt, OrderKey: s.OrderKey,
		}
		if s.Retry {
			f.retries[ids[i]] = true
		}
		if s.Reason != "" {
			f.reasons[ids[i]] = s.Reason
			for _, name := range fanOutListeners {
				f.reasons[outbox.DeliveryID(ids[i], name)] = s.Reason
			}
		}
	}
	f.mu.Unlock()
	err := outbox.RunInTx(context.Background(), f.DB, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := f.Outbox.Writer().WriteAll(ctx, tx, envs)
		return err
	})
	if err != nil {
		t.Fatalf("write %d events: %v", len(seeds), err)
	}
	return ids
}

// SeedDead writes the seeds and waits until every one of them is DEAD. Call it before
// [Fixture.Fix].
func (f *Fixture) SeedDead(t *testing.T, seeds ...Seed) []string {
	t.Helper()
	ids := f.Write(t, seeds...)
	f.WaitStatus(t, outbox.StatusDead, ids...)
	return ids
}

// SeedRetry writes the seeds with Retry set and waits until every one of them is RETRY,
// due again in an hour, after one failed attempt with its Reason. Call it before
// [Fixture.Fix].
func (f *Fixture) SeedRetry(t *testing.T, seeds ...Seed) []string {
	t.Helper()
	for i := range seeds {
		seeds[i].Retry = true
	}
	ids := f.Write(t, seeds...)
	f.WaitStatus(t, outbox.StatusRetry, ids...)
	return ids
}

// SeedDeadFanOut writes events of the fan-out route (a seed's Type and AggregateType
// default to TypeOrderCancelled and AggregateOrder, and must stay so) and waits until
// each is split and every delivery is DEAD. It returns the IDs of the deliveries per
// listener (ListenerBilling, ListenerMail), in the order of the seeds, which is their
// order in a list filtered by listener. Call it before [Fixture.Fix].
func (f *Fixture) SeedDeadFanOut(t *testing.T, seeds ...Seed) map[string][]string {
	t.Helper()
	for i := range seeds {
		seeds[i].Type = cmp.Or(seeds[i].Type, TypeOrderCancelled)
		if seeds[i].Type != TypeOrderCancelled || cmp.Or(seeds[i].AggregateType, AggregateOrder) != AggregateOrder {
			t.Fatalf("admintest: SeedDeadFanOut of %s/%s, not the fan-out route", seeds[i].AggregateType, seeds[i].Type)
		}
	}
	ids := f.Write(t, seeds...)
	f.WaitStatus(t, outbox.StatusDone, ids...)
	deliveries := map[string][]string{}
	var all []string
	for _, name := range fanOutListeners {
		for _, id := range ids {
			deliveries[name] = append(deliveries[name], outbox.DeliveryID(id, name))
		}
		all = append(all, deliveries[name]...)
	}
	f.WaitStatus(t, outbox.StatusDead, all...)
	return deliveries
}

// Poll runs the poller once: it hands replayed (NEW) events to the dispatcher.
func (f *Fixture) Poll(t *testing.T) {
	t.Helper()
	if _, err := outboxtest.Poll(context.Background(), f.Outbox); err != nil {
		t.Fatalf("poll: %v", err)
	}
}

// Status returns the event's status.
func (f *Fixture) Status(t *testing.T, id string) outbox.Status {
	t.Helper()
	e, err := f.Outbox.Store().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return e.Status
}

// WaitStatus waits until every event has the status, failing the test after a
// generous deadline.
func (f *Fixture) WaitStatus(t *testing.T, want outbox.Status, ids ...string) {
	t.Helper()
	i := 0
	var last error
	Eventually(t, fmt.Sprintf("%d event(s) %s", len(ids), want), func() bool {
		for ; i < len(ids); i++ {
			e, err := f.Outbox.Store().Get(context.Background(), ids[i])
			if err != nil && !errors.Is(err, outbox.ErrNotFound) {
				last = err
				return false
			}
			if err != nil || e.Status != want {
				return false
			}
		}
		return true
	})
	if last != nil {
		t.Logf("last lookup error: %v", last)
	}
}

// Eventually waits for cond, failing the test after 60 s. It waits for work on a real
// database; it is not a timing assertion.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
