package outbox

import "context"

// WriterHook observes and shapes writes: for each batch, BeforeWrite (it may transform
// or suppress the batch; its error aborts the write), the INSERT, AfterWrite, and when
// the transaction ends (through a [*Tx] or an adapter's) AfterCommit or AfterRollback,
// with a context that is never cancelled. Errors and panics after BeforeWrite are only
// logged. Embed [NopWriterHook] to implement only some methods.
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
