package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Insert: the checks every write shares, and the event INSERT that follows the
// ordered events' key locks (the dialect's orderStrategy), with the retry that skips
// existing IDs where the INSERT cannot.

// Insert implements [Store.Insert]. It runs on exec under ctx, without QueryTimeout, so
// that it is part of the caller's transaction. New rows are NEW with no attempts,
// whatever the events' Status and Attempts say, except ordered events (OrderKey set),
// which are numbered by their keys' rows in the key table (see [OrderStore]) and
// inserted WAITING, but for the first of a key that has no event left that is not
// DONE, inserted NEW (docs/ordering.md); Insert sets their Status and OrderSeq. How is
// the dialect's orderStrategy: on PostgreSQL a write whose events are all ordered is one
// statement (postgresOrder), and on SQLite ordered events given with a *sql.DB or
// *sql.Conn (outside a transaction) are written in a transaction of Insert's own
// (sqliteOrder). A zero CreatedAt becomes the current time and a zero AvailableAt
// becomes the later of CreatedAt and the current time. Events with LockedBy set are inserted claimed until the database's
// current time at the INSERT statement plus p.ClaimTTL (on PostgreSQL
// statement_timestamp(), not the start of the caller's transaction). Events whose ID
// exists are skipped (see dialect.skipExisting); a skipped ordered event leaves a gap in
// its key's OrderSeq, which order does not mind. A nil exec returns an error wrapping
// [ErrNoTransaction]; invalid params an error matching [ErrInvalidArgument], and so, on a
// partitioned table, is an ID that no partition holds (checkPartitions); no events
// is a no-op.
func (s *Store) Insert(ctx context.Context, exec outboxtype.Executor, p storage.InsertParams) (storage.InsertResult, error) {
	if len(p.Events) == 0 {
		return storage.InsertResult{}, nil
	}
	if exec == nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: nil executor: %w", outboxtype.ErrNoTransaction)
	}
	if err := p.Validate(); err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	if err := s.checkPacket(ctx, exec, p.Events); err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	if err := s.checkPartitions(ctx, exec, p.Events); err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	var res storage.InsertResult
	var err error
	if keys := orderKeys(p.Events); len(keys) > 0 {
		res, err = s.d.order.insert(ctx, s, exec, p, keys)
	} else {
		res, err = s.insertEvents(ctx, s.on(exec), p, nil, nil)
	}
	if noPartition(err) {
		s.parts.Store(nil) // read the partitions again at the next write
		err = fmt.Errorf("%w: %w", err, outboxtype.ErrInvalidArgument)
	}
	return res, err
}

// insertEvents runs the event INSERT of p.Events through exec, after the ordered
// events' keys are locked and numbered: the ordered events whose IDs are in heads are
// inserted NEW, those in candidates NEW if their key has no event that is not DONE when
// the statement starts (insertQueriesHeads; Insert then sets their Status), the others
// WAITING. It skips the events whose ID exists and returns them.
func (s *Store) insertEvents(ctx context.Context, exec outboxtype.Executor, p storage.InsertParams, heads, candidates map[string]bool) (storage.InsertResult, error) {
	now := time.Now()
	qs, err := s.d.insertQueriesBounded(s.table, p, now, heads, candidates, s.stmtBytes())
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	var news, existing map[string]bool
	for _, q := range qs {
		chunk := p.Events[q.first : q.first+q.n]
		if q.skipsByCount { // one event
			res, err := exec.ExecContext(ctx, q.SQL, q.Args...)
			var n int64
			if err == nil {
				n, err = res.RowsAffected()
			}
			if err != nil {
				return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
			}
			if n == 0 {
				existing = addID(existing, chunk[0].ID)
			}
			continue
		}
		if q.returnsStatus {
			written, err := insertReturning(ctx, exec, q)
			if err != nil {
				return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
			}
			for i := range chunk {
				switch st, ok := written[chunk[i].ID]; {
				case !ok:
					existing = addID(existing, chunk[i].ID)
				case st == outboxtype.StatusNew:
					news = addID(news, chunk[i].ID)
				}
			}
			continue
		}
		found, err := s.insertSkipping(ctx, exec, q, storage.InsertParams{Events: chunk, ClaimTTL: p.ClaimTTL}, now, heads)
		if err != nil {
			return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
		}
		for id := range found {
			existing = addID(existing, id)
		}
	}
	var res storage.InsertResult
	for i := range p.Events {
		e := &p.Events[i]
		if existing[e.ID] {
			res.Existing = append(res.Existing, e.ID)
		} else if candidates[e.ID] && news[e.ID] {
			e.Status = outboxtype.StatusNew
		}
	}
	return res, nil
}

