package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The [SQLite] dialect: its values, its time encoding, and sqliteOrder, how SQLite
// keeps the events of a key in order, whose doc comment is SQLite's whole concurrency
// argument.

var sqliteDialect = &dialect{
	// octet_length (SQLite 3.43) reads the size from the record's header, not the
	// value: an overflow page that is corrupt is not read.
	sizeFunc:   "octet_length",
	name:       "sqlite",
	bindVar:    func(int) string { return "?" },
	quoteChar:  '"',
	encodeTime: encodeSQLiteTime,
	decodeTime: decodeTime,
	// SQLite before 3.32 allows 999 parameters, newer builds 32766; modernc.org/sqlite
	// also binds arguments in time quadratic in their number, so several statements
	// of 999 are faster than one of 32766.
	maxBindParams: 999,
	maxIDs:        500,
	statusHint:    "+",
	dbNow:         sqliteNow("'now'"),
	dbTimeOffset: func(b *builder, d time.Duration) string {
		return sqliteNow("'now', " + b.arg(fmt.Sprintf("%+.6f seconds", d.Seconds())))
	},
	ddl:              sqliteDDL,
	order:            sqliteOrder{},
	literalLimit:     true,
	transactionalDDL: true,
	skipExisting:     " ON CONFLICT (event_id) DO NOTHING",
	skipOnlyDeciding: true,
	cachedStatements: 128,
	splitKeyset:      true,
}

// sqliteTimeLayout is how the [SQLite] dialect stores times: UTC with exactly six
// fractional digits, so that comparing the text compares the times.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// sqliteNow returns the SQLite expression for the time strftime computes from args
// ("'now'" and modifiers) in the sqliteTimeLayout text form. SQLite's clock has
// millisecond precision, so the microseconds are always "000". Within one statement
// every 'now' is the same instant.
func sqliteNow(args string) string {
	return "strftime('%Y-%m-%dT%H:%M:%f000Z', " + args + ")"
}

func encodeSQLiteTime(t time.Time) (any, error) {
	if y := t.Year(); y < 1 || y > 9999 {
		return nil, fmt.Errorf("time %s is outside the years 1 to 9999 that SQLite text times hold", t)
	}
	return t.Format(sqliteTimeLayout), nil
}

