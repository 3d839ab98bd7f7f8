package outboxtype

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The errors of delivery, which package outbox declares under the same names.
var (
	// ErrStopped is the cause (context.Cause) of a listener's context when a stop's
	// deadline passes.
	ErrStopped = errors.New("outbox: stopped")
	// ErrUnrecoverable is matched by every listener error that makes its event DEAD at
	// once, the attempt counted.
	ErrUnrecoverable = errors.New("outbox: unrecoverable")
	// ErrUnroutable is the reason recorded for an event that no listener handles.
	ErrUnroutable = errors.New("outbox: no listener for event")
)

// DeferError is the listener error that makes its event NEW again, due after Delay,
// without counting an attempt. Find it with errors.As.
type DeferError struct {
	Delay time.Duration
}

// Error implements error.
func (e *DeferError) Error() string { return fmt.Sprintf("deferred for %s", e.Delay) }

// RetryAfterError is the listener error that fails the attempt, counted, and retries
// after Delay instead of the policy's backoff; Err, which may be nil, is recorded as the
// last error. Find it with errors.As.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

// Error implements error.
func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.Delay)
	}
	return fmt.Sprintf("retry after %s: %v", e.Delay, e.Err)
}

// Unwrap returns the underlying error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// PanicError is a recovered listener or interceptor panic: a failed attempt.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic. It is logged, never stored in the table.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// BatchItem is one event of a batch with its attempt's context: what a batch listener's
// HandleBatch gets, one per event.
type BatchItem struct {
	Ctx   context.Context
	Event *Event
}

// Failure is what a subscription's fallback gets: the delivery that is about to become
// DEAD.
type Failure struct {
	Event          *Event
	Listener       string    // the subscription's name
	Attempts       int       // failed attempts, the last one included
	Err            error     // the last attempt's error
	FirstAttemptAt time.Time // when the first failed attempt ended
	LastAttemptAt  time.Time // when the last one ended
}
