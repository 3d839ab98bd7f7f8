package storage

import (
	"context"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// AuditStore is implemented by a [Store] that keeps the audit trail (the SQL store keeps
// it in the table <table>_audit, which the admin migration creates). Without it the
// changes of outbox.Events are made but not recorded, and outbox.Events.Audit returns an
// error matching errors.ErrUnsupported.
type AuditStore interface {
	// RecordAudit stores e.
	RecordAudit(ctx context.Context, e outboxtype.AuditEntry) error
	// ListAudit returns at most p.Limit entries, newest first, with IDs below p.Before
	// when it is set.
	ListAudit(ctx context.Context, p ListAuditParams) ([]outboxtype.AuditEntry, error)
}

// AuditedStore is implemented by an [AuditStore] that makes a change of outbox.Events
// and stores its audit entry in one transaction (the SQL store does): both are stored
// or neither, so a change whose entry cannot be written is not made. Without it,
// Events makes the change and then writes its entry; an entry that cannot be
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
