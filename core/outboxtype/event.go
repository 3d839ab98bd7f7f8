package outboxtype

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
)

// Status is the delivery state of an event row. The numeric values are stored in the
// status column and never change.
type Status int

// String returns the status name: "NEW", "DONE", "RETRY", "DEAD", "WAITING",
// "FALLBACK" or "DISCARDED".
func (s Status) String() string {
	switch s {
	case StatusNew:
		return "NEW"
	case StatusDone:
		return "DONE"
	case StatusRetry:
		return "RETRY"
	case StatusDead:
		return "DEAD"
	case StatusWaiting:
		return "WAITING"
	case StatusFallback:
		return "FALLBACK"
	case StatusDiscarded:
		return "DISCARDED"
	default:
		return "UNKNOWN"
	}
}

// Event is one stored outbox row, as listeners, the dead-event manager and stores see it.
// Times are in UTC. A listener must not modify the event it is given.
type Event struct {
	// ID is the event's unique identifier: a ULID unless the writer's caller set one.
	ID string
	// Type is the event type, for example "OrderPlaced".
	Type string
	// AggregateType names the kind of entity the event is about. It is never empty:
	// events written without one carry GlobalAggregateType.
	AggregateType string
	// AggregateID identifies the entity. Optional.
	AggregateID string
	// TenantID is pass-through metadata. Optional.
	TenantID string
	// Payload is the event body, a valid JSON document, marshalled once at write time.
	Payload json.RawMessage
	// Headers is string metadata. Nil when the event has none.
	Headers map[string]string
	// Status is the row's delivery state.
	Status Status
	// Attempts counts failed deliveries (deferrals do not count).
	Attempts int
	// LastError is the last failure's reason (at most MaxLastErrorLen bytes).
	LastError string
	// CreatedAt is when the event occurred (outbox.Envelope.OccurredAt).
	CreatedAt time.Time
	// AvailableAt is the earliest time the event may be delivered.
	AvailableAt time.Time
	// DoneAt is when the row became DONE, DEAD or FALLBACK; zero while it is pending.
	DoneAt time.Time
	// FirstAttemptAt is when the first failed attempt was recorded (by the database
	// clock); zero if none has failed, or since a replay.
	FirstAttemptAt time.Time
	// OrderKey is the key of an ordered event (outbox.Envelope.OrderKey), or "".
	OrderKey string
	// OrderSeq is an ordered event's place in its key (commit order), or 0.
	OrderSeq int64
	// LockedBy is the claim token ("<node ID>/<ULID>") in outbox.MultiNode mode, or "".
	LockedBy string
	// LockedUntil is when the claim expires: the database's value from a store, this
	// node's conservative estimate (comparable with time.Now) in the copy a listener gets.
	LockedUntil time.Time
	// Listener names the subscription this row is for, or "". A fan-out delivery (one
	// row per listener of an event that has several, docs/listeners.md) has it from its
	// insert and goes to that listener alone; any other row gets it when its listener
	// fails for good (DEAD or FALLBACK), so that a replay re-runs that listener only.
	Listener string
}

// Executor runs SQL. *sql.DB, *sql.Tx, *sql.Conn and *Tx satisfy it. Writes must go through
// an executor that is inside a transaction; see outbox.Writer.Write.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// RowError reports a row the store could not decode, or could not read at all (Err
// then wraps [ErrUnreadableRow]).
type RowError struct {
	EventID string
	Err     error
}

// Error implements error.
func (e RowError) Error() string {
	if errors.Is(e.Err, ErrUnreadableRow) {
		return "read event " + e.EventID + ": " + e.Err.Error()
	}
	return "decode event " + e.EventID + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e RowError) Unwrap() error { return e.Err }

// DeadFilter selects DEAD events. Empty fields match everything.
type DeadFilter struct {
	EventType     string
	AggregateType string
	Listener      string // the subscription whose delivery failed (Event.Listener)
}

