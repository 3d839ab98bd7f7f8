package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Purge: the finished rows in batches, then the undelivered rows past their cutoff
// when it is set, then the key rows of keys with nothing left to order; on MySQL one
// purge of the table at a time, under a named lock.

// Purge implements [Store.Purge] with one DELETE (on MySQL in a READ COMMITTED
// transaction, so that it takes no gap locks that would make INSERTs wait). A batch
// that deletes fewer than p.Limit rows goes on, with p.UndeliveredBefore, to the NEW and
// RETRY rows created before it, then to the WAITING ones, one DELETE each for the rows
// the batch has left; a batch that still deletes fewer than p.Limit rows then deletes,
// in batches of p.Limit, the rows of the key table whose keys have nothing left that is
// not DONE and were not written since p.Before.
func (s *Store) Purge(ctx context.Context, p storage.PurgeParams) (int64, error) {
	ids, err := s.purgeRange(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	q, err := s.d.purgeQuery(s.table, p, ids)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	var undelivered any
	if !p.UndeliveredBefore.IsZero() {
		if undelivered, err = s.d.time(p.UndeliveredBefore); err != nil {
			return 0, fmt.Errorf("purge: UndeliveredBefore: %w", err)
		}
	}
	run, read := s.execRange, s.on(s.db)
	if s.d.claimInTx { // MySQL: one purge of the table at a time
		conn, ok, err := s.purgeLock(ctx)
		if err != nil {
			return 0, fmt.Errorf("purge: %w", err)
		}
		if !ok {
			return 0, nil // another node purges the table now
		}
		defer s.releasePurgeLock(ctx, conn)
		run = func(ctx context.Context, q query) (int64, error) { return s.execRangeOn(ctx, conn, q) }
		read = conn
	}
	n, err := run(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	for _, waiting := range []bool{false, true} {
		if undelivered == nil || n >= int64(p.Limit) {
			break
		}
		k, err := run(ctx, s.d.purgeUndeliveredQuery(s.table, undelivered, waiting, p.Limit-int(n), ids))
		n += k
		if err != nil {
			return n, fmt.Errorf("purge undelivered events: %w", err)
		}
	}
	if n < int64(p.Limit) {
		// The events are purged up to the cutoff: the key rows left with nothing to
		// order and not written since go too.
		if err := s.purgeKeys(ctx, p, run, read); err != nil {
			return n, fmt.Errorf("purge order keys: %w", err)
		}
	}
	return n, nil
}

// purgeKeys walks the key table by primary key, p.Limit rows a batch, and deletes the
// rows of each batch not written since p.Before whose keys have nothing left to order
// (purgeKeysQuery; keyBoundQuery says why a walk). Each batch is two statements: the
// read, through read, of where it ends, then the delete, by run.
func (s *Store) purgeKeys(ctx context.Context, p storage.PurgeParams, run func(context.Context, query) (int64, error), read outboxtype.Executor) error {
	before, err := s.d.time(p.Before)
	if err != nil {
		return err
	}
	for after := ""; ; {
		upTo, err := s.keyBound(ctx, read, after, p.Limit)
		if err != nil {
			return err
		}
		if _, err := run(ctx, s.d.purgeKeysQuery(s.table, before, after, upTo)); err != nil {
			return err
		}
		if upTo == nil {
			return nil
		}
		after = *upTo
	}
}

// keyBound runs keyBoundQuery through read: the last key of the batch after after, or
// nil when the batch reaches the end of the key table.
func (s *Store) keyBound(ctx context.Context, read outboxtype.Executor, after string, limit int) (*string, error) {
	q := s.d.keyBoundQuery(s.table, after, limit)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := read.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	var key *string
	for rows.Next() {
		key = new(string)
		if err := rows.Scan(key); err != nil {
			rows.Close()
			return nil, err
		}
	}
	return key, errors.Join(rows.Err(), rows.Close())
}

// purgeLockName is the name of the table's purge lock on MySQL (at most 64 characters).
func (s *Store) purgeLockName() string {
	sum := sha256.Sum256([]byte(s.d.qualified(s.table)))
	return "outbox_purge_" + hex.EncodeToString(sum[:16])
}

// purgeLock takes, on MySQL/MariaDB, the table's purge lock: a named lock (GET_LOCK,
// without waiting) on a connection that then runs the purge's statements, so that
// several nodes' purges never wait for each other's row locks, and a purge holds one
// connection of the pool, as elsewhere. A purge that finds the lock taken deletes
// nothing (ok false); the node purges again at its next interval. A named lock ends
// with its connection, so a node that dies holding it does not keep it.
func (s *Store) purgeLock(ctx context.Context) (conn *sql.Conn, ok bool, err error) {
	lctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if conn, err = s.db.Conn(lctx); err != nil {
		return nil, false, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(lctx, "SELECT GET_LOCK(?, 0)", s.purgeLockName()).Scan(&got); err != nil {
		return nil, false, errors.Join(err, conn.Close())
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, false, conn.Close()
	}
	return conn, true, nil
}

// releasePurgeLock releases the purge lock conn holds and returns conn to the pool, or
// discards it (which ends the lock) when the release fails.
func (s *Store) releasePurgeLock(ctx context.Context, conn *sql.Conn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.ExecContext(rctx, "DO RELEASE_LOCK(?)", s.purgeLockName()); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // makes database/sql close it
	}
	_ = conn.Close()
}

// execRangeOn is execRange on conn (MySQL): q runs alone, READ COMMITTED, retried after
// a lock conflict as execRange does.
func (s *Store) execRangeOn(ctx context.Context, conn *sql.Conn, q query) (int64, error) {
	for attempt := 1; ; attempt++ {
		n, err := s.execReadCommittedOn(ctx, conn, q)
		if err == nil || attempt == claimAttempts || !isLockConflict(err) || ctx.Err() != nil {
			return n, err
		}
		if serr := sleepCtx(ctx, time.Duration(attempt)*10*time.Millisecond); serr != nil {
			return 0, errors.Join(err, serr)
		}
	}
}

// execReadCommittedOn runs q on conn as a transaction of its own (autocommit) at READ
// COMMITTED, under QueryTimeout.
func (s *Store) execReadCommittedOn(ctx context.Context, conn *sql.Conn, q query) (int64, error) {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return 0, err
	}
	res, err := conn.ExecContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
