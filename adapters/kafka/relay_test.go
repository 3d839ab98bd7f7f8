package outboxkafka_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	outboxkafka "github.com/outboxkit/outbox/adapters/kafka"
	outbox "github.com/outboxkit/outbox/core"
)

// TestRelayDelivers writes events of several aggregates, ordered and not, and reads
// them back from the topics the default Topic picks: key, value, headers, and the
// order of each key.
func TestRelayDelivers(t *testing.T) {
	t.Parallel()
	topics := []string{"Order", "Customer", outbox.GlobalAggregateType}
	b := setup(t, setupOpts{topics: topics})
	relay := b.relay(t, outboxkafka.Config{})
	for _, route := range [][2]string{{"Order", "OrderPlaced"}, {"Customer", "CustomerRenamed"}, {"", "Ping"}} {
		if err := b.ob.Register(route[0], route[1], relay); err != nil {
			t.Fatal(err)
		}
	}
	b.start(t)

	const perKey = 10
	orders := []string{"o-1", "o-2"}
	var ids []string
	for i := range perKey { // ordered: two keys, interleaved, one transaction each
		for _, o := range orders {
			ids = append(ids, b.write(t, outbox.Envelope{
				Type: "OrderPlaced", AggregateType: "Order", AggregateID: o, OrderKey: "order/" + o,
				TenantID: "t-1", Headers: map[string]string{"b": "2", "a": "1"},
				Payload: mustJSON(t, map[string]any{"order": o, "seq": i}),
			}))
		}
	}
	for i := range 3 { // unordered: keyed by the aggregate ID
		ids = append(ids, b.write(t, outbox.Envelope{
			Type: "CustomerRenamed", AggregateType: "Customer", AggregateID: fmt.Sprintf("c-%d", i),
			Payload: mustJSON(t, map[string]any{"name": fmt.Sprintf("n-%d", i)}),
		}))
	}
	pingPayload := json.RawMessage(`{ "ping" : [1, 2.50] }`) // odd spacing: the bytes go through as stored
	pingID := b.write(t, outbox.Envelope{Type: "Ping", Payload: pingPayload})
	ids = append(ids, pingID)

	stored := make(map[string]outbox.Event, len(ids))
	for _, id := range ids {
		stored[id] = b.waitStatus(t, id, outbox.StatusDone)
	}
	recs := consume(t, b.cluster, topics, ids...)

	seen := make(map[string]bool)
	seqs := make(map[string][]int) // order key -> seq of each event's first record, in partition order
	for _, r := range recs {
		e, ok := stored[header(r, outboxkafka.HeaderEventID)]
		if !ok {
			t.Fatalf("record %s/%d@%d: unknown event (headers %v)", r.Topic, r.Partition, r.Offset, r.Headers)
		}
		if r.Topic != e.AggregateType {
			t.Errorf("event %s (%s): topic %q, want the aggregate type %q", e.ID, e.Type, r.Topic, e.AggregateType)
		}
		var wantKey []byte
		switch {
		case e.OrderKey != "":
			wantKey = []byte(e.OrderKey)
		case e.AggregateID != "":
			wantKey = []byte(e.AggregateID)
		}
		if !bytes.Equal(r.Key, wantKey) {
			t.Errorf("event %s (%s): key %q, want %q", e.ID, e.Type, r.Key, wantKey)
		}
		if !bytes.Equal(r.Value, e.Payload) {
			t.Errorf("event %s (%s): value %s, want the stored payload %s", e.ID, e.Type, r.Value, e.Payload)
		}
		if got, want := headerList(r), wantHeaders(e); !slices.Equal(got, want) {
			t.Errorf("event %s (%s): headers\n got %q\nwant %q", e.ID, e.Type, got, want)
		}
		if seen[e.ID] {
			continue // at least once: a duplicate would be fine, but not out of order
		}
		seen[e.ID] = true
		if e.OrderKey != "" {
			var p struct{ Seq int }
			if err := json.Unmarshal(r.Value, &p); err != nil {
				t.Fatal(err)
			}
			seqs[e.OrderKey] = append(seqs[e.OrderKey], p.Seq)
		}
	}
	if got := string(stored[pingID].Payload); got != string(pingPayload) {
		t.Errorf("stored ping payload %s, want %s as written", got, pingPayload)
	}
	for _, o := range orders {
		want := make([]int, perKey)
		for i := range want {
			want[i] = i
		}
		if got := seqs["order/"+o]; !slices.Equal(got, want) {
			t.Errorf("order key %q: records in order %v, want %v", "order/"+o, got, want)
		}
	}
}

