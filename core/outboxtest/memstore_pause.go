package outboxtest

import (
	"context"
	"maps"
	"slices"
	"strings"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

var _ storage.PauseStore = (*MemoryStore)(nil)

// Paused implements [storage.PauseStore.Paused].
func (s *MemoryStore) Paused(ctx context.Context) ([]outbox.Pause, error) {
	if err := check(ctx, nil); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Values(s.pause))
	slices.SortFunc(out, func(a, b outbox.Pause) int { return strings.Compare(a.Listener, b.Listener) })
	return out, nil
}

// SetPaused implements [storage.PauseStore.SetPaused]; a pause takes the store's clock.
func (s *MemoryStore) SetPaused(ctx context.Context, p storage.SetPausedParams) (bool, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, was := s.pause[p.Listener]
	changed := was != p.Pause
	switch {
	case p.Pause && !was:
		if s.pause == nil {
			s.pause = make(map[string]outbox.Pause)
		}
		s.pause[p.Listener] = outbox.Pause{Listener: p.Listener, At: s.dbNow(), Actor: p.Entry.Actor, Reason: p.Reason}
	case !p.Pause && was:
		delete(s.pause, p.Listener)
	}
	e := p.Entry
	if changed {
		e.Count = 1
	}
	s.audit = append(s.audit, e)
	return changed, nil
}

// Pin implements [storage.PauseStore.Pin].
func (s *MemoryStore) Pin(ctx context.Context, p storage.PinParams) (int64, error) {
	if err := check(ctx, p.Validate()); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range uniq(p.IDs) {
		r, ok := s.rows[id]
		if !ok {
			continue
		}
		e := &r.ev
		if e.Listener != "" || e.Status != outbox.StatusNew && e.Status != outbox.StatusRetry || p.Token != "" && e.LockedBy != p.Token {
			continue
		}
		e.Listener = p.Listener
		clearClaim(e)
		n++
	}
	return n, nil
}

// skipped reports whether s leaves e out of a read.
func skipped(e *outbox.Event, s storage.Skip) bool {
	if e.Listener != "" {
		return slices.Contains(s.Listeners, e.Listener)
	}
	return slices.Contains(s.Routes, storage.RouteKey{AggregateType: e.AggregateType, EventType: e.Type})
}
