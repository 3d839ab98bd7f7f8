package outboxtype

import (
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/outboxkit/outbox/core/internal/check"
)

// MaxErrorSearchLen bounds [EventFilter.ErrorContains].
const MaxErrorSearchLen = 256

// EventFilter narrows the lists of outbox.Events.List. Empty fields match every event.
type EventFilter struct {
	EventType     string
	AggregateType string
	// AggregateID selects one aggregate's events, through the aggregate index.
	AggregateID string
	// Listener matches Event.Listener (a fan-out delivery's subscription, or the listener
	// that failed for good).
	Listener string
	// ErrorContains matches events whose last error contains it, ignoring case by
	// Unicode simple case folding, as strings.EqualFold compares ("É" matches "é", "K"
	// matches the Kelvin sign), without folding accents ("e" does not match "é") or
	// expanding letters ("ß" does not match "ss"): the same on every database, whatever
	// its collation ([EventFilter.MatchesError]). At most MaxErrorSearchLen bytes.
	ErrorContains string
	// OrderKey selects one order key's NEW, RETRY, DEAD or WAITING events, in the key's
	// order (OrderSeq, then ID), through the order index; not with AggregateID, From or
	// To. Its cursors hold OrderSeq ([ListCursor]). At most MaxOrderKeyLen bytes.
	OrderKey string
	// Blocking selects the RETRY or DEAD events that hold their order key: WAITING
	// events of the key wait behind them (a DEAD one only while nothing of its key is
	// NEW or RETRY, as under DeadKeyWaits). Only with those two statuses.
	Blocking bool
	// From (inclusive) and To (exclusive) bound the list's time (see outbox.EventQuery); a
	// zero time leaves that side open.
	From, To time.Time
}

// TypeCount is the number of events of one status and event type.
type TypeCount struct {
	Status    Status
	EventType string
	Count     int64
}

// Validate reports whether f can be used; the error matches [ErrInvalidArgument].
func (f EventFilter) Validate() error {
	for _, c := range [...]struct {
		name, value string
		limit       int
	}{
		{"EventType", f.EventType, MaxTypeLen}, {"AggregateType", f.AggregateType, MaxAggregateTypeLen},
		{"AggregateID", f.AggregateID, MaxAggregateIDLen}, {"Listener", f.Listener, MaxListenerLen},
		{"ErrorContains", f.ErrorContains, MaxErrorSearchLen}, {"OrderKey", f.OrderKey, MaxOrderKeyLen},
	} {
		if len(c.value) > c.limit {
			return check.Invalid("event filter", "%s is %d bytes, limit %d", c.name, len(c.value), c.limit)
		}
		if !check.ValidText(c.value) {
			return check.Invalid("event filter", "%s is not valid UTF-8 or contains NUL", c.name)
		}
	}
	for _, t := range [...]time.Time{f.From, f.To} {
		if y := t.UTC().Year(); !t.IsZero() && (y < 1000 || y > 9999) {
			return check.Invalid("event filter", "time %s is outside the years 1000 to 9999 that every database holds", t.Format(time.RFC3339Nano))
		}
	}
	if f.OrderKey != "" && (f.AggregateID != "" || !f.From.IsZero() || !f.To.IsZero()) {
		return check.Invalid("event filter", "OrderKey does not go with AggregateID, From or To: a key's list is in the key's order")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return check.Invalid("event filter", "From %s is not before To %s", f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
	}
	return nil
}

// MatchesError reports whether lastError matches f.ErrorContains: it holds the text
// under Unicode simple case folding (see [EventFilter.ErrorContains]). An empty
// ErrorContains matches everything.
func (f EventFilter) MatchesError(lastError string) bool {
	sub := f.ErrorContains
	if sub == "" {
		return true
	}
	for i := range lastError {
		if hasPrefixFold(lastError[i:], sub) {
			return true
		}
	}
	return false
}

// hasPrefixFold reports whether s begins with prefix under Unicode simple case folding.
func hasPrefixFold(s, prefix string) bool {
	for _, p := range prefix {
		r, size := utf8.DecodeRuneInString(s)
		if size == 0 || !equalFoldRune(r, p) {
			return false
		}
		s = s[size:]
	}
	return true
}

// equalFoldRune reports whether a and b are equal under Unicode simple case folding.
func equalFoldRune(a, b rune) bool {
	if a == b {
		return true
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}

// EventCount is a count bounded by MaxCountRows.
type EventCount struct {
	// N is the number of events counted.
	N int64
	// AtLeast is set when the count stopped after MaxCountRows rows of its index with
	// more rows left: there are N events or more (N is MaxCountRows when every row read
	// was counted).
	AtLeast bool
}

// GroupCount is the number of events of one aggregate type, event type and listener
// ("" for an event that names none) among the events a count counted.
type GroupCount struct {
	AggregateType string
	EventType     string
	Listener      string
	N             int64
}

// EventCounts is the answer of outbox.Events.Count.
type EventCounts struct {
	EventCount
	// Groups are the counts per aggregate type, event type and listener of the events
	// counted (with AtLeast, of those only), largest first; nil unless asked for.
	Groups []GroupCount
}

// BlockedKeys is the answer of storage.EventCountStore.CountBlockedKeys.
type BlockedKeys struct {
	// EventCount counts the order keys whose WAITING events wait behind a RETRY or DEAD
	// event (as [Stats.BlockedKeys]) among the rows read; AtLeast when rows were left.
	EventCount
	// Oldest is the created_at of the oldest event that holds one of them; zero if none.
	Oldest time.Time
}

// Validate reports whether each field is text a row can hold (valid UTF-8, no NUL,
// within the column's length); the error matches [ErrInvalidArgument].
func (f DeadFilter) Validate() error {
	for _, c := range [...]struct {
		name, value string
		limit       int
	}{{"EventType", f.EventType, MaxTypeLen}, {"AggregateType", f.AggregateType, MaxAggregateTypeLen}, {"Listener", f.Listener, MaxListenerLen}} {
		if len(c.value) > c.limit {
			return check.Invalid("dead filter", "%s is %d bytes, limit %d", c.name, len(c.value), c.limit)
		}
		if !check.ValidText(c.value) {
			return check.Invalid("dead filter", "%s is not valid UTF-8 or contains NUL", c.name)
		}
	}
	return nil
}

// ListTime is the time event e has in the list of q's status and filter: the key of
// that list's order, which a Cursor holds (but in a list by OrderKey, see ListCursor).
func ListTime(e Event, st Status, f EventFilter) time.Time {
	if f.ListsByFinish(st) && !e.DoneAt.IsZero() {
		return e.DoneAt
	}
	return e.CreatedAt
}

// ListCursor is the cursor that continues the list of st and f after event e: its
// ListTime and ID, or in a list by OrderKey its OrderSeq and ID.
func ListCursor(e Event, st Status, f EventFilter) Cursor {
	if f.OrderKey != "" {
		return Cursor{OrderSeq: e.OrderSeq, ID: e.ID}
	}
	return Cursor{CreatedAt: ListTime(e, st, f), ID: e.ID}
}
