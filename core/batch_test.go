package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// batchRecorder is a BatchListener that records each call's event IDs and answers each
// event with errs[ID] (nil when absent).
type batchRecorder struct {
	mu    sync.Mutex
	calls [][]string
	ctxOK []bool // per call: every item's Ctx carried its own event's interceptor value
	errs  map[string]error
	block chan struct{} // when set, HandleBatch waits for it (or ctx)
}

type ctxEventKey struct{}

func (r *batchRecorder) Handle(context.Context, *outbox.Event) error {
	panic("Handle called on a BatchListener")
}

func (r *batchRecorder) HandleBatch(ctx context.Context, items []outbox.BatchItem) []error {
	ids := make([]string, len(items))
	ok := true
	out := make([]error, len(items))
	for i, it := range items {
		ids[i] = it.Event.ID
		if v, _ := it.Ctx.Value(ctxEventKey{}).(string); v != it.Event.ID {
			ok = false
		}
		out[i] = r.errs[it.Event.ID]
	}
	r.mu.Lock()
	r.calls, r.ctxOK = append(r.calls, ids), append(r.ctxOK, ok)
	r.mu.Unlock()
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return slices.Repeat([]error{ctx.Err()}, len(items))
		}
	}
	return out
}

func (r *batchRecorder) got() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// tagEvents is an interceptor that puts the event's ID in its attempt's context and
// records the error each After saw; Before fails for the IDs in failBefore.
type tagEvents struct {
	mu         sync.Mutex
	after      map[string]error
	failBefore map[string]bool
}

func (ic *tagEvents) Before(ctx context.Context, e *outbox.Event) (context.Context, error) {
	if ic.failBefore[e.ID] {
		return nil, errors.New("before failed")
	}
	return context.WithValue(ctx, ctxEventKey{}, e.ID), nil
}

func (ic *tagEvents) After(_ context.Context, e *outbox.Event, err error) error {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.after == nil {
		ic.after = map[string]error{}
	}
	ic.after[e.ID] = err
	return nil
}

// occupy registers a listener for "Blocker" events that blocks the only worker until the
// returned function is called, and writes one such event, so that the events written
// next queue up behind it.
func occupy(t *testing.T, b *dispatchBundle) (release func()) {
	t.Helper()
	g := newGate()
	b.listen(t, "Blocker", g)
	b.write(t, newEvent("blocker", "Blocker"))
	synctest.Wait()
	return g.open
}

// TestBatchListenerTakesQueuedEvents: a worker hands the events of one BatchListener
// subscription queued behind each other to one HandleBatch call, up to BatchSize; an
// event of another subscription queued among them is in its own lane and does not cut
// the batch (it is delivered in its turn, on its own); each event's error decides its
// own fate, and its interceptors see its own context and error.
func TestBatchListenerTakesQueuedEvents(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ic := &tagEvents{}
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1, Retry: fixedDelay(time.Hour), MaxAttempts: 3,
			Interceptors: []outbox.Interceptor{ic}})
		rec := &batchRecorder{errs: map[string]error{
			"b1": errors.New("broker down"),
			"b2": fmt.Errorf("too large: %w", outbox.ErrUnrecoverable),
		}}
		if err := b.reg.Subscribe(outbox.Subscription{EventType: "Batch", Listener: rec, BatchSize: 4}); err != nil {
			t.Fatal(err)
		}
		other := newGate()
		other.open()
		b.listen(t, "Other", other)
		release := occupy(t, b)
		for _, id := range []string{"b0", "b1", "b2"} {
			b.write(t, newEvent(id, "Batch"))
		}
		b.write(t, newEvent("o1", "Other"))
		for _, id := range []string{"b3", "b4", "b5", "b6", "b7", "b8"} {
			b.write(t, newEvent(id, "Batch"))
		}
		release()
		synctest.Wait()
		want := [][]string{{"b0", "b1", "b2", "b3"}, {"b4", "b5", "b6", "b7"}, {"b8"}}
		if got := rec.got(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("HandleBatch calls %v, want %v", got, want)
		}
		for i, ok := range rec.ctxOK {
			if !ok {
				t.Errorf("call %d: an item's Ctx is not its own attempt's", i)
			}
		}
		if got := other.delivered(); !slices.Equal(got, []string{"o1"}) {
			t.Errorf("Other listener got %v", got)
		}
		for id, want := range map[string]outbox.Status{"b0": outbox.StatusDone, "b1": outbox.StatusRetry,
			"b2": outbox.StatusDead, "b8": outbox.StatusDone, "o1": outbox.StatusDone} {
			if got := b.row(t, id); got.Status != want {
				t.Errorf("%s: status %s, want %s", id, got.Status, want)
			}
		}
		if got := b.row(t, "b1"); got.Attempts != 1 || !strings.Contains(got.LastError, "broker down") {
			t.Errorf("b1: attempts %d, last error %q", got.Attempts, got.LastError)
		}
		ic.mu.Lock()
		defer ic.mu.Unlock()
		if ic.after["b0"] != nil || ic.after["b1"] == nil || !errors.Is(ic.after["b2"], outbox.ErrUnrecoverable) {
			t.Errorf("After saw b0 %v, b1 %v, b2 %v; want each event's own error", ic.after["b0"], ic.after["b1"], ic.after["b2"])
		}
	})
}

