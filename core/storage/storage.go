package storage

import (
	"context"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// from audit.go

// AuditStore is implemented by a [Store] that keeps the audit trail (the SQL store keeps
// it in the table <table>_audit, which the admin migration creates). Without it the
// changes of [DeadEvents] are made but not recorded, and [DeadEvents.Audit] returns an
// error matching errors.ErrUnsupported.
type AuditStore interface {
	// RecordAudit stores e.
	RecordAudit(ctx context.Context, e outboxtype.AuditEntry) error
	// ListAudit returns at most p.Limit entries, newest first, with IDs below p.Before
	// when it is set.
	ListAudit(ctx context.Context, p ListAuditParams) ([]outboxtype.AuditEntry, error)
}

// AuditedStore is implemented by an [AuditStore] that makes a change of [DeadEvents]
// and stores its audit entry in one transaction (the SQL store does): both are stored
// or neither, so a change whose entry cannot be written is not made. Without it,
// DeadEvents makes the change and then writes its entry; an entry that cannot be
// written then leaves a change the trail lacks ([outboxtype.AuditError.Unrecorded]).
type AuditedStore interface {
	// ChangeAudited makes the change p.Entry.Action names and stores p.Entry, its
	// Count set to the rows changed, in one transaction, and returns the rows changed.
	// When the entry cannot be stored it changes nothing and returns an error that
	// wraps an *[outboxtype.AuditError].
	ChangeAudited(ctx context.Context, p AuditedChangeParams) (int64, error)
}

// AuditedChangeParams are the inputs of [AuditedStore.ChangeAudited].
type AuditedChangeParams struct {
	// Entry is the audit entry to store, its Count set to the rows changed. Its Action
	// selects the change: AuditReplay replays the DEAD events among IDs and
	// AuditReplayAll those among IDs (a batch found by its filter) or the oldest Limit
	// DEAD events matching DeadFilter (as [DeadStore.Replay]), AuditDelete deletes the
	// DEAD events among IDs (as [DeadStore.DeleteDead]), AuditDiscard discards the
	// events among IDs (as [DiscardStore.Discard]).
	Entry outboxtype.AuditEntry
	// IDs are the events of the change.
	IDs []string
	// DeadFilter and Limit select the batch of an AuditReplayAll without IDs.
	outboxtype.DeadFilter
	Limit int
	// Now is a replay's available_at and a discard's done_at.
	Now time.Time
	// Continue says that Entry was stored by an earlier call, an earlier batch of the
	// same replay-all: the rows this one changes are added to its Count.
	Continue bool
	// OnlyIfChanged stores no entry when no row changed (a change of one event that was
	// not there to change).
	OnlyIfChanged bool
}

// Validate reports whether p can be passed to [AuditedStore.ChangeAudited]; the error
// matches [outboxtype.ErrInvalidArgument].
func (p AuditedChangeParams) Validate() error {
	e := p.Entry
	if !check.PossibleID(e.ID) || e.At.IsZero() {
		return check.Invalid("audited change", "the entry needs an ID and a time")
	}
	for _, s := range [...]string{e.Actor, e.Target} {
		if !check.ValidText(s) {
			return check.Invalid("audited change", "the entry's actor or target is not valid UTF-8 or contains NUL")
		}
	}
	if len(e.Actor) > check.ActorLen || len(e.Target) > check.AuditTargetLen {
		return check.Invalid("audited change", "the entry's actor or target is too long")
	}
	switch e.Action {
	case outboxtype.AuditReplay, outboxtype.AuditReplayAll, outboxtype.AuditDiscard:
		if p.Now.IsZero() {
			return check.Invalid("audited change", "Now is zero")
		}
	case outboxtype.AuditDelete:
	default:
		return check.Invalid("audited change", "unknown action %q", e.Action)
	}
	if e.Action == outboxtype.AuditReplayAll && len(p.IDs) == 0 {
		if p.Limit <= 0 {
			return check.Invalid("audited change", "a replay-all takes IDs, or a filter and a positive Limit")
		}
		return p.DeadFilter.Validate()
	}
	if len(p.IDs) == 0 || p.DeadFilter != (outboxtype.DeadFilter{}) || p.Limit != 0 || p.Continue && e.Action != outboxtype.AuditReplayAll {
		return check.Invalid("audited change", "%s takes IDs and no filter nor Limit (nor Continue, but a replay-all)", e.Action)
	}
	for _, id := range p.IDs {
		if !check.PossibleID(id) {
			return check.Invalid("audited change", "ID %q is empty, longer than %d bytes, or not valid text", id, outboxtype.MaxIDLen)
		}
	}
	return nil
}

// ListAuditParams are the inputs of [AuditStore.ListAudit].
type ListAuditParams struct {
	Before string // an entry ID: list older entries; "" starts at the newest
	Limit  int    // must be positive
}

// from browse.go

// ListEventsParams are the inputs of [EventStore.ListEvents].
type ListEventsParams struct {
	Status outboxtype.Status
	outboxtype.EventFilter
	Newest bool
	// After is the position of the last event of the previous page, in the list's
	// order; zero starts at the beginning.
	After outboxtype.Cursor
	// Limit bounds the page. Must be positive.
	Limit int
	// ScanLimit bounds the rows of the index read when a filter is not part of it. Must
	// be positive.
	ScanLimit int
}

// Validate reports whether p can be passed to [EventStore.ListEvents]; the error matches
// [outboxtype.ErrInvalidArgument].
func (p ListEventsParams) Validate() error {
	if p.Status > outboxtype.StatusDiscarded {
		return check.Invalid("list events", "unknown status %d", p.Status)
	}
	if err := p.EventFilter.Validate(); err != nil {
		return err
	}
	if p.Blocking && p.Status != outboxtype.StatusRetry && p.Status != outboxtype.StatusDead {
		return check.Invalid("list events", "Blocking lists RETRY and DEAD events, not %s", p.Status)
	}
	if p.OrderKey == "" && p.After.OrderSeq != 0 {
		return check.Invalid("list events", "After is a cursor of a list by order key (OrderSeq %d), and OrderKey is empty", p.After.OrderSeq)
	}
	if p.OrderKey != "" {
		if !p.Status.InKeyOrder() {
			return check.Invalid("list events", "OrderKey lists NEW, RETRY, DEAD and WAITING events, not %s: the others have left their key", p.Status)
		}
		if !p.After.IsZero() && (p.After.OrderSeq == 0 || !p.After.CreatedAt.IsZero()) {
			return check.Invalid("list events", "After is not a cursor of a list by order key (it needs OrderSeq and no CreatedAt)")
		}
	}
	if p.Limit <= 0 || p.ScanLimit <= 0 {
		return check.Invalid("list events", "Limit and ScanLimit must be positive, got %d and %d", p.Limit, p.ScanLimit)
	}
	return nil
}

// EventStore is implemented by a [Store] that lists events of every status, for
// [DeadEvents.Events] and [DeadEvents.CountByType]. Without it they return an error
// matching errors.ErrUnsupported.
type EventStore interface {
	// ListEvents returns at most p.Limit events of p.Status that match the filter, in the
	// list's order (see [EventQuery]), after p.After. When a filter is outside the
	// list's index and p.ScanLimit rows were read before p.Limit matched, stop is the
	// position of the last row read (the next page starts after it); else it is zero.
	ListEvents(ctx context.Context, p ListEventsParams) (events []outboxtype.Event, stop outboxtype.Cursor, err error)
	// CountByType counts the events per status and event type.
	CountByType(ctx context.Context) ([]outboxtype.TypeCount, error)
}

// from count.go

// CountEventsParams are the inputs of [EventCountStore.CountEvents].
type CountEventsParams struct {
	Status outboxtype.Status
	outboxtype.EventFilter
	// Groups asks for EventCounts.Groups.
	Groups bool
	// ScanLimit bounds the rows of the index read. Must be positive.
	ScanLimit int
}

// Validate reports whether p can be passed to [EventCountStore.CountEvents]; the error
// matches [outboxtype.ErrInvalidArgument].
func (p CountEventsParams) Validate() error {
	if p.ScanLimit <= 0 {
		return check.Invalid("count events", "ScanLimit must be positive, got %d", p.ScanLimit)
	}
	return p.List().Validate()
}

// List is the list whose first ScanLimit rows a count of p reads: the events of the
// status in the list's order, newest first for DONE, FALLBACK and DISCARDED events (as
// the admin page lists them; on PostgreSQL and SQLite their index holds every finished
// row, DEAD ones too, and the newest finished rows are the ones a purge left).
func (p CountEventsParams) List() ListEventsParams {
	return ListEventsParams{Status: p.Status, EventFilter: p.EventFilter, Newest: p.EventFilter.ListsByFinish(p.Status),
		Limit: 1, ScanLimit: p.ScanLimit}
}

// EventCountStore is implemented by an [EventStore] that counts with a bound, for
// [DeadEvents.CountEvents] and [DeadEvents.Overview] (the admin's counts). Without it
// they return an error matching errors.ErrUnsupported.
type EventCountStore interface {
	// CountEvents counts the events of p.Status that match the filter. It reads at
	// most p.ScanLimit rows of an index that holds them, in the order of their list
	// (newest first for DONE, FALLBACK and DISCARDED events): that of the list
	// [EventStore.ListEvents] reads, or any that holds the status in that order. When
	// the index has more rows, the count is of the rows read and AtLeast is set.
	CountEvents(ctx context.Context, p CountEventsParams) (outboxtype.EventCounts, error)
	// CountBlockedKeys counts the blocked order keys among at most scanLimit rows of
	// the order index (the ordered events that are not finished), AtLeast when it has
	// more.
	CountBlockedKeys(ctx context.Context, scanLimit int) (outboxtype.BlockedKeys, error)
}

// from lease.go

// Validate reports whether p can be passed to [LeaseStore.AcquireLease]; the error
// matches [outboxtype.ErrInvalidArgument].
func (p LeaseParams) Validate() error {
	switch {
	case p.Holder == "":
		return check.Invalid("acquire lease", "Holder is empty")
	case len(p.Holder) > outboxtype.MaxClaimTokenLen:
		return check.Invalid("acquire lease", "Holder is %d bytes, more than MaxClaimTokenLen (%d)", len(p.Holder), outboxtype.MaxClaimTokenLen)
	case p.TTL < minClaimTTL:
		return check.Invalid("acquire lease", "TTL must be positive, got %s", p.TTL)
	}
	return nil
}

// from params.go

// Validate reports whether p can be passed to [Store.Insert] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p InsertParams) Validate() error {
	if len(p.Events) > 1 {
		seen := make(map[string]struct{}, len(p.Events))
		for i := range p.Events {
			if _, dup := seen[p.Events[i].ID]; dup {
				return check.Invalid("insert", "event %d: ID %q is used twice in the batch", i, p.Events[i].ID)
			}
			seen[p.Events[i].ID] = struct{}{}
		}
	}
	claimed := false
	for i := range p.Events {
		if k := p.Events[i].OrderKey; len(k) > outboxtype.MaxOrderKeyLen || k != "" && !check.ValidText(k) {
			return check.Invalid("insert", "event %d: OrderKey is longer than MaxOrderKeyLen (%d) or not valid text", i, outboxtype.MaxOrderKeyLen)
		}
		if l := p.Events[i].Listener; len(l) > outboxtype.MaxListenerLen || l != "" && !check.ValidText(l) {
			return check.Invalid("insert", "event %d: Listener is longer than MaxListenerLen (%d) or not valid text", i, outboxtype.MaxListenerLen)
		}
		if tok := p.Events[i].LockedBy; tok != "" {
			if err := validToken("insert", tok); err != nil {
				return err
			}
			claimed = true
		}
	}
	if claimed && p.ClaimTTL < minClaimTTL {
		return check.Invalid("insert", "ClaimTTL must be positive for events with LockedBy, got %s", p.ClaimTTL)
	}
	if p.ClaimTTL < 0 {
		return check.Invalid("insert", "ClaimTTL is negative: %s", p.ClaimTTL)
	}
	return nil
}

