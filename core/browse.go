package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxScanRows bounds the rows one page of [Events.List] reads when it filters on a
// column that its index does not hold (event type, aggregate type, listener, error
// text): a page stops after that many rows of the index, full or not, and its Next
// cursor continues the scan. A list can never lock up the table, whatever it searches.
const MaxScanRows = 10000

// MaxErrorSearchLen bounds [EventFilter.ErrorContains].
const MaxErrorSearchLen = 256

// EventFilter narrows the lists of [Events.List]. Empty fields match every event.
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
	// From (inclusive) and To (exclusive) bound the list's time (see [EventQuery]); a
	// zero time leaves that side open.
	From, To time.Time
}

// EventQuery selects one page of the events of one status, for the admin's lists.
//
// A list is in the order of its time: when the event finished for DONE, FALLBACK and
// DISCARDED, when it was created for the other statuses, and when it was created for
// every status when AggregateID is set; a list of one OrderKey is in the key's order.
// Each list reads an index in that order (see docs/operations.md): pages are keyset
// pages, as fast on the millionth row as on the first.
type EventQuery struct {
	Status Status
	EventFilter
	// Newest lists the newest first; the default is oldest first.
	Newest bool
	// After continues from the Next cursor of the previous page; zero starts at the
	// beginning.
	After Cursor
	// Limit is the page size, 1 to MaxPageSize. Defaults to DefaultPageSize.
	Limit int
}

// EventPage is one page of [Events.List].
type EventPage struct {
	Events []Event
	// Next is the cursor of the following page; zero when this page is the last.
	Next Cursor
	// Partial is set when the page stopped after MaxScanRows rows of its index with fewer
	// events than the limit: Next continues the search from where it stopped.
	Partial bool
}

// TypeCount is the number of events of one status and event type.
type TypeCount struct {
	Status    Status
	EventType string
	Count     int64
}

// ListEventsParams are the inputs of [EventStore.ListEvents].
type ListEventsParams struct {
	Status Status
	EventFilter
	Newest bool
	// After is the position of the last event of the previous page, in the list's
	// order; zero starts at the beginning.
	After Cursor
	// Limit bounds the page. Must be positive.
	Limit int
	// ScanLimit bounds the rows of the index read when a filter is not part of it. Must
	// be positive.
	ScanLimit int
}

