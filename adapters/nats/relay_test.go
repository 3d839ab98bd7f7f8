package outboxnats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	outboxnats "github.com/outboxkit/outbox/adapters/nats"
	outbox "github.com/outboxkit/outbox/core"
)

// TestPublish writes events through a real outbox and reads them back from the stream:
// default subjects, payload, headers, Nats-Msg-Id, and the write order of ordered events.
func TestPublish(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{})
	relay := newRelay(t, js, outboxnats.Config{})
	db := newDB(t)
	ob := startOutbox(t, db, outbox.Config{},
		outbox.Subscription{AggregateType: "Order", EventType: "OrderPlaced", Listener: relay},
		outbox.Subscription{AggregateType: "Order", EventType: "OrderLine", Listener: relay},
		outbox.Subscription{AggregateType: "billing.Invoice", EventType: "Invoice Paid>*", Listener: relay},
		outbox.Subscription{EventType: "Ping", Listener: relay},
	)

	placed := write(t, db, ob, outbox.Envelope{
		Type: "OrderPlaced", AggregateType: "Order", AggregateID: "42", TenantID: "acme",
		Payload: json.RawMessage(`{"total_cents":1999,"note":"ünïcode"}`),
		Headers: map[string]string{"x-request-id": "r-1"},
	})[0]
	paid := write(t, db, ob, outbox.Envelope{
		Type: "Invoice Paid>*", AggregateType: "billing.Invoice", Payload: json.RawMessage(`[1,2]`),
	})[0]
	ping := write(t, db, ob, outbox.Envelope{Type: "Ping", Payload: "pong"})[0]

	// Ordered events of two keys, each in its own transaction: commit order is write order.
	lines := map[string][]string{}
	for i := range 40 {
		key := []string{"order-7", "order-8"}[i%2]
		id := write(t, db, ob, outbox.Envelope{
			Type: "OrderLine", AggregateType: "Order", AggregateID: strings.TrimPrefix(key, "order-"),
			OrderKey: key, Payload: map[string]int{"line": i},
		})[0]
		lines[key] = append(lines[key], id)
	}
	all := append([]string{placed, paid, ping}, slices.Concat(lines["order-7"], lines["order-8"])...)
	waitStatus(t, ob, outbox.StatusDone, all...)

	msgs := streamMessages(t, js, streamName)
	if len(msgs) != len(all) {
		t.Fatalf("stream has %d messages, want %d (one per event)", len(msgs), len(all))
	}
	byID := map[string]*jetstream.RawStreamMsg{}
	for _, m := range msgs {
		byID[m.Header.Get(outboxnats.HeaderEventID)] = m
	}

	wantSubjects := map[string]string{
		placed: "outbox.Order.OrderPlaced",
		paid:   "outbox.billing_Invoice.Invoice_Paid__",
		ping:   "outbox.__GLOBAL__.Ping",
	}
	for id, subject := range wantSubjects {
		m := byID[id]
		if m == nil {
			t.Fatalf("no message for event %s", id)
		}
		e := event(t, ob, id)
		if m.Subject != subject {
			t.Errorf("event %s: subject %q, want %q", id, m.Subject, subject)
		}
		if string(m.Data) != string(e.Payload) {
			t.Errorf("event %s: data %s, want the stored payload %s", id, m.Data, e.Payload)
		}
		want := nats.Header{
			"outbox-event-id":       {e.ID},
			"outbox-event-type":     {e.Type},
			"outbox-aggregate-type": {e.AggregateType},
			"outbox-created-at":     {e.CreatedAt.UTC().Format(time.RFC3339Nano)},
			"Nats-Msg-Id":           {e.ID},
		}
		if id == placed {
			want["x-request-id"] = []string{"r-1"}
			want["outbox-aggregate-id"] = []string{"42"}
			want["outbox-tenant-id"] = []string{"acme"}
		}
		if !maps.EqualFunc(m.Header, want, slices.Equal) {
			t.Errorf("event %s: headers\n%v\nwant\n%v", id, m.Header, want)
		}
	}
	if got := string(byID[placed].Data); got != `{"total_cents":1999,"note":"ünïcode"}` {
		t.Errorf("OrderPlaced data %s, want the JSON written", got)
	}
	if _, err := time.Parse(time.RFC3339Nano, byID[ping].Header.Get(outboxnats.HeaderCreatedAt)); err != nil {
		t.Errorf("outbox-created-at: %v", err)
	}

	for key, ids := range lines {
		var got []string
		for _, m := range msgs { // stream order
			if m.Header.Get(outboxnats.HeaderOrderKey) == key {
				got = append(got, m.Header.Get(outboxnats.HeaderEventID))
				if m.Subject != "outbox.Order.OrderLine" {
					t.Errorf("ordered event: subject %q", m.Subject)
				}
			}
		}
		if !slices.Equal(got, ids) {
			t.Errorf("key %s: stream order\n%v\nwant write order\n%v", key, got, ids)
		}
	}
}