// Validate reports whether p can be passed to [OrderStore.Promote] (see the fields);
// the error matches [outboxtype.ErrInvalidArgument].
func (p PromoteParams) Validate() error {
	switch {
	case len(p.Keys) > 0 && len(p.IDs) > 0:
		return check.Invalid("promote", "both Keys and IDs are set")
	case len(p.Keys) == 0 && len(p.IDs) == 0 && p.Limit <= 0:
		return check.Invalid("promote", "Limit must be positive when Keys and IDs are empty, got %d", p.Limit)
	case p.Token != "" && p.TTL < minClaimTTL:
		return check.Invalid("promote", "TTL must be positive with a Token, got %s", p.TTL)
	}
	return validToken("promote", p.Token)
}

// Validate reports whether p can be passed to [Store.MarkDone] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p MarkDoneParams) Validate() error {
	if len(p.IDs) == 0 {
		return check.Invalid("mark done", "IDs is empty")
	}
	if p.DoneAt.IsZero() {
		return check.Invalid("mark done", "DoneAt is zero")
	}
	if p.Tokens == nil {
		return validToken("mark done", p.Token)
	}
	if p.Token != "" {
		return check.Invalid("mark done", "both Token and Tokens are set")
	}
	if len(p.Tokens) != len(p.IDs) {
		return check.Invalid("mark done", "%d Tokens for %d IDs", len(p.Tokens), len(p.IDs))
	}
	for i, tok := range p.Tokens {
		if tok == "" {
			return check.Invalid("mark done", "Tokens[%d] (for %q) is empty", i, p.IDs[i])
		}
		if err := validToken("mark done", tok); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports whether p can be passed to [ClaimStore.RenewClaim] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p RenewClaimParams) Validate() error {
	if p.ID == "" {
		return check.Invalid("renew claim", "ID is empty")
	}
	if p.Token == "" {
		return check.Invalid("renew claim", "Token is empty")
	}
	if err := validToken("renew claim", p.Token); err != nil {
		return err
	}
	if p.TTL < minClaimTTL {
		return check.Invalid("renew claim", "TTL must be positive, got %s", p.TTL)
	}
	return nil
}

