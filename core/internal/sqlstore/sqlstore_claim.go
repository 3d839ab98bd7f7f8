package sqlstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Claims (MultiNode): Claim, as one statement or, on MySQL, as a short READ
// COMMITTED transaction, and RenewClaim.

// Claim implements [ClaimStore.Claim]. On PostgreSQL and SQLite it is one auto-committed
// UPDATE … RETURNING statement. On MySQL/MariaDB it is one short READ COMMITTED
// transaction: a plain read of the due rows' IDs that walks the pending index, a SELECT
// … FOR UPDATE SKIP LOCKED of those rows by primary key that locks just the rows it
// returns, then an UPDATE of those rows by primary key (see claimReadQuery); READ
// COMMITTED takes no gap locks, so concurrent INSERTs into the table never wait for a
// claim, and the locking read never meets a row that an open transaction inserted. A
// claim that fails with a deadlock (1213) or a lock wait timeout (1205) is retried a few
// times with a short backoff.
func (s *Store) Claim(ctx context.Context, p storage.ClaimParams) (storage.PendingBatch, error) {
	if s.d.claimInTx {
		if err := p.Validate(); err != nil {
			return storage.PendingBatch{}, fmt.Errorf("claim: %w", err)
		}
		for attempt := 1; ; attempt++ {
			b, err := s.claimTx(ctx, p)
			if err == nil {
				return b, nil
			}
			if attempt == claimAttempts || !isLockConflict(err) || ctx.Err() != nil {
				return storage.PendingBatch{}, fmt.Errorf("claim: %w", err)
			}
			if err := sleepCtx(ctx, time.Duration(attempt)*10*time.Millisecond); err != nil {
				return storage.PendingBatch{}, fmt.Errorf("claim: %w", err)
			}
		}
	}
	q, err := s.d.claimQuery(s.table, p)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("claim: %w", err)
	}
	// A claim that failed was undone whole; isolate claims the rows again, without
	// their payloads, and reads each one alone.
	events, bad, err := s.queryEvents(ctx, s.on(s.db), q, strict)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("claim: %w", err)
	}
	b := storage.PendingBatch{Events: events, Undecodable: bad}
	for i := range events {
		// PostgreSQL returned the previous claim (SQLite the new one, never counted).
		countTakeOver(&b, events[i].LockedBy, p.Token)
		events[i].LockedBy = p.Token
	}
	sortClaimed(events)
	return b, nil
}

// RenewClaim implements [ClaimStore.RenewClaim] with one UPDATE by primary key.
func (s *Store) RenewClaim(ctx context.Context, p storage.RenewClaimParams) (int64, error) {
	q, err := s.d.renewClaimQuery(s.table, p)
	if err != nil {
		return 0, fmt.Errorf("renew claim: %w", err)
	}
	n, err := s.exec1(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("renew claim %s: %w", p.ID, err)
	}
	return n, nil
}

// claimReadRounds bounds the rounds of a MySQL claim: each reads the next due rows
// after the last round's and locks those it can.
const claimReadRounds = 4

// claimTx runs one claim transaction on MySQL; see Store.Claim. Each round reads the
// IDs of the next due rows (claimReadQuery), after the previous round's last one, and
// locks those that nobody holds (claimLockQuery); a round that locked fewer rows than
// it read (another claim holds them) is followed by another, so that concurrent claims
// take the rows after one another's, as a locking walk of the index would.
func (s *Store) claimTx(ctx context.Context, p storage.ClaimParams) (b storage.PendingBatch, err error) {
	token := p.Token
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	tx, err := s.beginReadCommitted(ctx)
	if err != nil {
		return storage.PendingBatch{}, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	var (
		ids   []string
		until any
		after *claimCursor
	)
	for round := 0; round < claimReadRounds && len(ids) < p.Limit; round++ {
		want := p.Limit - len(ids)
		read, err := s.d.claimReadQuery(s.table, p, want, after)
		if err != nil {
			return storage.PendingBatch{}, err
		}
		var candidates []string
		rows, err := tx.QueryContext(ctx, read.SQL, read.Args...)
		if err != nil {
			return storage.PendingBatch{}, err
		}
		for rows.Next() {
			var c claimCursor
			if err := rows.Scan(&c.id, &c.due, &c.created); err != nil {
				rows.Close()
				return storage.PendingBatch{}, err
			}
			candidates, after = append(candidates, c.id), &c
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return storage.PendingBatch{}, err
		}
		if len(candidates) == 0 {
			break
		}
		lock, err := s.d.claimLockQuery(s.table, p, candidates)
		if err != nil {
			return storage.PendingBatch{}, err
		}
		if rows, err = tx.QueryContext(ctx, lock.SQL, lock.Args...); err != nil {
			return storage.PendingBatch{}, err
		}
		locked := 0
		for rows.Next() {
			var r rawRow
			if err := r.scan(rows, &until); err != nil {
				rows.Close()
				return storage.PendingBatch{}, err
			}
			ids = append(ids, r.id())
			locked++
			prev, _ := textValue(r[lockedByColumn])
			countTakeOver(&b, prev, token)
			e, err := r.decode(s.d, strict)
			if err != nil {
				b.Undecodable = append(b.Undecodable, outboxtype.RowError{EventID: r.id(), Err: err})
				continue
			}
			b.Events = append(b.Events, e)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return storage.PendingBatch{}, err
		}
		if len(candidates) < want || locked == len(candidates) {
			break // no due row after these, or none of them was held
		}
	}
	if len(ids) == 0 {
		return storage.PendingBatch{}, tx.Commit()
	}
	untilTime, err := s.d.decodeTime(until)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("claim expiry: %w", err)
	}
	untilArg, err := s.d.time(untilTime)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("claim expiry: %w", err)
	}
	for _, q := range s.d.claimUpdateQueries(s.table, token, untilArg, ids) {
		if _, err := tx.ExecContext(ctx, q.SQL, q.Args...); err != nil {
			return storage.PendingBatch{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return storage.PendingBatch{}, err
	}
	for i := range b.Events {
		b.Events[i].LockedBy, b.Events[i].LockedUntil = token, untilTime
	}
	return b, nil
}

// sortClaimed puts claimed events in claim order: due longest first (available_at,
// created_at, event_id).
func sortClaimed(events []outboxtype.Event) {
	slices.SortFunc(events, func(a, b outboxtype.Event) int {
		return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
}

// countTakeOver counts in b a claimed row whose previous claim, prev, belonged to another
// token: it had expired (Claim takes only unclaimed or expired rows).
func countTakeOver(b *storage.PendingBatch, prev, token string) {
	if prev != "" && prev != token {
		b.TakenOver++
	}
}