// wantHeaders is the header list of e's record: e's headers sorted by key, then the
// outbox-* headers that apply.
func wantHeaders(e outbox.Event) []string {
	var hs []string
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		hs = append(hs, k+"="+e.Headers[k])
	}
	hs = append(hs,
		outboxkafka.HeaderEventID+"="+e.ID,
		outboxkafka.HeaderEventType+"="+e.Type,
		outboxkafka.HeaderAggregateType+"="+e.AggregateType)
	if e.AggregateID != "" {
		hs = append(hs, outboxkafka.HeaderAggregateID+"="+e.AggregateID)
	}
	if e.TenantID != "" {
		hs = append(hs, outboxkafka.HeaderTenantID+"="+e.TenantID)
	}
	if e.OrderKey != "" {
		hs = append(hs, outboxkafka.HeaderOrderKey+"="+e.OrderKey)
	}
	return append(hs, outboxkafka.HeaderCreatedAt+"="+e.CreatedAt.UTC().Format(time.RFC3339Nano))
}

// headerList returns r's headers as "key=value", in order.
func headerList(r *kgo.Record) []string {
	hs := make([]string, 0, len(r.Headers))
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	return hs
}

// TestRelayDoneOnlyAfterAck holds the broker's answer to the produce request: while it
// is held the event is not DONE; once the broker answers, it is, and the record is in
// the topic.
func TestRelayDoneOnlyAfterAck(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{topics: []string{"Order"}})
	held, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { closeOnce(release) }) // before the outbox stops, should the test fail early
	b.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.cluster.DropControl() // this request only
		closeOnce(held)
		b.cluster.SleepControl(func() { <-release })
		return nil, nil, false // then the broker handles it as usual
	})
	if err := b.ob.Register("Order", "OrderPlaced", b.relay(t, outboxkafka.Config{})); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	id := b.write(t, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Payload: mustJSON(t, 1)})

	select {
	case <-held:
	case <-time.After(waitTimeout):
		t.Fatal("no produce request reached the broker")
	}
	if e := b.event(t, id); e.Status == outbox.StatusDone || e.Attempts != 0 {
		t.Fatalf("while the broker holds the produce request: status %s, attempts %d; want not DONE, no failed attempt", e.Status, e.Attempts)
	}
	closeOnce(release)
	if e := b.waitStatus(t, id, outbox.StatusDone); e.Attempts != 0 {
		t.Errorf("attempts %d, want 0", e.Attempts)
	}
	consume(t, b.cluster, []string{"Order"}, id)
}

// TestRelayRetriesUntilBrokerAccepts makes the broker refuse every produce request for
// a while (as it does while the producer lacks the WRITE ACL): the attempts fail and
// the events wait in RETRY; once the broker accepts, every event is DONE and in the
// topic.
func TestRelayRetriesUntilBrokerAccepts(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{topics: []string{"Order"}})
	refuse := b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.TopicAuthorizationFailed, Count: -1})
	err := b.ob.Subscribe(outbox.Subscription{
		AggregateType: "Order", EventType: "OrderPlaced", Listener: b.relay(t, outboxkafka.Config{}),
		MaxAttempts: -1, Retry: outbox.FixedBackoff{Wait: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, b.write(t, outbox.Envelope{
			Type: "OrderPlaced", AggregateType: "Order", AggregateID: fmt.Sprintf("o-%d", i), Payload: mustJSON(t, i),
		}))
	}
	for _, id := range ids {
		e := b.waitEvent(t, id, "a failed attempt", func(e outbox.Event) bool { return e.Attempts >= 1 })
		if e.Status == outbox.StatusDone || !strings.Contains(e.LastError, "TOPIC_AUTHORIZATION_FAILED") {
			t.Fatalf("event %s while the broker refuses: status %s, last error %q; want not DONE, the broker's error",
				id, e.Status, e.LastError)
		}
	}
	refuse.Remove()
	for _, id := range ids {
		b.waitStatus(t, id, outbox.StatusDone)
	}
	consume(t, b.cluster, []string{"Order"}, ids...)
}

