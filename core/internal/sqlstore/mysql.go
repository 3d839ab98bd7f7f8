package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The [MySQL] dialect (MySQL and MariaDB): its values, the DSN it needs and the check of
// a connection's settings, and mysqlOrder, how MySQL keeps the events of a key in order,
// whose doc comment is MySQL's whole concurrency argument.

var mysqlDialect = &dialect{
	name:              "mysql",
	bindVar:           func(int) string { return "?" },
	quoteChar:         '`',
	encodeTime:        encodeMySQLTime,
	decodeTime:        decodeTime,
	maxBindParams:     65535, // the protocol's 2-byte parameter count
	maxIDs:            1000,
	maxStatementBytes: 4 << 20,
	packetLimited:     true,
	sizeFunc:          "LENGTH",
	orderedDML:        true,
	expandKeyset:      true,
	dueColumn:         "due_at",
	finishedColumn:    "finished_at",
	pollColumn:        "pending_created_at",
	dbNow:             "UTC_TIMESTAMP(6)",
	dbTimeOffset: func(b *builder, d time.Duration) string {
		return "UTC_TIMESTAMP(6) + INTERVAL " + b.arg(d.Microseconds()) + " MICROSECOND"
	},
	claimInTx:        true,
	readCommittedDML: true,
	byIDHint:         " FORCE INDEX (PRIMARY)",
	orderOpenColumn:  "order_open_key",
	order:            mysqlOrder{},
	ddl:              mysqlDDL,
	checkConn:        checkMySQLConn,
	cachedStatements: 16,
}

// encodeMySQLTime passes t (UTC, microseconds) to the driver, which formats it in its
// loc: UTC when the DSN is right, see [MySQL].
func encodeMySQLTime(t time.Time) (any, error) {
	if y := t.Year(); y < 1000 || y > 9999 {
		return nil, fmt.Errorf("time %s is outside the years 1000 to 9999 that MySQL DATETIME holds", t)
	}
	return t, nil
}

// MySQLDSNParams are the DSN parameters the [MySQL] dialect needs from
// github.com/go-sql-driver/mysql, to append to the DSN:
// "user:password@tcp(127.0.0.1:3306)/app?" + outbox.MySQLDSNParams.
const MySQLDSNParams = "parseTime=true&loc=UTC"

// mysqlCheckTimes are the instants the connection check sends: one in January and one
// in July, so that a loc with daylight saving time is off by its offset in at least one
// of them even where its standard offset is zero.
var mysqlCheckTimes = [...]time.Time{
	time.Date(2001, 1, 2, 3, 4, 5, 123456000, time.UTC),
	time.Date(2001, 7, 2, 3, 4, 5, 123456000, time.UTC),
}

// mysqlCheckQuery reads a time argument back twice: as DATETIME, which tells whether the
// driver parses times (parseTime), and as text formatted by the server, which shows the
// wall-clock time the driver sent (its loc). It also reads the connection's character
// sets and max_allowed_packet.
const mysqlCheckQuery = "SELECT CAST(? AS DATETIME(6)), DATE_FORMAT(CAST(? AS DATETIME(6)), '%Y-%m-%d %H:%i:%s.%f'), " +
	"@@character_set_client, @@character_set_connection, @@max_allowed_packet"

// mysqlPacketHeadroom is the part of max_allowed_packet kept for an event's columns
// other than the payload and the statement around them (see mysqlPacketNeed).
const mysqlPacketHeadroom = 64 << 10

// mysqlPacketNeed is the max_allowed_packet that an event with a payload of maxPayload
// bytes needs: the INSERT carries the payload in one packet, and the driver's
// client-side interpolation (interpolateParams=true) may escape every byte of it, so
// twice the payload, plus headroom for the other columns.
func mysqlPacketNeed(maxPayload int) int64 { return 2*int64(maxPayload) + mysqlPacketHeadroom }

// mysqlTextLayout is how DATE_FORMAT in mysqlCheckQuery prints a time.
const mysqlTextLayout = "2006-01-02 15:04:05.000000"

