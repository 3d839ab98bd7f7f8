package outbox

import "context"

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