// TestRelayBrokerTimeout holds every produce request past the listener's timeout: each
// attempt fails when its context ends, and after MaxAttempts the event is DEAD with
// the cause in its last error. The record of the first attempt, still in flight,
// reaches the topic once the broker answers: delivery into Kafka is at least once.
func TestRelayBrokerTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{topics: []string{"Order"}})
	release := make(chan struct{})
	t.Cleanup(func() { closeOnce(release) }) // before the outbox stops
	b.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.cluster.SleepControl(func() { <-release })
		return nil, nil, false // a control that handles nothing stays for every request
	})
	err := b.ob.Subscribe(outbox.Subscription{
		AggregateType: "Order", EventType: "OrderPlaced", Listener: b.relay(t, outboxkafka.Config{}),
		MaxAttempts: 2, Retry: outbox.FixedBackoff{Wait: 10 * time.Millisecond}, Timeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	id := b.write(t, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Payload: mustJSON(t, 1)})

	e := b.waitStatus(t, id, outbox.StatusDead)
	t.Logf("DEAD after %d attempts: %s", e.Attempts, e.LastError)
	if e.Attempts != 2 {
		t.Errorf("attempts %d, want 2", e.Attempts)
	}
	for _, want := range []string{id, "no acknowledgement", context.DeadlineExceeded.Error()} {
		if !strings.Contains(e.LastError, want) {
			t.Errorf("last error %q does not name %q", e.LastError, want)
		}
	}
	closeOnce(release)
	consume(t, b.cluster, []string{"Order"}, id)
}

// TestRelayPermanentFailures checks that failures no retry can fix make the event DEAD
// after one attempt, whatever MaxAttempts says.
func TestRelayPermanentFailures(t *testing.T) {
	t.Parallel()
	t.Run("RecordTooLarge", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{
			topics: []string{"Order"},
			kfake:  []kfake.Opt{kfake.BrokerConfigs(map[string]string{"message.max.bytes": "1024"})},
		})
		if err := b.ob.Register("Order", "OrderPlaced", b.relay(t, outboxkafka.Config{})); err != nil {
			t.Fatal(err)
		}
		b.start(t)
		id := b.write(t, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: mustJSON(t, randomText(t, 8<<10))})
		e := b.waitStatus(t, id, outbox.StatusDead)
		t.Logf("DEAD after %d attempts: %s", e.Attempts, e.LastError)
		if e.Attempts != 1 || !strings.Contains(e.LastError, kerr.MessageTooLarge.Message) || !strings.Contains(e.LastError, "(permanent)") {
			t.Errorf("attempts %d, last error %q; want 1 attempt, a permanent MESSAGE_TOO_LARGE", e.Attempts, e.LastError)
		}
	})
	t.Run("EmptyTopic", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{topics: []string{"Order"}})
		relay := b.relay(t, outboxkafka.Config{Topic: func(*outbox.Event) string { return "" }})
		if err := b.ob.Register("Order", "OrderPlaced", relay); err != nil {
			t.Fatal(err)
		}
		b.start(t)
		id := b.write(t, outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", Payload: mustJSON(t, 1)})
		e := b.waitStatus(t, id, outbox.StatusDead)
		if e.Attempts != 1 || !strings.Contains(e.LastError, outboxkafka.ErrEmptyTopic.Error()) {
			t.Errorf("attempts %d, last error %q; want 1 attempt, %q", e.Attempts, e.LastError, outboxkafka.ErrEmptyTopic)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		cluster := newCluster(t, kfake.SeedTopics(1, "Order"))
		client := newClient(t, cluster)
		for _, tc := range []struct {
			name   string
			cfg    outboxkafka.Config
			event  outbox.Event
			reason error
		}{
			{"NoPayload", outboxkafka.Config{}, outbox.Event{ID: "e-1", Type: "T", AggregateType: "Order"}, outboxkafka.ErrNoPayload},
			{"EmptyTopic", outboxkafka.Config{Topic: func(*outbox.Event) string { return "" }},
				outbox.Event{ID: "e-2", Type: "T", AggregateType: "Order", Payload: json.RawMessage(`1`)}, outboxkafka.ErrEmptyTopic},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				relay, err := outboxkafka.New(client, tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				err = relay.Handle(ctx, &tc.event)
				var pe *outboxkafka.ProduceError
				if !errors.Is(err, outbox.ErrUnrecoverable) || !errors.Is(err, tc.reason) ||
					!errors.As(err, &pe) || !pe.Permanent || pe.EventID != tc.event.ID {
					t.Errorf("Handle: %v (%#v); want a permanent *ProduceError for %s matching outbox.ErrUnrecoverable and %v",
						err, pe, tc.event.ID, tc.reason)
				}
			})
		}
	})
}

