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

// AuditEntry is one row of the audit trail: a change made through [DeadEvents].
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
// changes of [DeadEvents] are made but not recorded, and [DeadEvents.Audit] returns an
// error matching errors.ErrUnsupported.
type AuditStore interface {
	// RecordAudit stores e.
	RecordAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns at most p.Limit entries, newest first, with IDs below p.Before
	// when it is set.
	ListAudit(ctx context.Context, p ListAuditParams) ([]AuditEntry, error)
}

// ListAuditParams are the inputs of [AuditStore.ListAudit].
type ListAuditParams struct {
	Before string // an entry ID: list older entries; "" starts at the newest
	Limit  int    // must be positive
}

// AuditQuery selects a page of the audit trail, newest first.
type AuditQuery struct {
	// Before continues from the Next of the previous page.
	Before string
	// Limit is the page size, 1 to MaxDeadPageSize. Defaults to DefaultDeadPageSize.
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
func (d *DeadEvents) Audit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultDeadPageSize
	}
	if limit < 0 || limit > MaxDeadPageSize {
		return AuditPage{}, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalidArgument, q.Limit, MaxDeadPageSize)
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

// audit records a change that succeeded. The change is made by then: an error says
// that the trail lacks it.
func (d *DeadEvents) audit(ctx context.Context, action, target string, n int64) error {
	as, ok := d.store.(AuditStore)
	if !ok {
		return nil
	}
	at := d.now()
	e := AuditEntry{ID: defaultIDs.next(at), At: at, Actor: cut(actorFrom(ctx), maxActorLen), Action: action,
		Target: cut(target, maxAuditTargetLen), Count: n}
	if e.Actor == "" {
		e.Actor = "unknown"
	}
	if err := as.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		return fmt.Errorf("outbox: %s of %d events done, but not recorded in the audit trail: %w", action, n, err)
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