// checkMySQLConn is the [MySQL] dialect's connection check; see [SQLStore.CheckConnection].
func checkMySQLConn(ctx context.Context, db *sql.DB, maxPayload int) error {
	var maxPacket int64
	for _, want := range mysqlCheckTimes {
		var scanned any
		var text, csClient, csConn sql.NullString
		if err := db.QueryRowContext(ctx, mysqlCheckQuery, want, want).Scan(&scanned, &text, &csClient, &csConn, &maxPacket); err != nil {
			return fmt.Errorf("check mysql connection: %w", err)
		}
		t, ok := scanned.(time.Time)
		if !ok {
			return &outboxtype.ConfigError{Field: "DSN", Reason: fmt.Sprintf(
				"DATETIME values scan as %T, not time.Time: add parseTime=true to the MySQL DSN (outbox.MySQLDSNParams)", scanned)}
		}
		if t.Location() == time.Local {
			return &outboxtype.ConfigError{Field: "DSN", Reason: "the driver reads and writes times in loc=Local, the process's time zone: " +
				"set loc=UTC in the MySQL DSN (outbox.MySQLDSNParams)"}
		}
		if got := text.String; got != want.Format(mysqlTextLayout) || !t.Equal(want) {
			return &outboxtype.ConfigError{Field: "DSN", Reason: fmt.Sprintf(
				"the driver sends times in loc %s, not UTC (%s was stored as %q): set loc=UTC in the MySQL DSN (outbox.MySQLDSNParams)",
				t.Location(), want.Format(mysqlTextLayout), got)}
		}
		if csClient.String != "utf8mb4" || csConn.String != "utf8mb4" {
			return &outboxtype.ConfigError{Field: "DSN", Reason: fmt.Sprintf(
				"the connection character set is %s/%s, not utf8mb4: remove charset from the MySQL DSN or set charset=utf8mb4",
				csClient.String, csConn.String)}
		}
	}
	if need := mysqlPacketNeed(maxPayload); maxPayload > 0 && need > maxPacket {
		return &outboxtype.ConfigError{Field: "MaxPayloadBytes", Reason: fmt.Sprintf(
			"%d needs a server max_allowed_packet of at least %d (twice MaxPayloadBytes plus 64 KiB), but max_allowed_packet is %d: "+
				"lower MaxPayloadBytes to at most %d or raise max_allowed_packet", maxPayload, need, maxPacket,
			max(0, maxPacket-mysqlPacketHeadroom)/2)}
	}
	return nil
}