// TestRelayRetryableErrors checks that a refusal the outbox can retry does not match
// outbox.ErrUnrecoverable, and that a context that ended reports its cause.
func TestRelayRetryableErrors(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t, kfake.SeedTopics(1, "Order"))
	relay, err := outboxkafka.New(newClient(t, cluster), outboxkafka.Config{})
	if err != nil {
		t.Fatal(err)
	}
	event := &outbox.Event{ID: "e-1", Type: "OrderPlaced", AggregateType: "Order", Payload: json.RawMessage(`{}`)}
	// The subtests run one after the other: the fault of the first must not meet the second.

	t.Run("Refused", func(t *testing.T) {
		cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.TopicAuthorizationFailed})
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		err := relay.Handle(ctx, event)
		var pe *outboxkafka.ProduceError
		if !errors.As(err, &pe) || pe.Permanent || errors.Is(err, outbox.ErrUnrecoverable) ||
			!errors.Is(err, kerr.TopicAuthorizationFailed) || pe.Topic != "Order" {
			t.Errorf("Handle: %v; want a retryable *ProduceError wrapping TOPIC_AUTHORIZATION_FAILED", err)
		}
		if err := relay.Handle(ctx, event); err != nil { // the fault answered one request
			t.Errorf("Handle after the refusal: %v", err)
		}
	})
	t.Run("ContextEnded", func(t *testing.T) {
		cause := errors.New("stopping")
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		err := relay.Handle(ctx, event)
		if !errors.Is(err, cause) || errors.Is(err, outbox.ErrUnrecoverable) {
			t.Errorf("Handle: %v; want a retryable error naming the context's cause", err)
		}
	})
}

// TestRelayPropagate checks that Propagate runs with the attempt's context (here, a
// value an interceptor put there, as a tracing interceptor puts its span) and that
// its headers land on the record, replacing an event header of the same key.
func TestRelayPropagate(t *testing.T) {
	t.Parallel()
	type traceKey struct{}
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	b := setup(t, setupOpts{topics: []string{"Order"}, outbox: outbox.Config{
		Interceptors: []outbox.Interceptor{outbox.InterceptorFuncs{
			BeforeFunc: func(ctx context.Context, _ *outbox.Event) (context.Context, error) {
				return context.WithValue(ctx, traceKey{}, traceparent), nil
			},
		}},
	}})
	relay := b.relay(t, outboxkafka.Config{Propagate: func(ctx context.Context, set func(key, value string)) {
		tp, _ := ctx.Value(traceKey{}).(string)
		set("traceparent", tp)
		set("tracestate", "vendor=1")
		set("", "ignored")
	}})
	if err := b.ob.Register("Order", "OrderPlaced", relay); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	id := b.write(t, outbox.Envelope{
		Type: "OrderPlaced", AggregateType: "Order", Payload: mustJSON(t, 1),
		Headers: map[string]string{"traceparent": "stale", "x-app": "shop", outboxkafka.HeaderEventID: "spoofed"},
	})
	e := b.waitStatus(t, id, outbox.StatusDone)
	recs := consume(t, b.cluster, []string{"Order"}, id)

	want := []string{
		outboxkafka.HeaderEventID + "=" + id, // the event's header of this key, overridden
		"traceparent=" + traceparent,         // the event's header, overridden by Propagate
		"x-app=shop",
		outboxkafka.HeaderEventType + "=OrderPlaced",
		outboxkafka.HeaderAggregateType + "=Order",
		outboxkafka.HeaderCreatedAt + "=" + e.CreatedAt.UTC().Format(time.RFC3339Nano),
		"tracestate=vendor=1",
	}
	if got := headerList(recs[0]); !slices.Equal(got, want) {
		t.Errorf("headers\n got %q\nwant %q", got, want)
	}
}