// Validate reports whether p can be passed to [ClaimStore.Claim] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p ClaimParams) Validate() error {
	if p.Token == "" {
		return check.Invalid("claim", "Token is empty")
	}
	if err := validToken("claim", p.Token); err != nil {
		return err
	}
	if p.TTL < minClaimTTL {
		return check.Invalid("claim", "TTL must be positive, got %s", p.TTL)
	}
	if p.SkipRecent < 0 {
		return check.Invalid("claim", "SkipRecent is negative: %s", p.SkipRecent)
	}
	if p.Limit <= 0 {
		return check.Invalid("claim", "Limit must be positive, got %d", p.Limit)
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Reschedule] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p RescheduleParams) Validate() error {
	if p.ID == "" {
		return check.Invalid("reschedule", "ID is empty")
	}
	if p.Status != outboxtype.StatusRetry && p.Status != outboxtype.StatusNew {
		return check.Invalid("reschedule", "Status must be NEW or RETRY, got %s", p.Status)
	}
	if p.AvailableAt.IsZero() {
		return check.Invalid("reschedule", "AvailableAt is zero")
	}
	return validToken("reschedule", p.Token)
}

// Validate reports whether p can be passed to [Store.MarkDead] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p MarkDeadParams) Validate() error {
	if p.ID == "" {
		return check.Invalid("mark dead", "ID is empty")
	}
	if p.DeadAt.IsZero() {
		return check.Invalid("mark dead", "DeadAt is zero")
	}
	if len(p.Listener) > outboxtype.MaxListenerLen || !check.ValidText(p.Listener) {
		return check.Invalid("mark dead", "Listener is longer than MaxListenerLen (%d) or not valid text", outboxtype.MaxListenerLen)
	}
	return validToken("mark dead", p.Token)
}

