package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

func TestSubscribeRejects(t *testing.T) {
	t.Parallel()
	l := outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })
	reg := outbox.NewRegistry()
	if err := reg.Subscribe(outbox.Subscription{Name: "taken", AggregateType: "A", EventType: "T", Listener: l}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		s     outbox.Subscription
		field string // ConfigError field; "" for ErrDuplicateListener
	}{
		{"no event type", outbox.Subscription{Listener: l}, "Listener"},
		{"nil listener", outbox.Subscription{EventType: "T"}, "Listener"},
		{"MaxAttempts -2", outbox.Subscription{EventType: "T", Listener: l, MaxAttempts: -2}, "Subscription.MaxAttempts"},
		{"Timeout -2ns", outbox.Subscription{EventType: "T", Listener: l, Timeout: -2}, "Subscription.Timeout"},
		{"BatchSize -1", outbox.Subscription{EventType: "T", Listener: l, BatchSize: -1}, "Subscription.BatchSize"},
		{"name not text", outbox.Subscription{Name: "a\x00b", EventType: "T", Listener: l}, "Subscription.Name"},
		{"name too long", outbox.Subscription{Name: strings.Repeat("n", outbox.MaxListenerLen+1), EventType: "T", Listener: l}, "Subscription.Name"},
		{"route taken, default name taken", outbox.Subscription{AggregateType: "A", EventType: "W", Listener: l}, "-"},
		{"name taken", outbox.Subscription{Name: "taken", AggregateType: "B", EventType: "T", Listener: l}, ""},
		{"default name taken", outbox.Subscription{Name: "A/U", EventType: "V", Listener: l}, "-"},
	}
	for _, tt := range tests {
		err := reg.Subscribe(tt.s)
		var ce *outbox.ConfigError
		switch {
		case tt.field == "-": // first of a pair: must pass
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			// The same route again: fan-out, but only under another name.
			s := tt.s
			s.Name = ""
			if s.AggregateType == "" {
				s.EventType = "U" // the default name A/U is taken
				s.AggregateType = "A"
			}
			if err := reg.Subscribe(s); !errors.Is(err, outbox.ErrDuplicateListener) {
				t.Errorf("%s: default name taken: %v, want ErrDuplicateListener", tt.name, err)
			}
			s.Name = tt.name + " again"
			if err := reg.Subscribe(s); err != nil {
				t.Errorf("%s: a second listener of the route, named: %v", tt.name, err)
			}
		case tt.field == "":
			if !errors.Is(err, outbox.ErrDuplicateListener) {
				t.Errorf("%s: %v, want ErrDuplicateListener", tt.name, err)
			}
		case !errors.As(err, &ce) || ce.Field != tt.field:
			t.Errorf("%s: %v, want a ConfigError for %s", tt.name, err, tt.field)
		}
	}
}

// TestRetryableClassifierPanics: a classifier that panics retries the error (the
// event is not lost to DEAD by a bug in the classifier), and the panic is logged.
func TestRetryableClassifierPanics(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Retry: fixedDelay(time.Hour)})
		if err := b.reg.Subscribe(outbox.Subscription{Name: "panicky", EventType: "Thing",
			Listener:  outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return errors.New("no") }),
			Retryable: func(error) bool { panic("classifier bug") },
		}); err != nil {
			t.Fatal(err)
		}
		b.write(t, newEvent("e1", "Thing"))
		synctest.Wait()
		if got := b.row(t, "e1"); got.Status != outbox.StatusRetry || got.Attempts != 1 {
			t.Fatalf("status %s attempts %d, want RETRY 1", got.Status, got.Attempts)
		}
		if len(b.logs.find(slog.LevelError, "Subscription.Retryable panicked; the error is retried")) != 1 {
			t.Fatal("no log of the panic")
		}
	})
}