// Validate reports whether p can be passed to [EventStore.ListEvents]; the error matches
// [ErrInvalidArgument].
func (p ListEventsParams) Validate() error {
	if p.Status > StatusDiscarded {
		return invalidParams("list events", "unknown status %d", p.Status)
	}
	if err := p.EventFilter.Validate(); err != nil {
		return err
	}
	if p.Blocking && p.Status != StatusRetry && p.Status != StatusDead {
		return invalidParams("list events", "Blocking lists RETRY and DEAD events, not %s", p.Status)
	}
	if p.OrderKey == "" && p.After.OrderSeq != 0 {
		return invalidParams("list events", "After is a cursor of a list by order key (OrderSeq %d), and OrderKey is empty", p.After.OrderSeq)
	}
	if p.OrderKey != "" {
		if !keyListStatus(p.Status) {
			return invalidParams("list events", "OrderKey lists NEW, RETRY, DEAD and WAITING events, not %s: the others have left their key", p.Status)
		}
		if !p.After.IsZero() && (p.After.OrderSeq == 0 || !p.After.CreatedAt.IsZero()) {
			return invalidParams("list events", "After is not a cursor of a list by order key (it needs OrderSeq and no CreatedAt)")
		}
	}
	if p.Limit <= 0 || p.ScanLimit <= 0 {
		return invalidParams("list events", "Limit and ScanLimit must be positive, got %d and %d", p.Limit, p.ScanLimit)
	}
	return nil
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
			return invalidParams("event filter", "%s is %d bytes, limit %d", c.name, len(c.value), c.limit)
		}
		if !validText(c.value) {
			return invalidParams("event filter", "%s is not valid UTF-8 or contains NUL", c.name)
		}
	}
	for _, t := range [...]time.Time{f.From, f.To} {
		if y := t.UTC().Year(); !t.IsZero() && (y < 1000 || y > 9999) {
			return invalidParams("event filter", "time %s is outside the years 1000 to 9999 that every database holds", t.Format(time.RFC3339Nano))
		}
	}
	if f.OrderKey != "" && (f.AggregateID != "" || !f.From.IsZero() || !f.To.IsZero()) {
		return invalidParams("event filter", "OrderKey does not go with AggregateID, From or To: a key's list is in the key's order")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return invalidParams("event filter", "From %s is not before To %s", f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
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

// errorPrefilter is the LIKE pattern (escaped with '!') that the SQL store matches
// against LOWER(last_error) to narrow a list by ErrorContains before MatchesError
// decides: every row that matches is among those it selects, whatever the database's
// LOWER does beyond ASCII (PostgreSQL's follows the database's ctype, MySQL's the
// charset, SQLite's is ASCII only). ASCII letters are lowered, other ASCII characters
// kept, and any other character, as well as k and s (whose fold orbits hold the Kelvin
// sign and the long s), becomes %.
func errorPrefilter(sub string) string {
	var b strings.Builder
	b.WriteByte('%')
	wild := true // b ends with the wildcard %
	for _, r := range sub {
		if r >= utf8.RuneSelf || r == 'k' || r == 'K' || r == 's' || r == 'S' {
			if !wild {
				b.WriteByte('%')
				wild = true
			}
			continue
		}
		b.WriteString(likeEscape(strings.ToLower(string(r))))
		wild = false
	}
	if !wild {
		b.WriteByte('%')
	}
	return b.String()
}

// scanned reports whether f filters on a column outside the list's index, so that a
// page must bound the rows it reads.
func (f EventFilter) scanned() bool {
	return f.EventType != "" || f.AggregateType != "" || f.Listener != "" || f.ErrorContains != "" || f.Blocking
}

// finishedList reports whether the list of st is in finish-time order.
func finishedList(st Status, f EventFilter) bool {
	return f.AggregateID == "" && (st == StatusDone || st == StatusFallback || st == StatusDiscarded)
}

// keyListStatus reports whether events of status st are in their key's order index:
// those a list by OrderKey shows.
func keyListStatus(st Status) bool {
	return st == StatusNew || st == StatusRetry || st == StatusDead || st == StatusWaiting
}

// ListTime is the time event e has in the list of q's status and filter: the key of
// that list's order, which a Cursor holds (but in a list by OrderKey, see ListCursor).
func ListTime(e Event, st Status, f EventFilter) time.Time {
	if finishedList(st, f) && !e.DoneAt.IsZero() {
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

// EventStore is implemented by a [Store] that lists events of every status, for
// [Events.List] and [Events.CountByType]. Without it they return an error
// matching errors.ErrUnsupported.
type EventStore interface {
	// ListEvents returns at most p.Limit events of p.Status that match the filter, in the
	// list's order (see [EventQuery]), after p.After. When a filter is outside the
	// list's index and p.ScanLimit rows were read before p.Limit matched, stop is the
	// position of the last row read (the next page starts after it); else it is zero.
	ListEvents(ctx context.Context, p ListEventsParams) (events []Event, stop Cursor, err error)
	// CountByType counts the events per status and event type.
	CountByType(ctx context.Context) ([]TypeCount, error)
}

// List returns a page of the events of q.Status that match the filter: the admin's
// lists of pending, retrying, dead and recently finished events. An invalid query
// returns an error wrapping ErrInvalidArgument.
func (d *Events) List(ctx context.Context, q EventQuery) (EventPage, error) {
	limit := cmp.Or(q.Limit, DefaultPageSize)
	if limit < 0 || limit > MaxPageSize {
		return EventPage{}, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalidArgument, q.Limit, MaxPageSize)
	}
	es, ok := d.store.(EventStore)
	if !ok {
		return EventPage{}, fmt.Errorf("outbox: store %T does not implement EventStore: %w", d.store, errors.ErrUnsupported)
	}
	p := ListEventsParams{Status: q.Status, EventFilter: q.EventFilter, Newest: q.Newest, After: q.After,
		Limit: limit + 1, ScanLimit: MaxScanRows}
	if err := p.Validate(); err != nil {
		return EventPage{}, err
	}
	events, stop, err := es.ListEvents(ctx, p)
	if err != nil {
		return EventPage{}, fmt.Errorf("outbox: list events: %w", err)
	}
	page := EventPage{Events: events}
	switch {
	case len(events) > limit:
		page.Events = events[:limit]
		last := page.Events[limit-1]
		page.Next = ListCursor(last, q.Status, q.EventFilter)
	case !stop.IsZero():
		page.Next, page.Partial = stop, true
	}
	return page, nil
}

// CountByType counts the events per status and event type. It reads every row, as
// Stats does, so its cost grows with the table; [Events.Overview] is the bounded
// summary the admin page shows.
func (d *Events) CountByType(ctx context.Context) ([]TypeCount, error) {
	es, ok := d.store.(EventStore)
	if !ok {
		return nil, fmt.Errorf("outbox: store %T does not implement EventStore: %w", d.store, errors.ErrUnsupported)
	}
	counts, err := es.CountByType(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: count by type: %w", err)
	}
	return counts, nil
}

// MaxBulkIDs bounds the IDs of one bulk action ([Events.ReplayIDs],
// [Events.DiscardIDs], [Events.DeleteIDs]).
const MaxBulkIDs = MaxPageSize

// checkBulk validates the IDs of a bulk action and returns them without repeats, in
// their first order.
func checkBulk(action string, ids []string) ([]string, error) {
	if len(ids) == 0 || len(ids) > MaxBulkIDs {
		return nil, fmt.Errorf("%w: %s: %d IDs, want 1 to %d", ErrInvalidArgument, action, len(ids), MaxBulkIDs)
	}
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !possibleID(id) {
			return nil, fmt.Errorf("%w: %s: ID %q is empty, longer than %d bytes, or not valid text", ErrInvalidArgument, action, id, MaxIDLen)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// ReplayIDs replays the DEAD events among ids (as Replay does one; others are left
// alone) and returns how many. It is audited, also when it changed nothing.
func (d *Events) ReplayIDs(ctx context.Context, ids []string) (int64, error) {
	ids, err := checkBulk("replay", ids)
	if err != nil {
		return 0, err
	}
	if _, err := d.deadStore(); err != nil {
		return 0, err
	}
	n, err := d.change(ctx, AuditedChangeParams{Entry: d.entry(ctx, AuditReplay, idsTarget(ids)), IDs: ids, Now: d.now()})
	if n > 0 {
		d.replayed()
	}
	return n, wrapErr("replay events", err)
}

// DiscardIDs discards the events among ids that are DEAD or pending (as Discard does
// one) and returns how many it discarded. It is recorded in the audit trail.
func (d *Events) DiscardIDs(ctx context.Context, ids []string) (int64, error) {
	ids, err := checkBulk("discard", ids)
	if err != nil {
		return 0, err
	}
	if _, ok := d.store.(DiscardStore); !ok {
		return 0, fmt.Errorf("outbox: discard: %T does not implement DiscardStore: %w", d.store, errors.ErrUnsupported)
	}
	n, err := d.change(ctx, AuditedChangeParams{Entry: d.entry(ctx, AuditDiscard, idsTarget(ids)), IDs: ids, Now: d.now()})
	if n > 0 {
		d.replayed()
	}
	return n, wrapErr("discard events", err)
}

// DeleteIDs deletes the DEAD events among ids for good (as Delete does one) and
// returns how many it deleted. It is recorded in the audit trail.
func (d *Events) DeleteIDs(ctx context.Context, ids []string) (int64, error) {
	ids, err := checkBulk("delete", ids)
	if err != nil {
		return 0, err
	}
	if _, err := d.deadStore(); err != nil {
		return 0, err
	}
	n, err := d.change(ctx, AuditedChangeParams{Entry: d.entry(ctx, AuditDelete, idsTarget(ids)), IDs: ids})
	if n > 0 {
		d.replayed()
	}
	return n, wrapErr("delete events", err)
}

// idsTarget is the audit target of an action on ids: the IDs, comma-separated.
func idsTarget(ids []string) string { return strings.Join(ids, ",") }

// filterTarget is the audit target of an action on a filter.
func filterTarget(f DeadFilter) string {
	var parts []string
	for _, kv := range [...][2]string{{"event_type", f.EventType}, {"aggregate_type", f.AggregateType}, {"listener", f.Listener}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if len(parts) == 0 {
		return "all dead events"
	}
	return strings.Join(parts, " ")
}