// addID adds id to the set m, allocating it on first use.
func addID(m map[string]bool, id string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[id] = true
	return m
}

// insertSkippingAttempts bounds the runs of one INSERT in insertSkipping: each run
// after the first follows a unique violation by rows committed since the last look.
const insertSkippingAttempts = 4

// insertSkipping runs q, the INSERT of p.Events, on a dialect without skipExisting:
// after a unique violation, which undid only that statement, it reads which of the
// events exist and runs the INSERT again without them. It returns the IDs it skipped.
func (s *Store) insertSkipping(ctx context.Context, exec outboxtype.Executor, q query, p storage.InsertParams, now time.Time, heads map[string]bool) (map[string]bool, error) {
	var skipped map[string]bool
	for attempt := 1; ; attempt++ {
		_, err := exec.ExecContext(ctx, q.SQL, q.Args...)
		if err == nil || attempt == insertSkippingAttempts || !isUniqueViolation(err) {
			return skipped, err
		}
		ids := make([]string, len(p.Events))
		for i := range p.Events {
			ids[i] = p.Events[i].ID
		}
		found, rerr := s.existingIDs(ctx, exec, ids)
		if rerr != nil || len(found) == 0 {
			return nil, errors.Join(err, rerr)
		}
		var rest []outboxtype.Event
		for _, e := range p.Events {
			if found[e.ID] {
				skipped = addID(skipped, e.ID)
			} else {
				rest = append(rest, e)
			}
		}
		if len(rest) == 0 {
			return skipped, nil
		}
		p.Events = rest
		qs, qerr := s.d.insertQueriesBounded(s.table, p, now, heads, nil, s.stmtBytes())
		if qerr != nil {
			return nil, qerr
		}
		if len(qs) != 1 { // fewer rows than one statement held
			return nil, fmt.Errorf("%d events need %d statements after skipping existing IDs", len(rest), len(qs))
		}
		q = qs[0]
	}
}

// existingIDs returns which of ids are rows of the table, read through exec.
func (s *Store) existingIDs(ctx context.Context, exec outboxtype.Executor, ids []string) (map[string]bool, error) {
	q := s.d.existingQuery(s.table, ids)
	rows, err := exec.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		found[id] = true
	}
	return found, errors.Join(rows.Err(), rows.Close())
}

// isUniqueViolation reports whether err is MySQL's duplicate key (1062) or SQLite's
// unique or primary key constraint failure; the event table's only unique key is
// event_id. Matched on the message, as isLockConflict, to keep the drivers out of core.
func isUniqueViolation(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Error 1062") || strings.Contains(msg, "UNIQUE constraint failed")
}

// insertReturning runs an INSERT that returns its rows' event_id and status, and
// returns them.
func insertReturning(ctx context.Context, exec outboxtype.Executor, q query) (map[string]outboxtype.Status, error) {
	rows, err := exec.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	written := make(map[string]outboxtype.Status, q.n)
	for rows.Next() {
		var id string
		var status int
		if err := rows.Scan(&id, &status); err != nil {
			rows.Close()
			return nil, err
		}
		written[id] = outboxtype.Status(status)
	}
	return written, errors.Join(rows.Err(), rows.Close())
}
