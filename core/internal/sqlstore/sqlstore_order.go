package sqlstore

import (
	"context"
	"fmt"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Ordered events, the store's side every database shares: which events a write
// inserts NEW, and Promote's batches, each run by the dialect's orderStrategy.

// headsOf returns the IDs of the ordered events to insert NEW where the event INSERT
// does not decide (MySQL, SQLite): the first event of each key that locking the keys
// found idle, with no event left that is not DONE. It sets every ordered event's Status
// to what it is inserted as.
func headsOf(events []outboxtype.Event, keys []keyCount, idle map[string]bool) map[string]bool {
	open := map[string]bool{}
	for _, k := range keys {
		if !idle[k.key] {
			open[k.key] = true
		}
	}
	return markHeads(events, open)
}

// markHeads sets the Status of the ordered events: NEW for the first event of each key
// not in open, WAITING for the others; it returns the IDs of the NEW ones.
func markHeads(events []outboxtype.Event, open map[string]bool) map[string]bool {
	heads := map[string]bool{}
	for i := range events {
		e := &events[i]
		if e.OrderKey == "" {
			continue
		}
		e.Status = outboxtype.StatusWaiting
		if !open[e.OrderKey] {
			open[e.OrderKey] = true
			e.Status = outboxtype.StatusNew
			heads[e.ID] = true
		}
	}
	return heads
}

// Promote implements [OrderStore.Promote] in batches of at most maxIDs keys or IDs,
// each run by the dialect's orderStrategy: one UPDATE (on MySQL a read of the heads,
// then an UPDATE by primary key, in a READ COMMITTED transaction like the other range
// updates), which with p.Read returns the promoted rows (on MySQL a read by primary key
// follows).
func (s *Store) Promote(ctx context.Context, p storage.PromoteParams) (storage.PromoteResult, error) {
	var res storage.PromoteResult
	keys, ids := p.Keys, p.IDs
	for {
		batch := p
		if len(keys) > 0 {
			batch.Keys = keys[:min(len(keys), s.d.maxIDs)]
			keys = keys[len(batch.Keys):]
		}
		if len(ids) > 0 {
			batch.IDs = ids[:min(len(ids), s.d.maxIDs)]
			ids = ids[len(batch.IDs):]
		}
		if err := s.d.order.promote(ctx, s, batch, &res); err != nil {
			return res, fmt.Errorf("promote: %w", err)
		}
		if len(keys) == 0 && len(ids) == 0 {
			return res, nil
		}
	}
}

// promoteOnce runs q, a promote of one statement (PostgreSQL, SQLite): with read, one
// that returns the promoted rows, which it adds to res.
func (s *Store) promoteOnce(ctx context.Context, q query, read bool, res *storage.PromoteResult) error {
	if read {
		return s.promoteReturning(ctx, q, res)
	}
	n, err := s.exec1(ctx, q)
	res.Promoted += n
	return err
}

// promoteReturning runs a promote that returns the promoted rows (PostgreSQL, SQLite),
// retried on a lock conflict as exec1 retries the promote that returns none.
func (s *Store) promoteReturning(ctx context.Context, q query, res *storage.PromoteResult) error {
	return retryConflicts(ctx, func() error {
		n, err := s.readPromoted(ctx, q, res)
		res.Promoted += int64(n)
		return err
	})
}

// readPromoted runs q, which returns promoted rows, adds them to res and returns how
// many it read.
func (s *Store) readPromoted(ctx context.Context, q query, res *storage.PromoteResult) (int, error) {
	events, bad, err := s.queryEvents(ctx, s.on(s.db), q, strict)
	if err != nil {
		return 0, err
	}
	res.Events = append(res.Events, events...)
	res.Undecodable = append(res.Undecodable, bad...)
	return len(events) + len(bad), nil
}
