package outbox

import (
	"fmt"
	"time"
)

// invalidParams reports bad input to a [Store] method; nothing runs in that case.
func invalidParams(method, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, method, fmt.Sprintf(format, args...))
}

// validToken checks an optional claim token.
func validToken(method, token string) error {
	if len(token) > MaxClaimTokenLen {
		return invalidParams(method, "Token is %d bytes, more than MaxClaimTokenLen (%d)", len(token), MaxClaimTokenLen)
	}
	return nil
}

// minClaimTTL is the shortest claim TTL a store accepts: the precision of the stored times.
const minClaimTTL = time.Microsecond

// Validate reports whether p can be passed to [Store.Insert] (see the fields); the error
// matches [ErrInvalidArgument].
func (p InsertParams) Validate() error {
	if len(p.Events) > 1 {
		seen := make(map[string]struct{}, len(p.Events))
		for i := range p.Events {
			if _, dup := seen[p.Events[i].ID]; dup {
				return invalidParams("insert", "event %d: ID %q is used twice in the batch", i, p.Events[i].ID)
			}
			seen[p.Events[i].ID] = struct{}{}
		}
	}
	claimed := false
	for i := range p.Events {
		if k := p.Events[i].OrderKey; len(k) > MaxOrderKeyLen || k != "" && !validText(k) {
			return invalidParams("insert", "event %d: OrderKey is longer than MaxOrderKeyLen (%d) or not valid text", i, MaxOrderKeyLen)
		}
		if l := p.Events[i].Listener; len(l) > MaxListenerLen || l != "" && !validText(l) {
			return invalidParams("insert", "event %d: Listener is longer than MaxListenerLen (%d) or not valid text", i, MaxListenerLen)
		}
		if tok := p.Events[i].LockedBy; tok != "" {
			if err := validToken("insert", tok); err != nil {
				return err
			}
			claimed = true
		}
	}
	if claimed && p.ClaimTTL < minClaimTTL {
		return invalidParams("insert", "ClaimTTL must be positive for events with LockedBy, got %s", p.ClaimTTL)
	}
	if p.ClaimTTL < 0 {
		return invalidParams("insert", "ClaimTTL is negative: %s", p.ClaimTTL)
	}
	return nil
}

// Validate reports whether p can be passed to [OrderStore.Promote] (see the fields);
// the error matches [ErrInvalidArgument].
func (p PromoteParams) Validate() error {
	switch {
	case len(p.Keys) > 0 && len(p.IDs) > 0:
		return invalidParams("promote", "both Keys and IDs are set")
	case len(p.Keys) == 0 && len(p.IDs) == 0 && p.Limit <= 0:
		return invalidParams("promote", "Limit must be positive when Keys and IDs are empty, got %d", p.Limit)
	case p.Token != "" && p.TTL < minClaimTTL:
		return invalidParams("promote", "TTL must be positive with a Token, got %s", p.TTL)
	}
	return validToken("promote", p.Token)
}

