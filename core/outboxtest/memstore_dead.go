package outboxtest

import (
	"context"
	"fmt"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// The DEAD rows of the memory store: listed, counted, replayed, discarded, deleted.

// ListDead implements [storage.DeadStore.ListDead].
func (s *MemoryStore) ListDead(ctx context.Context, p storage.ListDeadParams) ([]outbox.Event, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return nil, err
	}
	after := outbox.Cursor{CreatedAt: canonical(p.After.CreatedAt), ID: p.After.ID}
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := s.sorted(func(e *outbox.Event) bool {
		return matchDead(e, p.DeadFilter) && (p.After.IsZero() || keyAfter(e, after))
	})
	out := make([]outbox.Event, 0, min(len(rows), p.Limit))
	for _, r := range rows[:min(len(rows), p.Limit)] {
		out = append(out, clone(r.ev))
	}
	return out, nil
}

// CountDead implements [storage.DeadStore.CountDead].
func (s *MemoryStore) CountDead(ctx context.Context, f outbox.DeadFilter) (int64, error) {
	if err := check(ctx, f.Validate()); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.rows {
		if matchDead(&r.ev, f) {
			n++
		}
	}
	return n, nil
}

// Replay implements [storage.DeadStore.Replay].
func (s *MemoryStore) Replay(ctx context.Context, p storage.ReplayParams) (int64, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return 0, err
	}
	now := canonical(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*memRow
	if len(p.IDs) > 0 {
		for _, id := range uniq(p.IDs) {
			if r, ok := s.rows[id]; ok && r.ev.Status == outbox.StatusDead {
				rows = append(rows, r)
			}
		}
	} else {
		rows = s.sorted(func(e *outbox.Event) bool { return matchDead(e, p.DeadFilter) })
		rows = rows[:min(len(rows), p.Limit)]
	}
	for _, r := range rows {
		r.ev.Status, r.ev.Attempts, r.ev.LastError, r.ev.AvailableAt, r.ev.DoneAt = outbox.StatusNew, 0, "", now, time.Time{}
		r.ev.FirstAttemptAt = time.Time{}
		if r.ev.OrderKey != "" {
			r.ev.Status = outbox.StatusWaiting // Promote moves it on when its key lets it
		}
		clearClaim(&r.ev)
	}
	return int64(len(rows)), nil
}

// Discard implements [storage.DiscardStore.Discard].
func (s *MemoryStore) Discard(ctx context.Context, ids []string, at time.Time) (int64, error) {
	for _, id := range ids {
		if id == "" {
			return 0, fmt.Errorf("discard: %w: empty event ID", outbox.ErrInvalidArgument)
		}
	}
	if at.IsZero() {
		return 0, fmt.Errorf("discard: %w: the time is zero", outbox.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range uniq(ids) {
		r, ok := s.rows[id]
		if !ok {
			continue
		}
		switch r.ev.Status {
		case outbox.StatusNew, outbox.StatusRetry, outbox.StatusDead, outbox.StatusWaiting:
			r.ev.Status, r.ev.DoneAt = outbox.StatusDiscarded, canonical(at)
			clearClaim(&r.ev)
			n++
		}
	}
	return n, nil
}

// DeleteDead implements [storage.DeadStore.DeleteDead].
func (s *MemoryStore) DeleteDead(ctx context.Context, ids []string) (int64, error) {
	for _, id := range ids {
		if id == "" {
			return 0, fmt.Errorf("delete dead: %w: empty event ID", outbox.ErrInvalidArgument)
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range uniq(ids) {
		if r, ok := s.rows[id]; ok && r.ev.Status == outbox.StatusDead {
			delete(s.rows, id)
			n++
		}
	}
	return n, nil
}
