package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// ListEvents implements [EventStore.ListEvents]. A list whose filters are all in its
// index is one query. Any other first reads where the scan window ends (the
// ScanLimit-th row of the index after the cursor, an index-only read), then the matching
// rows up to there, so that a page reads at most ScanLimit rows whatever it searches.
func (s *Store) ListEvents(ctx context.Context, p storage.ListEventsParams) ([]outboxtype.Event, outboxtype.Cursor, error) {
	if err := p.Validate(); err != nil {
		return nil, outboxtype.Cursor{}, err
	}
	base := ctx // for listPage, whose statements each run under QueryTimeout (queryEvents)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	pl := s.d.listPlan(s.table, p)
	if err := s.aggregateIndex(ctx, p.AggregateID, &pl); err != nil {
		return nil, outboxtype.Cursor{}, fmt.Errorf("list events: %w", err)
	}
	var bound *outboxtype.Cursor
	if pl.window {
		q, err := s.d.listWindowQuery(s.table, pl, p)
		if err != nil {
			return nil, outboxtype.Cursor{}, fmt.Errorf("list events: %w", err)
		}
		if bound, err = s.windowEnd(ctx, pl, q); err != nil {
			return nil, outboxtype.Cursor{}, fmt.Errorf("list events: %w", err)
		}
	}
	events, err := s.listPage(base, pl, p, bound)
	if err != nil {
		return nil, outboxtype.Cursor{}, fmt.Errorf("list events: %w", err)
	}
	if p.ErrorContains != "" {
		// The statement's LIKE is a superset of the matches (check.ErrorPrefilter): keep
		// those MatchesError accepts and, while the page is short and the statement
		// was cut by its LIMIT, read on after the last row, twice as many at a time.
		// Every read stays between the cursor and the window's end.
		var kept []outboxtype.Event
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
			next.After = outboxtype.ListCursor(events[len(events)-1], p.Status, p.EventFilter)
			limit = min(2*limit, p.ScanLimit)
			next.Limit = limit
			if events, err = s.listPage(base, pl, next, bound); err != nil {
				return nil, outboxtype.Cursor{}, fmt.Errorf("list events: %w", err)
			}
		}
		events = kept
	}
	if bound == nil || len(events) >= p.Limit {
		return events, outboxtype.Cursor{}, nil
	}
	return events, *bound, nil
}

// aggregateIndex checks, for a list or count of one aggregate's events (aggregateID
// set), that the table has an index that finds them: CreateAggregateIndex's, or, on a
// table without the version that drops it, the admin version's, which pl then forces
// on MySQL. Without either the list would read the whole table, so it returns an error
// matching errors.ErrUnsupported that names the fix. The opt-in index, once seen, is
// not looked for again.
func (s *Store) aggregateIndex(ctx context.Context, aggregateID string, pl *listPlan) error {
	if aggregateID == "" || s.aggregateIndexed.Load() {
		return nil
	}
	has, err := hasIndex(ctx, s.db, s.d, s.table, s.table.indexName(aggregateListIndexSuffix))
	if err != nil || has {
		s.aggregateIndexed.Store(has)
		return err
	}
	if has, err = hasIndex(ctx, s.db, s.d, s.table, s.table.indexName(aggregateIndexSuffix)); err != nil || has {
		if has && s.d.name == "mysql" {
			pl.force = " FORCE INDEX (" + s.d.quote(s.table.indexName(aggregateIndexSuffix)) + ")"
		}
		return err
	}
	return fmt.Errorf("%s has no aggregate index, and a list of one aggregate's events would read every row: "+
		"create it with outbox.MigrateAggregateIndex or the command outbox migrate -aggregate-index (docs/databases.md): %w", s.table, errors.ErrUnsupported)
}

// listPage reads the rows of one statement of a list page (listPageQuery).
func (s *Store) listPage(ctx context.Context, pl listPlan, p storage.ListEventsParams, bound *outboxtype.Cursor) ([]outboxtype.Event, error) {
	q, err := s.d.listPageQuery(s.table, pl, p, bound)
	if err != nil {
		return nil, err
	}
	// A row the database cannot return is listed with a placeholder payload (isolate).
	events, bad, err := s.queryEvents(ctx, s.db, q, lenient)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, bad[0]
	}
	return events, nil
}

var _ storage.EventCountStore = (*Store)(nil)

