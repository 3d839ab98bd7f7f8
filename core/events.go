package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// Page sizes of the lists of [Events].
const (
	// DefaultPageSize is the page size of a query whose Limit is 0.
	DefaultPageSize = 50
	// MaxPageSize is the largest page a list returns.
	MaxPageSize = 500
	// DefaultReplayBatchSize is the batch size of Events.ReplayAll when 0 is given.
	DefaultReplayBatchSize = 100
)

// Events inspects the events of every status, from [Outbox.Events], and changes them:
// replay, discard, delete. Every change it makes is recorded in the audit trail when the store keeps one
// ([AuditStore]), with the actor of the context ([WithActor]). It is safe for concurrent
// use.
type Events struct {
	store       storage.Store
	now         func() time.Time
	afterReplay func() // wakes the pollers; nil until New sets it
}

// newEvents returns the inspection of store's events.
func newEvents(store storage.Store) *Events {
	return &Events{store: store, now: time.Now}
}

// deadStore returns the store's [DeadStore] methods, or an error matching
// errors.ErrUnsupported.
func (d *Events) deadStore() (storage.DeadStore, error) {
	if ds, ok := d.store.(storage.DeadStore); ok {
		return ds, nil
	}
	return nil, fmt.Errorf("outbox: store %T does not implement DeadStore: %w", d.store, errors.ErrUnsupported)
}

// DeadQuery selects a page of DEAD events.
type DeadQuery struct {
	DeadFilter
	// After continues from the Next cursor of the previous page; zero starts at the oldest.
	After Cursor
	// Limit is the page size, 1 to MaxPageSize. Defaults to DefaultPageSize.
	Limit int
}

// DeadPage is one page of DEAD events, oldest first.
type DeadPage struct {
	Events []Event
	// Next is the cursor for the following page; zero when this page is the last.
	Next Cursor
	// Partial is set when a filtered page stopped after MaxScanRows rows of the DEAD
	// events with fewer events than the limit (as [EventPage.Partial]): Next continues
	// the search from where it stopped.
	Partial bool
}

// ListDead returns a page of DEAD events matching q, oldest first (created_at, then ID).
// On a store that lists events of every status ([EventStore], the SQL store) it is
// [Events.List] of the DEAD list: a page reads at most MaxScanRows rows whatever
// its filter, and may be Partial. A limit outside 0..MaxPageSize returns an error
// wrapping ErrInvalidArgument.
func (d *Events) ListDead(ctx context.Context, q DeadQuery) (DeadPage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPageSize
	}
	if limit < 0 || limit > MaxPageSize {
		return DeadPage{}, fmt.Errorf("%w: limit %d is outside 1..%d", ErrInvalidArgument, q.Limit, MaxPageSize)
	}
	if _, ok := d.store.(storage.EventStore); ok {
		if err := q.DeadFilter.Validate(); err != nil {
			return DeadPage{}, err
		}
		if q.After.OrderSeq != 0 {
			return DeadPage{}, fmt.Errorf("%w: list dead events: After is a cursor of a list by order key", ErrInvalidArgument)
		}
		page, err := d.List(ctx, EventQuery{Status: StatusDead, After: q.After, Limit: limit,
			EventFilter: EventFilter{EventType: q.EventType, AggregateType: q.AggregateType, Listener: q.Listener}})
		if err != nil {
			return DeadPage{}, fmt.Errorf("outbox: list dead events: %w", err)
		}
		return DeadPage{Events: page.Events, Next: page.Next, Partial: page.Partial}, nil
	}
	ds, err := d.deadStore()
	if err != nil {
		return DeadPage{}, err
	}
	// Ask for one more row to know whether a next page exists.
	events, err := ds.ListDead(ctx, storage.ListDeadParams{DeadFilter: q.DeadFilter, After: q.After, Limit: limit + 1})
	if err != nil {
		return DeadPage{}, fmt.Errorf("outbox: list dead events: %w", err)
	}
	page := DeadPage{Events: events}
	if len(events) > limit {
		page.Events = events[:limit]
		last := page.Events[limit-1]
		page.Next = Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}

// CountDead returns the number of DEAD events matching f. It counts every one of them,
// so its cost grows with their number; [Events.Count] reads at most MaxCountRows rows.
func (d *Events) CountDead(ctx context.Context, f DeadFilter) (int64, error) {
	ds, err := d.deadStore()
	if err != nil {
		return 0, err
	}
	n, err := ds.CountDead(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("outbox: count dead events: %w", err)
	}
	return n, nil
}

