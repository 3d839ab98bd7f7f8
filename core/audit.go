package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The actions of the audit trail.
const (
	AuditReplay    = "replay"     // DEAD events replayed by ID
	AuditReplayAll = "replay-all" // DEAD events replayed by filter
	AuditDelete    = "delete"     // DEAD events deleted
	AuditDiscard   = "discard"    // events discarded
)

// Bounds of an audit entry's text: longer values are cut, ending with "…".
const (
	maxActorLen       = 255
	maxAuditTargetLen = 4000
)

// AuditEntry is one row of the audit trail: a change made through [Events].
type AuditEntry struct {
	ID     string    // a ULID: entries sort by time
	At     time.Time // when the change finished
	Actor  string    // who made it ([WithActor]); "unknown" when nobody was named
	Action string    // AuditReplay, AuditReplayAll, AuditDelete or AuditDiscard
	Target string    // the event IDs, comma-separated, or the filter
	Count  int64     // how many events it changed
}

// AuditStore is implemented by a [Store] that keeps the audit trail (the SQL store keeps
// it in the table <table>_audit, which the admin migration creates). Without it the
// changes of [Events] are made but not recorded, and [Events.Audit] returns an
// error matching errors.ErrUnsupported.
type AuditStore interface {
	// RecordAudit stores e.
	RecordAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns at most p.Limit entries, newest first, with IDs below p.Before
	// when it is set.
	ListAudit(ctx context.Context, p ListAuditParams) ([]AuditEntry, error)
}

// AuditedStore is implemented by an [AuditStore] that makes a change of [Events]
// and stores its audit entry in one transaction (the SQL store does): both are stored
// or neither, so a change whose entry cannot be written is not made. Without it,
// Events makes the change and then writes its entry; an entry that cannot be
// written then leaves a change the trail lacks ([AuditError.Unrecorded]).
type AuditedStore interface {
	// ChangeAudited makes the change p.Entry.Action names and stores p.Entry, its
	// Count set to the rows changed, in one transaction, and returns the rows changed.
	// When the entry cannot be stored it changes nothing and returns an error that
	// wraps an *[AuditError].
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
	Entry AuditEntry
	// IDs are the events of the change.
	IDs []string
	// DeadFilter and Limit select the batch of an AuditReplayAll without IDs.
	DeadFilter
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
// matches [ErrInvalidArgument].
func (p AuditedChangeParams) Validate() error {
	e := p.Entry
	if !possibleID(e.ID) || e.At.IsZero() {
		return invalidParams("audited change", "the entry needs an ID and a time")
	}
	for _, s := range [...]string{e.Actor, e.Target} {
		if !validText(s) {
			return invalidParams("audited change", "the entry's actor or target is not valid UTF-8 or contains NUL")
		}
	}
	if len(e.Actor) > maxActorLen || len(e.Target) > maxAuditTargetLen {
		return invalidParams("audited change", "the entry's actor or target is too long")
	}
	switch e.Action {
	case AuditReplay, AuditReplayAll, AuditDiscard:
		if p.Now.IsZero() {
			return invalidParams("audited change", "Now is zero")
		}
	case AuditDelete:
	default:
		return invalidParams("audited change", "unknown action %q", e.Action)
	}
	if e.Action == AuditReplayAll && len(p.IDs) == 0 {
		if p.Limit <= 0 {
			return invalidParams("audited change", "a replay-all takes IDs, or a filter and a positive Limit")
		}
		return p.DeadFilter.Validate()
	}
	if len(p.IDs) == 0 || p.DeadFilter != (DeadFilter{}) || p.Limit != 0 || p.Continue && e.Action != AuditReplayAll {
		return invalidParams("audited change", "%s takes IDs and no filter nor Limit (nor Continue, but a replay-all)", e.Action)
	}
	for _, id := range p.IDs {
		if !possibleID(id) {
			return invalidParams("audited change", "ID %q is empty, longer than %d bytes, or not valid text", id, MaxIDLen)
		}
	}
	return nil
}

// AuditError is the error of a change of [Events] whose audit entry could not be
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

// auditReason describes err, the failure to write an audit entry, for [AuditError.Reason]:
// the drivers' messages are matched, as isLockConflict does.
func auditReason(err error) string {
	if errors.Is(err, errAuditEntryGone) {
		return "the entry of the earlier batches is gone"
	}
	msg := err.Error()
	for _, r := range [...]struct{ reason, marks string }{
		{"the audit table does not exist", "SQLSTATE 42P01|Error 1146 |no such table"},
		{"no permission to write the audit table", "SQLSTATE 42501|Error 1142 |Error 1044 |permission denied|readonly database|not authorized"},
	} {
		for m := range strings.SplitSeq(r.marks, "|") {
			if strings.Contains(msg, m) {
				return r.reason
			}
		}
	}
	return "a database error"
}

// errAuditEntryGone is the error of a replay-all's later batch whose entry is not in
// the audit table any more.
var errAuditEntryGone = errors.New("audit entry not found")

// ListAuditParams are the inputs of [AuditStore.ListAudit].
type ListAuditParams struct {
	Before string // an entry ID: list older entries; "" starts at the newest
	Limit  int    // must be positive
}

// AuditQuery selects a page of the audit trail, newest first.
type AuditQuery struct {
	// Before continues from the Next of the previous page.
	Before string
	// Limit is the page size, 1 to MaxPageSize. Defaults to DefaultPageSize.
	Limit int
}

// AuditPage is one page of the audit trail.
type AuditPage struct {
	Entries []AuditEntry
	Next    string // the Before of the following page; "" when this one is the last
}

type actorKey struct{}

// WithActor returns a context that names who makes the changes done under it, for the
// audit trail (the admin page names the authorized user, the command-line tool the OS
// user).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// actorFrom returns the actor WithActor put in ctx, or "".
func actorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// Audit returns a page of the audit trail, newest first.
func (d *Events) Audit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPageSize
	}
	if limit < 0 || limit > MaxPageSize {
		return AuditPage{}, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalidArgument, q.Limit, MaxPageSize)
	}
	if q.Before != "" && !possibleID(q.Before) {
		return AuditPage{}, fmt.Errorf("%w: audit cursor %q", ErrInvalidArgument, q.Before)
	}
	as, ok := d.store.(AuditStore)
	if !ok {
		return AuditPage{}, fmt.Errorf("outbox: store %T does not implement AuditStore: %w", d.store, errors.ErrUnsupported)
	}
	entries, err := as.ListAudit(ctx, ListAuditParams{Before: q.Before, Limit: limit + 1})
	if err != nil {
		return AuditPage{}, fmt.Errorf("outbox: list audit trail: %w", err)
	}
	page := AuditPage{Entries: entries}
	if len(entries) > limit {
		page.Entries = entries[:limit]
		page.Next = page.Entries[limit-1].ID
	}
	return page, nil
}