// CountEvents implements [EventCountStore.CountEvents] on the list's index (countPlan)
// with two statements, as a windowed list page: the window's end (the ScanLimit-th row
// of the index, an index-only read), then the count up to it (countQuery).
func (s *Store) CountEvents(ctx context.Context, p storage.CountEventsParams) (outboxtype.EventCounts, error) {
	if err := p.Validate(); err != nil {
		return outboxtype.EventCounts{}, err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	pl := s.d.countPlan(s.table, p)
	if err := s.aggregateIndex(ctx, p.AggregateID, &pl); err != nil {
		return outboxtype.EventCounts{}, fmt.Errorf("count events: %w", err)
	}
	q, err := s.d.countWindowQuery(s.table, pl, p)
	if err != nil {
		return outboxtype.EventCounts{}, fmt.Errorf("count events: %w", err)
	}
	bound, err := s.windowEnd(ctx, pl, q)
	if err != nil {
		return outboxtype.EventCounts{}, fmt.Errorf("count events: %w", err)
	}
	q, err = s.d.countQuery(s.table, pl, p, bound)
	if err != nil {
		return outboxtype.EventCounts{}, fmt.Errorf("count events: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return outboxtype.EventCounts{}, fmt.Errorf("count events: %w", err)
	}
	defer rows.Close()
	var (
		out outboxtype.EventCounts
		n   int64
	)
	groups := map[outboxtype.GroupCount]int64{}
	for rows.Next() {
		var (
			g                   outboxtype.GroupCount
			lastError, listener sql.NullString
			k                   int64
		)
		dest := []any{&k}
		switch {
		case p.ErrorContains != "":
			dest, k = []any{&lastError, &g.AggregateType, &g.EventType, &listener}, 1
		case p.Groups:
			dest = []any{&g.AggregateType, &g.EventType, &listener, &k}
		}
		if err := rows.Scan(dest...); err != nil {
			return outboxtype.EventCounts{}, fmt.Errorf("count events: %w", err)
		}
		if p.ErrorContains != "" && !p.MatchesError(lastError.String) {
			continue
		}
		n += k
		g.Listener = listener.String
		groups[g] += k
	}
	if err := rows.Err(); err != nil {
		return outboxtype.EventCounts{}, fmt.Errorf("count events: %w", err)
	}
	if p.Groups {
		for g, k := range groups {
			g.N = k
			out.Groups = append(out.Groups, g)
		}
	}
	out.EventCount = outboxtype.EventCount{N: n, AtLeast: bound != nil}
	return out, nil
}

// windowEnd runs the window statement q of plan pl and returns the position of its row,
// or nil when the index ends before the window does.
func (s *Store) windowEnd(ctx context.Context, pl listPlan, q query) (*outboxtype.Cursor, error) {
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
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("scan window: %w", err)
	case pl.seq:
		return &outboxtype.Cursor{OrderSeq: seq, ID: string(id)}, nil
	default:
		t, err := s.d.decodeTime(at)
		if err != nil {
			return nil, fmt.Errorf("scan window: %w", err)
		}
		return &outboxtype.Cursor{CreatedAt: t, ID: string(id)}, nil
	}
}

// CountBlockedKeys implements [EventCountStore.CountBlockedKeys] with one statement
// (blockedKeysWindowQuery).
func (s *Store) CountBlockedKeys(ctx context.Context, scanLimit int) (outboxtype.BlockedKeys, error) {
	if scanLimit <= 0 {
		return outboxtype.BlockedKeys{}, check.Invalid("count blocked keys", "scanLimit must be positive, got %d", scanLimit)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	q := s.d.blockedKeysWindowQuery(s.table, scanLimit)
	var (
		n, read int64
		oldest  any
	)
	if err := s.db.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&n, &oldest, &read); err != nil {
		return outboxtype.BlockedKeys{}, fmt.Errorf("count blocked keys: %w", err)
	}
	b := outboxtype.BlockedKeys{EventCount: outboxtype.EventCount{N: n, AtLeast: read >= int64(scanLimit)}}
	if oldest != nil {
		t, err := s.d.decodeTime(oldest)
		if err != nil {
			return outboxtype.BlockedKeys{}, fmt.Errorf("count blocked keys: oldest: %w", err)
		}
		b.Oldest = t
	}
	return b, nil
}

// CountByType implements [EventStore.CountByType] with one grouped query.
func (s *Store) CountByType(ctx context.Context) ([]outboxtype.TypeCount, error) {
	q := s.d.countByTypeQuery(s.table)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, fmt.Errorf("count by type: %w", err)
	}
	defer rows.Close()
	var out []outboxtype.TypeCount
	for rows.Next() {
		var c outboxtype.TypeCount
		var st int64
		if err := rows.Scan(&st, &c.EventType, &c.Count); err != nil {
			return nil, fmt.Errorf("count by type: %w", err)
		}
		c.Status = outboxtype.Status(st)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count by type: %w", err)
	}
	return out, nil
}

var _ storage.AuditedStore = (*Store)(nil)

// RecordAudit implements [AuditStore.RecordAudit].
func (s *Store) RecordAudit(ctx context.Context, e outboxtype.AuditEntry) error {
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
func (s *Store) ChangeAudited(ctx context.Context, p storage.AuditedChangeParams) (int64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var (
		qs  []query
		err error
	)
	switch p.Entry.Action {
	case outboxtype.AuditReplay, outboxtype.AuditReplayAll:
		qs, err = s.d.replayQueries(s.table, storage.ReplayParams{IDs: p.IDs, DeadFilter: p.DeadFilter, Limit: p.Limit, Now: p.Now})
	case outboxtype.AuditDelete:
		qs = s.d.deleteDeadQueries(s.table, p.IDs)
	case outboxtype.AuditDiscard:
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
func (s *Store) changeAuditedOnce(ctx context.Context, qs []query, p storage.AuditedChangeParams) (n int64, err error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var tx interface {
		outboxtype.Executor
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
			err = check.ErrAuditEntryGone
		}
		if err != nil {
			if isLockConflict(err) {
				return 0, err // retried whole
			}
			return 0, &outboxtype.AuditError{Action: p.Entry.Action, Reason: check.AuditReason(err), Err: err}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	committed = true
	return n, nil
}

// ListAudit implements [AuditStore.ListAudit].
func (s *Store) ListAudit(ctx context.Context, p storage.ListAuditParams) ([]outboxtype.AuditEntry, error) {
	if p.Limit <= 0 {
		return nil, check.Invalid("list audit", "Limit must be positive, got %d", p.Limit)
	}
	q := s.d.listAuditQuery(s.table, p)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []outboxtype.AuditEntry
	for rows.Next() {
		var (
			e  outboxtype.AuditEntry
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
