package storage

import (
	"context"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// ListEventsParams are the inputs of [EventStore.ListEvents].
type ListEventsParams struct {
	Status outboxtype.Status
	outboxtype.EventFilter
	Newest bool
	// After is the position of the last event of the previous page, in the list's
	// order; zero starts at the beginning.
	After outboxtype.Cursor
	// Limit bounds the page. Must be positive.
	Limit int
	// ScanLimit bounds the rows of the index read when a filter is not part of it. Must
	// be positive.
	ScanLimit int
}

// Validate reports whether p can be passed to [EventStore.ListEvents]; the error matches
// [outboxtype.ErrInvalidArgument].
func (p ListEventsParams) Validate() error {
	if p.Status > outboxtype.StatusDiscarded {
		return check.Invalid("list events", "unknown status %d", p.Status)
	}
	if err := p.EventFilter.Validate(); err != nil {
		return err
	}
	if p.Blocking && p.Status != outboxtype.StatusRetry && p.Status != outboxtype.StatusDead {
		return check.Invalid("list events", "Blocking lists RETRY and DEAD events, not %s", p.Status)
	}
	if p.OrderKey == "" && p.After.OrderSeq != 0 {
		return check.Invalid("list events", "After is a cursor of a list by order key (OrderSeq %d), and OrderKey is empty", p.After.OrderSeq)
	}
	if p.OrderKey != "" {
		if !p.Status.InKeyOrder() {
			return check.Invalid("list events", "OrderKey lists NEW, RETRY, DEAD and WAITING events, not %s: the others have left their key", p.Status)
		}
		if !p.After.IsZero() && (p.After.OrderSeq == 0 || !p.After.CreatedAt.IsZero()) {
			return check.Invalid("list events", "After is not a cursor of a list by order key (it needs OrderSeq and no CreatedAt)")
		}
	}
	if p.Limit <= 0 || p.ScanLimit <= 0 {
		return check.Invalid("list events", "Limit and ScanLimit must be positive, got %d and %d", p.Limit, p.ScanLimit)
	}
	return nil
}

// EventStore is implemented by a [Store] that lists events of every status, for
// outbox.Events.List and outbox.Events.CountByType. Without it they return an error
// matching errors.ErrUnsupported.
type EventStore interface {
	// ListEvents returns at most p.Limit events of p.Status that match the filter, in the
	// list's order (see outbox.EventQuery), after p.After. When a filter is outside the
	// list's index and p.ScanLimit rows were read before p.Limit matched, stop is the
	// position of the last row read (the next page starts after it); else it is zero.
	ListEvents(ctx context.Context, p ListEventsParams) (events []outboxtype.Event, stop outboxtype.Cursor, err error)
	// CountByType counts the events per status and event type.
	CountByType(ctx context.Context) ([]outboxtype.TypeCount, error)
}

// CountEventsParams are the inputs of [EventCountStore.CountEvents].
type CountEventsParams struct {
	Status outboxtype.Status
	outboxtype.EventFilter
	// Groups asks for EventCounts.Groups.
	Groups bool
	// ScanLimit bounds the rows of the index read. Must be positive.
	ScanLimit int
}

// Validate reports whether p can be passed to [EventCountStore.CountEvents]; the error
// matches [outboxtype.ErrInvalidArgument].
func (p CountEventsParams) Validate() error {
	if p.ScanLimit <= 0 {
		return check.Invalid("count events", "ScanLimit must be positive, got %d", p.ScanLimit)
	}
	return p.List().Validate()
}

// List is the list whose first ScanLimit rows a count of p reads: the events of the
// status in the list's order, newest first for DONE, FALLBACK and DISCARDED events (as
// the admin page lists them; on PostgreSQL and SQLite their index holds every finished
// row, DEAD ones too, and the newest finished rows are the ones a purge left).
func (p CountEventsParams) List() ListEventsParams {
	return ListEventsParams{Status: p.Status, EventFilter: p.EventFilter, Newest: p.EventFilter.ListsByFinish(p.Status),
		Limit: 1, ScanLimit: p.ScanLimit}
}

// EventCountStore is implemented by an [EventStore] that counts with a bound, for
// outbox.Events.Count and outbox.Events.Overview (the admin's counts). Without it
// they return an error matching errors.ErrUnsupported.
type EventCountStore interface {
	// CountEvents counts the events of p.Status that match the filter. It reads at
	// most p.ScanLimit rows of an index that holds them, in the order of their list
	// (newest first for DONE, FALLBACK and DISCARDED events): that of the list
	// [EventStore.ListEvents] reads, or any that holds the status in that order. When
	// the index has more rows, the count is of the rows read and AtLeast is set.
	CountEvents(ctx context.Context, p CountEventsParams) (outboxtype.EventCounts, error)
	// CountBlockedKeys counts the blocked order keys among at most scanLimit rows of
	// the order index (the ordered events that are not finished), AtLeast when it has
	// more.
	CountBlockedKeys(ctx context.Context, scanLimit int) (outboxtype.BlockedKeys, error)
}
