// Package adaptertest is the shared harness of the transaction adapters' tests
// (internal/integrationtest/adapters/gorm, .../bun, .../sqlx) and of the middleware's:
// one started [outbox.Outbox] per test on SQLite, PostgreSQL or MariaDB, a business table
// beside it, and helpers that wait for deliveries or prove that none happened.
//
// The Outbox runs one worker and, by default, polls once an hour, so an event delivered
// within the test's deadline came through the hot path, and the hot queue is handled in
// order: [Bundle.Settle] commits a sentinel event and waits for it, after which every
// event handed to the hot path earlier has been handled.
package adaptertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/internal/testdb"
)

// Event and aggregate types the harness's listener is registered for.
const (
	AggregateType = "Order"
	EventType     = "OrderPlaced"
)

// Backend is one database the adapter tests run on.
type Backend struct {
	// Name is the dialect's name: "sqlite", "postgres" or "mysql".
	Name    string
	Dialect outbox.Dialect
}

// Backends lists every database an adapter must be tested on.
var Backends = []Backend{
	{Name: "sqlite", Dialect: outbox.SQLite},
	{Name: "postgres", Dialect: outbox.Postgres},
	{Name: "mysql", Dialect: outbox.MySQL},
}

// ForEach runs fn as a parallel subtest per backend.
func ForEach(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// Options configures [Setup].
type Options struct {
	// PollInterval is the Outbox's poll interval. Defaults to an hour, so only the hot
	// path delivers within a test; call [Bundle.Poll] to run the poller once.
	PollInterval time.Duration
}

// Bundle is a started Outbox over a fresh table, with a business table beside it.
type Bundle struct {
	// DB is the database; on SQLite it is a fresh file per test.
	DB      *sql.DB
	Backend Backend
	// Schema is the test's own schema (PostgreSQL) or database (MariaDB), or "" on
	// SQLite. Qualify table names with it through [Bundle.Qualify].
	Schema string
	// Table is the outbox table, qualified with Schema.
	Table string
	// Orders is the business table, qualified with Schema: orders(id VARCHAR(64) PRIMARY KEY).
	Orders string
	Outbox *outbox.Outbox
	// Writer is Outbox.Writer().
	Writer *outbox.Writer
	// Listener records every delivery of (AggregateType, EventType) events.
	Listener *outboxtest.RecordingListener

	metrics   *hotCounter
	logs      *logRecorder
	sentinels atomic.Int64
}

// Setup migrates a fresh outbox table and an orders table, starts an Outbox with one
// worker and stops it when the test ends.
func Setup(t *testing.T, b Backend, opts Options) *Bundle {
	t.Helper()
	var db *sql.DB
	switch b.Name {
	case "sqlite":
		db = testdb.NewSQLiteDB(t)
	case "postgres":
		db = testdb.NewPostgresDB(t)
	case "mysql":
		db = testdb.NewMySQLDB(t)
	default:
		t.Fatalf("unknown backend %q", b.Name)
	}
	table := testdb.IsolatedTable(t, db, b.Name)
	schema := ""
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		schema = table[:i]
	}
	bundle := &Bundle{DB: db, Backend: b, Schema: schema, Table: table}
	bundle.Orders = bundle.Qualify("orders")

	ctx := context.Background()
	if err := outbox.MigrateTable(ctx, db, b.Dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+bundle.Orders+` (id VARCHAR(64) PRIMARY KEY)`); err != nil {
		t.Fatalf("create orders: %v", err)
	}

	bundle.metrics = &hotCounter{}
	bundle.logs = &logRecorder{}
	bundle.Listener = &outboxtest.RecordingListener{}
	ob, err := outbox.New(db, outbox.Config{
		Dialect:      b.Dialect,
		Table:        table,
		Workers:      1,
		PollInterval: cmpOr(opts.PollInterval, time.Hour),
		SkipRecent:   -1, // Poll sees every committed event at once
		Logger:       slog.New(bundle.logs),
		Metrics:      bundle.metrics,
	})
	if err != nil {
		t.Fatalf("new outbox: %v", err)
	}
	if err := ob.Register(AggregateType, EventType, bundle.Listener); err != nil {
		t.Fatalf("register: %v", err)
	}
	if err := ob.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	// The poller's first cycle runs at start; wait for it, so that an event written
	// from now on is found only by an explicit Poll.
	Eventually(t, "the poller's first cycle", func() bool { return bundle.metrics.polls() > 0 })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop outbox: %v", err)
		}
	})
	bundle.Outbox, bundle.Writer = ob, ob.Writer()
	return bundle
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Qualify returns name qualified with the test's schema, if any.
func (b *Bundle) Qualify(name string) string {
	if b.Schema == "" {
		return name
	}
	return b.Schema + "." + name
}

// Envelope returns an (AggregateType, EventType) envelope with the given event ID and
// aggregate ID; the listener is registered for it.
func (b *Bundle) Envelope(eventID, orderID string) outbox.Envelope {
	return outbox.Envelope{
		ID:            eventID,
		Type:          EventType,
		AggregateType: AggregateType,
		AggregateID:   orderID,
		Payload:       map[string]string{"order_id": orderID},
	}
}

// InsertOrderSQL returns the business INSERT with the dialect's placeholder for the
// order ID ($1 on PostgreSQL, ? elsewhere).
func (b *Bundle) InsertOrderSQL() string {
	ph := "?"
	if b.Backend.Dialect == outbox.Postgres {
		ph = "$1"
	}
	return `INSERT INTO ` + b.Orders + ` (id) VALUES (` + ph + `)`
}

