package outbox_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

var errBadInput = errors.New("bad input")

// TestSubscriptionPolicy gives each listener its own policy beside the Config's
// (MaxAttempts 10, a slow retry): its own MaxAttempts and retry policy, an error
// classifier, a timeout, and a typed listener whose payload does not decode.
func TestSubscriptionPolicy(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{MaxAttempts: 10, PollInterval: 20 * time.Millisecond,
			Retry: outbox.FixedBackoff{Wait: time.Hour}})
		var mu sync.Mutex
		attempts := map[string]int{}
		count := func(e *outbox.Event) {
			mu.Lock()
			attempts[e.Type]++
			mu.Unlock()
		}
		var deadlineLeft time.Duration
		hasDeadline := false
		var placed []orderPlacedPayload
		subs := []outbox.Subscription{
			{AggregateType: "Order", EventType: "Flaky", MaxAttempts: 3, Retry: outbox.FixedBackoff{Wait: time.Millisecond},
				Listener: outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
					count(e)
					return errors.New("broker unavailable")
				})},
			{Name: "classifier", AggregateType: "Order", EventType: "Permanent", MaxAttempts: -1,
				Retryable: func(err error) bool { return !errors.Is(err, errBadInput) },
				Listener: outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
					count(e)
					return fmt.Errorf("validate: %w", errBadInput)
				})},
			{AggregateType: "Order", EventType: "Slow", MaxAttempts: 1, Timeout: 50 * time.Millisecond,
				Listener: outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
					count(e)
					d, ok := ctx.Deadline()
					mu.Lock()
					deadlineLeft, hasDeadline = time.Until(d), ok
					mu.Unlock()
					<-ctx.Done()
					return ctx.Err()
				})},
			{AggregateType: "Order", EventType: "Placed", Listener: outbox.Typed(func(_ context.Context, e *outbox.Event, p orderPlacedPayload) error {
				count(e)
				mu.Lock()
				placed = append(placed, p)
				mu.Unlock()
				return nil
			})},
		}
		for _, s := range subs {
			if err := a.ob.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		a.start(t)
		ctx := context.Background()
		ids := map[string]string{}
		for i, env := range []outbox.Envelope{
			{Type: "Flaky", AggregateType: "Order", Payload: 1},
			{Type: "Permanent", AggregateType: "Order", Payload: 1},
			{Type: "Slow", AggregateType: "Order", Payload: 1},
			{Type: "Placed", AggregateType: "Order", Payload: orderPlacedPayload{OrderID: "o-1", TotalCents: 4200}},
			{ID: "bad-placed", Type: "Placed", AggregateType: "Order", Payload: json.RawMessage(`{"order_id":"o-2","total_cents":"a lot"}`)},
		} {
			id, err := a.placeOrder(ctx, fmt.Sprint("o", i), env, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids[env.Type+map[bool]string{true: "-bad"}[env.ID != ""]] = id
		}
		want := map[string]struct {
			status   outbox.Status
			attempts int
			errHas   string
		}{
			"Flaky":      {outbox.StatusDead, 3, "broker unavailable"},
			"Permanent":  {outbox.StatusDead, 1, "bad input"},
			"Slow":       {outbox.StatusDead, 1, "context deadline exceeded"},
			"Placed":     {outbox.StatusDone, 0, ""},
			"Placed-bad": {outbox.StatusDead, 1, "does not decode into outbox_test.orderPlacedPayload, field total_cents"},
		}
		for name, w := range want {
			id := ids[name]
			eventually(t, name+" settled", func() bool { return a.event(t, id).Status == w.status })
			if e := a.event(t, id); e.Attempts != w.attempts || !strings.Contains(e.LastError, w.errHas) {
				t.Errorf("%s: %d attempts, last error %q; want %d and %q", name, e.Attempts, e.LastError, w.attempts, w.errHas)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if attempts["Flaky"] != 3 || attempts["Permanent"] != 1 || attempts["Slow"] != 1 || attempts["Placed"] != 1 {
			t.Errorf("listener calls %v, want Flaky 3, Permanent 1, Slow 1, Placed 1 (the bad payload never reaches fn)", attempts)
		}
		// At most the timeout: a listener that starts late on a busy machine may find
		// it already past (negative), which the configuration does not rule out.
		if !hasDeadline || deadlineLeft > 50*time.Millisecond {
			t.Errorf("Slow's context had a deadline %v, %s left, want one at most its own 50ms timeout away", hasDeadline, deadlineLeft)
		}
		if len(placed) != 1 || placed[0] != (orderPlacedPayload{OrderID: "o-1", TotalCents: 4200}) {
			t.Errorf("typed listener got %+v", placed)
		}
	})
}

type orderPlacedPayload struct {
	OrderID    string `json:"order_id"`
	TotalCents int    `json:"total_cents"`
}

// TestCodecRoundTrip writes raw bytes through a codec that stores them as a base64
// JSON string, on every database, and decodes them with the same codec in a typed
// listener.
func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{Codec: bytesCodec{}})
		got := make(chan blob, 1)
		if err := a.ob.Register("Doc", "Uploaded", outbox.TypedCodec(bytesCodec{}, func(_ context.Context, _ *outbox.Event, p blob) error {
			got <- p
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		raw := blob{0x00, 0xff, 0x10, '"', '\\', 0x80}
		id, err := a.placeOrder(context.Background(), "d1", outbox.Envelope{Type: "Uploaded", AggregateType: "Doc", Payload: raw}, nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if string(p) != string(raw) {
				t.Fatalf("decoded %x, want %x", p, raw)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("not delivered")
		}
		if e := a.event(t, id); string(e.Payload) != `"`+base64.StdEncoding.EncodeToString(raw)+`"` {
			t.Fatalf("stored payload %s", e.Payload)
		}
	})
}

// blob is raw bytes that bytesCodec stores as a base64 JSON string.
type blob []byte

type bytesCodec struct{}

func (bytesCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(blob)
	if !ok {
		return nil, fmt.Errorf("bytesCodec: %T is not a blob", v)
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

func (bytesCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*blob)
	if !ok {
		return fmt.Errorf("bytesCodec: %T is not a *blob", v)
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	*p = b
	return err
}

// TestSubscribeTimeoutInMultiNode: in MultiNode mode a listener's own timeout must stay
// below ClaimTTL - StatusTimeout, so that a claim outlives an attempt, and cannot be
// -1; elsewhere any timeout goes.
func TestSubscribeTimeoutInMultiNode(t *testing.T) {
	t.Parallel()
	l := outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })
	multi := newOutbox(t, outboxtest.NewMemoryStore(), outbox.Config{Mode: outbox.MultiNode, ClaimTTL: 2 * time.Minute,
		StatusTimeout: 10 * time.Second})
	for _, timeout := range []time.Duration{-1, 110 * time.Second, time.Hour} {
		var ce *outbox.ConfigError
		if err := multi.Subscribe(outbox.Subscription{EventType: "T", Listener: l, Timeout: timeout}); !errors.As(err, &ce) || ce.Field != "Subscription.Timeout" {
			t.Errorf("MultiNode, timeout %s: %v, want a ConfigError for Subscription.Timeout", timeout, err)
		}
	}
	if err := multi.Subscribe(outbox.Subscription{EventType: "T", Listener: l, Timeout: 109 * time.Second}); err != nil {
		t.Errorf("MultiNode, timeout 109s: %v", err)
	}
	single := newOutbox(t, outboxtest.NewMemoryStore(), outbox.Config{})
	if err := single.Subscribe(outbox.Subscription{EventType: "T", Listener: l, Timeout: -1}); err != nil {
		t.Errorf("SingleNode, no timeout: %v", err)
	}
}

// TestFallbackOnDatabases: on every database, a fallback that succeeds makes its event
// FALLBACK with the listener's last error, after the attempts its subscription allows,
// and the ordered event behind it on its key is delivered next (FALLBACK releases the
// key, while DEAD would hold it); the failure context carries the first attempt's
// time as the table recorded it. A fallback that fails leaves the event DEAD.
func TestFallbackOnDatabases(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 20 * time.Millisecond})
		var (
			mu        sync.Mutex
			failures  []outbox.Failure
			delivered []string
		)
		fallback := func(_ context.Context, f outbox.Failure) error {
			mu.Lock()
			failures = append(failures, f)
			mu.Unlock()
			if f.Event.AggregateID == "unlucky" {
				return errors.New("dead letter topic down")
			}
			return nil
		}
		if err := a.ob.Subscribe(outbox.Subscription{Name: "shipper", AggregateType: "Order", EventType: "Ship",
			MaxAttempts: 2, Retry: outbox.FixedBackoff{Wait: 10 * time.Millisecond}, Fallback: fallback,
			Listener: outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
				if strings.HasPrefix(e.AggregateID, "poison") || e.AggregateID == "unlucky" {
					return errors.New("carrier refused")
				}
				mu.Lock()
				delivered = append(delivered, e.AggregateID)
				mu.Unlock()
				return nil
			})}); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := context.Background()
		var ids []string
		for i, agg := range []string{"poison", "after-poison", "unlucky"} {
			id, err := a.placeOrder(ctx, fmt.Sprint("o", i), outbox.Envelope{Type: "Ship", AggregateType: "Order",
				AggregateID: agg, OrderKey: map[bool]string{true: "K"}[i < 2], Payload: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		eventually(t, "the poisoned event handled by the fallback", func() bool { return a.event(t, ids[0]).Status == outbox.StatusFallback })
		eventually(t, "the next event of its key delivered", func() bool { return a.event(t, ids[1]).Status == outbox.StatusDone })
		eventually(t, "the event whose fallback fails to go DEAD", func() bool { return a.event(t, ids[2]).Status == outbox.StatusDead })

		poisoned, unlucky := a.event(t, ids[0]), a.event(t, ids[2])
		if poisoned.Attempts != 2 || poisoned.LastError != "carrier refused" || poisoned.FirstAttemptAt.IsZero() || poisoned.DoneAt.IsZero() {
			t.Errorf("FALLBACK row: attempts %d, last error %q, first attempt %v, done at %v",
				poisoned.Attempts, poisoned.LastError, poisoned.FirstAttemptAt, poisoned.DoneAt)
		}
		if unlucky.Attempts != 2 || unlucky.LastError != "carrier refused; fallback failed: dead letter topic down" {
			t.Errorf("DEAD row: attempts %d, last error %q", unlucky.Attempts, unlucky.LastError)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(failures) != 2 {
			t.Fatalf("fallback ran %d times, want twice", len(failures))
		}
		for _, f := range failures {
			if f.Event.ID == ids[0] && (f.Attempts != 2 || f.Listener != "shipper" || f.Err == nil ||
				!f.FirstAttemptAt.Equal(poisoned.FirstAttemptAt) || f.LastAttemptAt.Before(f.FirstAttemptAt.Add(-time.Second))) {
				t.Errorf("failure of the poisoned event: %+v (row's first attempt %v)", f, poisoned.FirstAttemptAt)
			}
		}
		if len(delivered) != 1 || delivered[0] != "after-poison" {
			t.Errorf("delivered %v, want after-poison only", delivered)
		}
		st, err := a.ob.Events().Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Counts[outbox.StatusFallback] != 1 || st.Counts[outbox.StatusDead] != 1 {
			t.Errorf("stats %v, want one FALLBACK and one DEAD", st.Counts)
		}
	})
}

// TestDeleteDoneOnDatabases: with Config.DeleteDone, on every database, a delivered
// event's row is deleted (a batch through the hot path, an event that failed once, and
// an ordered key's events, delivered in order); the failing events' rows stay until
// they succeed. An ID is free again once its event is gone: writing it again is a new
// event.
func TestDeleteDoneOnDatabases(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{DeleteDone: true, PollInterval: 20 * time.Millisecond,
			Retry: outbox.FixedBackoff{Wait: 20 * time.Millisecond}})
		var (
			mu     sync.Mutex
			seen   []string
			failed = map[string]bool{}
		)
		if err := a.ob.Register("Order", "Placed", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			if e.AggregateID == "flaky" && !failed[e.ID] {
				failed[e.ID] = true
				return errors.New("try again")
			}
			seen = append(seen, e.AggregateID)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := context.Background()
		write := func(i int, env outbox.Envelope) string {
			t.Helper()
			env.Type, env.AggregateType, env.Payload = "Placed", "Order", i
			id, err := a.placeOrder(ctx, fmt.Sprint("o", i), env, nil)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		var ids []string
		for i := range 20 {
			env := outbox.Envelope{AggregateID: fmt.Sprint("plain-", i)}
			switch {
			case i == 3:
				env.AggregateID = "flaky"
			case i >= 10:
				env.AggregateID, env.OrderKey = fmt.Sprint("k-", i), "K"
			}
			ids = append(ids, write(i, env))
		}
		eventually(t, "every row deleted", func() bool { return a.count(t, a.table) == 0 })
		mu.Lock()
		var ordered []string
		for _, s := range seen {
			if strings.HasPrefix(s, "k-") {
				ordered = append(ordered, s)
			}
		}
		n := len(seen)
		mu.Unlock()
		if n != 20 {
			t.Errorf("%d deliveries, want 20", n)
		}
		for i, s := range ordered {
			if want := fmt.Sprint("k-", i+10); s != want {
				t.Fatalf("ordered deliveries %v, want k-10 … k-19 in order", ordered)
			}
		}
		// The ID of a delivered (deleted) event can be written again: a new event.
		again := write(99, outbox.Envelope{ID: ids[0], AggregateID: "again"})
		if again != ids[0] {
			t.Fatalf("write returned %s, want %s", again, ids[0])
		}
		eventually(t, "the rewritten event delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == 21 && seen[20] == "again"
		})
	})
}
