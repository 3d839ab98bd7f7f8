package storage

import (
	"context"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// Store persists events: the delivery core that every backend implements. outbox.NewSQLStore
// returns the implementation for PostgreSQL, MySQL/MariaDB and SQLite;
// [github.com/outboxkit/outbox/core/outboxtest] has an in-memory one for tests. Optional
// interfaces are found by type assertion: [ClaimStore] (required by outbox.MultiNode mode),
// [DeadStore] (for outbox.Events), [StatsStore], [LeaseStore] and [ConnectionChecker]. Every store must
// pass [github.com/outboxkit/outbox/core/storetest.Run].
//
// Status updates are fenced: they never change a DONE row, under claims they change a
// row only while its locked_by holds the update's token, and they report the rows
// changed, so a caller can tell a lost race from success. Every outcome clears the
// claim. Methods other than Insert use their own short statements.
type Store interface {
	// Insert adds p.Events as NEW rows in one statement through exec (the caller's
	// transaction); an event with LockedBy set is claimed until database now + p.ClaimTTL.
	// An event whose ID is a row is skipped (the transaction stays usable) and reported,
	// unless p.NewIDs says none can be. An [OrderStore] stores ordered events WAITING
	// (see there) and sets OrderSeq, Status.
	Insert(ctx context.Context, exec outboxtype.Executor, p InsertParams) (InsertResult, error)
	// Get returns one event by ID, or an error matching [outboxtype.ErrNotFound].
	Get(ctx context.Context, id string) (outboxtype.Event, error)
	// Pending returns due NEW and RETRY rows, claimed or not, due longest first
	// (available_at, created_at, event_id); undecodable rows come back in
	// PendingBatch.Undecodable.
	Pending(ctx context.Context, p PendingParams) (PendingBatch, error)
	// MarkDone moves the rows to DONE, sets done_at and clears the claim, except rows
	// already DONE or fenced out by p.Token/p.Tokens; it returns the rows changed.
	MarkDone(ctx context.Context, p MarkDoneParams) (int64, error)
	// Reschedule makes a row p.Status and due at p.AvailableAt, records p.LastError,
	// clears the claim and counts an attempt if asked; fenced as MarkDone.
	Reschedule(ctx context.Context, p RescheduleParams) (int64, error)
	// MarkDead moves a row to DEAD with p.Reason and done_at p.DeadAt, clears the claim
	// and counts an attempt if asked; fenced as MarkDone.
	MarkDead(ctx context.Context, p MarkDeadParams) (int64, error)
	// Purge deletes at most p.Limit rows and returns how many: DONE and DEAD rows
	// finished (done_at, else created_at) before p.Before, oldest first; then, when they
	// are fewer and p.UndeliveredBefore is set, NEW and RETRY rows, then WAITING rows,
	// created before it, each oldest first (created_at, event_id).
	Purge(ctx context.Context, p PurgeParams) (int64, error)
}

// ClaimStore is implemented by a [Store] that can claim rows for one node, as outbox.MultiNode mode needs
// (outbox.New rejects a store without it in that mode).
//
// Claims are decided by the database clock alone (Insert of a pre-claimed row too), so
// nodes whose clocks disagree neither steal live claims nor wait for expired ones.
type ClaimStore interface {
	// Claim atomically claims for p.Token, until database now + p.TTL, at most p.Limit
	// due NEW and RETRY rows (available_at <= now, created_at <= now - p.SkipRecent)
	// that are unclaimed or whose claim expired, due longest first (available_at,
	// created_at, event_id), and returns them in that order with LockedBy and
	// LockedUntil set. Rows locked by a concurrent transaction are skipped, never waited
	// for. Undecodable rows are claimed too, in PendingBatch.Undecodable.
	Claim(ctx context.Context, p ClaimParams) (PendingBatch, error)
	// RenewClaim extends p.Token's claim on the NEW or RETRY row p.ID to database now +
	// p.TTL and returns 1, or 0 when p.Token no longer holds it (an expired claim that
	// nobody took over is still held).
	RenewClaim(ctx context.Context, p RenewClaimParams) (int64, error)
}

// OrderStore is implemented by a [Store] that keeps ordered events in order
// (docs/ordering.md): Insert numbers them under a lock on their key held until the
// transaction ends and stores them WAITING, or NEW (claimed if asked) when nothing of
// their key is left; Promote makes a key's next event NEW.
type OrderStore interface {
	// Promote makes the lowest WAITING event of each key NEW, due from now (database
	// clock) unless its available_at is later, unless the key has a NEW or RETRY event,
	// or a DEAD one and p.DeadBlocks. On an error the result holds what the statements
	// that succeeded did.
	Promote(ctx context.Context, p PromoteParams) (PromoteResult, error)
}

// PromoteParams are the inputs of [OrderStore.Promote].
type PromoteParams struct {
	Keys       []string // the keys; empty: any keys, at most Limit
	IDs        []string // when set instead of Keys: only these events, each if it is next
	DeadBlocks bool
	Limit      int
	Token      string        // when set, the promoted events are claimed by it
	TTL        time.Duration // how long the Token's claim lasts, from the database's time
	Read       bool          // return the promoted rows, as stored now
}

// PromoteResult is what [OrderStore.Promote] did: how many events it made NEW and, with
// Read, those rows (a row that changed again before a separate read, MySQL's, may miss).
type PromoteResult struct {
	Promoted    int64
	Events      []outboxtype.Event
	Undecodable []outboxtype.RowError
}

// DeadStore is implemented by a [Store] that can list, count and replay DEAD events, for
// outbox.Events. Without it those methods return an error matching
// errors.ErrUnsupported.
type DeadStore interface {
	// ListDead returns DEAD events matching the filter in keyset order (created_at,
	// event_id), starting strictly after p.After when it is set.
	ListDead(ctx context.Context, p ListDeadParams) ([]outboxtype.Event, error)
	// CountDead counts DEAD events matching the filter.
	CountDead(ctx context.Context, f outboxtype.DeadFilter) (int64, error)
	// Replay moves DEAD rows back to NEW, due now, with attempts reset and last_error,
	// done_at and the claim cleared. Either p.IDs or the filter with p.Limit selects the
	// rows; only DEAD rows change. It returns the number of rows changed.
	Replay(ctx context.Context, p ReplayParams) (int64, error)
	// DeleteDead deletes the DEAD rows among ids and returns how many.
	DeleteDead(ctx context.Context, ids []string) (int64, error)
}

// DiscardStore is implemented by a [Store] that can discard events, for
// outbox.Events.Discard. Without it Discard returns an error matching
// errors.ErrUnsupported.
type DiscardStore interface {
	// Discard makes the rows among ids that are NEW, RETRY, DEAD or WAITING DISCARDED,
	// finished at at, their claims cleared, and returns how many it changed.
	Discard(ctx context.Context, ids []string, at time.Time) (int64, error)
}

// FanOutStore is implemented by a [Store] that can split events into one delivery row
// per listener (fan-out, docs/listeners.md). Without it an event with several listeners
// is DEAD with an error matching errors.ErrUnsupported.
type FanOutStore interface {
	// FanOut splits p.Events in one transaction: each event is marked DONE (or deleted,
	// p.Delete), fenced by its own Token as MarkDone is, and the deliveries of the events
	// that changed are inserted as Insert inserts events (rows whose ID exists are skipped
	// and reported). An event the fence keeps is left alone and its deliveries are not
	// inserted; either the whole split is written or nothing.
	FanOut(ctx context.Context, p FanOutParams) (FanOutResult, error)
}

// FanOutParams are the inputs of [FanOutStore.FanOut].
type FanOutParams struct {
	// Events are the events to split, no ID twice.
	Events []FanOutEvent
	// DoneAt is stored as the events' done_at.
	DoneAt time.Time
	// Delete deletes the events instead of marking them DONE (outbox.Config.DeleteDone).
	Delete bool
	// ClaimTTL is how long the deliveries with LockedBy set stay claimed, counted from
	// the database's current time; see [InsertParams.ClaimTTL].
	ClaimTTL time.Duration
}

// FanOutEvent is one event of a [FanOutParams].
type FanOutEvent struct {
	// ID is the event being split.
	ID string
	// Token, when set, fences the event by claim; see [MarkDoneParams.Token].
	Token string
	// Deliveries are its rows to insert, one per listener, each with Listener set (and
	// an ID of its own, outbox.DeliveryID); ordered ones are numbered in their keys, those with
	// LockedBy claimed for ClaimTTL.
	Deliveries []outboxtype.Event
}

// FanOutResult is what [FanOutStore.FanOut] did.
type FanOutResult struct {
	// Split are the IDs of the events that changed, whose deliveries are rows now.
	Split []string
	// Existing are the deliveries that were rows already (an earlier split interrupted
	// before its outcome was known), in order.
	Existing []string
}

// StatsStore is implemented by a [Store] that can count rows per status, for outbox.Events.Stats and
// the metrics that read it. Without it Stats returns an error matching
// errors.ErrUnsupported.
type StatsStore interface {
	// Stats counts rows per status and finds the oldest due-or-not pending row.
	Stats(ctx context.Context) (outboxtype.Stats, error)
}

// LeaseStore is implemented by a [Store] that keeps the table's dispatch lease (the SQL
// store does, in the table <table>_lease): outbox.SingleNode and outbox.MultiNode processes deliver
// only while they hold it, a SingleNode process alone, MultiNode ones together
// (outbox.Outbox.Start, docs/modes.md). Without it an Outbox runs without the lease.
type LeaseStore interface {
	// AcquireLease takes the lease for p.Holder until database now + p.TTL when it is
	// free (never taken, released or expired), or renews it when p.Holder holds it or,
	// for p.Mode MultiNode, MultiNode processes do. It returns the lease as it stands,
	// Held set when p's process holds it, or an error matching errors.ErrUnsupported
	// when the table has no lease table (run outbox.MigrateTable).
	AcquireLease(ctx context.Context, p LeaseParams) (Lease, error)
	// ReleaseLease ends holder's SingleNode lease, if it still holds it.
	ReleaseLease(ctx context.Context, holder string) error
}

// LeaseParams are the inputs of [LeaseStore.AcquireLease]: the holder (1 to
// MaxClaimTokenLen bytes), whether it shares the lease (a MultiNode process) or holds
// it alone (a SingleNode process), and the lease's TTL.
type LeaseParams struct {
	Holder string
	Shared bool
	TTL    time.Duration
}

// Lease is the dispatch lease as [LeaseStore.AcquireLease] left it: its holder (of a
// shared lease, the last to renew it), whether it is shared (held by MultiNode
// processes), its expiry by the database clock, and whether the caller holds it.
type Lease struct {
	Holder    string
	Shared    bool
	ExpiresAt time.Time
	Held      bool
}

// ConnectionChecker is implemented by stores that can verify their database connection
// (the SQL store does); outbox.Outbox.Start fails with CheckConnection's error.
type ConnectionChecker interface {
	// CheckConnection returns a *[outboxtype.ConfigError] when the connection is misconfigured, or
	// the error that kept it from checking.
	CheckConnection(ctx context.Context) error
}

// InsertParams are the inputs of [Store.Insert].
type InsertParams struct {
	// Events are the rows to insert; no two may have the same ID.
	Events []outboxtype.Event
	// ClaimTTL is how long the events with LockedBy set stay claimed, counted from the
	// database's current time at the insert. Required when one of them is.
	ClaimTTL time.Duration
	// NewIDs says that every event's ID was generated for this insert (the Writer's
	// own IDs, for envelopes without one), so that no row can hold it yet: a store may
	// insert without looking for existing IDs, and then a duplicate ID fails the
	// insert instead of being skipped. A store may also ignore it.
	NewIDs bool
}

// InsertResult is what [Store.Insert] did: Existing are the IDs it skipped because
// they were rows (committed, or inserted before in the same transaction), in order.
type InsertResult struct {
	Existing []string
}

// MarkDoneParams are the inputs of [Store.MarkDone].
type MarkDoneParams struct {
	// IDs are the events to mark.
	IDs []string
	// DoneAt is stored as done_at.
	DoneAt time.Time
	// Token, when set, fences the update by claim: only rows whose locked_by equals
	// Token change. Empty changes the rows whatever their claim (single-node mode).
	Token string
	// Tokens, when set, fences each row by its own claim: IDs[i] changes only while
	// its locked_by equals Tokens[i] (one non-empty token per ID, Token empty).
	Tokens []string
	// Delete deletes the rows instead of marking them DONE (outbox.Config.DeleteDone), with
	// the same fences; DoneAt is then unused.
	Delete bool
}

// RescheduleParams are the inputs of [Store.Reschedule].
type RescheduleParams struct {
	ID string
	// Status is StatusRetry after a failed attempt, StatusNew after a deferral.
	Status outboxtype.Status
	// AvailableAt is when the event is due again.
	AvailableAt time.Time
	// CountAttempt increments attempts.
	CountAttempt bool
	// LastError is stored truncated to MaxLastErrorLen bytes; empty keeps the old value.
	LastError string
	// Token, when set, fences the update by claim; see [MarkDoneParams.Token].
	Token string
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
	// Token, when set, fences the update by claim; see [MarkDoneParams.Token].
	Token string
	// Fallback makes the row FALLBACK instead of DEAD: the listener's fallback handled
	// the event (outbox.Subscription.Fallback).
	Fallback bool
	// Listener, when set, is stored as the row's listener: the subscription that failed
	// (a replay then re-runs it alone). At most MaxListenerLen bytes.
	Listener string
}

// PendingParams are the inputs of [Store.Pending].
type PendingParams struct {
	// Now is the reference time: rows with available_at after Now are not due.
	Now time.Time
	// SkipRecent leaves out rows created after Now-SkipRecent.
	SkipRecent time.Duration
	// Limit bounds the batch. Must be positive.
	Limit int
	// After, unless zero, keeps only rows after it in (available_at, created_at,
	// event_id) order: its AvailableAt is required. With CreatedAt and ID zero it keeps
	// the rows due at or after AvailableAt (the poller's low-water mark).
	After outboxtype.Cursor
	// Skip leaves rows out: of paused subscriptions, or of those whose queue is full.
	Skip Skip
}

// ClaimParams are the inputs of [ClaimStore.Claim].
type ClaimParams struct {
	// Token is written to locked_by and fences the outcomes: fresh per claim (the outbox
	// uses "<node ID>/<new ID>"), required, at most MaxClaimTokenLen bytes.
	Token string
	// TTL is how long the claim holds, from the database's current time. Must be positive.
	TTL time.Duration
	// SkipRecent leaves out rows created less than this long ago (database time), >= 0.
	SkipRecent time.Duration
	// Limit bounds the batch. Must be positive.
	Limit int
	// Skip leaves rows out: of paused subscriptions, or of those whose queue is full.
	Skip Skip
	// DueFrom, when set, leaves out rows due before it: the poller's low-water mark,
	// before which nothing is pending that it has not claimed, so that the claim reads
	// the pending rows from there, not from the oldest.
	DueFrom time.Time
}

// RenewClaimParams are the inputs of [ClaimStore.RenewClaim].
type RenewClaimParams struct {
	// ID is the claimed event.
	ID string
	// Token is the claim to renew. Required, at most MaxClaimTokenLen bytes.
	Token string
	// TTL is the claim's new length, from the database's current time. Must be positive.
	TTL time.Duration
}

// PendingBatch is what [Store.Pending] and [ClaimStore.Claim] return.
type PendingBatch struct {
	// Events are the decoded due rows, in the order the method documents.
	Events []outboxtype.Event
	// Undecodable are due rows that could not be decoded (for example corrupt headers).
	Undecodable []outboxtype.RowError
	// TakenOver counts claimed rows whose claim by another token had expired (0 on SQLite).
	TakenOver int
}

// ListDeadParams are the inputs of [DeadStore.ListDead].
type ListDeadParams struct {
	outboxtype.DeadFilter
	// After is the position of the last event of the previous page; zero starts at the beginning.
	After outboxtype.Cursor
	// Limit bounds the page. Must be positive.
	Limit int
}

// ReplayParams are the inputs of [DeadStore.Replay].
type ReplayParams struct {
	// IDs replays exactly these events (those that are DEAD). When empty, the filter
	// and Limit select the oldest matching DEAD events.
	IDs []string
	outboxtype.DeadFilter
	// Limit bounds a filter replay. Must be positive when IDs is empty.
	Limit int
	// Now becomes available_at of the replayed rows.
	Now time.Time
}

// PurgeParams are the inputs of [Store.Purge].
type PurgeParams struct {
	// Before is the cutoff: rows finished before it are deleted.
	Before time.Time
	// DeadBefore, unless zero, is the cutoff of DEAD and FALLBACK rows instead of Before
	// (DONE rows keep Before).
	DeadBefore time.Time
	// UndeliveredBefore, unless zero, is the cutoff of the rows nobody delivered (NEW,
	// RETRY, WAITING), by created_at: those created before it are deleted too. Zero
	// deletes none of them.
	UndeliveredBefore time.Time
	// Limit bounds the batch. Must be positive.
	Limit int
}
