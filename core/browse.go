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

// MaxScanRows bounds the rows one page of [Events.List] reads when it filters on a column
// its index does not hold: the page stops there, full or not ([EventPage.Partial]).
const MaxScanRows = 10000

// EventQuery selects one keyset page of the events of one status, in the order of when
// they finished (DONE, FALLBACK, DISCARDED) or were created (docs/operations.md).
type EventQuery struct {
	Status Status
	EventFilter
	// Newest lists the newest first; the default is oldest first.
	Newest bool
	// After continues from the previous page's Next; zero starts at the beginning.
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
	// events than the limit.
	Partial bool
}

// List returns q's page; an invalid query's error wraps ErrInvalidArgument.
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

// CountByType counts the events per status and event type, reading every row.
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

// MaxBulkIDs bounds the IDs of one bulk action, such as [Events.ReplayIDs].
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

// ReplayIDs replays the DEAD events among ids, as Replay does one, and returns how many.
// It is audited, also when it changed nothing.
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

// DiscardIDs discards the DEAD or pending events among ids, as Discard does one, and
// returns how many. It is audited.
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

// DeleteIDs deletes the DEAD events among ids (audited); it returns how many.
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