// TestServerRestart stops the server while writers keep committing events and starts
// it again on the same port and store: attempts fail and are retried, and in the end
// every committed event is in the stream exactly once and every row is DONE.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{Storage: jetstream.FileStorage})
	acks := &ackCounter{JetStream: js}
	relay := newRelay(t, acks, outboxnats.Config{})
	var failures atomic.Int64
	counting := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		err := relay.Handle(ctx, e)
		if err != nil {
			if errors.Is(err, outbox.ErrUnrecoverable) {
				t.Errorf("event %s: a lost server must not be permanent: %v", e.ID, err)
			}
			failures.Add(1)
		}
		return err
	})
	db := newDB(t)
	// While the server is down, nats.go buffers each publish for the reconnection and the
	// attempt fails at the listener timeout; the buffered copy reaches the stream after
	// the restart, so the retry's PubAck reports a duplicate.
	ob := startOutbox(t, db, outbox.Config{ListenerTimeout: 300 * time.Millisecond},
		outbox.Subscription{
			AggregateType: "Order", EventType: "OrderPlaced", Listener: counting,
			Retry: outbox.FixedBackoff{Wait: 20 * time.Millisecond}, MaxAttempts: -1,
		},
		outbox.Subscription{
			AggregateType: "Order", EventType: "OrderLine", Listener: counting,
			Retry: outbox.FixedBackoff{Wait: 20 * time.Millisecond}, MaxAttempts: -1,
		},
	)

	// Two writers commit events until stop is closed: one unordered, one ordered by key.
	var (
		mu      sync.Mutex
		written []string
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	committed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(written)
	}
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				env := outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: map[string]int{"writer": w, "n": i}}
				if w == 1 {
					env.Type, env.OrderKey = "OrderLine", fmt.Sprintf("order-%d", i%3)
				}
				ids, err := writeErr(db, ob, env)
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				written = append(written, ids...)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // pace the writers; no assertion depends on it
			}
		})
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWriters)

	countDone := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		st, err := ob.Events().Stats(ctx)
		if err != nil {
			t.Fatalf("stats: %v", err)
		}
		return int(st.Counts[outbox.StatusDone])
	}
	waitFor(t, "20 events delivered before the stop", func() (bool, string) {
		n := countDone()
		return n >= 20, fmt.Sprintf("%d DONE", n)
	})

	srv.stop()
	atStop := committed()
	waitFor(t, "30 events committed and 2 failed attempts per worker while the server is down", func() (bool, string) {
		n, f := committed()-atStop, failures.Load()
		return n >= 30 && f >= 2*outbox.DefaultWorkers, fmt.Sprintf("%d committed, %d failed attempts", n, f)
	})

	srv.restart()
	atRestart := committed()
	waitFor(t, "30 events committed after the restart", func() (bool, string) {
		n := committed() - atRestart
		return n >= 30, fmt.Sprintf("%d committed", n)
	})
	stopWriters()

	ids := slices.Clone(written)
	waitStatus(t, ob, outbox.StatusDone, ids...)

	msgs := streamMessages(t, js, streamName)
	counts := countByEventID(msgs)
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("event %s is in the stream %d times, want once", id, counts[id])
		}
	}
	if len(msgs) != len(ids) {
		t.Errorf("stream has %d messages for %d events", len(msgs), len(ids))
	}
	if acks.duplicates.Load() == 0 {
		t.Errorf("no PubAck reported a duplicate: the attempts that timed out while the server was down left no copy to absorb")
	}
	t.Logf("%d events, %d failed attempts, %d PubAcks reporting a duplicate",
		len(ids), failures.Load(), acks.duplicates.Load())
}

