package outboxtype

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/outboxkit/outbox/core/internal/check"
)

// from audit.go

// The actions of the audit trail.
const (
	AuditReplay    = "replay"     // DEAD events replayed by ID
	AuditReplayAll = "replay-all" // DEAD events replayed by filter
	AuditDelete    = "delete"     // DEAD events deleted
	AuditDiscard   = "discard"    // events discarded
)

// AuditEntry is one row of the audit trail: a change made through [DeadEvents].
type AuditEntry struct {
	ID     string    // a ULID: entries sort by time
	At     time.Time // when the change finished
	Actor  string    // who made it ([WithActor]); "unknown" when nobody was named
	Action string    // AuditReplay, AuditReplayAll, AuditDelete or AuditDiscard
	Target string    // the event IDs, comma-separated, or the filter
	Count  int64     // how many events it changed
}

// AuditError is the error of a change of [DeadEvents] whose audit entry could not be
// written; errors.As finds it.
type AuditError struct {
	// Action is the change: AuditReplay, AuditReplayAll, AuditDelete or AuditDiscard.
	Action string
	// Recorded is how many events a replay-all changed, and recorded, in the batches
	// before the one whose entry failed.
	Recorded int64
	// Unrecorded is how many events the change made that the trail lacks: always 0 with
	// an [AuditedStore], which rolls the change back with its entry.
	Unrecorded int64
	// Reason says why without internal details, fit to show an operator: "the audit
	// table does not exist", "no permission to write the audit table" or "a database
	// error".
	Reason string
	// Err is the store's error.
	Err error
}

// Error implements error.
func (e *AuditError) Error() string {
	msg := "outbox: " + e.Action + ": the audit trail could not be written (" + e.Reason + "): " + fmt.Sprint(e.Err)
	if e.Unrecorded > 0 {
		return msg + fmt.Sprintf("; %d events were changed and are not recorded", e.Unrecorded)
	}
	if e.Recorded > 0 {
		return msg + fmt.Sprintf("; %d events were changed and recorded before, the rest were not changed", e.Recorded)
	}
	return msg + "; nothing was changed"
}

// Unwrap returns the store's error.
func (e *AuditError) Unwrap() error { return e.Err }

// from browse.go

// MaxErrorSearchLen bounds [EventFilter.ErrorContains].
const MaxErrorSearchLen = 256

// EventFilter narrows the lists of [DeadEvents.Events]. Empty fields match every event.
type EventFilter struct {
	EventType     string
	AggregateType string
	// AggregateID selects one aggregate's events, through the aggregate index.
	AggregateID string
	// Listener matches Event.Listener (a fan-out delivery's subscription, or the listener
	// that failed for good).
	Listener string
	// ErrorContains matches events whose last error contains it, ignoring case by
	// Unicode simple case folding, as strings.EqualFold compares ("É" matches "é", "K"
	// matches the Kelvin sign), without folding accents ("e" does not match "é") or
	// expanding letters ("ß" does not match "ss"): the same on every database, whatever
	// its collation ([EventFilter.MatchesError]). At most MaxErrorSearchLen bytes.
	ErrorContains string
	// OrderKey selects one order key's NEW, RETRY, DEAD or WAITING events, in the key's
	// order (OrderSeq, then ID), through the order index; not with AggregateID, From or
	// To. Its cursors hold OrderSeq ([ListCursor]). At most MaxOrderKeyLen bytes.
	OrderKey string
	// Blocking selects the RETRY or DEAD events that hold their order key: WAITING
	// events of the key wait behind them (a DEAD one only while nothing of its key is
	// NEW or RETRY, as under DeadKeyWaits). Only with those two statuses.
	Blocking bool
	// From (inclusive) and To (exclusive) bound the list's time (see [EventQuery]); a
	// zero time leaves that side open.
	From, To time.Time
}

// TypeCount is the number of events of one status and event type.
type TypeCount struct {
	Status    Status
	EventType string
	Count     int64
}

