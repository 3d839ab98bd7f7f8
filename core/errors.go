package outbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
)

var (
	// ErrNoTransaction is returned by [Writer.Write] when the executor is not inside a
	// transaction. Nothing is inserted.
	ErrNoTransaction = outboxtype.ErrNoTransaction
	// ErrStopped is the cause (context.Cause) of a listener's context when
	// [Outbox.Stop]'s deadline passes and running deliveries are cancelled.
	ErrStopped = errors.New("outbox: stopped")
	// ErrNotFound is returned when no event has the given ID.
	ErrNotFound = outboxtype.ErrNotFound
	// ErrNotDead is returned by a replay of an event that exists but is not DEAD.
	ErrNotDead = errors.New("outbox: event is not dead")
	// ErrFinished is returned by a discard of an event that is DONE, FALLBACK or
	// DISCARDED already.
	ErrFinished = errors.New("outbox: event is finished")
	// ErrDuplicateListener is returned when a listener is already registered under the
	// same name (by default "AggregateType/EventType").
	ErrDuplicateListener = errors.New("outbox: listener already registered")
	// ErrUnrecoverable is matched by every listener error that ends its event: DEAD at
	// once, the attempt counted (see [Listener]). [Dead] returns such an error, the way
	// to say it in a listener; an error type of your own matches it by wrapping it (as
	// [PayloadError] does), so that it stays a type callers can inspect.
	ErrUnrecoverable = errors.New("outbox: unrecoverable")
	// ErrUnroutable is the reason recorded for an event that no listener handles.
	ErrUnroutable = errors.New("outbox: no listener for event")
	// ErrInvalidEnvelope is matched (errors.Is) by every [EnvelopeError].
	ErrInvalidEnvelope = errors.New("outbox: invalid envelope")
	// ErrInvalidConfig is matched (errors.Is) by every [ConfigError].
	ErrInvalidConfig = outboxtype.ErrInvalidConfig
	// ErrInvalidArgument is wrapped by errors for bad arguments to a call, such as a page
	// limit out of range, or store parameters that fail their Validate method. Nothing
	// runs in that case.
	ErrInvalidArgument = outboxtype.ErrInvalidArgument
	// ErrTxDone is returned by [Writer.Write] through a transaction that has already
	// committed or rolled back (it also matches the driver's sql.ErrTxDone).
	ErrTxDone = outboxtype.ErrTxDone
	// ErrEventTooLarge is returned by a write whose event the database server would
	// refuse as one statement: on MySQL/MariaDB, a row that needs more than the server's
	// max_allowed_packet. The write is refused before any SQL, so the caller's
	// transaction stays usable; the error names the setting and the sizes.
	ErrEventTooLarge = outboxtype.ErrEventTooLarge
	// ErrUnreadableRow is wrapped by the reason of a row that the database stores but
	// cannot return, for example a PostgreSQL jsonb payload whose numbers write out to
	// more than a gigabyte. The poller moves such a row to DEAD, with this reason, the
	// server's error and the stored sizes, so that it cannot stop the other rows.
	ErrUnreadableRow = outboxtype.ErrUnreadableRow
)

// Reasons an envelope is rejected. An [EnvelopeError] wraps exactly one of them.
var (
	ErrEmptyType       = errors.New("event type is required")
	ErrFieldTooLong    = errors.New("field is too long")
	ErrPayloadRequired = errors.New("payload is required")
	ErrInvalidPayload  = errors.New("payload is not valid JSON")
	ErrPayloadTooLarge = errors.New("payload is too large")
	ErrEmptyHeaderKey  = errors.New("header key is empty")
	ErrInvalidText     = errors.New("text is not valid UTF-8 or contains NUL")
	ErrInvalidDelay    = errors.New("invalid delivery delay")
	ErrDuplicateID     = errors.New("event ID is used twice in one batch")
	ErrHeadersTooLarge = errors.New("headers are too large")
	ErrInvalidTime     = errors.New("time is outside the years 1000 to 9999 that every supported database stores")
)

// EnvelopeError reports an envelope that failed validation. It wraps one of the
// ErrEmptyType … ErrInvalidText reasons and matches ErrInvalidEnvelope.
type EnvelopeError struct {
	// Index is the envelope's position in the batch given to WriteAll (0 for Write).
	Index int
	// Field names the offending field, for example "Payload" or "Headers".
	Field string
	// Err is the reason.
	Err error
	// Detail adds context such as the size limit; may be empty.
	Detail string
}

// Error implements error.
func (e *EnvelopeError) Error() string {
	msg := fmt.Sprintf("outbox: envelope %d: %s: %v", e.Index, e.Field, e.Err)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Unwrap returns the reason.
func (e *EnvelopeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalidEnvelope) true.
func (e *EnvelopeError) Is(target error) bool { return target == ErrInvalidEnvelope }

// Defer returns the listener error that puts its event back, due after d, without
// counting an attempt: it is not a failure (the event is not ready yet, a downstream
// asks to wait). The row goes back to NEW; the outcome is [OutcomeDeferred]. A negative
// d is treated as 0. To retry a failure after a delay of your choice, return
// [RetryAfter] instead, which counts the attempt.
func Defer(d time.Duration) error { return &DeferError{Delay: max(d, 0)} }

// DeferError is the error [Defer] returns; find it with errors.As (an [Interceptor]
// tells a deferral from a failure so). A listener may return it wrapped.
type DeferError struct {
	Delay time.Duration
}

// Error implements error.
func (e *DeferError) Error() string { return fmt.Sprintf("deferred for %s", e.Delay) }

// Dead returns the listener error that ends its event: DEAD at once, whatever
// MaxAttempts says, and the attempt counts. err is the reason, recorded as the event's
// last error (nil records "listener reported the event dead"). The error reads as err
// and matches ErrUnrecoverable and err.
func Dead(err error) error { return &deadError{err: err} }

// deadError is the error [Dead] returns.
type deadError struct{ err error }

func (e *deadError) Error() string {
	if e.err == nil {
		return "listener reported the event dead"
	}
	return e.err.Error()
}

func (e *deadError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrUnrecoverable}
	}
	return []error{ErrUnrecoverable, e.err}
}

// RetryAfter returns a listener error that fails the attempt and asks for the retry
// after d instead of the retry policy's backoff. The attempt counts: at MaxAttempts the
// event is DEAD. err is the cause, recorded as the event's last error; it may be nil.
// To wait without counting an attempt, return [Defer] instead.
func RetryAfter(err error, d time.Duration) error { return &RetryAfterError{Delay: d, Err: err} }

// RetryAfterError is the error [RetryAfter] returns; find it with errors.As. A listener
// may return it wrapped.
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

// PanicError is the error recorded when a listener or interceptor panics. The panic is
// recovered and the delivery counts as a failed attempt.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic. It is logged, never stored in the table.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