// ackCounter counts the PubAcks that report a duplicate.
type ackCounter struct {
	jetstream.JetStream
	duplicates atomic.Int64
}

func (a *ackCounter) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := a.JetStream.PublishMsg(ctx, msg, opts...)
	if err == nil && ack.Duplicate {
		a.duplicates.Add(1)
	}
	return ack, err
}

// TestRedelivery publishes the same event again, as the outbox does after an attempt
// whose PubAck was lost: the duplicate window keeps one message in the stream.
func TestRedelivery(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{})
	relay := newRelay(t, js, outboxnats.Config{})

	t.Run("HandleTwice", func(t *testing.T) {
		t.Parallel()
		e := &outbox.Event{
			ID: outbox.NewID(), Type: "Twice", AggregateType: "Order",
			Payload: json.RawMessage(`{}`), CreatedAt: time.Now(),
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for i := range 2 {
			if err := relay.Handle(ctx, e); err != nil {
				t.Fatalf("Handle #%d: %v", i+1, err)
			}
		}
		if n := countByEventID(streamMessages(t, js, streamName))[e.ID]; n != 1 {
			t.Errorf("event in the stream %d times, want once", n)
		}
	})

	t.Run("LostAck", func(t *testing.T) {
		t.Parallel()
		// The first attempt publishes, then fails as if the PubAck had been lost: the
		// outbox retries, and the retry's PubAck says duplicate.
		var calls atomic.Int64
		lostAck := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			if err := relay.Handle(ctx, e); err != nil {
				return err
			}
			if calls.Add(1) == 1 {
				return errors.New("PubAck lost")
			}
			return nil
		})
		db := newDB(t)
		ob := startOutbox(t, db, outbox.Config{}, outbox.Subscription{
			AggregateType: "Order", EventType: "LostAck", Listener: lostAck,
			Retry: outbox.FixedBackoff{Wait: 20 * time.Millisecond},
		})
		id := write(t, db, ob, outbox.Envelope{Type: "LostAck", AggregateType: "Order", Payload: json.RawMessage(`{}`)})[0]
		waitStatus(t, ob, outbox.StatusDone, id)
		if e := event(t, ob, id); e.Attempts != 1 || calls.Load() != 2 {
			t.Errorf("attempts %d (want 1 failed), listener calls %d (want 2)", e.Attempts, calls.Load())
		}
		if n := countByEventID(streamMessages(t, js, streamName))[id]; n != 1 {
			t.Errorf("event in the stream %d times, want once", n)
		}
	})
}

