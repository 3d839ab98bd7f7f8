package storage

import (
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// Validate reports whether p can be passed to [Store.Insert] (see the fields); the error
// matches [outboxtype.ErrInvalidArgument].
func (p InsertParams) Validate() error {
	if len(p.Events) > 1 && !p.NewIDs { // generated IDs are unique
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
	return p.Skip.validate("claim")
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
	if !p.After.IsZero() && p.After.AvailableAt.IsZero() {
		return check.Invalid("pending", "After has no AvailableAt: the read goes by (available_at, created_at, event_id)")
	}
	if p.After.CreatedAt.IsZero() != (p.After.ID == "") {
		return check.Invalid("pending", "After has one of CreatedAt and ID: give both, or neither for the start of AvailableAt")
	}
	return p.Skip.validate("pending")
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

// validToken checks an optional claim token.
func validToken(method, token string) error {
	if len(token) > outboxtype.MaxClaimTokenLen {
		return check.Invalid(method, "Token is %d bytes, more than MaxClaimTokenLen (%d)", len(token), outboxtype.MaxClaimTokenLen)
	}
	return nil
}

// minClaimTTL is the shortest claim TTL a store accepts: the precision of the stored times.
const minClaimTTL = time.Microsecond
