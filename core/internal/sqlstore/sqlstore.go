package sqlstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// defaultStoreQueryTimeout bounds each statement the SQL store runs on its own.
const defaultStoreQueryTimeout = 10 * time.Second

// Config configures [New].
type Config struct {
	// Table is the outbox table, optionally schema-qualified ("app.outbox_event"). It
	// must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$, optionally "schema.table", and is
	// always quoted. Required.
	Table string
	// QueryTimeout bounds every statement the store runs on its own connection (all
	// methods but Insert, which runs on the caller's executor under the caller's
	// context). -1 disables the bound; 0 means 10 seconds.
	QueryTimeout time.Duration
	// TxOf returns the *sql.DB and *sql.Tx behind an executor that wraps a transaction
	// (package outbox's *Tx), so that Insert through it can use the statement cache of
	// the store's DB; nil, or ok false, runs the executor as it is.
	TxOf func(exec outboxtype.Executor) (db *sql.DB, tx *sql.Tx, ok bool)
}

// Store is the SQL store: a [storage.Store] with every optional capability of package
// storage, for PostgreSQL, MySQL/MariaDB and SQLite.
type Store struct {
	db      *sql.DB
	d       *dialect
	table   tableName
	timeout time.Duration
	txOf    func(outboxtype.Executor) (*sql.DB, *sql.Tx, bool)
	stmts   *stmtCache // nil when d.cachedStatements is 0; see on
	idle    *idleKeys  // keys seen idle outside a writer's transaction (MySQL); nil elsewhere
	// packet is the server's max_allowed_packet once the first write has read it
	// (dialect.packetLimited), else 0; see checkPacket.
	packet atomic.Int64
}

var (
	_ storage.Store             = (*Store)(nil)
	_ storage.ConnectionChecker = (*Store)(nil)
)

// New returns the SQL store on db for dialect d. It does no I/O. It returns a
// *ConfigError when db or d is nil, the table name is invalid or QueryTimeout is
// negative other than -1.
//
// Values are bound as arguments; times are stored in UTC, truncated to microseconds.
func New(db *sql.DB, d *Dialect, cfg Config) (*Store, error) {
	if db == nil {
		return nil, &outboxtype.ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return nil, &outboxtype.ConfigError{Field: "Dialect", Reason: "nil; use outbox.Postgres, outbox.MySQL or outbox.SQLite"}
	}
	t, err := parseTableName(cfg.Table)
	if err != nil {
		return nil, err
	}
	if cfg.QueryTimeout < 0 && cfg.QueryTimeout != -1 {
		return nil, &outboxtype.ConfigError{Field: "QueryTimeout", Reason: fmt.Sprintf("%s is negative; use -1 to disable", cfg.QueryTimeout)}
	}
	s := &Store{db: db, d: d, table: t, timeout: cmp.Or(cfg.QueryTimeout, defaultStoreQueryTimeout), txOf: cfg.TxOf}
	if n := s.d.cachedStatements; n > 0 {
		s.stmts = newStmtCache(db, n)
	}
	if s.d.headBySnapshot || s.d.carryKeys {
		s.idle = newIdleKeys()
	}
	return s, nil
}

// DB is the store's *sql.DB.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect is the store's dialect.
func (s *Store) Dialect() *Dialect { return s.d }

// withTimeout bounds one statement by the configured QueryTimeout.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.timeout)
}

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