// sqliteOrder is how SQLite writes ordered events and promotes them. Why the events of a
// key are numbered in commit order and delivered one at a time, under concurrent
// writers, claimers and purges:
//
// One writer. SQLite runs one writing transaction at a time (with SQLiteDSN's
// _txlock=immediate a transaction takes the write lock at BEGIN; otherwise its first
// write statement does), so a statement that writes sees every commit before it, and the
// transactions that write one key commit one after the other. It needs no lock of its
// own on the key: an ordered write takes the write lock with its first statement (if the
// transaction does not hold it already), before it reads the key's numbers.
//
// Numbering (schema version 7, keyCarryMigration). The key row carries the highest
// number of the key's events that have left the order index: two triggers raise its
// last_seq to the order_seq of a row that finishes (DONE, FALLBACK, DISCARDED) or is
// deleted while open (a DEAD row deleted or purged), and set its updated_at. A write
// numbers its events after the highest order_seq of the key's open rows (one probe of
// the order index), or when it has none after the number its key row carries, so the
// numbers of a key rise over its life (until the key purge deletes its row), and the key
// is idle when it has no open row. A write writes nothing to the key row: its key upsert
// (lockKeysQueries), ON CONFLICT … DO UPDATE SET last_seq = last_seq, changes nothing in
// a key row that exists (SQLite rewrites no page for an unchanged row) and creates a new
// key's row at 0; it is a write so that it takes the one write lock before its
// RETURNING reads both numbers, so that what it reads is every commit of the key, and
// the numbers follow commit order. Outside a transaction (a *sql.DB or *sql.Conn) the
// upsert's read and the event INSERT would each commit on their own, and another writer
// could number the key in between: insert runs them in a transaction of its own. After
// version 7 no process of an earlier release may write ordered events to the table: it
// would number them from the key row alone, which no longer follows the key's open
// rows (a process of this release refuses a table without version 7).
//
// NEW or WAITING. The upsert's RETURNING tells, per key, whether the key has an open row
// (the highest open order_seq, NULL when there is none), and the first event of each
// idle key is inserted NEW, the others WAITING (headsOf), by a plain INSERT: what the
// upsert read under the write lock is every commit of the key.
//
// Why this way (W1o / W1 on SQLite, docs/BENCHMARKS.md): the event INSERT deciding, as
// on PostgreSQL, instead of a read before it gave 0.64 with the read and 0.70 without,
// five rounds a side; the key upsert deciding instead of the INSERT, with one result set
// fewer a write, gave medians of 0.625 and 0.665 over eight alternations; and the key
// row carrying the number instead of a counter every write advanced gave medians of
// 0.77 against 0.665 over eight alternations.
//
// Keys seen idle. A key whose event the promote after a DONE outcome of this store found
// idle (it reads, for the batch's keys with nothing open, the number their key rows
// carry: idleCarriedQuery) is written by one statement instead (insertCarriedQuery): an
// INSERT OR IGNORE of the event NEW, numbered after that number, whose event_id value
// is NULL unless the key has still nothing open and its key row still carries that
// number. The statement reads that under the write lock; if anything changed (another
// process wrote the key, its row was purged), it inserts nothing and the write takes
// the upsert and the plain INSERT. Each promote's read is used once (idleKeys: bounded,
// turned off for a while when more than a quarter of those used were stale).
// TestSQLiteHeadsFollowThePromotesRead covers both paths against writes by another
// store, purges, rollbacks, DEAD, discarded, deleted and out-of-order finished events,
// and TestSQLiteKeysCarryTheirNumbers numbers keys across three stores that finish,
// discard and delete their events.
//
// Promote. A key's next event becomes NEW when nothing earlier of the key is NEW, RETRY
// (or DEAD, when DEAD blocks); only a promote turns a WAITING row NEW. The promote is one
// UPDATE of the heads its subquery reads, re-checking status = WAITING
// (promoteStatement), and SQLite runs one writer at a time: two promotes of one key make
// at most one event NEW. A promote runs after the commit it follows (the writer's, after
// its transaction; the deliverer's, after a DONE outcome), so of the two the later one
// sees both commits, and the poller's sweep moves on the keys nobody did.
// TestPromoteKeepsOneHeadPerKey races promotes with claims, outcomes and writers.
//
// Claimers. A NEW ordered event is an ordinary NEW row, and only one event of a key is
// ever NEW or RETRY. A claim is one UPDATE of the rows of an IN subquery, writers being
// serialised (claimQuery). A WAITING event is inserted unclaimed; a promote with a token
// claims the rows it makes NEW in its UPDATE.
//
// Purges. The purge and the key purge are writes too, so each sees every commit. The
// key purge (purgeKeysQuery) deletes the key rows whose keys have no open row and whose
// updated_at, when the row was made or an event of the key last left the order index,
// is before the cutoff; a write does not change updated_at, but a writer's open rows
// keep its key's row, and a key whose row is gone starts again from 1, behind nothing. A
// key read idle before the purge fails insertCarriedQuery's check of its row. The purge
// of undelivered rows (PurgeParams.UndeliveredBefore, WriterOnly mode) deletes open
// rows: the delete trigger carries their numbers into the key row, as for a purged DEAD
// row, and the key's lowest WAITING row left is its head, which a promote makes NEW.
type sqliteOrder struct{}

// insert writes ordered events in the caller's transaction, or in one of its own when
// exec is a *sql.DB or a *sql.Conn.
func (o sqliteOrder) insert(ctx context.Context, s *Store, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	// Outside a transaction, the key upsert's read and the event INSERT would each
	// commit on their own, and another writer could number the key in between: they
	// run in a transaction of their own.
	switch e := exec.(type) {
	case *sql.DB:
		return o.insertInTx(ctx, s, e.BeginTx, e == s.db, p, keys)
	case *sql.Conn:
		return o.insertInTx(ctx, s, e.BeginTx, false, p, keys)
	}
	return o.insertOrdered(ctx, s, s.on(exec), p, keys)
}