// entry returns a new audit entry of action on target, by the actor of ctx.
func (d *Events) entry(ctx context.Context, action, target string) AuditEntry {
	at := d.now()
	e := AuditEntry{ID: defaultIDs.next(at), At: at, Actor: cut(actorFrom(ctx), maxActorLen), Action: action,
		Target: cut(target, maxAuditTargetLen)}
	if e.Actor == "" {
		e.Actor = "unknown"
	}
	return e
}

// change makes the change p describes and records it in the audit trail: both in one
// transaction on an [AuditedStore]; else the change alone, then its entry. It returns
// the rows changed; an error about the entry is an *AuditError.
func (d *Events) change(ctx context.Context, p AuditedChangeParams) (int64, error) {
	if as, ok := d.store.(AuditedStore); ok {
		return as.ChangeAudited(ctx, p)
	}
	var (
		n   int64
		err error
	)
	switch p.Entry.Action {
	case AuditReplay, AuditReplayAll:
		var ds DeadStore
		if ds, err = d.deadStore(); err == nil {
			n, err = ds.Replay(ctx, ReplayParams{IDs: p.IDs, DeadFilter: p.DeadFilter, Limit: p.Limit, Now: p.Now})
		}
	case AuditDelete:
		var ds DeadStore
		if ds, err = d.deadStore(); err == nil {
			n, err = ds.DeleteDead(ctx, p.IDs)
		}
	case AuditDiscard:
		ds, ok := d.store.(DiscardStore)
		if !ok {
			return 0, fmt.Errorf("outbox: discard: %T does not implement DiscardStore: %w", d.store, errors.ErrUnsupported)
		}
		n, err = ds.Discard(ctx, p.IDs, p.Now)
	}
	if err != nil || n == 0 && p.OnlyIfChanged {
		return n, err
	}
	e := p.Entry
	e.Count = n
	if err := d.record(ctx, e); err != nil {
		err.Unrecorded = n
		return n, err
	}
	return n, nil
}

// record stores e, when the store keeps an audit trail, even if ctx is canceled (the
// change is made by then).
func (d *Events) record(ctx context.Context, e AuditEntry) *AuditError {
	as, ok := d.store.(AuditStore)
	if !ok {
		return nil
	}
	if err := as.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		return &AuditError{Action: e.Action, Reason: auditReason(err), Err: err}
	}
	return nil
}

// cut makes s storable in the audit table: valid UTF-8 without NUL bytes (an actor may
// come from a request header), at most limit bytes, ending with "…" when cut.
func cut(s string, limit int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= limit {
		return s
	}
	return cutText(s, limit-len("…")) + "…"
}
