package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// MaxCountRows bounds the index rows one count of [Events.Count] and [Events.Overview]
// reads; a count that stops there is a lower bound ([EventCount.AtLeast]).
const MaxCountRows = 10_000

// EventCountQuery selects what [Events.Count] counts, filtered as an EventQuery.
type EventCountQuery struct {
	Status Status
	EventFilter
	// Groups asks for the counts per aggregate type, event type and listener too.
	Groups bool
}

// Overview is the bounded summary of the table that [Events.Overview] returns.
type Overview struct {
	// Counts has the count of every status, bounded by MaxCountRows.
	Counts map[Status]EventCount
	// ByType counts the events Counts counted per status and event type.
	ByType []TypeCount
	// OldestPending is created_at of the oldest NEW or RETRY event; zero when none.
	OldestPending time.Time
	// BlockedKeys counts the order keys held by a RETRY or DEAD event; OldestBlocked is the
	// oldest holder's created_at.
	BlockedKeys   EventCount
	OldestBlocked time.Time
}

// countStore returns the store's [storage.EventCountStore] methods, or an error matching
// errors.ErrUnsupported.
func (d *Events) countStore() (storage.EventCountStore, error) {
	if cs, ok := d.store.(storage.EventCountStore); ok {
		return cs, nil
	}
	return nil, fmt.Errorf("outbox: store %T does not implement EventCountStore: %w", d.store, errors.ErrUnsupported)
}

// Count counts the events of q.Status matching the filter (with q.Groups, per group too),
// reading at most MaxCountRows index rows. An invalid query's error wraps
// ErrInvalidArgument.
func (d *Events) Count(ctx context.Context, q EventCountQuery) (EventCounts, error) {
	p := storage.CountEventsParams{Status: q.Status, EventFilter: q.EventFilter, Groups: q.Groups, ScanLimit: MaxCountRows}
	if err := p.Validate(); err != nil {
		return EventCounts{}, err
	}
	cs, err := d.countStore()
	if err != nil {
		return EventCounts{}, err
	}
	c, err := cs.CountEvents(ctx, p)
	if err != nil {
		return EventCounts{}, fmt.Errorf("outbox: count events: %w", err)
	}
	slices.SortFunc(c.Groups, func(a, b GroupCount) int {
		return cmp.Or(cmp.Compare(b.N, a.N), strings.Compare(a.AggregateType, b.AggregateType),
			strings.Compare(a.EventType, b.EventType), strings.Compare(a.Listener, b.Listener))
	})
	return c, nil
}

// overviewStatuses are the statuses [Events.Overview] counts.
var overviewStatuses = [...]Status{StatusNew, StatusRetry, StatusWaiting, StatusDead, StatusDone, StatusFallback, StatusDiscarded}

// Overview returns the counts per status and event type, the oldest pending event and
// the blocked keys, each statement reading at most MaxCountRows index rows.
func (d *Events) Overview(ctx context.Context) (Overview, error) {
	cs, err := d.countStore()
	if err != nil {
		return Overview{}, err
	}
	es, ok := d.store.(storage.EventStore)
	if !ok {
		return Overview{}, fmt.Errorf("outbox: store %T does not implement EventStore: %w", d.store, errors.ErrUnsupported)
	}
	o := Overview{Counts: make(map[Status]EventCount, len(overviewStatuses))}
	for _, st := range overviewStatuses {
		c, err := cs.CountEvents(ctx, storage.CountEventsParams{Status: st, Groups: true, ScanLimit: MaxCountRows})
		if err != nil {
			return Overview{}, fmt.Errorf("outbox: overview: count %s: %w", st, err)
		}
		o.Counts[st] = c.EventCount
		byType := map[string]int64{}
		for _, g := range c.Groups {
			byType[g.EventType] += g.N
		}
		for _, typ := range slices.Sorted(maps.Keys(byType)) {
			o.ByType = append(o.ByType, TypeCount{Status: st, EventType: typ, Count: byType[typ]})
		}
	}
	// The oldest pending event is the first of the NEW list or of the RETRY list.
	for _, st := range [...]Status{StatusNew, StatusRetry} {
		events, _, err := es.ListEvents(ctx, storage.ListEventsParams{Status: st, Limit: 1, ScanLimit: MaxCountRows})
		if err != nil {
			return Overview{}, fmt.Errorf("outbox: overview: oldest %s: %w", st, err)
		}
		if len(events) > 0 && (o.OldestPending.IsZero() || events[0].CreatedAt.Before(o.OldestPending)) {
			o.OldestPending = events[0].CreatedAt
		}
	}
	if w := o.Counts[StatusWaiting]; w.N > 0 || w.AtLeast {
		b, err := cs.CountBlockedKeys(ctx, MaxCountRows)
		if err != nil {
			return Overview{}, fmt.Errorf("outbox: overview: blocked keys: %w", err)
		}
		o.BlockedKeys, o.OldestBlocked = b.EventCount, b.Oldest
	}
	return o, nil
}
