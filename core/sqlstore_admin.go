package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ListEvents implements [EventStore.ListEvents]. A list whose filters are all in its
// index is one query. Any other first reads where the scan window ends (the
// ScanLimit-th row of the index after the cursor, an index-only read), then the matching
// rows up to there, so that a page reads at most ScanLimit rows whatever it searches.
func (s *sqlStore) ListEvents(ctx context.Context, p ListEventsParams) ([]Event, Cursor, error) {
	if err := p.Validate(); err != nil {
		return nil, Cursor{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	pl := s.d.listPlan(s.table, p)
	var bound *Cursor
	if pl.window {
		q, err := s.d.listWindowQuery(s.table, pl, p)
		if err != nil {
			return nil, Cursor{}, fmt.Errorf("list events: %w", err)
		}
		var (
			at  any
			seq int64
			id  []byte
		)
		dest := []any{&at, &id}
		if pl.seq {
			dest[0] = &seq
		}
		switch err := s.db.QueryRowContext(ctx, q.SQL, q.Args...).Scan(dest...); {
		case errors.Is(err, sql.ErrNoRows): // the window reaches the end of the list
		case err != nil:
			return nil, Cursor{}, fmt.Errorf("list events: scan window: %w", err)
		case pl.seq:
			bound = &Cursor{OrderSeq: seq, ID: string(id)}
		default:
			t, err := s.d.decodeTime(at)
			if err != nil {
				return nil, Cursor{}, fmt.Errorf("list events: scan window: %w", err)
			}
			bound = &Cursor{CreatedAt: t, ID: string(id)}
		}
	}
	q, err := s.d.listPageQuery(s.table, pl, p, bound)
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("list events: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	events, bad, err := scanEvents(rows, s.d, lenient)
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("list events: %w", err)
	}
	if len(bad) > 0 {
		return nil, Cursor{}, fmt.Errorf("list events: %w", bad[0])
	}
	if bound == nil || len(events) >= p.Limit {
		return events, Cursor{}, nil
	}
	return events, *bound, nil
}

// CountByType implements [EventStore.CountByType] with one grouped query.
func (s *sqlStore) CountByType(ctx context.Context) ([]TypeCount, error) {
	q := s.d.countByTypeQuery(s.table)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, fmt.Errorf("count by type: %w", err)
	}
	defer rows.Close()
	var out []TypeCount
	for rows.Next() {
		var c TypeCount
		var st int64
		if err := rows.Scan(&st, &c.EventType, &c.Count); err != nil {
			return nil, fmt.Errorf("count by type: %w", err)
		}
		c.Status = Status(st)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count by type: %w", err)
	}
	return out, nil
}

// RecordAudit implements [AuditStore.RecordAudit].
func (s *sqlStore) RecordAudit(ctx context.Context, e AuditEntry) error {
	q, err := s.d.recordAuditQuery(s.table, e)
	if err != nil {
		return fmt.Errorf("record audit: %w", err)
	}
	if _, err := s.exec1(ctx, q); err != nil {
		return fmt.Errorf("record audit: %w", err)
	}
	return nil
}

// ListAudit implements [AuditStore.ListAudit].
func (s *sqlStore) ListAudit(ctx context.Context, p ListAuditParams) ([]AuditEntry, error) {
	if p.Limit <= 0 {
		return nil, invalidParams("list audit", "Limit must be positive, got %d", p.Limit)
	}
	q := s.d.listAuditQuery(s.table, p)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var (
			e  AuditEntry
			id []byte
			at any
		)
		if err := rows.Scan(&id, &at, &e.Actor, &e.Action, &e.Target, &e.Count); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		if e.At, err = s.d.decodeTime(at); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.ID = string(id)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
