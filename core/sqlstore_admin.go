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
	events, err := s.listPage(ctx, pl, p, bound)
	if err != nil {
		return nil, Cursor{}, fmt.Errorf("list events: %w", err)
	}
	if p.ErrorContains != "" {
		// The statement's LIKE is a superset of the matches (errorPrefilter): keep
		// those MatchesError accepts and, while the page is short and the statement
		// was cut by its LIMIT, read on after the last row, twice as many at a time.
		// Every read stays between the cursor and the window's end.
		var kept []Event
		for limit := p.Limit; ; {
			for _, e := range events {
				if len(kept) < p.Limit && p.MatchesError(e.LastError) {
					kept = append(kept, e)
				}
			}
			if len(kept) >= p.Limit || len(events) < limit {
				break
			}
			next := p
			next.After = ListCursor(events[len(events)-1], p.Status, p.EventFilter)
			limit = min(2*limit, p.ScanLimit)
			next.Limit = limit
			if events, err = s.listPage(ctx, pl, next, bound); err != nil {
				return nil, Cursor{}, fmt.Errorf("list events: %w", err)
			}
		}
		events = kept
	}
	if bound == nil || len(events) >= p.Limit {
		return events, Cursor{}, nil
	}
	return events, *bound, nil
}

// listPage reads the rows of one statement of a list page (listPageQuery).
func (s *sqlStore) listPage(ctx context.Context, pl listPlan, p ListEventsParams, bound *Cursor) ([]Event, error) {
	q, err := s.d.listPageQuery(s.table, pl, p, bound)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	events, bad, err := scanEvents(rows, s.d, lenient)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, bad[0]
	}
	return events, nil
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

var _ AuditedStore = (*sqlStore)(nil)

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

// ChangeAudited implements [AuditedStore.ChangeAudited]: one transaction (READ
// COMMITTED on MySQL), under QueryTimeout, of the change's statements (those of Replay,
// DeleteDead or Discard) and the entry's INSERT, or with p.Continue the UPDATE that
// adds to its count. A failed entry rolls the change back; a lock conflict rolls it all
// back and it is retried, as claims are.
func (s *sqlStore) ChangeAudited(ctx context.Context, p AuditedChangeParams) (int64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var (
		qs  []query
		err error
	)
	switch p.Entry.Action {
	case AuditReplay, AuditReplayAll:
		qs, err = s.d.replayQueries(s.table, ReplayParams{IDs: p.IDs, DeadFilter: p.DeadFilter, Limit: p.Limit, Now: p.Now})
	case AuditDelete:
		qs = s.d.deleteDeadQueries(s.table, p.IDs)
	case AuditDiscard:
		qs, err = s.d.discardQueries(s.table, p.IDs, p.Now)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.Entry.Action, err)
	}
	var n int64
	err = retryConflicts(ctx, func() error {
		n, err = s.changeAuditedOnce(ctx, qs, p)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.Entry.Action, err)
	}
	return n, nil
}

// changeAuditedOnce runs one transaction of ChangeAudited.
func (s *sqlStore) changeAuditedOnce(ctx context.Context, qs []query, p AuditedChangeParams) (n int64, err error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var tx interface {
		Executor
		Commit() error
		Rollback() error
	}
	if s.d.readCommittedDML {
		tx, err = s.beginReadCommitted(ctx)
	} else {
		tx, err = s.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	exec := func(q query) (int64, error) {
		res, err := tx.ExecContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	for _, q := range qs {
		k, err := exec(q)
		if err != nil {
			return 0, err
		}
		n += k
	}
	if n > 0 || !p.OnlyIfChanged && !p.Continue {
		e := p.Entry
		e.Count = n
		q, err := s.d.recordAuditQuery(s.table, e)
		if p.Continue {
			q = s.d.addAuditCountQuery(s.table, e.ID, n)
		}
		if err != nil {
			return 0, err
		}
		k, err := exec(q)
		if err == nil && k == 0 {
			err = errAuditEntryGone
		}
		if err != nil {
			if isLockConflict(err) {
				return 0, err // retried whole
			}
			return 0, &AuditError{Action: p.Entry.Action, Reason: auditReason(err), Err: err}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	committed = true
	return n, nil
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