// Get returns one event by ID, whatever its status, or an error wrapping ErrNotFound.
func (d *Events) Get(ctx context.Context, id string) (Event, error) {
	if id == "" {
		return Event{}, fmt.Errorf("%w: empty event ID", ErrInvalidArgument)
	}
	e, err := d.store.Get(ctx, id)
	if err != nil {
		return Event{}, fmt.Errorf("outbox: get event %s: %w", id, err)
	}
	return e, nil
}

// Replay moves one DEAD event back to NEW, attempts reset, for the poller to deliver; the
// error wraps ErrNotFound or ErrNotDead (the event exists but is not DEAD) otherwise.
func (d *Events) Replay(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty event ID", ErrInvalidArgument)
	}
	if _, err := d.deadStore(); err != nil {
		return err
	}
	n, err := d.change(ctx, storage.AuditedChangeParams{Entry: d.entry(ctx, AuditReplay, id), IDs: []string{id}, Now: d.now(), OnlyIfChanged: true})
	if n > 0 {
		d.replayed()
	}
	if err != nil || n > 0 {
		return wrapErr("replay event "+id, err)
	}
	e, err := d.store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("outbox: replay event %s: %w", id, err)
	}
	return fmt.Errorf("outbox: replay event %s (status %s): %w", id, e.Status, ErrNotDead)
}

// Delete deletes one DEAD event for good (never delivered; its order key moves on); the
// error wraps ErrNotFound or ErrNotDead otherwise.
func (d *Events) Delete(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty event ID", ErrInvalidArgument)
	}
	if _, err := d.deadStore(); err != nil {
		return err
	}
	n, err := d.change(ctx, storage.AuditedChangeParams{Entry: d.entry(ctx, AuditDelete, id), IDs: []string{id}, OnlyIfChanged: true})
	if n > 0 {
		d.replayed() // its key's next event is promoted by the next sweep, at once
	}
	if err != nil || n > 0 {
		return wrapErr("delete event "+id, err)
	}
	e, err := d.store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("outbox: delete event %s: %w", id, err)
	}
	return fmt.Errorf("outbox: delete event %s (status %s): %w", id, e.Status, ErrNotDead)
}

// Discard makes one event DISCARDED: it is never delivered (again), and its row is kept
// until the purge, as DEAD rows are. It takes an event that is DEAD or pending (NEW,
// RETRY, WAITING); an ordered event's key moves on at once. A pending event that a
// dispatcher is delivering right now may still be delivered once, and its outcome is
// then not recorded. The error wraps ErrNotFound, or ErrFinished when the event is
// DONE, FALLBACK or DISCARDED already.
func (d *Events) Discard(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty event ID", ErrInvalidArgument)
	}
	if _, ok := d.store.(storage.DiscardStore); !ok {
		return fmt.Errorf("outbox: discard: %T does not implement DiscardStore: %w", d.store, errors.ErrUnsupported)
	}
	n, err := d.change(ctx, storage.AuditedChangeParams{Entry: d.entry(ctx, AuditDiscard, id), IDs: []string{id}, Now: d.now(), OnlyIfChanged: true})
	if n > 0 {
		d.replayed() // its key's next event is promoted by the next sweep, at once
	}
	if err != nil || n > 0 {
		return wrapErr("discard event "+id, err)
	}
	e, err := d.store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("outbox: discard event %s: %w", id, err)
	}
	return fmt.Errorf("outbox: discard event %s (status %s): %w", id, e.Status, ErrFinished)
}

