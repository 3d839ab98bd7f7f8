package outboxfx_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"

	outbox "github.com/outboxkit/outbox/core"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
	"github.com/outboxkit/outbox/internal/testdb"
)

// The route the tests' listeners handle.
const (
	aggregateType = "Order"
	eventType     = "OrderPlaced"
)

// waitTimeout bounds every wait for something the outbox does in the background. It
// is a failure deadline, never a pause: waits end as soon as the awaited signal comes.
const waitTimeout = 30 * time.Second

// backend is a database the tests run on.
type backend struct {
	name    string
	dialect outbox.Dialect
	open    func(testing.TB) *sql.DB
}

var backends = []backend{
	{name: "sqlite", dialect: outbox.SQLite, open: testdb.NewSQLiteDB},
	{name: "postgres", dialect: outbox.Postgres, open: testdb.NewPostgresDB},
}

// forEachBackend runs fn as a parallel subtest per backend. PostgreSQL tests skip (or
// fail under OUTBOX_TEST_REQUIRE_DBS) when no server can be had.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// testBundle is a database with a migrated outbox table of its own.
type testBundle struct {
	db      *sql.DB
	dialect outbox.Dialect
	table   string
	metrics *dispatchRecorder
}

func setup(t *testing.T, b backend) *testBundle {
	t.Helper()
	db := b.open(t)
	table := testdb.IsolatedTable(t, db, b.dialect.Name())
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := outbox.MigrateTable(ctx, db, b.dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return &testBundle{db: db, dialect: b.dialect, table: table, metrics: newDispatchRecorder()}
}

// config returns a Config over the bundle's table that polls once an hour, so that an
// event delivered within a test came through the hot path (or the poll at start).
func (tb *testBundle) config() outboxfx.Config {
	return outboxfx.Config{
		Dialect:      tb.dialect,
		Table:        tb.table,
		PollInterval: time.Hour,
		Logger:       quietLogger(),
		Metrics:      tb.metrics,
	}
}

// provideDB provides the bundle's *sql.DB to the app.
func (tb *testBundle) provideDB() fx.Option {
	return fx.Provide(func() *sql.DB { return tb.db })
}

// write writes one OrderPlaced event for order in its own transaction through a
// *outbox.Tx, so that it takes the hot path, and returns its ID.
func (tb *testBundle) write(t *testing.T, w *outbox.Writer, order string) string {
	t.Helper()
	var id string
	err := outbox.RunInTx(t.Context(), tb.db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = w.Write(ctx, tx, orderPlaced(order))
		return err
	})
	if err != nil {
		t.Fatalf("write %s: %v", order, err)
	}
	return id
}

// writeBare writes one event through a bare *sql.Tx, which has no after-commit hooks:
// only the poller delivers it.
func (tb *testBundle) writeBare(t *testing.T, w *outbox.Writer, order string) string {
	t.Helper()
	tx, err := tb.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.Write(t.Context(), tx, orderPlaced(order))
	if err != nil {
		_ = tx.Rollback()
		t.Fatalf("write %s: %v", order, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

func orderPlaced(order string) outbox.Envelope {
	return outbox.Envelope{
		Type:          eventType,
		AggregateType: aggregateType,
		AggregateID:   order,
		Payload:       map[string]string{"order": order},
	}
}

// requireStatus fails the test unless every event has status want.
func requireStatus(t *testing.T, ob *outbox.Outbox, want outbox.Status, ids ...string) {
	t.Helper()
	for _, id := range ids {
		e, err := ob.Store().Get(t.Context(), id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if e.Status != want {
			t.Errorf("event %s: status %s, want %s", id, e.Status, want)
		}
	}
}

// quietLogger discards the outbox's logs.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// dispatchRecorder is an outbox.Metrics that reports every finished delivery attempt.
// Dispatched is called after the outcome is written, so a received DispatchInfo with
// OutcomeDone means the row is DONE.
type dispatchRecorder struct {
	outbox.NopMetrics
	ch chan outbox.DispatchInfo
}

func newDispatchRecorder() *dispatchRecorder {
	return &dispatchRecorder{ch: make(chan outbox.DispatchInfo, 1000)}
}

func (r *dispatchRecorder) Dispatched(info outbox.DispatchInfo) { r.ch <- info }

// await waits for n finished deliveries and fails the test unless each succeeded
// through path.
func (r *dispatchRecorder) await(t *testing.T, n int, path outbox.Path) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for i := range n {
		select {
		case info := <-r.ch:
			if info.Outcome != outbox.OutcomeDone || info.Path != path {
				t.Errorf("delivery %d: %s through the %s path, want success through the %s path", i, info.Outcome, info.Path, path)
			}
		case <-timeout.C:
			t.Fatalf("%d of %d deliveries after %s", i, n, waitTimeout)
		}
	}
}

// recordingListener records the IDs of the events it handles. When gated, each
// delivery waits until release is called or the delivery's context ends.
type recordingListener struct {
	gated    bool
	release  chan struct{}
	handling chan string // receives each event ID as its delivery starts

	mu  sync.Mutex
	ids []string
}

func newRecordingListener(gated bool) *recordingListener {
	return &recordingListener{gated: gated, release: make(chan struct{}), handling: make(chan string, 1000)}
}

func (l *recordingListener) Handle(ctx context.Context, e *outbox.Event) error {
	l.handling <- e.ID
	if l.gated {
		select {
		case <-l.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	l.ids = append(l.ids, e.ID)
	l.mu.Unlock()
	return nil
}

// open lets every waiting and future delivery through.
func (l *recordingListener) open() { close(l.release) }

// handled returns the IDs of the deliveries that completed.
func (l *recordingListener) handled() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

// awaitHandling waits until a delivery has started and returns its event ID.
func (l *recordingListener) awaitHandling(t *testing.T) string {
	t.Helper()
	select {
	case id := <-l.handling:
		return id
	case <-time.After(waitTimeout):
		t.Fatalf("no delivery started within %s", waitTimeout)
		return ""
	}
}

// asListener returns the constructor of the outboxfx.Listener for l.
func (l *recordingListener) asListener() func() outboxfx.Listener {
	return func() outboxfx.Listener {
		return outboxfx.Listener{AggregateType: aggregateType, EventType: eventType, Listener: l}
	}
}

// signalHandler is a slog.Handler that closes a channel when a record with a given
// message is logged.
type signalHandler struct {
	msg  string
	once *sync.Once
	ch   chan struct{}
}

func newSignalHandler(msg string) *signalHandler {
	return &signalHandler{msg: msg, once: new(sync.Once), ch: make(chan struct{})}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

// requireErrorContains fails the test unless err is non-nil and its message contains
// every one of want.
func requireErrorContains(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
}

// ids returns n distinct order IDs.
func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("o-%d", i)
	}
	return out
}
