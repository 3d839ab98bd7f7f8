package outboxtest

import (
	"context"
	"sync"

	outbox "github.com/outboxkit/outbox/core"
)

// RecordingListener is an [outbox.Listener] that records a copy of every event it
// handles, in order, then returns what Func returns (nil when Func is nil). It is safe
// for concurrent use. The zero value records and succeeds.
type RecordingListener struct {
	// Func, when set, decides the outcome of each delivery. It is called after the event
	// is recorded.
	Func func(ctx context.Context, e *outbox.Event) error

	mu     sync.Mutex
	events []outbox.Event
}

var _ outbox.Listener = (*RecordingListener)(nil)

// Handle records e and calls Func.
func (l *RecordingListener) Handle(ctx context.Context, e *outbox.Event) error {
	l.mu.Lock()
	l.events = append(l.events, clone(*e))
	l.mu.Unlock()
	if l.Func == nil {
		return nil
	}
	return l.Func(ctx, e)
}

// Events returns copies of the events handled so far, in delivery order.
func (l *RecordingListener) Events() []outbox.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]outbox.Event, len(l.events))
	for i, e := range l.events {
		out[i] = clone(e)
	}
	return out
}

// IDs returns the IDs of the events handled so far, in delivery order; an event
// delivered twice appears twice.
func (l *RecordingListener) IDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, len(l.events))
	for i, e := range l.events {
		ids[i] = e.ID
	}
	return ids
}

// Count returns the number of deliveries so far.
func (l *RecordingListener) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// Reset forgets the recorded deliveries.
func (l *RecordingListener) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = nil
}
