// Command relay-nats relays an order service's events to NATS JetStream, with the trace
// of the request that wrote each event carried to the message's consumer. Everything
// runs in this one process, NATS included: an embedded nats-server with JetStream, the
// outbox on SQLite, and OpenTelemetry with an in-memory exporter, so it needs nothing
// installed:
//
//	go run ./examples/relay-nats
//
// An order and its OrderPlaced event commit in one transaction inside a traced
// "request" span. Right after the commit the outbox hands the event to the
// outboxnats relay, which publishes it to the subject outbox.Order.OrderPlaced with the
// event ID as Nats-Msg-Id and reports the event DONE only after JetStream stored it. A
// JetStream consumer reads the message and prints it with the trace ID its headers
// carry: the same trace as the request's.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, "sqlite"

	outboxnats "github.com/outboxkit/outbox/adapters/nats"
	outboxotel "github.com/outboxkit/outbox/adapters/otel"
	outbox "github.com/outboxkit/outbox/core"
)

// OrderPlaced is the event's payload.
type OrderPlaced struct {
	OrderID    string `json:"order_id"`
	TotalCents int    `json:"total_cents"`
}

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "outbox-relay-nats-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// NATS with JetStream, in this process, and a stream for the order events.
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("nats-server did not start")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"outbox.Order.>"}})
	if err != nil {
		return err
	}

	// Tracing: spans go to memory; the propagator writes W3C trace context headers.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(ctx)
	otelCfg := outboxotel.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}}

	// The outbox on SQLite, with the relay as the listener of OrderPlaced.
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total_cents INTEGER NOT NULL)`); err != nil {
		return err
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite,
		WriterHooks:  []outbox.WriterHook{outboxotel.WriterHook(otelCfg)},
		Interceptors: []outbox.Interceptor{outboxotel.Interceptor(otelCfg)},
	})
	if err != nil {
		return err
	}
	relay, err := outboxnats.New(js, outboxnats.Config{Propagate: outboxotel.Propagate(otelCfg)})
	if err != nil {
		return err
	}
	if err := ob.Register("Order", "OrderPlaced", relay); err != nil {
		return err
	}
	if err := ob.Start(ctx); err != nil {
		return err
	}
	defer ob.Stop(ctx)

	// A request: the order and its event commit together inside the request's span.
	reqCtx, span := tp.Tracer("orders").Start(ctx, "POST /orders")
	err = outbox.RunInTx(reqCtx, db, func(ctx context.Context, tx *outbox.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total_cents) VALUES (?, ?)`, "o-1", 4200); err != nil {
			return err
		}
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{
			Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1",
			Payload: OrderPlaced{OrderID: "o-1", TotalCents: 4200},
		})
		return err
	})
	span.End()
	if err != nil {
		return err
	}
	fmt.Printf("request trace %s wrote order o-1\n", span.SpanContext().TraceID())

	// The consumer: read the message from the stream.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		return fmt.Errorf("no message in the stream: %w", err)
	}
	var p OrderPlaced
	if err := json.Unmarshal(msg.Data(), &p); err != nil {
		return err
	}
	headers := propagation.MapCarrier{}
	for k := range msg.Headers() {
		headers[k] = msg.Headers().Get(k)
	}
	remote := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, headers))
	fmt.Printf("consumer got %s on %s: order %s, %d cents, Nats-Msg-Id %s, trace %s\n",
		msg.Headers().Get("outbox-event-type"), msg.Subject(), p.OrderID, p.TotalCents,
		msg.Headers().Get("Nats-Msg-Id"), remote.TraceID())

	// The consumer's parent is the outbox's delivery span, a child of the request's. The
	// delivery span ends when the relay has the PubAck, which can be after the consumer
	// got the message: wait for it to be recorded.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, s := range spans.GetSpans() {
			if s.SpanContext.SpanID() == remote.SpanID() {
				fmt.Printf("its parent span: %q, child of %s\n", s.Name, spanName(spans, s.Parent.SpanID()))
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the delivery span %s was not recorded", remote.SpanID())
		}
	}
}

// spanName returns the name of the recorded span id.
func spanName(spans *tracetest.InMemoryExporter, id trace.SpanID) string {
	for _, s := range spans.GetSpans() {
		if s.SpanContext.SpanID() == id {
			return fmt.Sprintf("%q", s.Name)
		}
	}
	return "no recorded span"
}