// Validate reports whether p can be passed to [Store.MarkDone] (see the fields); the error
// matches [ErrInvalidArgument].
func (p MarkDoneParams) Validate() error {
	if len(p.IDs) == 0 {
		return invalidParams("mark done", "IDs is empty")
	}
	if p.DoneAt.IsZero() {
		return invalidParams("mark done", "DoneAt is zero")
	}
	if p.Tokens == nil {
		return validToken("mark done", p.Token)
	}
	if p.Token != "" {
		return invalidParams("mark done", "both Token and Tokens are set")
	}
	if len(p.Tokens) != len(p.IDs) {
		return invalidParams("mark done", "%d Tokens for %d IDs", len(p.Tokens), len(p.IDs))
	}
	for i, tok := range p.Tokens {
		if tok == "" {
			return invalidParams("mark done", "Tokens[%d] (for %q) is empty", i, p.IDs[i])
		}
		if err := validToken("mark done", tok); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports whether p can be passed to [ClaimStore.RenewClaim] (see the fields); the error
// matches [ErrInvalidArgument].
func (p RenewClaimParams) Validate() error {
	if p.ID == "" {
		return invalidParams("renew claim", "ID is empty")
	}
	if p.Token == "" {
		return invalidParams("renew claim", "Token is empty")
	}
	if err := validToken("renew claim", p.Token); err != nil {
		return err
	}
	if p.TTL < minClaimTTL {
		return invalidParams("renew claim", "TTL must be positive, got %s", p.TTL)
	}
	return nil
}

// Validate reports whether p can be passed to [ClaimStore.Claim] (see the fields); the error
// matches [ErrInvalidArgument].
func (p ClaimParams) Validate() error {
	if p.Token == "" {
		return invalidParams("claim", "Token is empty")
	}
	if err := validToken("claim", p.Token); err != nil {
		return err
	}
	if p.TTL < minClaimTTL {
		return invalidParams("claim", "TTL must be positive, got %s", p.TTL)
	}
	if p.SkipRecent < 0 {
		return invalidParams("claim", "SkipRecent is negative: %s", p.SkipRecent)
	}
	if p.Limit <= 0 {
		return invalidParams("claim", "Limit must be positive, got %d", p.Limit)
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Reschedule] (see the fields); the error
// matches [ErrInvalidArgument].
func (p RescheduleParams) Validate() error {
	if p.ID == "" {
		return invalidParams("reschedule", "ID is empty")
	}
	if p.Status != StatusRetry && p.Status != StatusNew {
		return invalidParams("reschedule", "Status must be NEW or RETRY, got %s", p.Status)
	}
	if p.AvailableAt.IsZero() {
		return invalidParams("reschedule", "AvailableAt is zero")
	}
	return validToken("reschedule", p.Token)
}

// Validate reports whether p can be passed to [Store.MarkDead] (see the fields); the error
// matches [ErrInvalidArgument].
func (p MarkDeadParams) Validate() error {
	if p.ID == "" {
		return invalidParams("mark dead", "ID is empty")
	}
	if p.DeadAt.IsZero() {
		return invalidParams("mark dead", "DeadAt is zero")
	}
	if len(p.Listener) > MaxListenerLen || !validText(p.Listener) {
		return invalidParams("mark dead", "Listener is longer than MaxListenerLen (%d) or not valid text", MaxListenerLen)
	}
	return validToken("mark dead", p.Token)
}

// Validate reports whether p can be passed to [FanOutStore.FanOut] (see the fields); the
// error matches [ErrInvalidArgument].
func (p FanOutParams) Validate() error {
	if len(p.Events) == 0 {
		return invalidParams("fan out", "no events")
	}
	if p.DoneAt.IsZero() {
		return invalidParams("fan out", "DoneAt is zero")
	}
	seen := make(map[string]bool, len(p.Events))
	var all []Event
	for i, e := range p.Events {
		if !possibleID(e.ID) || seen[e.ID] {
			return invalidParams("fan out", "event %d: ID %q is empty, not valid text or used twice", i, e.ID)
		}
		seen[e.ID] = true
		if err := validToken("fan out", e.Token); err != nil {
			return err
		}
		if len(e.Deliveries) == 0 {
			return invalidParams("fan out", "event %s has no deliveries", e.ID)
		}
		for j := range e.Deliveries {
			if e.Deliveries[j].Listener == "" {
				return invalidParams("fan out", "event %s: delivery %d has no Listener", e.ID, j)
			}
		}
		all = append(all, e.Deliveries...)
	}
	for i := range all {
		if seen[all[i].ID] {
			return invalidParams("fan out", "delivery %s has the ID of an event being split", all[i].ID)
		}
	}
	return InsertParams{Events: all, ClaimTTL: p.ClaimTTL}.Validate()
}

// Validate reports whether p can be passed to [Store.Pending] (see the fields); the error
// matches [ErrInvalidArgument].
func (p PendingParams) Validate() error {
	if p.Limit <= 0 {
		return invalidParams("pending", "Limit must be positive, got %d", p.Limit)
	}
	if p.Now.IsZero() {
		return invalidParams("pending", "Now is zero")
	}
	if p.SkipRecent < 0 {
		return invalidParams("pending", "SkipRecent is negative: %s", p.SkipRecent)
	}
	return nil
}

// Validate reports whether each field is text a row can hold (valid UTF-8, no NUL,
// within the column's length); the error matches [ErrInvalidArgument].
func (f DeadFilter) Validate() error {
	for _, c := range [...]struct {
		name, value string
		limit       int
	}{{"EventType", f.EventType, MaxTypeLen}, {"AggregateType", f.AggregateType, MaxAggregateTypeLen}, {"Listener", f.Listener, MaxListenerLen}} {
		if len(c.value) > c.limit {
			return invalidParams("dead filter", "%s is %d bytes, limit %d", c.name, len(c.value), c.limit)
		}
		if !validText(c.value) {
			return invalidParams("dead filter", "%s is not valid UTF-8 or contains NUL", c.name)
		}
	}
	return nil
}

// possibleID reports whether id could be the ID of a stored event. A lookup of any other
// ID is a miss, answered without a query.
func possibleID(id string) bool { return id != "" && len(id) <= MaxIDLen && validText(id) }

// Validate reports whether p can be passed to [DeadStore.ListDead] (see the fields); the error
// matches [ErrInvalidArgument].
func (p ListDeadParams) Validate() error {
	if err := p.DeadFilter.Validate(); err != nil {
		return err
	}
	if p.Limit <= 0 {
		return invalidParams("list dead", "Limit must be positive, got %d", p.Limit)
	}
	if p.After.OrderSeq != 0 {
		return invalidParams("list dead", "After is a cursor of a list by order key (OrderSeq %d)", p.After.OrderSeq)
	}
	return nil
}

// Validate reports whether p can be passed to [DeadStore.Replay] (see the fields); the error
// matches [ErrInvalidArgument].
func (p ReplayParams) Validate() error {
	if err := p.DeadFilter.Validate(); err != nil {
		return err
	}
	for _, id := range p.IDs {
		if !possibleID(id) {
			return invalidParams("replay", "ID %q is empty, longer than %d bytes, or not valid text", id, MaxIDLen)
		}
	}
	if len(p.IDs) == 0 && p.Limit <= 0 {
		return invalidParams("replay", "IDs is empty and Limit is not positive (%d)", p.Limit)
	}
	if p.Now.IsZero() {
		return invalidParams("replay", "Now is zero")
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Purge] (see the fields); the error
// matches [ErrInvalidArgument].
func (p PurgeParams) Validate() error {
	if p.Limit <= 0 {
		return invalidParams("purge", "Limit must be positive, got %d", p.Limit)
	}
	if p.Before.IsZero() {
		return invalidParams("purge", "Before is zero")
	}
	return nil
}
