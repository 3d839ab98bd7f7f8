package outbox

import (
	"context"
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/notify"
)

// WriterHook runs around each batch written: BeforeWrite may transform or suppress it
// (its error aborts the write), then AfterWrite, and AfterCommit or AfterRollback when a
// [*Tx] or an adapter's transaction ends, under a context never cancelled. Later errors
// and panics are only logged.
type WriterHook interface {
	BeforeWrite(ctx context.Context, envs []Envelope) ([]Envelope, error)
	AfterWrite(ctx context.Context, events []Event) error
	AfterCommit(ctx context.Context, events []Event) error
	AfterRollback(ctx context.Context, events []Event) error
}

// NopWriterHook is a WriterHook that does nothing; embed it to pick methods.
type NopWriterHook struct{}

var _ WriterHook = NopWriterHook{}

func (NopWriterHook) BeforeWrite(_ context.Context, envs []Envelope) ([]Envelope, error) {
	return envs, nil
}

func (NopWriterHook) AfterWrite(context.Context, []Event) error { return nil }

func (NopWriterHook) AfterCommit(context.Context, []Event) error { return nil }

func (NopWriterHook) AfterRollback(context.Context, []Event) error { return nil }

// notifyHook signals the notifier after each commit with a due event (WriterOnly mode).
type notifyHook struct {
	NopWriterHook
	n   *notify.Notifier
	now func() time.Time
}

func (h notifyHook) AfterCommit(_ context.Context, events []Event) error {
	now := h.now()
	for i := range events {
		if !events[i].AvailableAt.After(now) {
			h.n.Signal()
			break
		}
	}
	return nil
}

// hotHook is the hot path as a writer hook: after commit it queues the committed events
// (dispatch.HotPath.AfterCommit); after a rollback it gives back their pre-claims.
type hotHook struct {
	NopWriterHook
	h *dispatch.HotPath
}

func (k hotHook) AfterCommit(ctx context.Context, events []Event) error {
	return k.h.AfterCommit(ctx, events)
}

func (k hotHook) AfterRollback(ctx context.Context, events []Event) error {
	return k.h.AfterRollback(ctx, events)
}
