package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Page sizes of the lists of [Events].
const (
	DefaultPageSize        = 50  // the page size of a query whose Limit is 0
	MaxPageSize            = 500 // the largest page a list returns
	DefaultReplayBatchSize = 100 // the batch size of Events.ReplayAll when 0 is given
)

// Events inspects and changes events (docs/operations.md), recording each change with
// the context's actor ([WithActor]). It is safe for concurrent use.
type Events struct {
	store       storage.Store
	now         func() time.Time
	afterReplay func()                // wakes the pollers after a replay; nil: nothing to wake
	afterPause  func(context.Context) // applies a pause or resume here, tells the others
	loads       func() []SubscriptionLoad
}

// SubscriptionLoad is a subscription's load here (see outboxtype.SubscriptionMetrics).
type SubscriptionLoad = outboxtype.SubscriptionLoad

// Subscriptions returns each registered subscription's load here, by name.
func (d *Events) Subscriptions(ctx context.Context) ([]SubscriptionLoad, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.loads == nil {
		return nil, nil
	}
	return d.loads(), nil
}

// newEvents returns the inspection of store's events; afterReplay, when set, runs after
// each replay.
func newEvents(store storage.Store, afterReplay func()) *Events {
	return &Events{store: store, now: time.Now, afterReplay: afterReplay}
}

// deadStore returns the store's [storage.DeadStore] methods, or an error matching
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
	// Partial is set when a filtered page stopped after MaxScanRows rows: Next continues.
	Partial bool
}

// ListDead returns a page of DEAD events matching q, oldest first. A limit outside
// 0..MaxPageSize returns an error wrapping ErrInvalidArgument.
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
		return DeadPage(page), nil
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

// CountDead counts the DEAD events matching f, reading every one of them.
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

// Get returns an event by ID, any status, or an error wrapping ErrNotFound.
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

// Replay moves one DEAD event back to NEW, attempts reset; the error wraps ErrNotFound,
// or ErrNotDead when the event is not DEAD.
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

// Delete deletes a DEAD event; the error wraps ErrNotFound or ErrNotDead.
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

// Discard makes a DEAD or pending event DISCARDED: never delivered (again), kept until the
// purge; an ordered event's key moves on. One being delivered right now may still be
// delivered once, its outcome unrecorded. The error wraps ErrNotFound, or ErrFinished.
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
// DefaultReplayBatchSize) and returns how many it replayed, so far when an error stops
// it. It is one audit entry; an event that dies again meanwhile is not replayed twice.
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

// Stats counts events per status, with the oldest pending, reading every row.
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