// TestRedeliveryAfterWindow shows the limit of the guarantee: once the duplicate window
// has passed, a redelivery is a second message.
func TestRedeliveryAfterWindow(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{Duplicates: 100 * time.Millisecond}) // the server's minimum
	relay := newRelay(t, js, outboxnats.Config{})
	e := &outbox.Event{
		ID: outbox.NewID(), Type: "Late", AggregateType: "Order",
		Payload: json.RawMessage(`{}`), CreatedAt: time.Now(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	waitFor(t, "a redelivery past the window to be stored", func() (bool, string) {
		if err := relay.Handle(ctx, e); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		n := countByEventID(streamMessages(t, js, streamName))[e.ID]
		return n == 2, fmt.Sprintf("%d messages", n)
	})
}

// TestPermanentErrors makes events that no retry can deliver: each goes DEAD after one
// attempt, with an error that says why, while a good event is delivered.
func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	srv := startServer(t, func(o *server.Options) { o.MaxPayload = 4096 })
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{MaxMsgSize: 2048})
	relay := newRelay(t, js, outboxnats.Config{Subject: func(e *outbox.Event) string {
		switch e.Type {
		case "EmptySubject":
			return ""
		case "Wildcard":
			return "outbox.*.x"
		case "Spaced":
			return "outbox.a b"
		case "DoubleDot":
			return "outbox..x"
		}
		return outboxnats.DefaultSubject(e)
	}})
	var (
		mu   sync.Mutex
		errs = map[string]error{}
	)
	recording := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		err := relay.Handle(ctx, e)
		mu.Lock()
		errs[e.Type] = err
		mu.Unlock()
		return err
	})
	cases := []struct {
		typ     string
		env     outbox.Envelope
		reason  error
		natsErr error // the nats.go error it also matches, if any
	}{
		{typ: "OverStreamMax", env: outbox.Envelope{Payload: bigJSON(3000)}, reason: outboxnats.ErrMessageTooLarge},
		{typ: "OverMaxPayload", env: outbox.Envelope{Payload: bigJSON(5000)}, reason: outboxnats.ErrMessageTooLarge, natsErr: nats.ErrMaxPayload},
		{typ: "BadHeader", env: outbox.Envelope{Headers: map[string]string{"bad key": "v"}}, reason: outboxnats.ErrInvalidHeader},
		{typ: "EmptySubject", reason: outboxnats.ErrInvalidSubject},
		{typ: "Wildcard", reason: outboxnats.ErrInvalidSubject},
		{typ: "Spaced", reason: outboxnats.ErrInvalidSubject},
		{typ: "DoubleDot", reason: outboxnats.ErrInvalidSubject},
	}
	subs := []outbox.Subscription{{AggregateType: "Order", EventType: "Good", Listener: recording}}
	for _, c := range cases {
		subs = append(subs, outbox.Subscription{AggregateType: "Order", EventType: c.typ, Listener: recording, MaxAttempts: -1})
	}
	db := newDB(t)
	ob := startOutbox(t, db, outbox.Config{}, subs...)

	ids := map[string]string{}
	for _, c := range cases {
		env := c.env
		env.Type, env.AggregateType = c.typ, "Order"
		if env.Payload == nil {
			env.Payload = json.RawMessage(`{}`)
		}
		ids[c.typ] = write(t, db, ob, env)[0]
	}
	good := write(t, db, ob, outbox.Envelope{Type: "Good", AggregateType: "Order", Payload: bigJSON(1000)})[0]
	waitStatus(t, ob, outbox.StatusDone, good)

	for _, c := range cases {
		waitStatus(t, ob, outbox.StatusDead, ids[c.typ])
		e := event(t, ob, ids[c.typ])
		mu.Lock()
		err := errs[c.typ]
		mu.Unlock()
		if e.Attempts != 1 {
			t.Errorf("%s: DEAD after %d attempts, want 1", c.typ, e.Attempts)
		}
		if !errors.Is(err, outbox.ErrUnrecoverable) || !errors.Is(err, c.reason) {
			t.Errorf("%s: error %v, want one matching outbox.ErrUnrecoverable and %v", c.typ, err, c.reason)
		}
		if c.natsErr != nil && !errors.Is(err, c.natsErr) {
			t.Errorf("%s: error %v does not match %v", c.typ, err, c.natsErr)
		}
		if !strings.Contains(e.LastError, c.reason.Error()) {
			t.Errorf("%s: last error %q does not say %q", c.typ, e.LastError, c.reason)
		}
	}
	if n := len(streamMessages(t, js, streamName)); n != 1 {
		t.Errorf("stream has %d messages, want the good one only", n)
	}
}

// bigJSON returns a JSON string of about n bytes.
func bigJSON(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// TestNoStream publishes to a subject no stream is bound to: the attempt fails and is
// retried, and the event is delivered once a stream is created.
func TestNoStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	relay := newRelay(t, js, outboxnats.Config{})
	firstErr := make(chan error, 1)
	recording := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		err := relay.Handle(ctx, e)
		if err != nil {
			select {
			case firstErr <- err:
			default:
			}
		}
		return err
	})
	db := newDB(t)
	ob := startOutbox(t, db, outbox.Config{}, outbox.Subscription{
		AggregateType: "Order", EventType: "OrderPlaced", Listener: recording,
		Retry: outbox.FixedBackoff{Wait: 20 * time.Millisecond}, MaxAttempts: -1,
	})
	id := write(t, db, ob, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: json.RawMessage(`{}`)})[0]

	var err error
	select {
	case err = <-firstErr:
	case <-time.After(waitTimeout):
		t.Fatal("no failed attempt")
	}
	if !errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, outbox.ErrUnrecoverable) {
		t.Fatalf("error %v: want a retryable one matching jetstream.ErrNoStreamResponse", err)
	}

	createStream(t, js, jetstream.StreamConfig{})
	waitStatus(t, ob, outbox.StatusDone, id)
	if e := event(t, ob, id); e.Attempts < 1 {
		t.Errorf("attempts %d, want at least one failure before the stream existed", e.Attempts)
	}
	if n := countByEventID(streamMessages(t, js, streamName))[id]; n != 1 {
		t.Errorf("event in the stream %d times, want once", n)
	}
}

