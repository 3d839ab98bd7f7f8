package outbox

import (
	"context"
	"database/sql"
	"time"
)

// Executor runs SQL. *sql.DB, *sql.Tx, *sql.Conn and *Tx satisfy it. Writes must go through
// an executor that is inside a transaction; see [Writer.Write].
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var (
	_ Executor = (*sql.DB)(nil)
	_ Executor = (*sql.Tx)(nil)
	_ Executor = (*sql.Conn)(nil)
)

// Store persists events. [NewSQLStore] returns the implementation for PostgreSQL,
// MySQL/MariaDB and SQLite; [github.com/outboxkit/outbox/core/outboxtest] has an
// in-memory one for tests. Every implementation must pass
// [github.com/outboxkit/outbox/core/storetest.Run].
//
// Status updates are fenced: they never change a DONE row, and MarkDone, Reschedule and
// MarkDead report how many rows they changed so a caller can tell a lost race from success.
// Methods that change rows outside the caller's transaction use their own short
// auto-committed statements and never hold a connection longer than one statement.
type Store interface {
	// Insert adds events as NEW rows using exec, which is normally the caller's
	// transaction. All events go in one statement; IDs must be unique.
	Insert(ctx context.Context, exec Executor, events []Event) error
	// MarkDone moves the given rows to DONE and sets done_at. Rows already DONE are left
	// alone. It returns the number of rows changed.
	MarkDone(ctx context.Context, p MarkDoneParams) (int64, error)
	// Reschedule makes a row due again at p.AvailableAt with status p.Status (StatusRetry
	// after a failure, StatusNew after a deferral), records p.LastError and, when
	// p.CountAttempt is set, increments attempts. A DONE row is left alone.
	Reschedule(ctx context.Context, p RescheduleParams) (int64, error)
	// MarkDead moves a row to DEAD with a reason and sets done_at to p.DeadAt;
	// p.CountAttempt increments attempts too. A DONE row is left alone.
	MarkDead(ctx context.Context, p MarkDeadParams) (int64, error)
	// Pending returns due NEW and RETRY rows, oldest first (created_at, then event_id).
	// Rows that cannot be decoded come back in PendingBatch.Undecodable.
	Pending(ctx context.Context, p PendingParams) (PendingBatch, error)
	// Get returns one event by ID, or ErrNotFound.
	Get(ctx context.Context, id string) (Event, error)
	// ListDead returns DEAD events matching the filter in keyset order (created_at,
	// event_id), starting strictly after p.After when it is set.
	ListDead(ctx context.Context, p ListDeadParams) ([]Event, error)
	// CountDead counts DEAD events matching the filter.
	CountDead(ctx context.Context, f DeadFilter) (int64, error)
	// Replay moves DEAD rows back to NEW, due now, with attempts reset and last_error and
	// done_at cleared. Either p.IDs or the filter with p.Limit selects the rows; only DEAD rows
	// change. It returns the number of rows changed.
	Replay(ctx context.Context, p ReplayParams) (int64, error)
	// Purge deletes at most p.Limit DONE and DEAD rows whose done_at (the time they became
	// DONE or DEAD; created_at for rows that have none) is before p.Before, oldest first,
	// and returns how many it deleted.
	Purge(ctx context.Context, p PurgeParams) (int64, error)
	// Stats counts rows per status and finds the oldest due-or-not pending row.
	Stats(ctx context.Context) (Stats, error)
}

// ConnectionChecker is implemented by stores that can verify that their database
// connection is configured the way they need, such as [SQLStore]. [Outbox.Start] calls
// CheckConnection before it starts anything and fails with its error.
type ConnectionChecker interface {
	// CheckConnection returns a *[ConfigError] when the connection is misconfigured, or
	// the error that kept it from checking.
	CheckConnection(ctx context.Context) error
}

// MarkDoneParams are the inputs of [Store.MarkDone].
type MarkDoneParams struct {
	// IDs are the events to mark.
	IDs []string
	// DoneAt is stored as done_at.
	DoneAt time.Time
}

// RescheduleParams are the inputs of [Store.Reschedule].
type RescheduleParams struct {
	ID string
	// Status is StatusRetry after a failed attempt, StatusNew after a deferral.
	Status Status
	// AvailableAt is when the event is due again.
	AvailableAt time.Time
	// CountAttempt increments attempts.
	CountAttempt bool
	// LastError is stored truncated to MaxLastErrorLen bytes; empty keeps the old value.
	LastError string
}

// MarkDeadParams are the inputs of [Store.MarkDead].
type MarkDeadParams struct {
	ID string
	// DeadAt is stored as done_at: the time the row reached a final state, from which
	// purge retention counts. Required.
	DeadAt time.Time
	// Reason is stored as last_error, truncated to MaxLastErrorLen bytes.
	Reason string
	// CountAttempt increments attempts (the delivery that failed for the last time).
	CountAttempt bool
}

// PendingParams are the inputs of [Store.Pending].
type PendingParams struct {
	// Now is the reference time: rows with available_at after Now are not due.
	Now time.Time
	// SkipRecent leaves out rows created after Now-SkipRecent.
	SkipRecent time.Duration
	// Limit bounds the batch. Must be positive.
	Limit int
}

// PendingBatch is what [Store.Pending] returns.
type PendingBatch struct {
	// Events are the decoded due rows, oldest first.
	Events []Event
	// Undecodable are due rows that could not be decoded (for example corrupt headers).
	Undecodable []RowError
}

// RowError reports a row the store could not decode.
type RowError struct {
	EventID string
	Err     error
}

// Error implements error.
func (e RowError) Error() string { return "decode event " + e.EventID + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e RowError) Unwrap() error { return e.Err }

// DeadFilter selects DEAD events. Empty fields match everything.
type DeadFilter struct {
	EventType     string
	AggregateType string
}

// Cursor is a keyset position in the (created_at, event_id) order.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// IsZero reports whether c is the start position.
func (c Cursor) IsZero() bool { return c.ID == "" && c.CreatedAt.IsZero() }

// ListDeadParams are the inputs of [Store.ListDead].
type ListDeadParams struct {
	DeadFilter
	// After is the position of the last event of the previous page; zero starts at the beginning.
	After Cursor
	// Limit bounds the page. Must be positive.
	Limit int
}

// ReplayParams are the inputs of [Store.Replay].
type ReplayParams struct {
	// IDs replays exactly these events (those that are DEAD). When empty, the filter
	// and Limit select the oldest matching DEAD events.
	IDs []string
	DeadFilter
	// Limit bounds a filter replay. Must be positive when IDs is empty.
	Limit int
	// Now becomes available_at of the replayed rows.
	Now time.Time
}

// PurgeParams are the inputs of [Store.Purge].
type PurgeParams struct {
	// Before is the cutoff: rows finished before it are deleted.
	Before time.Time
	// Limit bounds the batch. Must be positive.
	Limit int
}

// Stats summarises the table.
type Stats struct {
	// Counts holds the number of rows per status; statuses with no rows are absent or 0.
	Counts map[Status]int64
	// OldestPending is created_at of the oldest NEW or RETRY row; zero when there is none.
	OldestPending time.Time
}