// mysqlOrder is how MySQL and MariaDB write ordered events and promote them. Why the
// events of a key are numbered in commit order and delivered one at a time, under
// concurrent writers, claimers and purges:
//
// Numbering. Writing an ordered event upserts its key's row in the key table, which
// holds the key's counter: one INSERT … ON DUPLICATE KEY UPDATE per key, which returns
// the counter through LAST_INSERT_ID (lockKeysQueries; MySQL has no RETURNING). The
// upsert locks the row until the writer's transaction ends, so the transactions that
// write one key commit one after the other, and each takes the key's next numbers in
// that order: write order is commit order, and a transaction that committed late was
// simply later (the earlier one held the key). A rolled-back transaction gives its
// numbers back. Keys are locked in one (byte) order (orderKeys), so that two writes of
// the same keys do not deadlock.
//
// NEW or WAITING. The first event of a key is inserted NEW when the key has no open
// event (none that is not DONE, FALLBACK or DISCARDED), the others WAITING. The writer's
// REPEATABLE READ snapshot may predate the key's lock, and a locking read instead would
// hold locks on the order index until the user's transaction ends (the DONE writes of
// other keys would wait on them). So the writer reads its keys before the upsert, in a
// plain consistent read (snapshotKeysQuery): each key's row (last_seq, updated_at) and
// whether the key has an open event. The upsert then takes the lock and reports, with
// the counter, whether the row it updated is still the version that read saw. If it is,
// no transaction wrote the key between the snapshot and the lock, so the snapshot saw
// every event of the key, and a key it saw idle is idle: its first event is inserted
// NEW. If the row changed (another writer, or the key's row was purged and written
// again: updated_at tells two versions with the same counter apart), or the key was not
// idle, the events are inserted WAITING, as they are behind the event the snapshot
// missed, and the promote after commit moves them on. A key whose row the upsert
// inserts has no event left (a key row outlives its key's events, see the purge below),
// so its first event is NEW too. Under SERIALIZABLE InnoDB turns the read into a
// locking read, so two transactions writing one key at the same moment can end in a
// deadlock (error 1213), which SERIALIZABLE transactions retry anyway; READ UNCOMMITTED
// would read DONE outcomes that are not committed, and is not supported for ordered
// writes. TestMySQLHeadsFollowTheSnapshot takes a snapshot, lets other transactions
// write, finish, purge and write again each key, and checks the next write's status.
//
// Keys seen idle. That read need not be the writer's own: any consistent read that saw
// the key idle at a version will do, however old, since the upsert's check under the
// lock is what makes it usable (a row still at that version had no write committed
// since, and an event leaves the key's open rows but never comes back to them without a
// write of the key; a DEAD event counts as open). So the promote after a DONE outcome
// reads, in the statement that looks for the keys' next events (promoteIdleQuery), the
// version of each of its keys that has nothing left, and the store keeps those versions
// for its writers (idleKeys: bounded, each used once, turned off for a while when more
// than a quarter of those used were stale). A stale version fails the upsert's check,
// and the events go WAITING. TestMySQLHeadsFollowThePromotesRead covers it.
//
// Promote. A key's next event becomes NEW when nothing earlier of the key is NEW, RETRY
// (or DEAD, when DEAD blocks); only a promote turns a WAITING row NEW. The promote is
// two statements: a plain SELECT of the heads (promoteStatement: one consistent read,
// no locks), then an UPDATE of those rows by primary key while each is still WAITING
// (promoteIDsQueries), in ID order: one head alone (an exact unique lookup, which takes
// no gap lock), several in READ COMMITTED transactions. That suffices: in any snapshot
// a key's head is its lowest WAITING row when nothing holds the key, and since only a
// promote makes a WAITING row NEW, a head read in an older snapshot that is still
// WAITING now is still the head now; two promotes of one key make at most one event
// NEW. MariaDB, asked the same in one UPDATE … JOIN, read the subqueries as locking
// reads of the current rows, waiting on locks in between: two promotes of one key then
// each saw a different head (found by the fault harness's order checker), and their
// shared locks on the order index deadlocked DONE writes. The reads of the order index
// force it (MariaDB may turn a subquery into an anti-join over a materialised scan of
// the whole table). A promote runs after the commit it follows (the writer's, after its
// transaction; the deliverer's, after a DONE outcome), so of the two the later one sees
// both commits, and the poller's sweep moves on the keys nobody did.
// TestPromoteKeepsOneHeadPerKey races promotes with claims, outcomes and writers.
//
// Claimers. A NEW ordered event is an ordinary NEW row, and only one event of a key is
// ever NEW or RETRY. A claim is one short READ COMMITTED transaction (Store.claimTx): a
// plain read of the due rows' IDs along the pending index, a locking read FOR UPDATE
// SKIP LOCKED of those rows by primary key, then an UPDATE by primary key. READ
// COMMITTED takes no gap locks, so inserts into the table never wait for a claim, and
// the claim never meets a row an open business transaction inserted, whose implicit
// lock a locking read would turn into gap locks that DONE updates wait on until the
// business transaction ends (claimReadQuery, TestClaimTakesNoLockOfAnOpenWriter). Every
// statement that locks or changes rows by a list of IDs forces the primary key
// (byIDHint), for the same reason. The statements that change a range of rows run READ
// COMMITTED (readCommittedDML), and any statement the store runs on its own is retried
// after a deadlock (1213) or lock wait timeout (1205). A WAITING event is inserted
// unclaimed; a promote with a token claims the rows it makes NEW in its UPDATE.
//
// Purges. One purge of the table runs at a time (Store.purgeLock: a named lock on a
// connection of its own, which a dead node's connection releases), its statements READ
// COMMITTED, so purges never wait for each other's row locks and take no gap locks that
// would make inserts wait. The key purge (purgeKeysQuery) deletes the key rows whose keys
// have no open row and that were not written since the cutoff; a transaction that writes
// the key meanwhile updates updated_at under the row's lock. A key whose row is gone
// starts again from 1, behind nothing, and a version read before the purge fails the
// upsert's check (updated_at). The purge of undelivered rows (PurgeParams.UndeliveredBefore,
// WriterOnly mode) deletes open rows, under the same lock and READ COMMITTED: the key's
// counter stays in its key row, a key seen with open rows that lost them is only
// written WAITING (a promote moves it on), and the key's lowest WAITING row left is its
// head, which a promote makes NEW.
type mysqlOrder struct{}