type traceKey struct{}

// TestPropagate checks that Propagate runs with the listener's context (here, a value an
// interceptor put there, as a tracing interceptor puts its span) and that its headers
// replace the event's own, but not Nats-Msg-Id.
func TestPropagate(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{})
	relay := newRelay(t, js, outboxnats.Config{Propagate: func(ctx context.Context, set func(key, value string)) {
		traceparent, _ := ctx.Value(traceKey{}).(string)
		set("traceparent", traceparent)
		set("tracestate", "a=1")
		set("tracestate", "b=2")            // set twice: the last value stays
		set(jetstream.MsgIDHeader, "other") // ignored: Nats-Msg-Id is the event ID
	}})
	db := newDB(t)
	ob := startOutbox(t, db, outbox.Config{Interceptors: []outbox.Interceptor{outbox.InterceptorFuncs{
		BeforeFunc: func(ctx context.Context, e *outbox.Event) (context.Context, error) {
			return context.WithValue(ctx, traceKey{}, "00-trace-of-"+e.ID), nil
		},
	}}}, outbox.Subscription{AggregateType: "Order", EventType: "OrderPlaced", Listener: relay})

	id := write(t, db, ob, outbox.Envelope{
		Type: "OrderPlaced", AggregateType: "Order", Payload: json.RawMessage(`{}`),
		Headers: map[string]string{"traceparent": "stale", "x-kept": "yes"},
	})[0]
	waitStatus(t, ob, outbox.StatusDone, id)

	msgs := streamMessages(t, js, streamName)
	if len(msgs) != 1 {
		t.Fatalf("stream has %d messages, want 1", len(msgs))
	}
	h := msgs[0].Header
	for key, want := range map[string]string{
		"traceparent":         "00-trace-of-" + id,
		"tracestate":          "b=2",
		"x-kept":              "yes",
		jetstream.MsgIDHeader: id,
	} {
		if got := h.Values(key); !slices.Equal(got, []string{want}) {
			t.Errorf("header %s = %q, want [%q]", key, got, want)
		}
	}
}

// TestCustomSubject publishes on the subjects Config.Subject returns.
func TestCustomSubject(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{Subjects: []string{"orders.>"}})
	relay := newRelay(t, js, outboxnats.Config{Subject: func(e *outbox.Event) string {
		return "orders." + e.AggregateID + ".placed"
	}})
	db := newDB(t)
	ob := startOutbox(t, db, outbox.Config{}, outbox.Subscription{AggregateType: "Order", EventType: "OrderPlaced", Listener: relay})
	id := write(t, db, ob, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-9", Payload: json.RawMessage(`{}`)})[0]
	waitStatus(t, ob, outbox.StatusDone, id)
	msgs := streamMessages(t, js, streamName)
	if len(msgs) != 1 || msgs[0].Subject != "orders.o-9.placed" {
		t.Fatalf("messages %v, want one on orders.o-9.placed", msgs)
	}
}

// TestNew checks New's validation.
func TestNew(t *testing.T) {
	t.Parallel()
	_, err := outboxnats.New(nil, outboxnats.Config{})
	var cfgErr *outbox.ConfigError
	if !errors.As(err, &cfgErr) || !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("New(nil): %v, want an *outbox.ConfigError", err)
	}
	if cfgErr.Field == "" || cfgErr.Reason == "" {
		t.Errorf("ConfigError %+v: want Field and Reason", cfgErr)
	}
}