// randomText returns n bytes of base64 text that does not compress.
func randomText(t *testing.T, n int) string {
	t.Helper()
	buf := make([]byte, n*3/4)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf)
}

// closeOnce closes ch unless it is closed.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// TestRelayHandleBatch: one call produces every record of the batch and answers each
// event on its own, a permanent failure beside successes; through an outbox, events
// committed together reach the relay in batches and each is in the topic once.
func TestRelayHandleBatch(t *testing.T) {
	t.Parallel()
	t.Run("Direct", func(t *testing.T) {
		t.Parallel()
		cluster := newCluster(t, kfake.SeedTopics(testPartitions, "Order"))
		relay, err := outboxkafka.New(newClient(t, cluster), outboxkafka.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		var items []outbox.BatchItem
		for i, payload := range []json.RawMessage{json.RawMessage(`1`), nil, json.RawMessage(`3`)} {
			items = append(items, outbox.BatchItem{Ctx: ctx, Event: &outbox.Event{
				ID: fmt.Sprintf("batch-%d", i), Type: "T", AggregateType: "Order", AggregateID: "a", Payload: payload,
			}})
		}
		errs := relay.HandleBatch(ctx, items)
		if len(errs) != 3 || errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], outboxkafka.ErrNoPayload) {
			t.Fatalf("errors %v, want nil, ErrNoPayload, nil", errs)
		}
		recs := consume(t, cluster, []string{"Order"}, "batch-0", "batch-2")
		if len(recs) != 2 || header(recs[0], outboxkafka.HeaderEventID) != "batch-0" || header(recs[1], outboxkafka.HeaderEventID) != "batch-2" {
			t.Errorf("records %v, want batch-0 then batch-2 (one key, one partition: batch order)", recs)
		}
	})
	t.Run("ThroughOutbox", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{topics: []string{"Bulk"}, outbox: outbox.Config{Workers: 1}})
		var (
			mu      sync.Mutex
			largest int
		)
		spy := batchSpy{BatchListener: b.relay(t, outboxkafka.Config{}), seen: func(n int) {
			mu.Lock()
			largest = max(largest, n)
			mu.Unlock()
		}}
		if err := b.ob.Subscribe(outbox.Subscription{AggregateType: "Bulk", EventType: "Item", Listener: spy, BatchSize: 50}); err != nil {
			t.Fatal(err)
		}
		b.start(t)
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		var ids []string
		err := outbox.RunInTx(ctx, b.db, func(ctx context.Context, tx *outbox.Tx) error {
			envs := make([]outbox.Envelope, 300)
			for i := range envs {
				envs[i] = outbox.Envelope{Type: "Item", AggregateType: "Bulk", AggregateID: fmt.Sprint(i % 7), Payload: mustJSON(t, i)}
			}
			var err error
			ids, err = b.ob.Writer().WriteAll(ctx, tx, envs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			b.waitStatus(t, id, outbox.StatusDone)
		}
		if recs := consume(t, b.cluster, []string{"Bulk"}, ids...); len(recs) != len(ids) {
			t.Errorf("%d records for %d events", len(recs), len(ids))
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