// insertInTx is insert in a transaction that begin starts and that it commits. With
// ours (begin is the store's own pool's), it runs the store's prepared statements.
func (o sqliteOrder) insertInTx(ctx context.Context, s *Store, begin func(context.Context, *sql.TxOptions) (*sql.Tx, error), ours bool, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	tx, err := begin(ctx, nil)
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	var exec outboxtype.Executor = tx
	if ours && s.stmts != nil {
		exec = stmtExec{c: s.stmts, tx: tx}
	}
	res, err := o.insertOrdered(ctx, s, exec, p, keys)
	if err != nil {
		return storage.InsertResult{}, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	return res, nil
}

// insertOrdered writes one event of a key a promote saw idle with insertCarried, and
// any other write with the key upsert, then the event INSERT.
func (o sqliteOrder) insertOrdered(ctx context.Context, s *Store, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	if len(p.Events) == 1 && len(keys) == 1 && s.idle != nil {
		if cached, _ := s.idle.take(keys); cached != nil {
			ok, err := o.insertCarried(ctx, s, exec, &p.Events[0], cached[keys[0].key].seq, p.ClaimTTL)
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
	idle, err := o.lockKeys(ctx, s, exec, p.Events, keys)
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: lock order keys: %w", err)
	}
	return s.insertEvents(ctx, exec, p, headsOf(p.Events, keys, idle), nil)
}

// lockKeys runs the key upsert through exec, which takes the write lock and changes no
// existing key row, reads each key's carried number and the highest number of its open
// rows, and sets the events' OrderSeq. It returns the keys without open rows.
func (o sqliteOrder) lockKeys(ctx context.Context, s *Store, exec outboxtype.Executor, events []outboxtype.Event, keys []keyCount) (map[string]bool, error) {
	top := make(map[string]int64, len(keys))
	idle := make(map[string]bool, len(keys))
	keyCounts := make(map[string]int64, len(keys)) // the events of each key to number
	for _, k := range keys {
		keyCounts[k.key] = k.n
	}
	for _, q := range o.lockKeysQueries(s.d, s.table, keys, nil, time.Now()) {
		err := scanRows(ctx, exec, q, func(rows *sql.Rows) error {
			var key string
			var last int64
			var openMax sql.NullInt64
			if err := rows.Scan(&key, &last, &openMax); err != nil {
				return err
			}
			// The counter is the key's highest number: its open rows', or when it has
			// none the one its key row carries.
			last = max(last, openMax.Int64) + keyCounts[key]
			top[key] = last
			if !openMax.Valid {
				idle[key] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return idle, orderSeqs(events, keys, top)
}

// lockKeysQueries builds the key upserts, each statement many keys: a new key's row
// starts at 0, a key row that exists is left as it is, and each statement returns
// (order_key, last_seq, the highest order_seq of the key's open rows or NULL), read
// after it took the write lock. The rows' updated_at is now, bound: the process's clock
// is the database's (SQLite is a library in the process), and strftime('now') cost a
// key upsert a sixth of its CPU.
func (sqliteOrder) lockKeysQueries(d *dialect, t tableName, keys []keyCount, _ map[string]keySnapshot, now time.Time) []query {
	kt := d.qualified(keyTable(t))
	at, _ := d.time(now) // fails only outside the years 1 to 9999: the clock below
	updatedAt := func(b *builder) string {
		if at != nil {
			return b.arg(at)
		}
		return d.dbNow
	}
	argsPerKey := 2
	if at != nil {
		argsPerKey = 3
	}
	var qs []query
	per := min(d.maxIDs, d.maxBindParams/argsPerKey)
	for start := 0; start < len(keys); start += per {
		// SQLite has no INSERT … AS alias: the upserted row is named by its table's bare
		// name, which SQLite requires without a schema there.
		b := d.newBuilder().w("INSERT INTO ", kt, " (order_key, last_seq, updated_at) VALUES ")
		for i, k := range keys[start:min(start+per, len(keys))] {
			if i > 0 {
				b.w(", ")
			}
			b.w("(", b.arg(k.key), ", ", b.arg(int64(0)), ", ", updatedAt(b), ")")
		}
		b.w(" ON CONFLICT (order_key) DO UPDATE SET last_seq = last_seq RETURNING order_key, last_seq, (SELECT max(e.order_seq) FROM ",
			d.qualified(t), " e WHERE e.order_key = ", d.quote(keyTable(t).name), ".order_key", d.orderOpen("e"), ")")
		qs = append(qs, b.query())
	}
	return qs
}

// insertCarried inserts e, the one ordered event of a write, NEW and numbered seq+1 if
// its key still has no open event (none that is not DONE, FALLBACK or DISCARDED) and its
// key row still carries seq, what a promote read of it (insertCarriedQuery). It reports
// whether it inserted e, and then sets its Status and OrderSeq.
func (o sqliteOrder) insertCarried(ctx context.Context, s *Store, exec outboxtype.Executor, e *outboxtype.Event, seq int64, claimTTL time.Duration) (bool, error) {
	q, err := o.insertCarriedQuery(s.d, s.table, *e, seq, claimTTL, time.Now())
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

// insertCarriedQuery builds the INSERT of one ordered event e of a key that a promote
// read idle with last_seq seq (idleKeys): e NEW, numbered seq+1, on the condition, read
// by the statement itself, that the key has still no event that is not DONE and its key
// row still carries seq. The condition is the event_id's value (NULL when it fails),
// and INSERT OR IGNORE skips a row whose event_id is NULL: the statement then inserts
// nothing and returns no error (as for an ID that exists). Being a write, it takes
// SQLite's one write lock before it reads, so that what it reads is every commit.
func (sqliteOrder) insertCarriedQuery(d *dialect, t tableName, e outboxtype.Event, seq int64, claimTTL time.Duration, now time.Time) (query, error) {
	if e.ID == "" || e.OrderKey == "" {
		return query{}, check.Invalid("insert", "the event has no ID or no order key")
	}
	r, err := d.encodeRow(e, now)
	if err != nil {
		return query{}, err
	}
	columns, _ := insertColumns(e.LockedBy != "", true, e.Listener != "")
	b := d.newBuilder()
	b.w("INSERT OR IGNORE INTO ", d.qualified(t), " (", columns, ") VALUES ")
	e.OrderSeq = seq + 1
	r.claims, r.ordered, r.listeners = e.LockedBy != "", true, e.Listener != ""
	r.head, r.seq, r.carried = true, e.OrderSeq, &seq
	b.insertRow(t, e, claimTTL, r)
	return b.query(), nil
}

// promoteStatement builds the promote as one UPDATE of the heads its subquery reads,
// each while it is still WAITING; with p.Read it returns the promoted rows.
func (sqliteOrder) promoteStatement(d *dialect, t tableName, p storage.PromoteParams) query {
	b := d.newBuilder()
	b.w("UPDATE ", d.qualified(t)).promoteSet(p).w(" WHERE event_id IN (")
	b.heads(t, p, "")
	b.w(") AND status = ", sqlStatus(outboxtype.StatusWaiting))
	if p.Read {
		b.w(" RETURNING ", selectColumns)
	}
	return b.query()
}

// promote runs the promote's one statement and, after an outcome (the promote that
// reads back what it promotes), reads which of its keys were left idle, into s.idle. A
// writer's promote after its commit is of keys it just wrote, which are not idle.
func (o sqliteOrder) promote(ctx context.Context, s *Store, p storage.PromoteParams, res *storage.PromoteResult) error {
	withIdle := s.idle != nil && len(p.Keys) > 0 && s.idle.keeping()
	q, err := s.d.promoteQuery(s.table, p)
	if err != nil {
		return err
	}
	if err := s.promoteOnce(ctx, q, p.Read, res); err != nil {
		return err
	}
	if withIdle && p.Read {
		if err := o.readIdleCarried(ctx, s, p.Keys); err != nil {
			return fmt.Errorf("read idle keys: %w", err)
		}
	}
	return nil
}

// readIdleCarried reads which of keys have no event left that is not DONE, with the
// numbers their key rows carry, into s.idle.
func (o sqliteOrder) readIdleCarried(ctx context.Context, s *Store, keys []string) error {
	q := o.idleCarriedQuery(s.d, s.table, keys)
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	return scanRows(ctx, s.on(s.db), q, func(rows *sql.Rows) error {
		var key string
		var seq int64
		if err := rows.Scan(&key, &seq); err != nil {
			return err
		}
		s.idle.put(key, keySnapshot{seq: seq})
		return nil
	})
}

// idleCarriedQuery builds the read that follows a promote of keys: (order_key,
// last_seq) of those of the keys that have no event left that is not DONE, for idleKeys.
func (sqliteOrder) idleCarriedQuery(d *dialect, t tableName, keys []string) query {
	b := d.newBuilder()
	b.w("SELECT k.order_key, k.last_seq FROM ", d.qualified(keyTable(t)), " k WHERE k.order_key IN (")
	for i, k := range keys {
		if i > 0 {
			b.w(", ")
		}
		b.w(b.arg(k))
	}
	b.w(") AND NOT EXISTS (SELECT 1 FROM ", d.qualified(t), " e WHERE e.order_key = k.order_key", d.orderOpen("e"), ")")
	return b.query()
}

// keepsIdleKeys: the numbers the promotes read spare the writers the key upsert.
func (sqliteOrder) keepsIdleKeys() bool { return true }
