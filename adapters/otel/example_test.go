package outboxotel_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite"

	outboxotel "github.com/outboxkit/outbox/adapters/otel"
	outbox "github.com/outboxkit/outbox/core"
)

// Example traces an event from the request that writes it to its delivery, and shows
// what a broker relay's Propagate writes into its message.
func Example() {
	ctx := context.Background()
	db, cleanup := openExampleDB()
	defer cleanup()

	// Tracing, here into memory; a program exports with OTLP instead.
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(ctx)
	cfg := outboxotel.Config{
		TracerProvider: tp,
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}

	ob, err := outbox.New(db, outbox.Config{
		Dialect:      outbox.SQLite,
		WriterHooks:  []outbox.WriterHook{outboxotel.WriterHook(cfg)},
		Interceptors: []outbox.Interceptor{outboxotel.Interceptor(cfg)},
	})
	if err != nil {
		panic(err)
	}
	propagate := outboxotel.Propagate(cfg) // a relay's Config.Propagate
	tracer := tp.Tracer("shop")
	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		_, span := tracer.Start(ctx, "reserve stock") // runs inside the delivery span
		defer span.End()
		headers := map[string]string{} // a broker message's headers
		propagate(ctx, func(key, value string) { headers[key] = value })
		fmt.Println("message header traceparent:", headers["traceparent"] != "")
		return nil
	}))
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}

	reqCtx, req := tracer.Start(ctx, "POST /orders", trace.WithSpanKind(trace.SpanKindServer))
	err = outbox.RunInTx(reqCtx, db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
		return err
	})
	req.End()
	if err != nil {
		panic(err)
	}
	// Stop drains: the event is delivered and its span ended before it returns.
	if err := ob.Stop(ctx); err != nil {
		panic(err)
	}
	printTree(exporter.GetSpans())
	// Output:
	// message header traceparent: true
	// POST /orders (server)
	//   outbox deliver OrderPlaced (consumer) outcome=done
	//     reserve stock (internal)
}

// ExampleNewMetrics records the outbox's metrics with a MeterProvider and reads the
// delivery attempts back.
func ExampleNewMetrics() {
	ctx := context.Background()
	db, cleanup := openExampleDB()
	defer cleanup()

	reader := sdkmetric.NewManualReader() // a program uses a PeriodicReader with OTLP, or the Prometheus exporter
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	metrics, err := outboxotel.NewMetrics(outboxotel.Config{MeterProvider: mp, Instance: "orders"})
	if err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Metrics: metrics})
	if err != nil {
		panic(err)
	}
	err = ob.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }))
	if err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: 1})
		return err
	})
	if err != nil {
		panic(err)
	}
	if err := ob.Stop(ctx); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "outbox.dispatch.attempts" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				fmt.Println(m.Name, attrString(dp.Attributes), dp.Value)
			}
		}
	}
	// Output:
	// outbox.dispatch.attempts outbox.aggregate.type=Order,outbox.event.type=OrderPlaced,outbox.instance=orders,outbox.outcome=done,outbox.path=hot 1
}

// openExampleDB opens a migrated SQLite database in a temporary directory.
func openExampleDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "outboxotel-example-*")
	if err != nil {
		panic(err)
	}
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "example.db")))
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1) // SQLite has one writer: let writers queue in Go
	if err := outbox.Migrate(context.Background(), db, outbox.SQLite); err != nil {
		panic(err)
	}
	return db, func() {
		db.Close()
		os.RemoveAll(dir)
	}
}

// printTree prints spans as a tree, children indented under their parents.
func printTree(spans tracetest.SpanStubs) {
	var walk func(parent trace.SpanID, depth int)
	walk = func(parent trace.SpanID, depth int) {
		for _, s := range spans {
			if s.Parent.SpanID() != parent {
				continue
			}
			line := fmt.Sprintf("%s%s (%s)", strings.Repeat("  ", depth), s.Name, s.SpanKind)
			for _, kv := range s.Attributes {
				if kv.Key == "outbox.outcome" {
					line += " outcome=" + kv.Value.String()
				}
			}
			fmt.Println(line)
			walk(s.SpanContext.SpanID(), depth+1)
		}
	}
	walk(trace.SpanID{}, 0)
}

// attrString prints an attribute set as sorted key=value pairs.
func attrString(set attribute.Set) string {
	var pairs []string
	for _, kv := range set.ToSlice() {
		pairs = append(pairs, string(kv.Key)+"="+kv.Value.String())
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}
