package outboxtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

var _ storage.EventCountStore = (*MemoryStore)(nil)

// CountEvents implements [storage.EventCountStore.CountEvents]: the events ListEvents
// would list in pages, within the same scan window.
func (s *MemoryStore) CountEvents(ctx context.Context, p storage.CountEventsParams) (outbox.EventCounts, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return outbox.EventCounts{}, err
	}
	finished := p.AggregateID == "" && (p.Status == outbox.StatusDone || p.Status == outbox.StatusFallback || p.Status == outbox.StatusDiscarded)
	events, stop, err := s.ListEvents(ctx, storage.ListEventsParams{Status: p.Status, EventFilter: p.EventFilter, Newest: finished,
		Limit: p.ScanLimit, ScanLimit: p.ScanLimit})
	if err != nil {
		return outbox.EventCounts{}, err
	}
	out := outbox.EventCounts{EventCount: outbox.EventCount{N: int64(len(events)), AtLeast: !stop.IsZero() || len(events) >= p.ScanLimit}}
	if p.Groups {
		n := map[outbox.GroupCount]int64{}
		for _, e := range events {
			n[outbox.GroupCount{AggregateType: e.AggregateType, EventType: e.Type, Listener: e.Listener}]++
		}
		for g, k := range n {
			g.N = k
			out.Groups = append(out.Groups, g)
		}
	}
	return out, nil
}

// CountBlockedKeys implements [storage.EventCountStore.CountBlockedKeys]: its "order
// index" is the ordered events that are not finished, in (OrderKey, OrderSeq, ID) order.
func (s *MemoryStore) CountBlockedKeys(ctx context.Context, scanLimit int) (outbox.BlockedKeys, error) {
	if err := ctx.Err(); err != nil {
		return outbox.BlockedKeys{}, err
	}
	if scanLimit <= 0 {
		return outbox.BlockedKeys{}, fmt.Errorf("count blocked keys: %w: scanLimit must be positive, got %d", outbox.ErrInvalidArgument, scanLimit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var index []*outbox.Event
	for _, r := range s.rows {
		if e := &r.ev; e.OrderKey != "" && e.Status != outbox.StatusDone && e.Status < outbox.StatusFallback {
			index = append(index, e)
		}
	}
	slices.SortFunc(index, func(a, b *outbox.Event) int {
		return cmp.Or(strings.Compare(a.OrderKey, b.OrderKey), cmp.Compare(a.OrderSeq, b.OrderSeq), strings.Compare(a.ID, b.ID))
	})
	var b outbox.BlockedKeys
	b.AtLeast = len(index) >= scanLimit
	holders := map[string]time.Time{}
	for _, e := range index[:min(len(index), scanLimit)] {
		if (e.Status == outbox.StatusRetry || e.Status == outbox.StatusDead) && s.keyBlocked(e.OrderKey) {
			if old, ok := holders[e.OrderKey]; !ok || e.CreatedAt.Before(old) {
				holders[e.OrderKey] = e.CreatedAt
			}
		}
	}
	b.N = int64(len(holders))
	for _, t := range holders {
		if b.Oldest.IsZero() || t.Before(b.Oldest) {
			b.Oldest = t
		}
	}
	return b, nil
}

// keyBlocked reports whether key has WAITING events and no NEW one.
func (s *MemoryStore) keyBlocked(key string) bool {
	waiting := false
	for _, r := range s.rows {
		if r.ev.OrderKey != key {
			continue
		}
		if r.ev.Status == outbox.StatusNew {
			return false
		}
		waiting = waiting || r.ev.Status == outbox.StatusWaiting
	}
	return waiting
}
