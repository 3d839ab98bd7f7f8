package outbox

import "context"

// WriterHook observes and shapes writes. The writer calls, for each WriteAll batch:
// BeforeWrite (may transform the batch, or suppress it by returning no envelopes; an error
// aborts the write), then the INSERT, then AfterWrite, and after the transaction ends
// either AfterCommit or AfterRollback. Errors and panics from AfterWrite, AfterCommit and
// AfterRollback are logged and never reach the caller. Embed [NopWriterHook] to implement
// only some methods.
//
// AfterCommit and AfterRollback run only through a [*Tx] or an adapter's transaction,
// with a context that keeps the write's values but is never cancelled.
type WriterHook interface {
	BeforeWrite(ctx context.Context, envs []Envelope) ([]Envelope, error)
	AfterWrite(ctx context.Context, events []Event) error
	AfterCommit(ctx context.Context, events []Event) error
	AfterRollback(ctx context.Context, events []Event) error
}

// NopWriterHook implements [WriterHook] and does nothing (BeforeWrite returns the
// envelopes unchanged); embed it to implement only some methods.
type NopWriterHook struct{}

var _ WriterHook = NopWriterHook{}

func (NopWriterHook) BeforeWrite(_ context.Context, envs []Envelope) ([]Envelope, error) {
	return envs, nil
}

func (NopWriterHook) AfterWrite(context.Context, []Event) error { return nil }

func (NopWriterHook) AfterCommit(context.Context, []Event) error { return nil }

func (NopWriterHook) AfterRollback(context.Context, []Event) error { return nil }
