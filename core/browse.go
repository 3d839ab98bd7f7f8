package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// MaxScanRows bounds the rows one page of [Events.List] reads when it filters on a
// column that its index does not hold (event type, aggregate type, listener, error
// text): a page stops after that many rows of the index, full or not, and its Next
// cursor continues the scan. A list can never lock up the table, whatever it searches.
const MaxScanRows = 10000

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

// List returns a page of the events of q.Status that match the filter: the admin's
// lists of pending, retrying, dead and recently finished events. An invalid query
// returns an error wrapping ErrInvalidArgument.
func (d *Events) List(ctx context.Context, q EventQuery) (EventPage, error) {
	limit := cmp.Or(q.Limit, DefaultPageSize)
	if limit < 0 || limit > MaxPageSize {
		return EventPage{}, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalidArgument, q.Limit, MaxPageSize)
	}
	es, ok := d.store.(storage.EventStore)
	if !ok {
		return EventPage{}, fmt.Errorf("outbox: store %T does not implement EventStore: %w", d.store, errors.ErrUnsupported)
	}
	p := storage.ListEventsParams{Status: q.Status, EventFilter: q.EventFilter, Newest: q.Newest, After: q.After,
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
		page.Next = outboxtype.ListCursor(last, q.Status, q.EventFilter)
	case !stop.IsZero():
		page.Next, page.Partial = stop, true
	}
	return page, nil
}

// CountByType counts the events per status and event type. It reads every row, as
// Stats does, so its cost grows with the table; [Events.Overview] is the bounded
// summary the admin page shows.
func (d *Events) CountByType(ctx context.Context) ([]TypeCount, error) {
	es, ok := d.store.(storage.EventStore)
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
		if !check.PossibleID(id) {
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
	n, err := d.change(ctx, storage.AuditedChangeParams{Entry: d.entry(ctx, AuditReplay, idsTarget(ids)), IDs: ids, Now: d.now()})
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
	if _, ok := d.store.(storage.DiscardStore); !ok {
		return 0, fmt.Errorf("outbox: discard: %T does not implement DiscardStore: %w", d.store, errors.ErrUnsupported)
	}
	n, err := d.change(ctx, storage.AuditedChangeParams{Entry: d.entry(ctx, AuditDiscard, idsTarget(ids)), IDs: ids, Now: d.now()})
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
	n, err := d.change(ctx, storage.AuditedChangeParams{Entry: d.entry(ctx, AuditDelete, idsTarget(ids)), IDs: ids})
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