// Insert implements [Store.Insert]. It runs on exec under ctx, without QueryTimeout, so
// that it is part of the caller's transaction. New rows are NEW with no attempts,
// whatever the events' Status and Attempts say, except ordered events (OrderKey set),
// which are numbered by an upsert of their keys' rows in the key table (see
// [OrderStore]) and inserted WAITING, but for the first of a key that has no event left
// that is not DONE, inserted NEW (docs/ordering.md); Insert sets their Status and
// OrderSeq. On PostgreSQL a write whose events are all ordered is one statement
// (dialect.headByVersion). A zero CreatedAt becomes the current
// time and a zero AvailableAt becomes CreatedAt. Events with LockedBy set are inserted
// claimed until the database's current time at the INSERT statement plus p.ClaimTTL
// (on PostgreSQL statement_timestamp(), not the start of the caller's transaction).
// Events whose ID exists are skipped (see dialect.skipExisting); a skipped ordered
// event leaves a gap in its key's OrderSeq, which order does not mind. On SQLite, ordered
// events given with a *sql.DB or *sql.Conn (outside a transaction) are written in a
// transaction of Insert's own. A nil exec
// returns an error wrapping [ErrNoTransaction]; invalid params an error matching
// [ErrInvalidArgument]; no events is a no-op.
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
	keys := orderKeys(p.Events)
	if s.d.carryKeys && len(keys) > 0 {
		// Outside a transaction, the key upsert's read and the event INSERT would each
		// commit on their own, and another writer could number the key in between:
		// they run in a transaction of their own (SQLite, dialect.carryKeys).
		switch e := exec.(type) {
		case *sql.DB:
			return s.insertInTx(ctx, e.BeginTx, e == s.db, p, keys)
		case *sql.Conn:
			return s.insertInTx(ctx, e.BeginTx, false, p, keys)
		}
	}
	exec = s.on(exec)
	if s.d.headByVersion && len(keys) > 0 && !slices.ContainsFunc(p.Events, func(e outboxtype.Event) bool { return e.OrderKey == "" }) {
		return s.insertByVersion(ctx, exec, p, keys)
	}
	return s.insert(ctx, exec, p, keys)
}

// insertInTx is Insert in a transaction that begin starts and that it commits.
// With ours (begin is the store's own pool's), it runs the store's prepared statements.
func (s *Store) insertInTx(ctx context.Context, begin func(context.Context, *sql.TxOptions) (*sql.Tx, error), ours bool, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	tx, err := begin(ctx, nil)
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	var exec outboxtype.Executor = tx
	if ours && s.stmts != nil {
		exec = stmtExec{c: s.stmts, tx: tx}
	}
	res, err := s.insert(ctx, exec, p, keys)
	if err != nil {
		return storage.InsertResult{}, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	return res, nil
}

// insertByVersion is Insert of events that are all ordered, with insertByVersionQuery,
// and with insert for the events that statement left to it.
func (s *Store) insertByVersion(ctx context.Context, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	q, fits, err := s.d.insertByVersionQuery(s.table, p, keys, time.Now())
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	if !fits {
		return s.insert(ctx, exec, p, keys)
	}
	type row struct {
		status outboxtype.Status
		seq    int64
	}
	written := make(map[string]row, len(p.Events))
	rows, err := exec.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.status, &r.seq); err != nil {
			rows.Close()
			return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
		}
		written[id] = r
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	advanced := make(map[string]bool, len(keys)) // keys the statement wrote events of
	for i := range p.Events {
		e := &p.Events[i]
		if r, ok := written[e.ID]; ok {
			e.Status, e.OrderSeq = r.status, r.seq
			advanced[e.OrderKey] = true
		}
	}
	var rest storage.InsertParams // the events of keys that changed since the snapshot
	var at []int                  // their indexes in p.Events
	for i, e := range p.Events {
		if _, ok := written[e.ID]; !ok && !advanced[e.OrderKey] {
			rest.Events, at = append(rest.Events, e), append(at, i)
		}
	}
	var existing map[string]bool
	if len(rest.Events) > 0 {
		// A key all of whose events exist lands here too: insert skips them again.
		rest.ClaimTTL = p.ClaimTTL
		res, err := s.insert(ctx, exec, rest, orderKeys(rest.Events))
		if err != nil {
			return storage.InsertResult{}, err
		}
		for j, i := range at {
			p.Events[i].Status, p.Events[i].OrderSeq = rest.Events[j].Status, rest.Events[j].OrderSeq
		}
		for _, id := range res.Existing {
			existing = addID(existing, id)
		}
	}
	var res storage.InsertResult
	for _, e := range p.Events {
		if _, ok := written[e.ID]; !ok && (advanced[e.OrderKey] || existing[e.ID]) {
			res.Existing = append(res.Existing, e.ID)
		}
	}
	return res, nil
}