// TestBatchListenerFailures: a HandleBatch that returns a slice of the wrong length or
// panics fails every event of the call, which are retried; an event whose interceptor
// fails leaves the batch before the call and the others go ahead without it.
func TestBatchListenerFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		handle    func([]outbox.BatchItem) []error
		wantError string
	}{
		{"short", func([]outbox.BatchItem) []error { return nil }, "HandleBatch returned 0 results for 2 events"},
		{"panic", func([]outbox.BatchItem) []error { panic("relay bug") }, "relay bug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ic := &tagEvents{failBefore: map[string]bool{"x1": true}}
				b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1, Retry: fixedDelay(time.Hour), Interceptors: []outbox.Interceptor{ic}})
				var calls [][]string
				bl := batchFunc(func(_ context.Context, items []outbox.BatchItem) []error {
					var ids []string
					for _, it := range items {
						ids = append(ids, it.Event.ID)
					}
					calls = append(calls, ids)
					return tt.handle(items)
				})
				if err := b.reg.Subscribe(outbox.Subscription{EventType: "Batch", Listener: bl}); err != nil {
					t.Fatal(err)
				}
				release := occupy(t, b)
				for _, id := range []string{"x0", "x1", "x2"} {
					b.write(t, newEvent(id, "Batch"))
				}
				release()
				synctest.Wait()
				if want := [][]string{{"x0", "x2"}}; !slices.EqualFunc(calls, want, slices.Equal) {
					t.Fatalf("calls %v, want %v", calls, want)
				}
				for _, id := range []string{"x0", "x2"} {
					if got := b.row(t, id); got.Status != outbox.StatusRetry || !strings.Contains(got.LastError, tt.wantError) {
						t.Errorf("%s: status %s, last error %q; want RETRY with %q", id, got.Status, got.LastError, tt.wantError)
					}
				}
				if got := b.row(t, "x1"); got.Status != outbox.StatusRetry || !strings.Contains(got.LastError, "before failed") {
					t.Errorf("x1: status %s, last error %q; want RETRY after its interceptor failed", got.Status, got.LastError)
				}
			})
		})
	}
}

// TestBatchListenerHardStop: a hard stop while HandleBatch runs cancels its context and
// leaves every event of the batch pending.
func TestBatchListenerHardStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		reg := outbox.NewRegistry()
		d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{Workers: 1, Logger: newLogSink().logger()})
		if err != nil {
			t.Fatal(err)
		}
		rec := &batchRecorder{block: make(chan struct{})}
		if err := reg.Subscribe(outbox.Subscription{EventType: "Batch", Listener: rec}); err != nil {
			t.Fatal(err)
		}
		// The only worker is busy while both events are queued, or it could take h0 alone.
		blocker := newGate()
		if err := reg.Subscribe(outbox.Subscription{EventType: "Blocker", Listener: blocker}); err != nil {
			t.Fatal(err)
		}
		if err := d.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		write := func(events ...outbox.Event) {
			if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: events}); err != nil {
				t.Fatal(err)
			}
			if err := d.WriterHook().AfterCommit(t.Context(), events); err != nil {
				t.Fatal(err)
			}
		}
		write(newEvent("blocker", "Blocker"))
		synctest.Wait()
		events := []outbox.Event{newEvent("h0", "Batch"), newEvent("h1", "Batch")}
		write(events...)
		blocker.open()
		synctest.Wait()
		if got := rec.got(); len(got) != 1 || len(got[0]) != 2 {
			t.Fatalf("calls %v, want one batch of both events", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := d.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the deadline's error", err)
		}
		for _, e := range events {
			if got, _ := store.Event(e.ID); got.Status != outbox.StatusNew || got.Attempts != 0 {
				t.Errorf("%s: status %s attempts %d, want NEW 0", e.ID, got.Status, got.Attempts)
			}
		}
	})
}

// batchFunc adapts a function to BatchListener.
type batchFunc func(context.Context, []outbox.BatchItem) []error

func (f batchFunc) Handle(ctx context.Context, e *outbox.Event) error {
	return f(ctx, []outbox.BatchItem{{Ctx: ctx, Event: e}})[0]
}

func (f batchFunc) HandleBatch(ctx context.Context, items []outbox.BatchItem) []error {
	return f(ctx, items)
}