// Validate reports whether f can be used; the error matches [ErrInvalidArgument].
func (f EventFilter) Validate() error {
	for _, c := range [...]struct {
		name, value string
		limit       int
	}{
		{"EventType", f.EventType, MaxTypeLen}, {"AggregateType", f.AggregateType, MaxAggregateTypeLen},
		{"AggregateID", f.AggregateID, MaxAggregateIDLen}, {"Listener", f.Listener, MaxListenerLen},
		{"ErrorContains", f.ErrorContains, MaxErrorSearchLen}, {"OrderKey", f.OrderKey, MaxOrderKeyLen},
	} {
		if len(c.value) > c.limit {
			return check.Invalid("event filter", "%s is %d bytes, limit %d", c.name, len(c.value), c.limit)
		}
		if !check.ValidText(c.value) {
			return check.Invalid("event filter", "%s is not valid UTF-8 or contains NUL", c.name)
		}
	}
	for _, t := range [...]time.Time{f.From, f.To} {
		if y := t.UTC().Year(); !t.IsZero() && (y < 1000 || y > 9999) {
			return check.Invalid("event filter", "time %s is outside the years 1000 to 9999 that every database holds", t.Format(time.RFC3339Nano))
		}
	}
	if f.OrderKey != "" && (f.AggregateID != "" || !f.From.IsZero() || !f.To.IsZero()) {
		return check.Invalid("event filter", "OrderKey does not go with AggregateID, From or To: a key's list is in the key's order")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return check.Invalid("event filter", "From %s is not before To %s", f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
	}
	return nil
}

// MatchesError reports whether lastError matches f.ErrorContains: it holds the text
// under Unicode simple case folding (see [EventFilter.ErrorContains]). An empty
// ErrorContains matches everything.
func (f EventFilter) MatchesError(lastError string) bool {
	sub := f.ErrorContains
	if sub == "" {
		return true
	}
	for i := range lastError {
		if hasPrefixFold(lastError[i:], sub) {
			return true
		}
	}
	return false
}

// hasPrefixFold reports whether s begins with prefix under Unicode simple case folding.
func hasPrefixFold(s, prefix string) bool {
	for _, p := range prefix {
		r, size := utf8.DecodeRuneInString(s)
		if size == 0 || !equalFoldRune(r, p) {
			return false
		}
		s = s[size:]
	}
	return true
}

// equalFoldRune reports whether a and b are equal under Unicode simple case folding.
func equalFoldRune(a, b rune) bool {
	if a == b {
		return true
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}

// from count.go

// EventCount is a count bounded by MaxCountRows.
type EventCount struct {
	// N is the number of events counted.
	N int64
	// AtLeast is set when the count stopped after MaxCountRows rows of its index with
	// more rows left: there are N events or more (N is MaxCountRows when every row read
	// was counted).
	AtLeast bool
}

// GroupCount is the number of events of one aggregate type, event type and listener
// ("" for an event that names none) among the events a count counted.
type GroupCount struct {
	AggregateType string
	EventType     string
	Listener      string
	N             int64
}

// EventCounts is the answer of [DeadEvents.CountEvents].
type EventCounts struct {
	EventCount
	// Groups are the counts per aggregate type, event type and listener of the events
	// counted (with AtLeast, of those only), largest first; nil unless asked for.
	Groups []GroupCount
}

// BlockedKeys is the answer of [EventCountStore.CountBlockedKeys].
type BlockedKeys struct {
	// EventCount counts the order keys whose WAITING events wait behind a RETRY or DEAD
	// event (as [Stats.BlockedKeys]) among the rows read; AtLeast when rows were left.
	EventCount
	// Oldest is the created_at of the oldest event that holds one of them; zero if none.
	Oldest time.Time
}

// from envelope.go

// from event.go

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
	// CreatedAt is when the event occurred ([Envelope.OccurredAt]).
	CreatedAt time.Time
	// AvailableAt is the earliest time the event may be delivered.
	AvailableAt time.Time
	// DoneAt is when the row became DONE, DEAD or FALLBACK; zero while it is pending.
	DoneAt time.Time
	// FirstAttemptAt is when the first failed attempt was recorded (by the database
	// clock); zero if none has failed, or since a replay.
	FirstAttemptAt time.Time
	// OrderKey is the key of an ordered event ([Envelope.OrderKey]), or "".
	OrderKey string
	// OrderSeq is an ordered event's place in its key (commit order), or 0.
	OrderSeq int64
	// LockedBy is the claim token ("<node ID>/<ULID>") in [MultiNode] mode, or "".
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

// from params.go

// Validate reports whether each field is text a row can hold (valid UTF-8, no NUL,
// within the column's length); the error matches [ErrInvalidArgument].
func (f DeadFilter) Validate() error {
	for _, c := range [...]struct {
		name, value string
		limit       int
	}{{"EventType", f.EventType, MaxTypeLen}, {"AggregateType", f.AggregateType, MaxAggregateTypeLen}, {"Listener", f.Listener, MaxListenerLen}} {
		if len(c.value) > c.limit {
			return check.Invalid("dead filter", "%s is %d bytes, limit %d", c.name, len(c.value), c.limit)
		}
		if !check.ValidText(c.value) {
			return check.Invalid("dead filter", "%s is not valid UTF-8 or contains NUL", c.name)
		}
	}
	return nil
}

// from store.go

// Executor runs SQL. *sql.DB, *sql.Tx, *sql.Conn and *Tx satisfy it. Writes must go through
// an executor that is inside a transaction; see [Writer.Write].
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
type Cursor struct {
	CreatedAt time.Time
	ID        string
	OrderSeq  int64 // in a list by order key, instead of CreatedAt
}

// IsZero reports whether c is the start position.
func (c Cursor) IsZero() bool { return c.ID == "" && c.CreatedAt.IsZero() && c.OrderSeq == 0 }

// Stats summarises the table.
type Stats struct {
	// Counts holds the number of rows per status; statuses with no rows are absent or 0.
	Counts map[Status]int64
	// OldestPending is created_at of the oldest NEW or RETRY row; zero when there is none.
	OldestPending time.Time
	BlockedKeys   int64     // keys whose WAITING events wait behind a RETRY or DEAD one
	OldestBlocked time.Time // created_at of the oldest of those, or zero
}

// from audit.go

// from defaults.go

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

// from dialect_admin.go

// from event.go

// The statuses of an event row.
const (
	StatusNew     Status = 0 // waiting for its first delivery, or put back by a deferral or replay
	StatusDone    Status = 1 // the listener succeeded; terminal
	StatusRetry   Status = 2 // the last delivery failed; due again at AvailableAt
	StatusDead    Status = 3 // not delivered again unless replayed
	StatusWaiting Status = 4 // ordered, behind an earlier event of its key; NEW once it is first
	// StatusFallback: the listener failed for good and its [Subscription.Fallback]
	// handled the event; terminal, purged like DONE and DEAD, and it lets its order key
	// move on like DONE.
	StatusFallback Status = 5
	// StatusDiscarded: an operator discarded the event ([DeadEvents.Discard]); final,
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

// from browse.go

// ListTime is the time event e has in the list of q's status and filter: the key of
// that list's order, which a Cursor holds (but in a list by OrderKey, see ListCursor).
func ListTime(e Event, st Status, f EventFilter) time.Time {
	if f.ListsByFinish(st) && !e.DoneAt.IsZero() {
		return e.DoneAt
	}
	return e.CreatedAt
}

// ListCursor is the cursor that continues the list of st and f after event e: its
// ListTime and ID, or in a list by OrderKey its OrderSeq and ID.
func ListCursor(e Event, st Status, f EventFilter) Cursor {
	if f.OrderKey != "" {
		return Cursor{OrderSeq: e.OrderSeq, ID: e.ID}
	}
	return Cursor{CreatedAt: ListTime(e, st, f), ID: e.ID}
}

// from errors.go

// ConfigError reports an invalid configuration value. It matches ErrInvalidConfig.
type ConfigError struct {
	// Field is the configuration field, for example "Workers".
	Field string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return "outbox: invalid config: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
