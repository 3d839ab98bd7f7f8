package outboxotel_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite"

	outboxotel "github.com/outboxkit/outbox/adapters/otel"
	outbox "github.com/outboxkit/outbox/core"
)

// propagator is the propagator of the tests: W3C trace context and baggage. The tests
// never touch the OpenTelemetry globals.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// testBundle is a started outbox on a fresh SQLite database, traced by its own tracer
// provider into an in-memory span recorder.
type testBundle struct {
	db     *sql.DB
	ob     *outbox.Outbox
	rec    *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer // the application's tracer: request and listener spans
	cfg    outboxotel.Config
}

// setupOptions changes what setup builds.
type setupOptions struct {
	// otel is the adapter's Config; TracerProvider and Propagator are filled in.
	otel outboxotel.Config
	// outbox is the outbox's Config; Dialect, WriterHooks, Interceptors and Logger are
	// filled in, and a fast poller unless it sets PollInterval.
	outbox outbox.Config
	// startCtx is given to Start. Defaults to context.Background().
	startCtx context.Context
}

// setup builds a traced outbox with the adapter's writer hook and interceptor, lets
// register add listeners, starts it and stops it at cleanup.
func setup(t *testing.T, opts setupOptions, register func(b *testBundle) error) *testBundle {
	t.Helper()
	ctx := context.Background()
	db := newSQLiteDB(t)
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Errorf("shut down the tracer provider: %v", err)
		}
	})
	cfg := opts.otel
	cfg.TracerProvider, cfg.Propagator = tp, propagator

	oc := opts.outbox
	oc.Dialect = outbox.SQLite
	oc.WriterHooks = append(oc.WriterHooks, outboxotel.WriterHook(cfg))
	oc.Interceptors = append([]outbox.Interceptor{outboxotel.Interceptor(cfg)}, oc.Interceptors...)
	oc.Logger = slog.New(slog.DiscardHandler)
	if oc.PollInterval == 0 {
		// Retries are due at once (FixedBackoff{}); a fast poller delivers them.
		oc.PollInterval, oc.PollMaxInterval, oc.SkipRecent = 10*time.Millisecond, -1, -1
		oc.Retry = outbox.FixedBackoff{}
	}
	ob, err := outbox.New(db, oc)
	if err != nil {
		t.Fatalf("new outbox: %v", err)
	}
	b := &testBundle{db: db, ob: ob, rec: rec, tp: tp, tracer: tp.Tracer("app"), cfg: cfg}
	if register != nil {
		if err := register(b); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	startCtx := opts.startCtx
	if startCtx == nil {
		startCtx = ctx
	}
	if err := ob.Start(startCtx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return b
}

// write commits env through RunInTx (the hot path) under ctx and returns its ID.
func (b *testBundle) write(t *testing.T, ctx context.Context, env outbox.Envelope) string {
	t.Helper()
	var id string
	err := outbox.RunInTx(ctx, b.db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = b.ob.Writer().Write(ctx, tx, env)
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return id
}

// writeInSpan starts a request span, writes env inside it, ends the span and returns
// the event ID and the span's context.
func (b *testBundle) writeInSpan(t *testing.T, env outbox.Envelope) (string, trace.SpanContext) {
	t.Helper()
	ctx, span := b.tracer.Start(context.Background(), "request", trace.WithSpanKind(trace.SpanKindServer))
	id := b.write(t, ctx, env)
	span.End()
	return id, span.SpanContext()
}

// deliverySpans waits until n ended spans are delivery spans of event id, and returns
// them sorted by attempt.
func (b *testBundle) deliverySpans(t *testing.T, id string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var spans []sdktrace.ReadOnlySpan
	waitFor(t, "delivery spans", func() bool {
		spans = spans[:0]
		for _, s := range b.rec.Ended() {
			if strings.HasPrefix(s.Name(), "outbox deliver ") && attrs(s)["outbox.event.id"] == attribute.StringValue(id) {
				spans = append(spans, s)
			}
		}
		return len(spans) >= n
	})
	if len(spans) != n {
		t.Fatalf("got %d delivery spans of event %s, want %d", len(spans), id, n)
	}
	slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int {
		return int(attrs(a)["outbox.attempt"].AsInt64() - attrs(b)["outbox.attempt"].AsInt64())
	})
	return spans
}

// endedSpan waits for the ended span called name and returns it.
func (b *testBundle) endedSpan(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	waitFor(t, "span "+name, func() bool {
		for _, s := range b.rec.Ended() {
			if s.Name() == name {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// checkAttrs fails the test unless got has every attribute of want, with its value,
// and none of absent.
func checkAttrs(t *testing.T, got map[attribute.Key]attribute.Value, want map[attribute.Key]any, absent ...attribute.Key) {
	t.Helper()
	for k, w := range want {
		v, ok := got[k]
		if !ok {
			t.Errorf("attribute %s is missing", k)
			continue
		}
		if v.AsInterface() != w {
			t.Errorf("attribute %s = %v (%T), want %v (%T)", k, v.AsInterface(), v.AsInterface(), w, w)
		}
	}
	for _, k := range absent {
		if v, ok := got[k]; ok {
			t.Errorf("attribute %s = %v, want none", k, v.AsInterface())
		}
	}
}

// waitFor polls cond until it holds, failing the test after a generous deadline. It
// waits for work on a real database; it is not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// parseTraceparent splits a W3C traceparent header into its trace ID and parent span ID.
func parseTraceparent(t *testing.T, h string) (trace.TraceID, trace.SpanID) {
	t.Helper()
	parts := strings.Split(h, "-")
	if len(parts) != 4 || parts[0] != "00" {
		t.Fatalf("traceparent %q is not version 00 with four parts", h)
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		t.Fatalf("traceparent %q: trace ID: %v", h, err)
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		t.Fatalf("traceparent %q: span ID: %v", h, err)
	}
	return tid, sid
}

// newSQLiteDB opens a new SQLite database file in the test's temp dir and closes it
// when the test ends.
func newSQLiteDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close sqlite: %v", err)
		}
	})
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("ping sqlite: %v", err)
	}
	return db
}
