package outboxtest

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

var (
	_ storage.EventStore = (*MemoryStore)(nil)
	_ storage.AuditStore = (*MemoryStore)(nil)
)

// ListEvents implements [storage.EventStore.ListEvents]. Its "index" of a list is the
// events of the status (or of the aggregate, with AggregateID), in the list's order;
// the scan window counts them.
func (s *MemoryStore) ListEvents(ctx context.Context, p storage.ListEventsParams) ([]outbox.Event, outbox.Cursor, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return nil, outbox.Cursor{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := func(e *outbox.Event) time.Time { return outboxtype.ListTime(*e, p.Status, p.EventFilter) }
	// compare orders e against the position c in the list's order: (OrderSeq, ID) in a
	// list by order key, else (list time, ID).
	compare := func(e *outbox.Event, c outbox.Cursor) int {
		if p.OrderKey != "" {
			return cmp.Or(cmp.Compare(e.OrderSeq, c.OrderSeq), strings.Compare(e.ID, c.ID))
		}
		return cmp.Or(key(e).Compare(canonical(c.CreatedAt)), strings.Compare(e.ID, c.ID))
	}
	var index []*outbox.Event
	for _, r := range s.rows {
		e := &r.ev
		inIndex := e.Status == p.Status
		switch {
		case p.OrderKey != "": // the order index: the key's rows that are not finished
			inIndex = e.OrderKey == p.OrderKey && e.Status != outbox.StatusDone && e.Status < outbox.StatusFallback
		case p.AggregateID != "":
			inIndex = e.AggregateID == p.AggregateID
		}
		if !inIndex {
			continue
		}
		if !p.After.IsZero() {
			if c := compare(e, p.After); (c <= 0 && !p.Newest) || (c >= 0 && p.Newest) {
				continue
			}
		}
		if (!p.From.IsZero() && key(e).Before(canonical(p.From))) || (!p.To.IsZero() && !key(e).Before(canonical(p.To))) {
			continue
		}
		index = append(index, e)
	}
	slices.SortFunc(index, func(a, b *outbox.Event) int {
		c := compare(a, outboxtype.ListCursor(*b, p.Status, p.EventFilter))
		if p.Newest {
			return -c
		}
		return c
	})
	f := p.EventFilter
	scanned := f.EventType != "" || f.AggregateType != "" || f.Listener != "" || f.ErrorContains != "" || p.AggregateID != "" ||
		p.OrderKey != "" || f.Blocking
	var stop outbox.Cursor
	if scanned && len(index) > p.ScanLimit {
		last := index[p.ScanLimit-1]
		index, stop = index[:p.ScanLimit], outboxtype.ListCursor(*last, p.Status, p.EventFilter)
	}
	var out []outbox.Event
	for _, e := range index {
		if len(out) == p.Limit {
			return out, outbox.Cursor{}, nil
		}
		if e.Status == p.Status && (f.EventType == "" || e.Type == f.EventType) &&
			(f.AggregateType == "" || e.AggregateType == f.AggregateType) &&
			(f.Listener == "" || e.Listener == f.Listener) &&
			f.MatchesError(e.LastError) &&
			(!f.Blocking || s.holdsKey(e)) {
			out = append(out, clone(*e))
		}
	}
	if len(out) >= p.Limit {
		stop = outbox.Cursor{}
	}
	return out, stop, nil
}

// holdsKey reports whether e holds its order key (outbox.EventFilter.Blocking): WAITING
// events of its key wait, and for a DEAD e nothing of the key is NEW or RETRY.
func (s *MemoryStore) holdsKey(e *outbox.Event) bool {
	if e.OrderKey == "" {
		return false
	}
	waiting, moving := false, false
	for _, r := range s.rows {
		if r.ev.OrderKey != e.OrderKey {
			continue
		}
		waiting = waiting || r.ev.Status == outbox.StatusWaiting
		moving = moving || r.ev.Status == outbox.StatusNew || r.ev.Status == outbox.StatusRetry
	}
	return waiting && (e.Status != outbox.StatusDead || !moving)
}

// CountByType implements [storage.EventStore.CountByType].
func (s *MemoryStore) CountByType(ctx context.Context) ([]outbox.TypeCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	type k struct {
		st outbox.Status
		t  string
	}
	n := map[k]int64{}
	for _, r := range s.rows {
		n[k{r.ev.Status, r.ev.Type}]++
	}
	out := make([]outbox.TypeCount, 0, len(n))
	for key, c := range n {
		out = append(out, outbox.TypeCount{Status: key.st, EventType: key.t, Count: c})
	}
	slices.SortFunc(out, func(a, b outbox.TypeCount) int {
		return cmp.Or(cmp.Compare(a.Status, b.Status), strings.Compare(a.EventType, b.EventType))
	})
	return out, nil
}

// RecordAudit implements [storage.AuditStore.RecordAudit].
func (s *MemoryStore) RecordAudit(ctx context.Context, e outbox.AuditEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.At = canonical(e.At)
	s.audit = append(s.audit, e)
	return nil
}

// ListAudit implements [storage.AuditStore.ListAudit].
func (s *MemoryStore) ListAudit(ctx context.Context, p storage.ListAuditParams) ([]outbox.AuditEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.Clone(s.audit)
	slices.SortFunc(all, func(a, b outbox.AuditEntry) int { return strings.Compare(b.ID, a.ID) })
	var out []outbox.AuditEntry
	for _, e := range all {
		if (p.Before == "" || e.ID < p.Before) && len(out) < p.Limit {
			out = append(out, e)
		}
	}
	return out, nil
}