// Validate reports whether p can be passed to [FanOutStore.FanOut] (see the fields); the
// error matches [outboxtype.ErrInvalidArgument].
func (p FanOutParams) Validate() error {
	if len(p.Events) == 0 {
		return check.Invalid("fan out", "no events")
	}
	if p.DoneAt.IsZero() {
		return check.Invalid("fan out", "DoneAt is zero")
	}
	seen := make(map[string]bool, len(p.Events))
	var all []outboxtype.Event
	for i, e := range p.Events {
		if !check.PossibleID(e.ID) || seen[e.ID] {
			return check.Invalid("fan out", "event %d: ID %q is empty, not valid text or used twice", i, e.ID)
		}
		seen[e.ID] = true
		if err := validToken("fan out", e.Token); err != nil {
			return err
		}
		if len(e.Deliveries) == 0 {
			return check.Invalid("fan out", "event %s has no deliveries", e.ID)
		}
		for j := range e.Deliveries {
			if e.Deliveries[j].Listener == "" {
				return check.Invalid("fan out", "event %s: delivery %d has no Listener", e.ID, j)
			}
		}
		all = append(all, e.Deliveries...)
	}
	for i := range all {
		if seen[all[i].ID] {
			return check.Invalid("fan out", "delivery %s has the ID of an event being split", all[i].ID)
		}
	}
	return InsertParams{Events: all, ClaimTTL: p.ClaimTTL}.Validate()
}