// insert is Insert with the key upsert (and on MySQL the read before it) as statements
// of their own before the event INSERT.
func (s *Store) insert(ctx context.Context, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	if s.d.carryKeys && len(p.Events) == 1 && len(keys) == 1 && s.idle != nil {
		if cached, _ := s.idle.take(keys); cached != nil {
			ok, err := s.insertCarried(ctx, exec, &p.Events[0], cached[keys[0].key].seq, p.ClaimTTL)
			if err != nil {
				return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
			}
			stale := 0
			if !ok {
				stale = 1
			}
			s.idle.report(1, stale)
			if ok {
				return storage.InsertResult{}, nil
			}
			// The key was written or changed since the promote's read, or the event's
			// ID exists: the statements below, which see both.
		}
	}
	var heads, candidates map[string]bool
	if len(keys) > 0 {
		var snap, cached map[string]keySnapshot
		if s.d.headBySnapshot {
			// Keys a promote saw idle need no read here (idleKeys).
			read := keys
			if s.idle != nil {
				cached, read = s.idle.take(keys)
			}
			if len(read) > 0 {
				var err error
				if snap, err = s.snapshotKeys(ctx, exec, read); err != nil {
					return storage.InsertResult{}, fmt.Errorf("insert events: read order keys: %w", err)
				}
			}
			if snap == nil {
				snap = cached
			} else {
				maps.Copy(snap, cached)
			}
		}
		idle, err := s.lockKeys(ctx, exec, p.Events, keys, snap)
		if err != nil {
			return storage.InsertResult{}, fmt.Errorf("insert events: lock order keys: %w", err)
		}
		if cached != nil {
			stale := 0
			for k := range cached {
				if !idle[k] {
					stale++
				}
			}
			s.idle.report(len(cached), stale)
		}
		if s.d.headInInsert {
			candidates = markHeads(p.Events, map[string]bool{})
			for i := range p.Events {
				if candidates[p.Events[i].ID] {
					p.Events[i].Status = outboxtype.StatusWaiting // until the INSERT says NEW
				}
			}
		} else {
			heads = s.heads(p.Events, keys, idle)
		}
	}
	now := time.Now()
	qs, err := s.d.insertQueriesBounded(s.table, p, now, heads, candidates, s.stmtBytes())
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	var news, existing map[string]bool
	for _, q := range qs {
		chunk := p.Events[q.first : q.first+q.n]
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

// insertCarried inserts e, the one ordered event of a write, NEW and numbered seq+1 if
// its key still has no event that is not DONE and its key row still carries seq, what a
// promote read of it (dialect.insertCarriedQuery). It reports whether it inserted e,
// and then sets its Status and OrderSeq.
func (s *Store) insertCarried(ctx context.Context, exec outboxtype.Executor, e *outboxtype.Event, seq int64, claimTTL time.Duration) (bool, error) {
	q, err := s.d.insertCarriedQuery(s.table, *e, seq, claimTTL, time.Now())
	if err != nil {
		return false, err
	}
	res, err := exec.ExecContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n != 1 {
		return false, err
	}
	e.Status, e.OrderSeq = outboxtype.StatusNew, seq+1
	return true, nil
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

// snapshotKeys runs snapshotKeysQuery through exec (dialect.headBySnapshot) and
// returns what it read of each key that has a row.
func (s *Store) snapshotKeys(ctx context.Context, exec outboxtype.Executor, keys []keyCount) (map[string]keySnapshot, error) {
	snap := make(map[string]keySnapshot, len(keys))
	err := s.queryKeys(ctx, exec, keys, s.d.snapshotKeysQuery, func(rows *sql.Rows) error {
		var k string
		var v keySnapshot
		if err := rows.Scan(&k, &v.seq, &v.at, &v.open); err != nil {
			return err
		}
		snap[k] = v
		return nil
	})
	return snap, err
}

// queryKeys runs the read build makes of keys through exec, in chunks of the dialect's
// maxIDs, and calls scan for every row.
func (s *Store) queryKeys(ctx context.Context, exec outboxtype.Executor, keys []keyCount, build func(tableName, []keyCount) query, scan func(*sql.Rows) error) error {
	for start := 0; start < len(keys); start += s.d.maxIDs {
		q := build(s.table, keys[start:min(start+s.d.maxIDs, len(keys))])
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
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
	}
	return nil
}

// lockKeys advances the counters of keys in the key table through exec, which locks
// their rows until exec's transaction ends, and sets the events' OrderSeq. With
// carryKeys (SQLite) it changes no existing key row: it takes the write lock and reads
// each key's carried number and the highest number of its open rows. Without
// returning (MySQL) it also returns the keys known to have no event that is not DONE:
// keys whose row the upsert inserted (a key row outlives its events, see
// purgeKeysQuery), and keys whose row was still the version snap holds and that snap
// saw idle (dialect.headBySnapshot). With headInUpsert it returns the keys the upsert
// found without such an event.
func (s *Store) lockKeys(ctx context.Context, exec outboxtype.Executor, events []outboxtype.Event, keys []keyCount, snap map[string]keySnapshot) (map[string]bool, error) {
	top := make(map[string]int64, len(keys))
	qs := s.d.lockKeysQueries(s.table, keys, snap, time.Now())
	if !s.d.lockKeysReturning {
		idle := make(map[string]bool, len(keys))
		for i, q := range qs {
			res, err := exec.ExecContext(ctx, q.SQL, q.Args...)
			if err != nil {
				return nil, err
			}
			id, err := res.LastInsertId()
			if err != nil {
				return nil, err
			}
			k := keys[i]
			if id == 0 { // the row was inserted
				top[k.key], idle[k.key] = k.n, true
				continue
			}
			top[k.key] = id >> 1
			if id&1 == 1 && !snap[k.key].open {
				idle[k.key] = true
			}
		}
		return idle, orderSeqs(events, keys, top)
	}
	var idle map[string]bool
	if s.d.headInUpsert {
		idle = make(map[string]bool, len(keys))
	}
	var keyCounts map[string]int64 // with carryKeys, the events of each key to number
	if s.d.carryKeys {
		keyCounts = make(map[string]int64, len(keys))
		for _, k := range keys {
			keyCounts[k.key] = k.n
		}
	}
	for _, q := range qs {
		rows, err := exec.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var key string
			var last int64
			var open bool
			var openMax sql.NullInt64
			dest := []any{&key, &last}
			switch {
			case s.d.carryKeys:
				dest = append(dest, &openMax)
			case idle != nil:
				dest = append(dest, &open)
			}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return nil, err
			}
			if s.d.carryKeys {
				// The counter is the key's highest number: its open rows', or when it
				// has none the one its key row carries (dialect.carryKeys).
				open = openMax.Valid
				last = max(last, openMax.Int64) + keyCounts[key]
			}
			top[key] = last
			if idle != nil && !open {
				idle[key] = true
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
	}
	return idle, orderSeqs(events, keys, top)
}

// heads returns the IDs of the ordered events to insert NEW where the event INSERT does
// not decide (without headInInsert): the first event of each key known to have no
// event left that is not DONE, which with headBySnapshot or headInUpsert are the keys
// lockKeys found idle; without either, none. It sets every ordered event's Status to what it is inserted
// as.
func (s *Store) heads(events []outboxtype.Event, keys []keyCount, idle map[string]bool) map[string]bool {
	open := map[string]bool{}
	for _, k := range keys {
		if !(s.d.headBySnapshot || s.d.headInUpsert) || !idle[k.key] {
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

// Promote implements [OrderStore.Promote] with one UPDATE (on MySQL in a READ
// COMMITTED transaction, like the other range updates), which with p.Read returns the
// promoted rows (on MySQL a read by primary key follows).
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
		withIdle := s.idle != nil && len(batch.Keys) > 0 && s.idle.keeping()
		build := s.d.promoteQuery
		if withIdle && s.d.headBySnapshot {
			build = s.d.promoteIdleQuery
		}
		q, err := build(s.table, batch)
		if err != nil {
			return res, fmt.Errorf("promote: %w", err)
		}
		switch {
		case s.d.orderOpenColumn != "":
			err = s.promoteRead(ctx, q, batch, withIdle, &res)
		case p.Read:
			err = s.promoteReturning(ctx, q, &res)
		default:
			var n int64
			n, err = s.exec1(ctx, q)
			res.Promoted += n
		}
		if err != nil {
			return res, fmt.Errorf("promote: %w", err)
		}
		// Only after an outcome (the promote that reads back what it promotes): a
		// writer's promote after its commit is of keys it just wrote, which are not idle.
		if withIdle && s.d.carryKeys && p.Read {
			if err := s.readIdleCarried(ctx, batch.Keys); err != nil {
				return res, fmt.Errorf("promote: read idle keys: %w", err)
			}
		}
		if len(keys) == 0 && len(ids) == 0 {
			return res, nil
		}
	}
}

// readIdleCarried reads which of keys have no event left that is not DONE, with the
// numbers their key rows carry, into s.idle (SQLite, dialect.carryKeys).
func (s *Store) readIdleCarried(ctx context.Context, keys []string) error {
	q := s.d.idleCarriedQuery(s.table, keys)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.on(s.db).QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		var key string
		var seq int64
		if err := rows.Scan(&key, &seq); err != nil {
			rows.Close()
			return err
		}
		s.idle.put(key, keySnapshot{seq: seq})
	}
	return errors.Join(rows.Err(), rows.Close())
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

// promoteRead is a promote on MySQL (see dialect.promoteQuery): the heads read by q,
// then updated by primary key, in ID order, while still WAITING; with p.Read, the rows
// that are then NEW are read by primary key. With idle, q is promoteIdleQuery, whose
// idle keys go to s.idle.
func (s *Store) promoteRead(ctx context.Context, q query, p storage.PromoteParams, idle bool, res *storage.PromoteResult) error {
	rctx, cancel := s.withTimeout(ctx)
	rows, err := s.db.QueryContext(rctx, q.SQL, q.Args...)
	if err != nil {
		cancel()
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		var err error
		if idle {
			var head, key sql.NullString
			var seq, at sql.NullInt64
			if err = rows.Scan(&head, &key, &seq, &at); err == nil {
				id = head.String
				if !head.Valid && key.Valid && seq.Valid && at.Valid {
					s.idle.put(key.String, keySnapshot{seq: seq.Int64, at: at.Int64})
				}
			}
		} else {
			err = rows.Scan(&id)
		}
		if err != nil {
			rows.Close()
			cancel()
			return err
		}
		if id != "" {
			ids = append(ids, id)
		}
	}
	err = errors.Join(rows.Err(), rows.Close())
	cancel()
	if err != nil || len(ids) == 0 {
		return err
	}
	slices.Sort(ids)
	// One head (a writer's promote of the key it wrote, typically) is an exact unique
	// lookup, which takes no gap lock and runs on its own, as in MarkDone: two round
	// trips fewer than a READ COMMITTED transaction.
	run := s.exec1
	if len(ids) > 1 {
		run = s.execRange
	}
	n, err := s.execEach(ctx, s.d.promoteIDsQueries(s.table, ids, p), run)
	res.Promoted += n
	if err != nil || n == 0 || !p.Read {
		return err
	}
	_, err = s.readPromoted(ctx, s.d.promotedReadQuery(s.table, ids, p), res)
	return err
}

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

// releaseClaims implements claimReleaser (see dispatcher.releaseClaims).
func (s *Store) releaseClaims(ctx context.Context, ids, tokens []string) (int64, error) {
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

// Pending implements [Store.Pending].
func (s *Store) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	q, err := s.d.pendingQuery(s.table, p)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("pending: %w", err)
	}
	events, bad, err := s.queryEvents(ctx, s.on(s.db), q, strict)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("pending: %w", err)
	}
	return storage.PendingBatch{Events: events, Undecodable: bad}, nil
}

// queryEvents runs q, a statement of selectColumns, and decodes its rows in mode. When
// the statement fails in a way that one row can cause, its rows are read again one by
// one (isolate): in strict mode a row that cannot be read or decoded comes back in
// bad, in lenient mode with a placeholder payload. Only a statement that may run again
// after failing may come here (a SELECT, or an UPDATE … RETURNING undone whole).
//
// Each statement runs under its own QueryTimeout (ctx has none of the store's).
func (s *Store) queryEvents(ctx context.Context, exec outboxtype.Executor, q query, mode decodeMode) (events []outboxtype.Event, bad []outboxtype.RowError, err error) {
	qctx, cancel := s.withTimeout(ctx)
	rows, err := exec.QueryContext(qctx, q.SQL, q.Args...)
	if err == nil {
		events, bad, err = scanEvents(rows, s.d, mode)
		// Closed before any other statement: a pool of one connection (SQLite) has
		// none other to run isolate's.
		err = errors.Join(err, rows.Close())
	}
	if err != nil && qctx.Err() != nil && ctx.Err() == nil {
		err = errors.Join(err, qctx.Err()) // the statement's own timeout: maybe a row's (rowFault)
	}
	cancel()
	if err == nil {
		return events, bad, nil
	}
	iso, ierr := s.isolate(ctx, exec, q, err, mode)
	if ierr != nil {
		return nil, nil, ierr
	}
	events, bad = splitIsolated(iso)
	return events, bad, nil
}

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

// claimAttempts bounds the attempts of a MySQL claim, or of a statement run by
// execRange, that meets a lock conflict.
const claimAttempts = 4

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

// sortClaimed puts claimed events in claim order: due longest first (available_at,
// created_at, event_id).
func sortClaimed(events []outboxtype.Event) {
	slices.SortFunc(events, func(a, b outboxtype.Event) int {
		return cmp.Or(a.AvailableAt.Compare(b.AvailableAt), a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
}

// Get implements [Store.Get]. It returns an error wrapping [ErrNotFound] when no row
// has the ID, and one wrapping a [RowError] when the row's times cannot be decoded.
func (s *Store) Get(ctx context.Context, id string) (outboxtype.Event, error) {
	if !check.PossibleID(id) {
		return outboxtype.Event{}, fmt.Errorf("get event %q: %w", id, outboxtype.ErrNotFound)
	}
	q := s.d.getQuery(s.table, id)
	events, bad, err := s.queryEvents(ctx, s.db, q, lenient)
	switch {
	case err != nil:
		return outboxtype.Event{}, fmt.Errorf("get event %s: %w", id, err)
	case len(bad) > 0:
		return outboxtype.Event{}, fmt.Errorf("get: %w", bad[0])
	case len(events) == 0:
		return outboxtype.Event{}, fmt.Errorf("get event %s: %w", id, outboxtype.ErrNotFound)
	}
	return events[0], nil
}

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

// Purge implements [Store.Purge] with one DELETE (on MySQL in a READ COMMITTED
// transaction, so that it takes no gap locks that would make INSERTs wait). A batch
// that deletes fewer than p.Limit rows then deletes, in batches of p.Limit, the rows of
// the key table whose keys have nothing left that is not DONE and were not written
// since p.Before.
func (s *Store) Purge(ctx context.Context, p storage.PurgeParams) (int64, error) {
	q, err := s.d.purgeQuery(s.table, p)
	if err != nil {
		return 0, fmt.Errorf("purge: %w", err)
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

// CheckConnection verifies that the store's connection pool is configured the way its
// dialect needs. For [MySQL] it checks that DATETIME values scan as time.Time and that
// the driver sends and parses times in UTC (the DSN carries [MySQLDSNParams]), and that
// the connection character set is utf8mb4; a connection that breaks one of these rules
// would store wrong times or text without any error, so it returns a *[ConfigError]
// with Field "DSN" naming the fix. On every database it returns a *[ConfigError] with
// Field "Table" when the table exists but lacks a later migration. Any other error is
// the database's, for example an unreachable server.
// [Outbox.Start] runs it before it starts anything.
func (s *Store) CheckConnection(ctx context.Context) error { return s.CheckConnectionFor(ctx, 0) }

// CheckConnectionFor is CheckConnection that also checks, when maxPayload is positive, that
// the server takes a payload of maxPayload bytes ([MySQL]: max_allowed_packet).
// [Outbox.Start] runs it with Config.MaxPayloadBytes.
func (s *Store) CheckConnectionFor(ctx context.Context, maxPayload int) error {
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if s.d.checkConn != nil {
		if err := s.d.checkConn(ctx, s.db, maxPayload); err != nil {
			return err
		}
	}
	return s.checkTable(ctx)
}

// checkTable returns a *[ConfigError] when the table exists but lacks a column or index
// that a later migration adds and the queries use. A version that only drops the key
// table's index is not checked: the queries work with the index there (writes pay its
// upkeep until MigrateTable drops it), so an upgraded library starts on such a table.
// Nor is an optional one (the lease: Start runs without it, with a warning).
func (s *Store) checkTable(ctx context.Context) error {
	later := s.d.ddl(s.d, s.table).later
	if len(later) == 0 {
		return nil
	}
	if exists, err := hasColumn(ctx, s.db, s.d, s.table, "event_id"); err != nil || !exists {
		return err // no table yet: the first query will say so
	}
	for _, m := range later {
		if m.droppedKeyIndex != "" || m.optional {
			continue
		}
		has, err := m.applied(ctx, s.db, s.d, s.table)
		if err != nil {
			return err
		}
		if !has {
			what := "column " + m.column
			switch {
			case m.index != "":
				what = "index " + s.table.indexName(m.index)
			case m.trigger != "":
				what = "trigger " + s.table.indexName(m.trigger)
			}
			return &outboxtype.ConfigError{Field: "Table", Reason: fmt.Sprintf("%s has no %s: run outbox.MigrateTable, "+
				"or the migration %s from outbox.Migrations, to upgrade it", s.table, what, m.name)}
		}
	}
	return nil
}

// Stats implements [StatsStore.Stats] with one grouped query. It counts every row, so its
// cost grows with the table; keep the table small with purging.
func (s *Store) Stats(ctx context.Context) (outboxtype.Stats, error) {
	q := s.d.statsQuery(s.table)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	st := outboxtype.Stats{Counts: make(map[outboxtype.Status]int64, 4)}
	for rows.Next() {
		var status, count, oldest any
		if err := rows.Scan(&status, &count, &oldest); err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
		}
		st1, err1 := intValue(status)
		n, err2 := intValue(count)
		if err := errors.Join(err1, err2); err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
		}
		st.Counts[outboxtype.Status(st1)] = n
		if outboxtype.Status(st1) != outboxtype.StatusNew && outboxtype.Status(st1) != outboxtype.StatusRetry {
			continue
		}
		t, err := s.d.decodeTime(oldest)
		if err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: oldest %s: %w", outboxtype.Status(st1), err)
		}
		if st.OldestPending.IsZero() || t.Before(st.OldestPending) {
			st.OldestPending = t
		}
	}
	if err := rows.Err(); err != nil {
		return outboxtype.Stats{}, fmt.Errorf("stats: %w", err)
	}
	if st.Counts[outboxtype.StatusWaiting] == 0 {
		return st, nil // no key can be blocked
	}
	q = s.d.blockedKeysQuery(s.table)
	var oldest any
	if err := s.db.QueryRowContext(ctx, q.SQL, q.Args...).Scan(&st.BlockedKeys, &oldest); err != nil {
		return outboxtype.Stats{}, fmt.Errorf("stats: blocked keys: %w", err)
	}
	if oldest != nil {
		t, err := s.d.decodeTime(oldest)
		if err != nil {
			return outboxtype.Stats{}, fmt.Errorf("stats: oldest blocked: %w", err)
		}
		st.OldestBlocked = t
	}
	return st, nil
}

// countTakeOver counts in b a claimed row whose previous claim, prev, belonged to another
// token: it had expired (Claim takes only unclaimed or expired rows).
func countTakeOver(b *storage.PendingBatch, prev, token string) {
	if prev != "" && prev != token {
		b.TakenOver++
	}
}