// insert reads the keys before their lock (or takes what a promote read of them, see
// idleKeys), locks them, and inserts the first event of each key seen idle NEW.
func (o mysqlOrder) insert(ctx context.Context, s *Store, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	exec = s.on(exec)
	// Keys a promote saw idle need no read here (idleKeys).
	var snap, cached map[string]keySnapshot
	read := keys
	if s.idle != nil {
		cached, read = s.idle.take(keys)
	}
	if len(read) > 0 {
		var err error
		if snap, err = o.snapshotKeys(ctx, s, exec, read); err != nil {
			return storage.InsertResult{}, fmt.Errorf("insert events: read order keys: %w", err)
		}
	}
	if snap == nil {
		snap = cached
	} else {
		maps.Copy(snap, cached)
	}
	idle, err := o.lockKeys(ctx, s, exec, p.Events, keys, snap)
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
	return s.insertEvents(ctx, exec, p, headsOf(p.Events, keys, idle), nil)
}

// snapshotKeys runs snapshotKeysQuery through exec, in chunks of the dialect's maxIDs,
// and returns what it read of each key that has a row.
func (o mysqlOrder) snapshotKeys(ctx context.Context, s *Store, exec outboxtype.Executor, keys []keyCount) (map[string]keySnapshot, error) {
	snap := make(map[string]keySnapshot, len(keys))
	for start := 0; start < len(keys); start += s.d.maxIDs {
		q := o.snapshotKeysQuery(s.d, s.table, keys[start:min(start+s.d.maxIDs, len(keys))])
		err := scanRows(ctx, exec, q, func(rows *sql.Rows) error {
			var k string
			var v keySnapshot
			if err := rows.Scan(&k, &v.seq, &v.at, &v.open); err != nil {
				return err
			}
			snap[k] = v
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// snapshotEpoch is the origin of keySnapshot.at: the key row's updated_at travels as an
// integer, so that the upsert compares it exactly.
const snapshotEpoch = "'2000-01-01 00:00:00'"

// keyVersionAt is the MySQL expression of keySnapshot.at for the key table's updated_at
// column col: the snapshot read, the promote's read of idle keys and the upsert's version
// check must compute it alike.
func keyVersionAt(col string) string {
	return "TIMESTAMPDIFF(MICROSECOND, " + snapshotEpoch + ", " + col + ")"
}

// snapshotKeysQuery builds the consistent read of keys before their lock: for each key
// that has a row in the key table, (order_key, last_seq, updated_at as microseconds
// since snapshotEpoch, whether the key has an event that is not DONE). It is a plain
// SELECT, which locks nothing under READ COMMITTED and REPEATABLE READ.
func (mysqlOrder) snapshotKeysQuery(d *dialect, t tableName, keys []keyCount) query {
	b := d.newBuilder()
	b.w("SELECT k.order_key, k.last_seq, ", keyVersionAt("k.updated_at"), ", EXISTS (SELECT 1 FROM ", d.qualified(t),
		" e FORCE INDEX (", d.quote(t.indexName(orderIndexSuffix)), ") WHERE e.", d.orderColumn(), " = k.order_key) FROM ",
		d.qualified(keyTable(t)), " k WHERE k.order_key IN (")
	for i, k := range keys {
		if i > 0 {
			b.w(", ")
		}
		b.w(b.arg(k.key))
	}
	b.w(")")
	return b.query()
}

// lockKeys advances the counters of keys in the key table through exec, which locks
// their rows until exec's transaction ends, and sets the events' OrderSeq. It returns
// the keys known to have no event that is not DONE: keys whose row the upsert inserted
// (a key row outlives its events, see purgeKeysQuery), and keys whose row was still the
// version snap holds and that snap saw idle.
func (o mysqlOrder) lockKeys(ctx context.Context, s *Store, exec outboxtype.Executor, events []outboxtype.Event, keys []keyCount, snap map[string]keySnapshot) (map[string]bool, error) {
	top := make(map[string]int64, len(keys))
	idle := make(map[string]bool, len(keys))
	for i, q := range o.lockKeysQueries(s.d, s.table, keys, snap, time.Now()) {
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

// lockKeysQueries builds the upserts that lock keys and advance their counters by their
// counts, one statement a key: its result's LastInsertId is 0 after an insert (the
// counter is then the count), else twice the counter after the update, plus 1 when the
// row was, before the update, the version snap (what snapshotKeysQuery read of the key)
// holds.
func (mysqlOrder) lockKeysQueries(d *dialect, t tableName, keys []keyCount, snap map[string]keySnapshot, _ time.Time) []query {
	kt := d.qualified(keyTable(t))
	qs := make([]query, len(keys))
	for i, k := range keys {
		var seq, at any // NULL: the key had no row, which the <=> tests never match
		if s, ok := snap[k.key]; ok {
			seq, at = s.seq, s.at
		}
		b := d.newBuilder()
		// The assignments run left to right (or all on the old values, under
		// MariaDB's SIMULTANEOUS_ASSIGNMENT): the test reads the old updated_at.
		b.w("INSERT INTO ", kt, " (order_key, last_seq, updated_at) VALUES (", b.arg(k.key), ", ", b.arg(k.n), ", ", d.dbNow,
			") ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID((last_seq + VALUES(last_seq)) * 2 + (last_seq <=> ", b.arg(seq),
			" AND ", keyVersionAt("updated_at"), " <=> ", b.arg(at), ")) DIV 2, updated_at = VALUES(updated_at)")
		qs[i] = b.query()
	}
	return qs
}

// promoteStatement builds only the first statement of a promote: the read of the
// heads, a plain SELECT, whose rows promoteIDsQueries then updates. MariaDB may turn a
// subquery into an anti-join over a materialised scan of the whole table: the hint
// keeps the subqueries on the order index.
func (mysqlOrder) promoteStatement(d *dialect, t tableName, p storage.PromoteParams) query {
	b := d.newBuilder()
	b.heads(t, p, " FORCE INDEX ("+d.quote(t.indexName(orderIndexSuffix))+")")
	return b.query()
}

// promoteIdleQuery builds promoteStatement's read of the heads of p.Keys together with
// what snapshotKeysQuery reads of those of the keys that have no event left that is not
// DONE (idleKeys): rows (event_id, NULL, NULL, NULL) for the heads, then (NULL,
// order_key, last_seq, updated_at as microseconds since snapshotEpoch) for the idle
// keys. One statement, so one consistent read per part.
func (mysqlOrder) promoteIdleQuery(d *dialect, t tableName, p storage.PromoteParams) (query, error) {
	if len(p.Keys) == 0 || len(p.IDs) > 0 {
		return query{}, check.Invalid("promote", "an idle-key read needs Keys on MySQL")
	}
	heads, err := d.promoteQuery(t, p)
	if err != nil {
		return query{}, err
	}
	b := d.newBuilder()
	b.args = heads.Args
	b.w("SELECT p.event_id, NULL, NULL, NULL FROM (", heads.SQL, ") p UNION ALL SELECT NULL, k.order_key, k.last_seq, ",
		keyVersionAt("k.updated_at"), " FROM ", d.qualified(keyTable(t)), " k WHERE k.order_key IN (")
	for i, k := range p.Keys {
		if i > 0 {
			b.w(", ")
		}
		b.w(b.arg(k))
	}
	b.w(") AND NOT EXISTS (SELECT 1 FROM ", d.qualified(t), " e FORCE INDEX (", d.quote(t.indexName(orderIndexSuffix)), ") WHERE e.",
		d.orderColumn(), " = k.order_key)")
	return b.query(), nil
}

// promote reads the heads (with the versions of the keys left idle, while the store
// keeps them), then updates them by primary key (promoteRead).
func (o mysqlOrder) promote(ctx context.Context, s *Store, p storage.PromoteParams, res *storage.PromoteResult) error {
	withIdle := s.idle != nil && len(p.Keys) > 0 && s.idle.keeping()
	var q query
	var err error
	if withIdle {
		q, err = o.promoteIdleQuery(s.d, s.table, p)
	} else {
		q, err = s.d.promoteQuery(s.table, p)
	}
	if err != nil {
		return err
	}
	return o.promoteRead(ctx, s, q, p, withIdle, res)
}

// promoteRead runs a promote's two statements: the heads read by q, then updated by
// primary key, in ID order, while still WAITING; with p.Read, the rows that are then
// NEW are read by primary key. With idle, q is promoteIdleQuery, whose idle keys go to
// s.idle.
func (mysqlOrder) promoteRead(ctx context.Context, s *Store, q query, p storage.PromoteParams, idle bool, res *storage.PromoteResult) error {
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

// keepsIdleKeys: the versions the promotes read spare the writers their read.
func (mysqlOrder) keepsIdleKeys() bool { return true }