// Validate reports whether p can be passed to [Store.Pending] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p PendingParams) Validate() error {
	if p.Limit <= 0 {
		return check.Invalid("pending", "Limit must be positive, got %d", p.Limit)
	}
	if p.Now.IsZero() {
		return check.Invalid("pending", "Now is zero")
	}
	if p.SkipRecent < 0 {
		return check.Invalid("pending", "SkipRecent is negative: %s", p.SkipRecent)
	}
	return nil
}

// Validate reports whether p can be passed to [DeadStore.ListDead] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p ListDeadParams) Validate() error {
	if err := p.DeadFilter.Validate(); err != nil {
		return err
	}
	if p.Limit <= 0 {
		return check.Invalid("list dead", "Limit must be positive, got %d", p.Limit)
	}
	if p.After.OrderSeq != 0 {
		return check.Invalid("list dead", "After is a cursor of a list by order key (OrderSeq %d)", p.After.OrderSeq)
	}
	return nil
}

// Validate reports whether p can be passed to [DeadStore.Replay] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p ReplayParams) Validate() error {
	if err := p.DeadFilter.Validate(); err != nil {
		return err
	}
	for _, id := range p.IDs {
		if !check.PossibleID(id) {
			return check.Invalid("replay", "ID %q is empty, longer than %d bytes, or not valid text", id, outboxtype.MaxIDLen)
		}
	}
	if len(p.IDs) == 0 && p.Limit <= 0 {
		return check.Invalid("replay", "IDs is empty and Limit is not positive (%d)", p.Limit)
	}
	if p.Now.IsZero() {
		return check.Invalid("replay", "Now is zero")
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Purge] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p PurgeParams) Validate() error {
	if p.Limit <= 0 {
		return check.Invalid("purge", "Limit must be positive, got %d", p.Limit)
	}
	if p.Before.IsZero() {
		return check.Invalid("purge", "Before is zero")
	}
	return nil
}

// from store.go

