package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/storage"
)

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

// WithActor returns ctx naming who makes the changes under it, for the audit.
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
	if q.Before != "" && !check.PossibleID(q.Before) {
		return AuditPage{}, fmt.Errorf("%w: audit cursor %q", ErrInvalidArgument, q.Before)
	}
	as, ok := d.store.(storage.AuditStore)
	if !ok {
		return AuditPage{}, fmt.Errorf("outbox: store %T does not implement AuditStore: %w", d.store, errors.ErrUnsupported)
	}
	entries, err := as.ListAudit(ctx, storage.ListAuditParams{Before: q.Before, Limit: limit + 1})
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
	e := AuditEntry{ID: ids.At(at), At: at, Actor: cut(actorFrom(ctx), check.ActorLen), Action: action,
		Target: cut(target, check.AuditTargetLen)}
	if e.Actor == "" {
		e.Actor = "unknown"
	}
	return e
}

// change makes the change p describes and records it in the audit trail: both in one
// transaction on an [storage.AuditedStore]; else the change alone, then its entry. It returns
// the rows changed; an error about the entry is an *AuditError.
func (d *Events) change(ctx context.Context, p storage.AuditedChangeParams) (int64, error) {
	if as, ok := d.store.(storage.AuditedStore); ok {
		return as.ChangeAudited(ctx, p)
	}
	var (
		n   int64
		err error
	)
	switch p.Entry.Action {
	case AuditReplay, AuditReplayAll:
		var ds storage.DeadStore
		if ds, err = d.deadStore(); err == nil {
			n, err = ds.Replay(ctx, storage.ReplayParams{IDs: p.IDs, DeadFilter: p.DeadFilter, Limit: p.Limit, Now: p.Now})
		}
	case AuditDelete:
		var ds storage.DeadStore
		if ds, err = d.deadStore(); err == nil {
			n, err = ds.DeleteDead(ctx, p.IDs)
		}
	case AuditDiscard:
		ds, ok := d.store.(storage.DiscardStore)
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
	as, ok := d.store.(storage.AuditStore)
	if !ok {
		return nil
	}
	if err := as.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		return &AuditError{Action: e.Action, Reason: check.AuditReason(err), Err: err}
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
	return check.CutText(s, limit-len("…")) + "…"
}
