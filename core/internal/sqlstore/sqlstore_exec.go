package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// How the store runs its own statements: under QueryTimeout, in READ COMMITTED
// transactions where the dialect needs them (MySQL), and again after a lock conflict.

// exec1 runs one statement on its own. A statement that InnoDB picks as the victim of
// a deadlock (1213) or a lock wait timeout (1205), for example an outcome update
// meeting a purge or a replay of nearby rows, was rolled back whole: it is retried a
// few times with a short backoff, as claims are.
func (s *Store) exec1(ctx context.Context, q query) (n int64, err error) {
	err = retryConflicts(ctx, func() error {
		n, err = s.exec1Once(ctx, q)
		return err
	})
	return n, err
}

// retryConflicts runs fn again, a few times with a short backoff, while it fails with a
// lock conflict (see exec1); fn's statement must have been rolled back whole.
func retryConflicts(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == claimAttempts || !isLockConflict(err) || ctx.Err() != nil {
			return err
		}
		if serr := sleepCtx(ctx, time.Duration(attempt)*10*time.Millisecond); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// exec1Once runs one statement under QueryTimeout.
func (s *Store) exec1Once(ctx context.Context, q query) (int64, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	res, err := s.on(s.db).ExecContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execEach runs qs one after another with run, and sums the rows changed; on an error
// it returns the rows changed by the earlier statements with it.
func (s *Store) execEach(ctx context.Context, qs []query, run func(context.Context, query) (int64, error)) (int64, error) {
	var total int64
	for _, q := range qs {
		n, err := run(ctx, q)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// execRange runs a statement that changes a range of rows: on its own, or in a READ
// COMMITTED transaction where the dialect needs one (readCommittedDML). Two such
// statements that walk the same rows in different orders (Purge by finish time, Replay
// by creation time) can deadlock; InnoDB then rolls one back whole, and it is retried
// a few times with a short backoff, as claims are.
func (s *Store) execRange(ctx context.Context, q query) (int64, error) {
	if !s.d.readCommittedDML {
		return s.exec1(ctx, q)
	}
	for attempt := 1; ; attempt++ {
		n, err := s.execReadCommitted(ctx, q)
		if err == nil || attempt == claimAttempts || !isLockConflict(err) || ctx.Err() != nil {
			return n, err
		}
		if serr := sleepCtx(ctx, time.Duration(attempt)*10*time.Millisecond); serr != nil {
			return 0, errors.Join(err, serr)
		}
	}
}

// execAllReadCommitted runs qs in one READ COMMITTED transaction (one commit for a
// batch of single-row statements) and returns the rows they changed; a lock conflict
// rolls it back and it is retried, as execRange is.
func (s *Store) execAllReadCommitted(ctx context.Context, qs []query) (int64, error) {
	for attempt := 1; ; attempt++ {
		n, err := s.execAllOnce(ctx, qs)
		if err == nil || attempt == claimAttempts || !isLockConflict(err) || ctx.Err() != nil {
			return n, err
		}
		if serr := sleepCtx(ctx, time.Duration(attempt)*10*time.Millisecond); serr != nil {
			return 0, errors.Join(err, serr)
		}
	}
}

func (s *Store) execAllOnce(ctx context.Context, qs []query) (n int64, err error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	tx, err := s.beginReadCommitted(ctx)
	if err != nil {
		return 0, err
	}
	for _, q := range qs {
		res, qerr := tx.ExecContext(ctx, q.SQL, q.Args...)
		var k int64
		if qerr == nil {
			k, qerr = res.RowsAffected()
		}
		if qerr != nil {
			return 0, errors.Join(qerr, ignoreDone(tx.Rollback()))
		}
		n += k
	}
	return n, tx.Commit()
}

// execReadCommitted runs q alone in a READ COMMITTED transaction.
func (s *Store) execReadCommitted(ctx context.Context, q query) (n int64, err error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	tx, err := s.beginReadCommitted(ctx)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, q.SQL, q.Args...)
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return 0, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return n, tx.Commit()
}

// claimAttempts bounds the attempts of a MySQL claim, or of a statement run by
// execRange, that meets a lock conflict.
const claimAttempts = 4

// isLockConflict reports whether err is MySQL's deadlock (1213) or lock wait timeout
// (1205), after which a transaction may simply be run again. The driver's error type
// cannot be named here (core imports only the standard library), so its text is matched:
// "Error 1213 (40001): Deadlock found …".
func isLockConflict(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Error 1213") || strings.Contains(msg, "Error 1205") ||
		strings.Contains(msg, "SQLSTATE 40P01") // PostgreSQL's deadlock: the victim was rolled back
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scanRows runs q, a query, through exec and calls scan for each of its rows.
func scanRows(ctx context.Context, exec outboxtype.Executor, q query, scan func(*sql.Rows) error) error {
	rows, err := exec.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := scan(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}