// TestRetryableNeverOverridesUnrecoverable: an error wrapping ErrUnrecoverable is final
// even when the classifier calls every error retryable.
func TestRetryableNeverOverridesUnrecoverable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Retry: fixedDelay(time.Hour)})
		if err := b.reg.Subscribe(outbox.Subscription{EventType: "Thing",
			Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
				return outbox.ErrUnrecoverable
			}),
			Retryable: func(error) bool { return true },
		}); err != nil {
			t.Fatal(err)
		}
		b.write(t, newEvent("e1", "Thing"))
		synctest.Wait()
		if got := b.row(t, "e1"); got.Status != outbox.StatusDead {
			t.Fatalf("status %s, want DEAD", got.Status)
		}
	})
}

func TestTypedPayloadErrors(t *testing.T) {
	t.Parallel()
	type payload struct {
		N    int    `json:"n"`
		Name string `json:"name"`
	}
	called := false
	l := outbox.Typed(func(_ context.Context, _ *outbox.Event, p payload) error {
		called = true
		return nil
	})
	tests := []struct {
		payload, field, has string
	}{
		{`{"n":"x"}`, "n", "does not decode into outbox_test.payload, field n"},
		{`{"n":1,"name":2}`, "name", "field name"},
		{`[1]`, "", "does not decode into outbox_test.payload: json: cannot unmarshal array"},
		{`{"n":`, "", "unexpected end of JSON input"},
	}
	for _, tt := range tests {
		err := l.Handle(t.Context(), &outbox.Event{ID: "e1", Payload: json.RawMessage(tt.payload)})
		var pe *outbox.PayloadError
		if !errors.As(err, &pe) || !errors.Is(err, outbox.ErrUnrecoverable) || pe.Field != tt.field || pe.EventID != "e1" ||
			!strings.Contains(err.Error(), tt.has) {
			t.Errorf("%s: %v (field %q), want a PayloadError matching ErrUnrecoverable, field %q, containing %q", tt.payload, err, pe.Field, tt.field, tt.has)
		}
	}
	if called {
		t.Fatal("fn ran for a payload that did not decode")
	}
	want := errors.New("downstream")
	l = outbox.Typed(func(_ context.Context, _ *outbox.Event, p payload) error {
		if p != (payload{N: 7, Name: "x"}) {
			t.Errorf("decoded %+v", p)
		}
		return want
	})
	if err := l.Handle(t.Context(), &outbox.Event{Payload: json.RawMessage(`{"n":7,"name":"x"}`)}); err != want {
		t.Fatalf("fn's error came back as %v", err)
	}
}

// TestDispatchInfoNamesTheListener: every reported attempt names its listener, DONE
// (written by the recorder) and RETRY alike; an unroutable event names none.
func TestDispatchInfoNamesTheListener(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Retry: fixedDelay(time.Hour)})
		ok := outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })
		fail := outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return errors.New("no") })
		if err := b.reg.Subscribe(outbox.Subscription{Name: "mailer", EventType: "Good", Listener: ok}); err != nil {
			t.Fatal(err)
		}
		b.listen(t, "Bad", fail) // default name
		b.write(t, newEvent("e1", "Good"), newEvent("e2", "Bad"), newEvent("e3", "Nobody"))
		synctest.Wait()
		got := map[string]string{}
		b.metrics.mu.Lock()
		for _, info := range b.metrics.dispatched {
			got[info.EventType] = info.Listener
		}
		b.metrics.mu.Unlock()
		want := map[string]string{"Good": "mailer", "Bad": outbox.GlobalAggregateType + "/Bad", "Nobody": ""}
		if len(got) != len(want) {
			t.Fatalf("listeners reported %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: listener %q, want %q", k, got[k], v)
			}
		}
	})
}

// TestTypedCodecNilIsJSON: a nil codec decodes with JSONCodec instead of panicking at
// the first delivery.
func TestTypedCodecNilIsJSON(t *testing.T) {
	t.Parallel()
	var got map[string]int
	l := outbox.TypedCodec(nil, func(_ context.Context, _ *outbox.Event, p map[string]int) error {
		got = p
		return nil
	})
	if err := l.Handle(t.Context(), &outbox.Event{Payload: json.RawMessage(`{"n":7}`)}); err != nil || got["n"] != 7 {
		t.Fatalf("Handle = %v, decoded %v", err, got)
	}
}
