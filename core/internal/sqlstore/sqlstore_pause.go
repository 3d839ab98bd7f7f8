package sqlstore

import (
	"context"
	"fmt"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

var _ storage.PauseStore = (*Store)(nil)

// Paused implements [storage.PauseStore.Paused]: one read of the pause table, under
// QueryTimeout.
func (s *Store) Paused(ctx context.Context) ([]outboxtype.Pause, error) {
	ps, err := s.readPaused(ctx)
	if err != nil {
		return nil, s.sideTableError(ctx, "paused", pauseTable(s.table), "paused_by", "pause", err)
	}
	return ps, nil
}

func (s *Store) readPaused(ctx context.Context) ([]outboxtype.Pause, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	q := s.d.pausedQuery(s.table)
	rows, err := s.on(s.db).QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outboxtype.Pause
	for rows.Next() {
		var p outboxtype.Pause
		var at any
		if err := rows.Scan(&p.Listener, &at, &p.Actor, &p.Reason); err != nil {
			return nil, err
		}
		if p.At, err = s.d.decodeTime(at); err != nil {
			return nil, fmt.Errorf("pause of %q: paused_at: %w", p.Listener, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// SetPaused implements [storage.PauseStore.SetPaused]: the pause table's INSERT or
// DELETE and the audit entry in one transaction, as [Store.ChangeAudited] makes a change.
func (s *Store) SetPaused(ctx context.Context, p storage.SetPausedParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	qs := []query{s.d.setPausedQuery(s.table, p)}
	var n int64
	err := retryConflicts(ctx, func() (err error) {
		n, err = s.changeAuditedOnce(ctx, qs, storage.AuditedChangeParams{Entry: p.Entry})
		return err
	})
	if err != nil {
		return false, s.sideTableError(ctx, p.Entry.Action, pauseTable(s.table), "paused_by", "pause", err)
	}
	return n > 0, nil
}

// Pin implements [storage.PauseStore.Pin]: one UPDATE by primary key per chunk of IDs.
func (s *Store) Pin(ctx context.Context, p storage.PinParams) (int64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var total int64
	for _, q := range s.d.pinQueries(s.table, p) {
		n, err := s.exec1(ctx, q)
		if err != nil {
			return total, fmt.Errorf("pin: %w", err)
		}
		total += n
	}
	return total, nil
}
