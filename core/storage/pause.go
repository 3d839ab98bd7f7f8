package storage

import (
	"context"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// PauseStore is implemented by a [Store] that keeps the paused subscriptions of the table
// (the SQL store does, in the table <table>_pause that the pause migration creates), so
// that a pause holds on every process of the table (outbox.Events.Pause,
// docs/listeners.md). Without it, or on a table without the pause migration, Pause
// returns an error matching errors.ErrUnsupported and nothing is ever paused.
//
// A paused subscription's events stay pending: [PendingParams.Skip] and
// [ClaimParams.Skip] leave out the rows whose listener column names it, and an event
// routed by its type (listener empty) that only the paused subscription takes is pinned
// to it with Pin when the dispatcher refuses it, so that later reads leave it out too.
type PauseStore interface {
	// Paused returns the paused subscriptions, by name, or an error matching
	// errors.ErrUnsupported when the table has no pause table.
	Paused(ctx context.Context) ([]outboxtype.Pause, error)
	// SetPaused pauses or resumes p.Listener and stores p.Entry, its Count set to 1 when
	// the subscription's state changed and 0 when it was already so, in one transaction
	// (with an [AuditStore]; otherwise without the entry). It returns whether the state
	// changed. A pause that exists keeps its time, actor and reason.
	SetPaused(ctx context.Context, p SetPausedParams) (bool, error)
	// Pin writes p.Listener into the listener column of the NEW and RETRY rows among
	// p.IDs whose listener is empty, and clears their claim; with p.Token set, only of
	// rows that p.Token claims. It returns the rows changed.
	Pin(ctx context.Context, p PinParams) (int64, error)
}

// SetPausedParams are the inputs of [PauseStore.SetPaused].
type SetPausedParams struct {
	// Listener is the subscription's name, 1 to outboxtype.MaxListenerLen bytes.
	Listener string
	// Pause pauses it; false resumes it.
	Pause bool
	// Reason is stored with a pause (at most outboxtype.MaxLastErrorLen bytes).
	Reason string
	// Entry is the audit entry: Action AuditPause or AuditResume, Target the listener.
	Entry outboxtype.AuditEntry
}

// Validate reports whether p can be passed to [PauseStore.SetPaused]; the error matches
// [outboxtype.ErrInvalidArgument].
func (p SetPausedParams) Validate() error {
	if err := ValidListener("pause", p.Listener); err != nil {
		return err
	}
	if !check.ValidText(p.Reason) || len(p.Reason) > outboxtype.MaxLastErrorLen {
		return check.Invalid("pause", "the reason is not valid UTF-8, contains NUL, or is longer than %d bytes", outboxtype.MaxLastErrorLen)
	}
	want := outboxtype.AuditResume
	if p.Pause {
		want = outboxtype.AuditPause
	}
	e := p.Entry
	if e.Action != want || e.Target != p.Listener || !check.PossibleID(e.ID) || e.At.IsZero() {
		return check.Invalid("pause", "the entry needs an ID, a time, Action %s and Target the listener", want)
	}
	if !check.ValidText(e.Actor) || len(e.Actor) > check.ActorLen {
		return check.Invalid("pause", "the entry's actor is not valid UTF-8, contains NUL, or is too long")
	}
	return nil
}

// PinParams are the inputs of [PauseStore.Pin].
type PinParams struct {
	IDs      []string // the events, at least one
	Listener string   // the paused subscription that takes them
	Token    string   // the claim holding them (MultiNode), or ""
}

// Validate reports whether p can be passed to [PauseStore.Pin]; the error matches
// [outboxtype.ErrInvalidArgument].
func (p PinParams) Validate() error {
	if len(p.IDs) == 0 {
		return check.Invalid("pin", "no IDs")
	}
	for _, id := range p.IDs {
		if !check.PossibleID(id) {
			return check.Invalid("pin", "ID %q is empty, longer than %d bytes, or not valid text", id, outboxtype.MaxIDLen)
		}
	}
	if p.Token != "" {
		if err := validToken("pin", p.Token); err != nil {
			return err
		}
	}
	return ValidListener("pin", p.Listener)
}

// ValidListener reports whether name can be a listener column's value; the error, for
// op, matches [outboxtype.ErrInvalidArgument].
func ValidListener(op, name string) error {
	if name == "" || len(name) > outboxtype.MaxListenerLen || !check.ValidText(name) {
		return check.Invalid(op, "listener %q is empty, longer than %d bytes, or not valid text", name, outboxtype.MaxListenerLen)
	}
	return nil
}

// Skip leaves rows out of a read of pending rows ([PendingParams], [ClaimParams]): the
// dispatcher does not take them now. Listeners are subscriptions that are paused or
// whose queue is full; Routes are routes whose queue is full, for the rows routed by
// their type alone (no listener) to one subscription.
type Skip struct {
	// Listeners leaves out the rows whose listener is one of these names.
	Listeners []string
	// Routes leaves out the rows without a listener whose aggregate type and event type
	// are one of these.
	Routes []RouteKey
}

// RouteKey is an aggregate type and an event type, as stored.
type RouteKey struct{ AggregateType, EventType string }

// IsZero reports whether s leaves nothing out.
func (s Skip) IsZero() bool { return len(s.Listeners) == 0 && len(s.Routes) == 0 }

// validate reports whether s can be given to op.
func (s Skip) validate(op string) error {
	for _, n := range s.Listeners {
		if err := ValidListener(op, n); err != nil {
			return err
		}
	}
	for _, r := range s.Routes {
		if r.EventType == "" || len(r.EventType) > outboxtype.MaxTypeLen || !check.ValidText(r.EventType) ||
			len(r.AggregateType) > outboxtype.MaxAggregateTypeLen || !check.ValidText(r.AggregateType) {
			return check.Invalid(op, "route %q/%q is not a stored aggregate type and event type", r.AggregateType, r.EventType)
		}
	}
	return nil
}
