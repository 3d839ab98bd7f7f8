package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The outcomes of deliveries: MarkDone, FanOut, released claims, Reschedule and
// MarkDead.

// MarkDone implements [Store.MarkDone]. Rows that are already DONE are not changed. When
// one chunk of IDs fails, the rows of earlier chunks stay DONE and are counted.
func (s *Store) MarkDone(ctx context.Context, p storage.MarkDoneParams) (int64, error) {
	qs, err := s.d.markDoneQueries(s.table, p)
	if err != nil {
		return 0, fmt.Errorf("mark done: %w", err)
	}
	// Several IDs make a range scan, which under InnoDB's REPEATABLE READ takes
	// next-key locks: it waits for a business transaction's uncommitted row while
	// holding the gap before it, and the business transaction's next insert into that
	// gap deadlocks. Such statements run through execRange (READ COMMITTED on MySQL);
	// a single ID is an exact unique lookup and runs on its own.
	run := s.exec1
	if len(p.IDs) > 1 {
		run = s.execRange
	}
	var n int64
	if p.Delete && s.d.claimInTx && len(qs) > 1 {
		// MySQL's deletes, one statement a row: one transaction, one commit.
		n, err = s.execAllReadCommitted(ctx, qs)
	} else {
		n, err = s.execEach(ctx, qs, run)
	}
	if err != nil {
		return n, fmt.Errorf("mark done: %w", err)
	}
	return n, nil
}

// FanOut implements [FanOutStore.FanOut]: one transaction (READ COMMITTED on MySQL),
// under QueryTimeout, that marks the events DONE with a statement per chunk, which
// reports the rows it changed (see dialect.fanOutMarkQueries), so that a concurrent
// split of the same event waits for the row lock and then changes nothing, then inserts
// the deliveries of the events that changed with Insert's statements. A lock conflict
// rolls it back and it is retried, as claims are.
func (s *Store) FanOut(ctx context.Context, p storage.FanOutParams) (storage.FanOutResult, error) {
	if err := p.Validate(); err != nil {
		return storage.FanOutResult{}, fmt.Errorf("fan out: %w", err)
	}
	events := slices.SortedFunc(slices.Values(p.Events), func(a, b storage.FanOutEvent) int { return strings.Compare(a.ID, b.ID) })
	ids, tokens := make([]string, len(events)), make([]string, len(events))
	for i, e := range events {
		ids[i], tokens[i] = e.ID, e.Token
	}
	marks, locks, err := s.d.fanOutMarkQueries(s.table, ids, tokens, p.DoneAt, p.Delete)
	if err != nil {
		return storage.FanOutResult{}, fmt.Errorf("fan out: %w", err)
	}
	for attempt := 1; ; attempt++ {
		res, err := s.fanOutOnce(ctx, events, marks, locks, p)
		if err == nil || attempt == claimAttempts || !isLockConflict(err) || ctx.Err() != nil {
			if err != nil {
				return storage.FanOutResult{}, fmt.Errorf("fan out: %w", err)
			}
			return res, nil
		}
		if serr := sleepCtx(ctx, time.Duration(attempt)*10*time.Millisecond); serr != nil {
			return storage.FanOutResult{}, fmt.Errorf("fan out: %w", errors.Join(err, serr))
		}
	}
}

// fanOutOnce runs one FanOut transaction.
func (s *Store) fanOutOnce(ctx context.Context, events []storage.FanOutEvent, marks, locks []query, p storage.FanOutParams) (res storage.FanOutResult, err error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var tx interface {
		outboxtype.Executor
		Commit() error
		Rollback() error
	}
	if s.d.claimInTx {
		tx, err = s.beginReadCommitted(ctx)
	} else {
		tx, err = s.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return storage.FanOutResult{}, err
	}
	committed := false
	defer func() {
		if !committed {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	changed := map[string]bool{}
	readIDs := func(q query) error {
		rows, err := tx.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			changed[id] = true
		}
		return errors.Join(rows.Err(), rows.Close())
	}
	if locks != nil { // MySQL: lock the rows the updates will change, then change them
		for _, q := range locks {
			if err := readIDs(q); err != nil {
				return storage.FanOutResult{}, err
			}
		}
		for _, q := range marks {
			if _, err := tx.ExecContext(ctx, q.SQL, q.Args...); err != nil {
				return storage.FanOutResult{}, err
			}
		}
	} else {
		for _, q := range marks {
			if err := readIDs(q); err != nil {
				return storage.FanOutResult{}, err
			}
		}
	}
	var deliveries []outboxtype.Event
	var split []string
	for _, e := range events {
		if changed[e.ID] { // else fenced out, or finished already: its deliveries are not inserted
			split = append(split, e.ID)
			deliveries = append(deliveries, e.Deliveries...)
		}
	}
	if len(split) == 0 {
		return storage.FanOutResult{}, nil
	}
	ir, err := s.Insert(ctx, tx, storage.InsertParams{Events: deliveries, ClaimTTL: p.ClaimTTL})
	if err != nil {
		return storage.FanOutResult{}, err
	}
	// Insert numbered the ordered deliveries of this copy: give the caller's the result.
	copyInserted(events, deliveries)
	if err := tx.Commit(); err != nil {
		return storage.FanOutResult{}, err
	}
	committed = true
	return storage.FanOutResult{Split: split, Existing: ir.Existing}, nil
}

// copyInserted copies the Status and OrderSeq that Insert set on deliveries back to the
// deliveries of events with the same IDs.
func copyInserted(events []storage.FanOutEvent, deliveries []outboxtype.Event) {
	byID := make(map[string]*outboxtype.Event, len(deliveries))
	for i := range deliveries {
		byID[deliveries[i].ID] = &deliveries[i]
	}
	for _, e := range events {
		for j := range e.Deliveries {
			if d, ok := byID[e.Deliveries[j].ID]; ok {
				e.Deliveries[j].Status, e.Deliveries[j].OrderSeq = d.Status, d.OrderSeq
			}
		}
	}
}

// ReleaseClaims implements dispatch.ClaimReleaser: it clears the claims of the NEW and
// RETRY rows ids[i] still held by tokens[i], one statement per chunk.
func (s *Store) ReleaseClaims(ctx context.Context, ids, tokens []string) (int64, error) {
	if len(ids) != len(tokens) {
		return 0, fmt.Errorf("%w: %d IDs and %d tokens", outboxtype.ErrInvalidArgument, len(ids), len(tokens))
	}
	n, err := s.execEach(ctx, s.d.releaseClaimsQueries(s.table, ids, tokens), s.execRange)
	if err != nil {
		return n, fmt.Errorf("release claims: %w", err)
	}
	return n, nil
}

// Reschedule implements [Store.Reschedule].
func (s *Store) Reschedule(ctx context.Context, p storage.RescheduleParams) (int64, error) {
	q, err := s.d.rescheduleQuery(s.table, p)
	if err != nil {
		return 0, fmt.Errorf("reschedule: %w", err)
	}
	n, err := s.exec1(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("reschedule %s: %w", p.ID, err)
	}
	return n, nil
}

// MarkDead implements [Store.MarkDead].
func (s *Store) MarkDead(ctx context.Context, p storage.MarkDeadParams) (int64, error) {
	q, err := s.d.markDeadQuery(s.table, p)
	if err != nil {
		return 0, fmt.Errorf("mark dead: %w", err)
	}
	n, err := s.exec1(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("mark dead %s: %w", p.ID, err)
	}
	return n, nil
}
