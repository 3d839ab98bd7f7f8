package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Pause is a paused subscription: its name, since when, by whom and why.
type Pause = outboxtype.Pause

// Pause holds the events of the subscription named listener pending on every process
// until Resume (docs/listeners.md, pause). Audited. Errors wrap ErrInvalidArgument, or
// errors.ErrUnsupported.
func (d *Events) Pause(ctx context.Context, listener, reason string) error {
	return d.setPaused(ctx, listener, reason, true)
}

// Resume delivers the paused subscription's events again, due longest first.
func (d *Events) Resume(ctx context.Context, listener string) error {
	return d.setPaused(ctx, listener, "", false)
}

// Paused returns the paused subscriptions, by name.
func (d *Events) Paused(ctx context.Context) ([]Pause, error) {
	ps, err := d.pauseStore()
	if err != nil {
		return nil, err
	}
	list, err := ps.Paused(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: paused subscriptions: %w", err)
	}
	return list, nil
}

func (d *Events) setPaused(ctx context.Context, listener, reason string, pause bool) error {
	ps, err := d.pauseStore()
	if err != nil {
		return err
	}
	action := AuditResume
	if pause {
		action = AuditPause
	}
	p := storage.SetPausedParams{Listener: listener, Pause: pause, Reason: reason, Entry: d.entry(ctx, action, listener)}
	if err := p.Validate(); err != nil {
		return err
	}
	if _, err := ps.SetPaused(ctx, p); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if d.afterPause != nil {
		d.afterPause(ctx)
	}
	return nil
}

// pauseStore returns the store's [storage.PauseStore], or an error matching
// errors.ErrUnsupported.
func (d *Events) pauseStore() (storage.PauseStore, error) {
	if ps, ok := d.store.(storage.PauseStore); ok {
		return ps, nil
	}
	return nil, fmt.Errorf("outbox: store %T does not implement PauseStore: %w", d.store, errors.ErrUnsupported)
}