// ReplayAll replays every DEAD event matching f in batches of batchSize (0 means
// DefaultReplayBatchSize) and returns how many it replayed (so far, with the error,
// when one stops it). It is one entry of the audit trail; on an [AuditedStore] each
// batch adds its count to the entry in the batch's transaction, so that the entry
// holds every batch that was made.
//
// On a store that lists events of every status ([EventStore], the SQL store) it walks
// the DEAD list of f, oldest first, a page of batchSize (at most MaxPageSize)
// events at a time, each page reading at most MaxScanRows rows of the list's index, and
// replays each page's events by ID: every read and change is bounded, and an event that
// dies again meanwhile is behind the walk and not replayed twice. Elsewhere it replays
// at most as many as were DEAD when it started, the oldest matching ones first.
func (d *Events) ReplayAll(ctx context.Context, f DeadFilter, batchSize int) (int64, error) {
	if batchSize == 0 {
		batchSize = DefaultReplayBatchSize
	}
	if batchSize < 0 {
		return 0, fmt.Errorf("%w: batch size %d is negative", ErrInvalidArgument, batchSize)
	}
	if err := f.Validate(); err != nil {
		return 0, err
	}
	if _, ok := d.store.(storage.EventStore); ok {
		if _, err := d.deadStore(); err != nil {
			return 0, err
		}
		return d.replayListed(ctx, f, min(batchSize, MaxPageSize))
	}
	ds, err := d.deadStore()
	if err != nil {
		return 0, err
	}
	budget, err := ds.CountDead(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("outbox: replay dead events: %w", err)
	}
	entry := d.entry(ctx, AuditReplayAll, filterTarget(f))
	if budget == 0 {
		if err := d.record(ctx, entry); err != nil {
			return 0, fmt.Errorf("outbox: replay dead events: %w", err)
		}
		return 0, nil
	}
	_, audited := d.store.(storage.AuditedStore)
	var total int64
	for total < budget {
		limit := int(min(int64(batchSize), budget-total))
		var n int64
		if audited {
			n, err = d.change(ctx, storage.AuditedChangeParams{Entry: entry, DeadFilter: f, Limit: limit, Now: d.now(), Continue: total > 0})
		} else { // the entry is recorded at the end
			n, err = ds.Replay(ctx, storage.ReplayParams{DeadFilter: f, Limit: limit, Now: d.now()})
		}
		if err != nil {
			if ae := (*AuditError)(nil); errors.As(err, &ae) {
				ae.Recorded = total
			} else if total > 0 && !audited {
				entry.Count = total
				if aerr := d.record(ctx, entry); aerr != nil {
					aerr.Unrecorded = total
					err = errors.Join(err, aerr)
				}
			}
			return total, fmt.Errorf("outbox: replay dead events: %w", err)
		}
		total += n
		if n > 0 {
			d.replayed()
		}
		if n < int64(limit) {
			break
		}
	}
	if audited {
		return total, nil
	}
	entry.Count = total
	if err := d.record(ctx, entry); err != nil {
		err.Unrecorded = total
		return total, fmt.Errorf("outbox: replay dead events: %w", err)
	}
	return total, nil
}

// replayListed is ReplayAll on an EventStore: pages of the DEAD list of f, each
// replayed by ID.
func (d *Events) replayListed(ctx context.Context, f DeadFilter, batch int) (int64, error) {
	entry := d.entry(ctx, AuditReplayAll, filterTarget(f))
	_, audited := d.store.(storage.AuditedStore)
	q := EventQuery{Status: StatusDead, Limit: batch,
		EventFilter: EventFilter{EventType: f.EventType, AggregateType: f.AggregateType, Listener: f.Listener}}
	var (
		total    int64
		recorded bool // the entry is stored (audited)
	)
	fail := func(err error) (int64, error) {
		if ae := (*AuditError)(nil); errors.As(err, &ae) {
			ae.Recorded = total
		} else if !audited && total > 0 {
			entry.Count = total
			if aerr := d.record(ctx, entry); aerr != nil {
				aerr.Unrecorded = total
				err = errors.Join(err, aerr)
			}
		}
		return total, fmt.Errorf("outbox: replay dead events: %w", err)
	}
	for {
		page, err := d.List(ctx, q)
		if err != nil {
			return fail(err)
		}
		if len(page.Events) > 0 {
			ids := make([]string, len(page.Events))
			for i, e := range page.Events {
				ids[i] = e.ID
			}
			var n int64
			if audited {
				n, err = d.change(ctx, storage.AuditedChangeParams{Entry: entry, IDs: ids, Now: d.now(), Continue: recorded})
				recorded = recorded || err == nil
			} else { // the entry is recorded at the end
				ds, _ := d.deadStore()
				n, err = ds.Replay(ctx, storage.ReplayParams{IDs: ids, Now: d.now()})
			}
			if err != nil {
				return fail(err)
			}
			total += n
			if n > 0 {
				d.replayed()
			}
		}
		if page.Next.IsZero() {
			break
		}
		q.After = page.Next
	}
	if recorded {
		return total, nil
	}
	entry.Count = total
	if err := d.record(ctx, entry); err != nil {
		if total > 0 {
			err.Unrecorded = total
		}
		return total, fmt.Errorf("outbox: replay dead events: %w", err)
	}
	return total, nil
}

// wrapErr wraps a change's error with what was changed.
func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outbox: %s: %w", what, err)
}

func (d *Events) replayed() {
	if d.afterReplay != nil {
		d.afterReplay()
	}
}

// Stats counts events per status and reports the oldest pending one. It reads every
// row (metrics read it), so its cost grows with the table; [Events.Overview] is
// the bounded summary the admin page shows.
func (d *Events) Stats(ctx context.Context) (Stats, error) {
	ss, ok := d.store.(storage.StatsStore)
	if !ok {
		return Stats{}, fmt.Errorf("outbox: store %T does not implement StatsStore: %w", d.store, errors.ErrUnsupported)
	}
	s, err := ss.Stats(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	return s, nil
}
