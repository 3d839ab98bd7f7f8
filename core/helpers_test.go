package outbox_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// eventually waits for cond, failing the test after a generous deadline. It checks a
// condition on a real database; it is not a timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 30*time.Second, what, cond)
}

// eventuallyWithin is eventually with a bound of its own, for a wait that a
// configuration bounds (a multiple of its QueryTimeout, say).
func eventuallyWithin(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deliveries records every listener call by event ID.
type deliveries struct {
	mu    sync.Mutex
	calls map[string]int
	order []*outbox.Event
	fn    func(ctx context.Context, e *outbox.Event) error
}

func newDeliveries(fn func(ctx context.Context, e *outbox.Event) error) *deliveries {
	return &deliveries{calls: map[string]int{}, fn: fn}
}

func (d *deliveries) Handle(ctx context.Context, e *outbox.Event) error {
	d.mu.Lock()
	d.calls[e.ID]++
	cp := *e
	d.order = append(d.order, &cp)
	d.mu.Unlock()
	if d.fn != nil {
		return d.fn(ctx, e)
	}
	return nil
}

func (d *deliveries) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.order)
}

func (d *deliveries) of(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[id]
}

func (d *deliveries) seen() []*outbox.Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*outbox.Event(nil), d.order...)
}