// Store persists events: the delivery core that every backend implements. [NewSQLStore]
// returns the implementation for PostgreSQL, MySQL/MariaDB and SQLite;
// [github.com/outboxkit/outbox/core/outboxtest] has an in-memory one for tests. Optional
// interfaces are found by type assertion: [ClaimStore] (required by [MultiNode] mode),
// [DeadStore] (for [DeadEvents]), [StatsStore], [LeaseStore] and [ConnectionChecker]. Every store must
// pass [github.com/outboxkit/outbox/core/storetest.Run].
//
// Status updates are fenced: they never change a DONE row, under claims they change a
// row only while its locked_by holds the update's token, and they report the rows
// changed, so a caller can tell a lost race from success. Every outcome clears the
// claim. Methods other than Insert use their own short statements.
type Store interface {
	// Insert adds p.Events as NEW rows in one statement through exec (the caller's
	// transaction); an event with LockedBy set is claimed until database now + p.ClaimTTL.
	// An event whose ID is a row is skipped (the transaction stays usable) and reported.
	// An [OrderStore] stores ordered events WAITING (see there) and sets OrderSeq, Status.
	Insert(ctx context.Context, exec outboxtype.Executor, p InsertParams) (InsertResult, error)
	// Get returns one event by ID, or ErrNotFound.
	Get(ctx context.Context, id string) (outboxtype.Event, error)
	// Pending returns due NEW and RETRY rows, claimed or not, oldest first (created_at,
	// event_id); undecodable rows come back in PendingBatch.Undecodable.
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
	// Purge deletes at most p.Limit DONE and DEAD rows finished (done_at, else
	// created_at) before p.Before, oldest first, and returns how many.
	Purge(ctx context.Context, p PurgeParams) (int64, error)
}

// ClaimStore is implemented by a [Store] that can claim rows for one node, as [MultiNode] mode needs
// ([New] rejects a store without it in that mode).
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
	// Promote makes the lowest WAITING event of each key NEW, unless the key has a NEW
	// or RETRY event, or a DEAD one and p.DeadBlocks. On an error the result holds what
	// the statements that succeeded did.
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
// [DeadEvents]. Without it those methods return an error matching
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
// [DeadEvents.Discard]. Without it Discard returns an error matching
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
	// Delete deletes the events instead of marking them DONE ([Config.DeleteDone]).
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
	// an ID of its own, [DeliveryID]); ordered ones are numbered in their keys, those with
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

// StatsStore is implemented by a [Store] that can count rows per status, for [DeadEvents.Stats] and
// the metrics that read it. Without it Stats returns an error matching
// errors.ErrUnsupported.
type StatsStore interface {
	// Stats counts rows per status and finds the oldest due-or-not pending row.
	Stats(ctx context.Context) (outboxtype.Stats, error)
}

// LeaseStore is implemented by a [Store] that keeps the table's dispatch lease (the SQL
// store does, in the table <table>_lease): [SingleNode] and [MultiNode] processes deliver
// only while they hold it, a SingleNode process alone, MultiNode ones together
// ([Outbox.Start], docs/modes.md). Without it an Outbox runs without the lease.
type LeaseStore interface {
	// AcquireLease takes the lease for p.Holder until database now + p.TTL when it is
	// free (never taken, released or expired), or renews it when p.Holder holds it or,
	// for p.Mode MultiNode, MultiNode processes do. It returns the lease as it stands,
	// Held set when p's process holds it, or an error matching errors.ErrUnsupported
	// when the table has no lease table (run [MigrateTable]).
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
// (the SQL store does); [Outbox.Start] fails with CheckConnection's error.
type ConnectionChecker interface {
	// CheckConnection returns a *[ConfigError] when the connection is misconfigured, or
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
	// Delete deletes the rows instead of marking them DONE ([Config.DeleteDone]), with
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
	// the event ([Subscription.Fallback]).
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
	// After, unless zero, keeps only rows after it in (created_at, event_id) order.
	After outboxtype.Cursor
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
	// Limit bounds the batch. Must be positive.
	Limit int
}

// from params.go

// validToken checks an optional claim token.
func validToken(method, token string) error {
	if len(token) > outboxtype.MaxClaimTokenLen {
		return check.Invalid(method, "Token is %d bytes, more than MaxClaimTokenLen (%d)", len(token), outboxtype.MaxClaimTokenLen)
	}
	return nil
}

// minClaimTTL is the shortest claim TTL a store accepts: the precision of the stored times.
const minClaimTTL = time.Microsecond