// TestDefaultSubject checks the default subjects, including names that are not one token.
func TestDefaultSubject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		aggregateType, eventType, want string
	}{
		{"Order", "OrderPlaced", "outbox.Order.OrderPlaced"},
		{"", "UserSignedUp", "outbox.__GLOBAL__.UserSignedUp"},
		{outbox.GlobalAggregateType, "Ping", "outbox.__GLOBAL__.Ping"},
		{"billing.Invoice", "invoice.paid", "outbox.billing_Invoice.invoice_paid"},
		{"a b", "c\td\ne", "outbox.a_b.c_d_e"},
		{"*", ">", "outbox._._"},
		{"Zähler", "Größe*neu", "outbox.Zähler.Größe_neu"},
	}
	for _, tt := range tests {
		got := outboxnats.DefaultSubject(&outbox.Event{AggregateType: tt.aggregateType, Type: tt.eventType})
		if got != tt.want {
			t.Errorf("DefaultSubject(%q, %q) = %q, want %q", tt.aggregateType, tt.eventType, got, tt.want)
		}
	}
}

// TestHandleBatch: one call publishes every event of the batch and answers each on its
// own, a permanent failure beside successes; through an outbox, events committed
// together reach the relay in batches, and every one is in the stream once.
func TestHandleBatch(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil)
	_, js := connect(t, srv)
	createStream(t, js, jetstream.StreamConfig{})
	relay := newRelay(t, js, outboxnats.Config{Subject: func(e *outbox.Event) string {
		if e.Type == "Bad" {
			return "outbox.*"
		}
		return outboxnats.DefaultSubject(e)
	}})

	t.Run("Direct", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		var items []outbox.BatchItem
		for _, typ := range []string{"Good", "Bad", "Good"} {
			items = append(items, outbox.BatchItem{Ctx: ctx, Event: &outbox.Event{
				ID: outbox.NewID(), Type: typ, AggregateType: "Direct", Payload: json.RawMessage(`{}`), CreatedAt: time.Now(),
			}})
		}
		errs := relay.HandleBatch(ctx, items)
		if len(errs) != 3 || errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], outboxnats.ErrInvalidSubject) ||
			!errors.Is(errs[1], outbox.ErrUnrecoverable) {
			t.Fatalf("errors %v, want nil, a permanent ErrInvalidSubject, nil", errs)
		}
		counts := countByEventID(streamMessages(t, js, streamName))
		if counts[items[0].Event.ID] != 1 || counts[items[2].Event.ID] != 1 || counts[items[1].Event.ID] != 0 {
			t.Errorf("stream counts %v, want each good event once", counts)
		}
	})

	t.Run("ThroughOutbox", func(t *testing.T) {
		var (
			mu      sync.Mutex
			largest int
		)
		sizes := batchSpy{BatchListener: relay, seen: func(n int) {
			mu.Lock()
			largest = max(largest, n)
			mu.Unlock()
		}}
		db := newDB(t)
		ob := startOutbox(t, db, outbox.Config{Workers: 1},
			outbox.Subscription{AggregateType: "Bulk", EventType: "Item", Listener: sizes, BatchSize: 50})
		envs := make([]outbox.Envelope, 300)
		for i := range envs {
			envs[i] = outbox.Envelope{Type: "Item", AggregateType: "Bulk", Payload: map[string]int{"i": i}}
		}
		ids := write(t, db, ob, envs...)
		waitStatus(t, ob, outbox.StatusDone, ids...)
		counts := countByEventID(streamMessages(t, js, streamName))
		for _, id := range ids {
			if counts[id] != 1 {
				t.Fatalf("event %s in the stream %d times, want once", id, counts[id])
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if largest < 2 || largest > 50 {
			t.Errorf("largest batch %d, want between 2 and BatchSize 50", largest)
		}
		t.Logf("largest batch: %d events", largest)
	})
}

// batchSpy reports each batch's size, then hands it on.
type batchSpy struct {
	outbox.BatchListener
	seen func(n int)
}

func (s batchSpy) HandleBatch(ctx context.Context, items []outbox.BatchItem) []error {
	s.seen(len(items))
	return s.BatchListener.HandleBatch(ctx, items)
}