// WaitDelivered waits until each event has been handled by the listener and is DONE in
// the table, failing the test after a generous deadline.
func (b *Bundle) WaitDelivered(t *testing.T, ids ...string) {
	t.Helper()
	Eventually(t, fmt.Sprintf("delivery of %v", ids), func() bool {
		seen := b.Listener.IDs()
		for _, id := range ids {
			if !slices.Contains(seen, id) {
				return false
			}
		}
		for _, id := range ids {
			if s, ok := b.Status(t, id); !ok || s != outbox.StatusDone {
				return false
			}
		}
		return true
	})
}

// Settle commits a sentinel event through [outbox.RunInTx] and waits until it has been
// delivered. The Outbox has one worker and a FIFO hot queue, so afterwards every event
// handed to the hot path before the sentinel has been handled.
func (b *Bundle) Settle(t *testing.T) {
	t.Helper()
	id := outbox.NewID()
	err := outbox.RunInTx(context.Background(), b.DB, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := b.Writer.Write(ctx, tx, b.Envelope(id, "sentinel-"+id))
		return err
	})
	if err != nil {
		t.Fatalf("write sentinel: %v", err)
	}
	b.sentinels.Add(1)
	b.WaitDelivered(t, id)
}

// Sentinels returns how many sentinel events [Bundle.Settle] has written so far (each
// [Bundle.AssertNotDelivered] writes two). They are rows in the outbox table and count in
// [Bundle.HotEnqueued].
func (b *Bundle) Sentinels() int { return int(b.sentinels.Load()) }

// AssertNotDelivered settles the hot path and runs the poller once, then fails the test
// if any of ids was handled by the listener.
func (b *Bundle) AssertNotDelivered(t *testing.T, ids ...string) {
	t.Helper()
	b.Settle(t)
	b.Poll(t)
	b.Settle(t)
	seen := b.Listener.IDs()
	for _, id := range ids {
		if slices.Contains(seen, id) {
			t.Errorf("event %s was delivered; it must not be", id)
		}
	}
}

// Poll runs the poller once and returns how many events it handed to the dispatcher.
func (b *Bundle) Poll(t *testing.T) int {
	t.Helper()
	n, err := outboxtest.Poll(context.Background(), b.Outbox)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return n
}

// Status returns the event's status, or false when no row has that ID.
func (b *Bundle) Status(t *testing.T, id string) (outbox.Status, bool) {
	t.Helper()
	e, err := b.Outbox.Store().Get(context.Background(), id)
	if err != nil {
		if errors.Is(err, outbox.ErrNotFound) {
			return 0, false
		}
		t.Fatalf("get %s: %v", id, err)
	}
	return e.Status, true
}

// HasOrder reports whether the business table has a row with the order ID.
func (b *Bundle) HasOrder(t *testing.T, orderID string) bool {
	t.Helper()
	q := strings.Replace(`SELECT COUNT(*) FROM `+b.Orders+` WHERE id = ?`, "?", placeholder(b.Backend.Dialect), 1)
	var n int
	if err := b.DB.QueryRowContext(context.Background(), q, orderID).Scan(&n); err != nil {
		t.Fatalf("count orders: %v", err)
	}
	return n > 0
}

// EventRows returns how many rows the outbox table holds.
func (b *Bundle) EventRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.DB.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+b.Table).Scan(&n); err != nil {
		t.Fatalf("count events: %v", err)
	}
	return n
}

// EventIDsFor returns the IDs of the outbox rows whose aggregate ID is aggregateID,
// sorted: the rows an adapter's write inserted, to compare with the IDs it returned.
func (b *Bundle) EventIDsFor(t *testing.T, aggregateID string) []string {
	t.Helper()
	q := strings.Replace(`SELECT event_id FROM `+b.Table+` WHERE aggregate_id = ? ORDER BY event_id`, "?", placeholder(b.Backend.Dialect), 1)
	rows, err := b.DB.QueryContext(context.Background(), q, aggregateID)
	if err != nil {
		t.Fatalf("read event IDs: %v", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("read event IDs: %v", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read event IDs: %v", err)
	}
	return ids
}

// HotEnqueued returns how many events were handed to the hot queue so far (sentinels
// included).
func (b *Bundle) HotEnqueued() int { return b.metrics.get() }

// LogCount returns how many log records so far contain substr in their message.
func (b *Bundle) LogCount(level slog.Level, substr string) int { return b.logs.count(level, substr) }

func placeholder(d outbox.Dialect) string {
	if d == outbox.Postgres {
		return "$1"
	}
	return "?"
}

// Eventually waits for cond, failing the test after a generous deadline. It checks a
// condition on a real database; it is not a timing assertion.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hotCounter counts hot-queue hand-offs and finished poll cycles; every other metric is
// ignored.
type hotCounter struct {
	outbox.NopMetrics
	mu    sync.Mutex
	n     int
	cycle int
}

func (m *hotCounter) HotEnqueued() { m.mu.Lock(); m.n++; m.mu.Unlock() }

// OldestPendingLag is reported at the end of every successful poll cycle.
func (m *hotCounter) OldestPendingLag(time.Duration) { m.mu.Lock(); m.cycle++; m.mu.Unlock() }

func (m *hotCounter) get() int { m.mu.Lock(); defer m.mu.Unlock(); return m.n }

func (m *hotCounter) polls() int { m.mu.Lock(); defer m.mu.Unlock(); return m.cycle }

// logRecorder is a slog.Handler that keeps every record's level and message.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) count(level slog.Level, substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}