// Cursor is a keyset position in a list's order: (time, event_id), or in a list by
// [EventFilter.OrderKey] (OrderSeq, event_id). [ListCursor] returns the one after an event.
// The poller's read (Store.Pending) goes by (AvailableAt, CreatedAt, ID); there a zero
// CreatedAt and ID stand for the start of AvailableAt.
type Cursor struct {
	CreatedAt   time.Time
	ID          string
	OrderSeq    int64     // in a list by order key, instead of CreatedAt
	AvailableAt time.Time // in the poller's read, compared first
}

// IsZero reports whether c is the start position.
func (c Cursor) IsZero() bool {
	return c.ID == "" && c.CreatedAt.IsZero() && c.OrderSeq == 0 && c.AvailableAt.IsZero()
}

// Stats summarises the table.
type Stats struct {
	// Counts holds the number of rows per status; statuses with no rows are absent or 0.
	Counts map[Status]int64
	// OldestPending is created_at of the oldest NEW or RETRY row; zero when there is none.
	OldestPending time.Time
	BlockedKeys   int64     // keys whose WAITING events wait behind a RETRY or DEAD one
	OldestBlocked time.Time // created_at of the oldest of those, or zero
}

// Limits on stored fields, in bytes: the column sizes of the shipped DDL. Envelope
// fields over their limit are rejected; a longer last error is truncated.
const (
	MaxIDLen            = check.IDLen
	MaxTypeLen          = 128
	MaxAggregateTypeLen = 64
	MaxAggregateIDLen   = 128
	MaxTenantIDLen      = 64
	MaxOrderKeyLen      = 255
	MaxListenerLen      = 255  // Subscription.Name, Event.Listener
	MaxClaimTokenLen    = 128  // Event.LockedBy, ClaimParams.Token
	MaxLastErrorLen     = 4000 // Event.LastError
	// MaxHeadersBytes bounds an envelope's headers: the bytes of all keys and values
	// together. The check runs before any SQL, so that a header that the database
	// cannot take never reaches it (on MySQL/MariaDB a statement larger than
	// max_allowed_packet resets the connection, and the caller's transaction with it).
	MaxHeadersBytes = 64 << 10
)

// The statuses of an event row.
const (
	StatusNew     Status = 0 // waiting for its first delivery, or put back by a deferral or replay
	StatusDone    Status = 1 // the listener succeeded; terminal
	StatusRetry   Status = 2 // the last delivery failed; due again at AvailableAt
	StatusDead    Status = 3 // not delivered again unless replayed
	StatusWaiting Status = 4 // ordered, behind an earlier event of its key; NEW once it is first
	// StatusFallback: the listener failed for good and its outbox.Subscription.Fallback
	// handled the event; terminal, purged like DONE and DEAD, and it lets its order key
	// move on like DONE.
	StatusFallback Status = 5
	// StatusDiscarded: an operator discarded the event (outbox.Events.Discard); final,
	// never delivered, kept until the purge (as DEAD rows are) and releasing its order key.
	StatusDiscarded Status = 6
)

var (
	_ Executor = (*sql.DB)(nil)
	_ Executor = (*sql.Tx)(nil)
	_ Executor = (*sql.Conn)(nil)
)

// ListsByFinish reports whether the list of the events of status st that f selects is
// in the order of their finish time (done_at): the lists of DONE, FALLBACK and
// DISCARDED events, unless f.AggregateID is set (an aggregate's list is in creation
// order). Other lists are in creation order (created_at).
func (f EventFilter) ListsByFinish(st Status) bool {
	return f.AggregateID == "" && (st == StatusDone || st == StatusFallback || st == StatusDiscarded)
}

// InKeyOrder reports whether events of status s are in their key's order index: NEW,
// RETRY, DEAD and WAITING ones, those that a list by [EventFilter.OrderKey] shows. The
// others have left their key.
func (s Status) InKeyOrder() bool {
	return s == StatusNew || s == StatusRetry || s == StatusDead || s == StatusWaiting
}
