package outbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
)

var (
	// ErrNoTransaction is returned by [Writer.Write] when the executor is not inside a transaction.
	ErrNoTransaction = outboxtype.ErrNoTransaction
	// ErrStopped is the cause of a listener's context when [Outbox.Stop]'s deadline passes.
	ErrStopped = outboxtype.ErrStopped
	// ErrNotFound is returned when no event has the given ID.
	ErrNotFound = outboxtype.ErrNotFound
	// ErrNotDead is returned by a replay or delete of an event that exists but is not DEAD.
	ErrNotDead = errors.New("outbox: event is not dead")
	// ErrFinished is returned by a discard of an event that is DONE, FALLBACK or DISCARDED already.
	ErrFinished = errors.New("outbox: event is finished")
	// ErrDuplicateListener is returned when a listener is already registered under the same name.
	ErrDuplicateListener = errors.New("outbox: listener already registered")
	// ErrUnrecoverable is matched by every listener error that makes its event DEAD at once,
	// the attempt counted: [Dead]'s, or an error type of your own that wraps it.
	ErrUnrecoverable = outboxtype.ErrUnrecoverable
	// ErrUnroutable is the reason recorded for an event that no listener handles.
	ErrUnroutable = outboxtype.ErrUnroutable
	// ErrInvalidEnvelope is matched (errors.Is) by every [EnvelopeError].
	ErrInvalidEnvelope = errors.New("outbox: invalid envelope")
	// ErrInvalidConfig is matched (errors.Is) by every [ConfigError].
	ErrInvalidConfig = outboxtype.ErrInvalidConfig
	// ErrInvalidArgument is wrapped by the error of a call with bad arguments; it runs nothing.
	ErrInvalidArgument = outboxtype.ErrInvalidArgument
	// ErrTxDone is returned by [Writer.Write] through an ended transaction (sql.ErrTxDone too).
	ErrTxDone = outboxtype.ErrTxDone
	// ErrEventTooLarge is returned, before any SQL, by a write whose row the server would
	// refuse (MySQL's max_allowed_packet); the caller's transaction stays usable.
	ErrEventTooLarge = outboxtype.ErrEventTooLarge
	// ErrUnreadableRow is wrapped by the reason of a row moved DEAD as unreadable (databases.md).
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

// EnvelopeError reports an invalid envelope. It matches ErrInvalidEnvelope.
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

// Defer returns the listener error that makes its event NEW again, due after d (at least
// 0), without counting an attempt; [RetryAfter] counts it.
func Defer(d time.Duration) error { return &DeferError{Delay: max(d, 0)} }

// Dead returns the listener error that makes its event DEAD at once, the attempt counted,
// with err as its last error; it matches ErrUnrecoverable and err (which may be nil).
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

// RetryAfter returns a listener error that fails the attempt, counted, and retries after d
// instead of the policy's backoff; err, which may be nil, is recorded as the last error.
func RetryAfter(err error, d time.Duration) error { return &RetryAfterError{Delay: d, Err: err} }

// The errors a listener's result is made of (see [Listener]), declared in package
// [outboxtype].
type (
	// DeferError is [Defer]'s error; Delay is when the event is due again.
	DeferError = outboxtype.DeferError
	// RetryAfterError is [RetryAfter]'s error: Delay replaces the backoff.
	RetryAfterError = outboxtype.RetryAfterError
	// PanicError is a recovered panic: a failed attempt; its Stack is only logged.
	PanicError = outboxtype.PanicError
)
