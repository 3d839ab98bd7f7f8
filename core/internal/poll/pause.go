package poll

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Paused subscriptions (docs/listeners.md, pause). The table's pause set
// ([storage.PauseStore]) reaches this process's queues through the poller: at the start
// of a cycle at most every pauseRefreshMin, every Interval while it waits, and at once
// when Events.Pause or Resume runs here (RefreshPaused). Reads leave out the rows of
// paused subscriptions; an event routed by its type that only a paused subscription
// takes has no listener for the read to leave out, so it is pinned to that subscription
// when the queues refuse it (its listener column written, its claim cleared).

// pauseRefreshMin is the shortest time between two reads of the pause set by poll
// cycles; back-to-back cycles (a backlog) do not read it each time.
const pauseRefreshMin = time.Second

// pauses is the poller's view of the pause set.
type pauses struct {
	store storage.PauseStore // nil: the store keeps no pauses
	mu    sync.Mutex         // serialises refreshes: a later read is applied later
	last  time.Time          // guarded by mu: the last refresh
	// unsupported is set when the table has no pause table: it is not read again
	// until the process starts again (after MigrateTable).
	unsupported bool // guarded by mu
}

// RefreshPaused reads the pause set and applies it to the queues (see above). A failed
// read is logged and keeps the set as it was. It returns the pause set's error.
func (p *Poller) RefreshPaused(ctx context.Context) error {
	return p.refreshPaused(ctx, true)
}

func (p *Poller) refreshPaused(ctx context.Context, force bool) error {
	ps := &p.pauses
	if ps.store == nil {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := time.Now()
	if ps.unsupported || !force && now.Sub(ps.last) < pauseRefreshMin {
		return nil
	}
	ps.last = now
	if p.cfg.QueryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.QueryTimeout)
		defer cancel()
	}
	list, err := ps.store.Paused(ctx)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		ps.unsupported = true
		p.log.LogAttrs(ctx, slog.LevelWarn, "the table has no pause table: nothing is paused (run outbox.MigrateTable, then restart)",
			slog.String("error", err.Error()))
		return err
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			p.log.LogAttrs(ctx, slog.LevelError, "reading the paused subscriptions failed; the last ones read still hold",
				slog.String("error", err.Error()))
		}
		return err
	}
	names := make([]string, len(list))
	for i, x := range list {
		names[i] = x.Listener
	}
	p.settlePaused(ctx, p.q.SetPaused(names))
	return nil
}

// settlePaused deals with events of paused subscriptions that the queues refused or
// took out of a lane: an event routed by its type is pinned to its subscription, so that
// reads leave it out (its claim cleared); the claim of any other claimed one is given
// back.
func (p *Poller) settlePaused(ctx context.Context, events []dispatch.PausedEvent) {
	if len(events) == 0 {
		return
	}
	type pinKey struct{ listener, token string }
	pins := make(map[pinKey][]Event)
	claimed := make(map[string][]Event)
	for _, e := range events {
		if e.Event.Listener == "" && e.Listener != "" && p.pauses.store != nil {
			k := pinKey{e.Listener, e.LockedBy}
			pins[k] = append(pins[k], e.Event)
		} else if e.LockedBy != "" {
			claimed[e.LockedBy] = append(claimed[e.LockedBy], e.Event)
		}
	}
	for k, evs := range pins {
		ids := make([]string, len(evs))
		for i := range evs {
			ids[i] = evs[i].ID
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if p.cfg.QueryTimeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, p.cfg.QueryTimeout)
		}
		_, err := p.pauses.store.Pin(cctx, storage.PinParams{IDs: ids, Listener: k.listener, Token: k.token})
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				p.log.LogAttrs(ctx, slog.LevelError, "pinning events of a paused subscription failed; they are read again",
					slog.String("listener", k.listener), slog.Int("events", len(ids)), slog.String("error", err.Error()))
			}
			if k.token != "" {
				claimed[k.token] = append(claimed[k.token], evs...)
			}
		}
	}
	for token, evs := range claimed {
		p.refused(ctx, evs, token)
	}
}

// pausedEvent returns ev as refused for its paused subscription.
func (p *Poller) pausedEvent(ev outboxtype.Event) dispatch.PausedEvent {
	return dispatch.PausedEvent{Event: ev, Listener: p.q.PausedListener(ev)}
}

// PauseReader returns a service whose Start reads the pause set into the queues
// (RefreshPaused) and whose Stop does nothing. It is started before the dispatcher, so
// that a process that starts, or takes the dispatch lease, during a pause takes none of
// the paused subscription's events before the poller's first cycle (its hot path's
// included). A failed read is logged and does not fail the start: the poller's cycles
// read the set again.
func (p *Poller) PauseReader() startstop.Service { return pauseReader{p} }

type pauseReader struct{ p *Poller }

func (r pauseReader) Start(ctx context.Context) error {
	_ = r.p.RefreshPaused(ctx)
	return nil
}

func (pauseReader) Stop(context.Context) error { return nil }
