package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// DEAD rows: ListDead, CountDead, Replay, DeleteDead, and Discard.

// ListDead implements [DeadStore.ListDead].
func (s *Store) ListDead(ctx context.Context, p storage.ListDeadParams) ([]outboxtype.Event, error) {
	q, err := s.d.listDeadQuery(s.table, p)
	if err != nil {
		return nil, fmt.Errorf("list dead: %w", err)
	}
	events, bad, err := s.queryEvents(ctx, s.db, q, lenient)
	if err != nil {
		return nil, fmt.Errorf("list dead: %w", err)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("list dead: %w", bad[0])
	}
	return events, nil
}

// CountDead implements [DeadStore.CountDead].
func (s *Store) CountDead(ctx context.Context, f outboxtype.DeadFilter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	q := s.d.countDeadQuery(s.table, f)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var n int64
	if err := s.db.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count dead: %w", err)
	}
	return n, nil
}

// Replay implements [DeadStore.Replay]. A replay by IDs runs one statement per chunk of IDs;
// when one fails, the rows of earlier chunks stay replayed and are counted.
func (s *Store) Replay(ctx context.Context, p storage.ReplayParams) (int64, error) {
	qs, err := s.d.replayQueries(s.table, p)
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	var n int64
	if len(p.IDs) == 0 {
		n, err = s.execRange(ctx, qs[0])
	} else {
		// Like MarkDone of several IDs; and a replay, even of one row, can deadlock
		// with a purge deleting the same DEAD rows (the two lock the row and its
		// index entries in opposite orders), which execRange retries.
		n, err = s.execEach(ctx, qs, s.execRange)
	}
	if err != nil {
		return n, fmt.Errorf("replay: %w", err)
	}
	return n, nil
}

// DeleteDead implements [DeadStore.DeleteDead], one statement per chunk of IDs (like a
// replay, it can meet a purge of the same rows, which execRange retries).
func (s *Store) DeleteDead(ctx context.Context, ids []string) (int64, error) {
	for _, id := range ids {
		if id == "" {
			return 0, fmt.Errorf("delete dead: %w: empty event ID", outboxtype.ErrInvalidArgument)
		}
	}
	n, err := s.execEach(ctx, s.d.deleteDeadQueries(s.table, ids), s.execRange)
	if err != nil {
		return n, fmt.Errorf("delete dead: %w", err)
	}
	return n, nil
}

// Discard implements [DiscardStore.Discard].
func (s *Store) Discard(ctx context.Context, ids []string, at time.Time) (int64, error) {
	qs, err := s.d.discardQueries(s.table, ids, at)
	if err != nil {
		return 0, fmt.Errorf("discard: %w", err)
	}
	n, err := s.execEach(ctx, qs, s.execRange)
	if err != nil {
		return n, fmt.Errorf("discard: %w", err)
	}
	return n, nil
}
