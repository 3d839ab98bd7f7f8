package sqlstore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Ordered events (docs/ordering.md). An ordered row carries order_key and order_seq and
// is inserted WAITING (status 4), or NEW when it is the first event of a key that has
// nothing else left that is not DONE (dialect.headInTx, headBySnapshot). The key
// table, one row per key, holds the key's counter: Insert takes the next numbers from
// it with an upsert, which also locks the key's row until the inserting transaction
// ends, so that transactions writing one key commit one after the other and numbers
// follow commit order (on SQLite the key row instead carries the highest number of the
// key's events that left the order index, see dialect.carryKeys). Promote makes a
// key's lowest WAITING row NEW when nothing of the
// key is NEW or RETRY (or DEAD, when DEAD blocks). The order index holds the rows of a
// key that are not DONE, in order_seq order: Promote reads a key's head and blocker
// from it.

// The suffixes of the order index and the key table.
const (
	orderIndexSuffix = "_order_idx"
	keyTableSuffix   = "_key"
	keyIndexSuffix   = "_key_updated_idx"
)

// keyTable is the name of t's key table, in t's schema.
func keyTable(t tableName) tableName {
	return tableName{schema: t.schema, name: t.indexName(keyTableSuffix)}
}

// orderColumn is the column the order index starts with: order_key on PostgreSQL and
// SQLite, whose index is partial, and a generated column that is order_key on rows
// that are not DONE on MySQL.
func (d *dialect) orderColumn() string {
	if d.orderOpenColumn != "" {
		return d.orderOpenColumn
	}
	return "order_key"
}

// orderOpen is the condition the order index holds besides its key: the row is not
// DONE nor another handled outcome (orderOpenStatus). Written in every query that reads the index so that SQLite matches it to the
// partial index (MySQL's generated column implies it).
func (d *dialect) orderOpen(alias string) string {
	if d.orderOpenColumn != "" {
		return ""
	}
	if alias != "" {
		alias += "."
	}
	return " AND " + alias + "status <> 1 AND " + alias + "status < 5"
}

// keyCount is one key of an insert and how many of its events the insert writes.
type keyCount struct {
	key string
	n   int64
}

// orderKeys returns the keys of events in byte order, each with its number of events.
// Locking keys in one order keeps two inserts of the same keys from deadlocking.
func orderKeys(events []outboxtype.Event) []keyCount {
	counts := map[string]int64{}
	for i := range events {
		if k := events[i].OrderKey; k != "" {
			counts[k]++
		}
	}
	keys := make([]keyCount, 0, len(counts))
	for k, n := range counts {
		keys = append(keys, keyCount{k, n})
	}
	slices.SortFunc(keys, func(a, b keyCount) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	return keys
}

// keySnapshot is what snapshotKeysQuery read of one key before its lock (MySQL).
type keySnapshot struct {
	seq, at int64 // the key row's last_seq and updated_at, in microseconds since snapshotEpoch
	open    bool  // the key had an event that is not DONE
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

// snapshotKeysQuery builds the consistent read of keys (dialect.headBySnapshot): for
// each key that has a row in the key table, (order_key, last_seq, updated_at as
// microseconds since snapshotEpoch, whether the key has an event that is not DONE). It
// is a plain SELECT, which locks nothing under READ COMMITTED and REPEATABLE READ.
func (d *dialect) snapshotKeysQuery(t tableName, keys []keyCount) query {
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

// lockKeysQueries builds the upserts that lock keys and advance their counters by their
// counts. With returning, each statement returns (order_key, last_seq) for its keys,
// the counter after the increment, and with headInUpsert whether the key has an event
// that is not DONE; without (MySQL), each statement is one key, and its
// result's LastInsertId is 0 after an insert (the counter is then the count), else
// twice the counter after the update, plus 1 when the row was, before the update, the
// version snap (what snapshotKeysQuery read of the key) holds. now is the process's
// clock, which sets updated_at where it is the database's (processClock).
func (d *dialect) lockKeysQueries(t tableName, keys []keyCount, snap map[string]keySnapshot, now time.Time) []query {
	kt := d.qualified(keyTable(t))
	if !d.lockKeysReturning {
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
	var qs []query
	// The key rows' updated_at: the database's clock, or with processClock now, bound
	// (the process's clock is the database's, and SQLite's strftime('now') cost a key
	// upsert a sixth of its CPU).
	var at any
	if d.processClock {
		at, _ = d.time(now) // fails only outside the years 1 to 9999: the clock below
	}
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
	per := min(d.maxIDs, d.maxBindParams/argsPerKey)
	for start := 0; start < len(keys); start += per {
		b := d.newBuilder()
		b.w("INSERT INTO ", kt, " AS k (order_key, last_seq, updated_at) VALUES ")
		if d.upsertTargetBare {
			b = d.newBuilder().w("INSERT INTO ", kt, " (order_key, last_seq, updated_at) VALUES ")
		}
		for i, k := range keys[start:min(start+per, len(keys))] {
			if i > 0 {
				b.w(", ")
			}
			n := k.n
			if d.carryKeys {
				n = 0
			}
			b.w("(", b.arg(k.key), ", ", b.arg(n), ", ", updatedAt(b), ")")
		}
		target := "k."
		if d.upsertTargetBare {
			target = ""
		}
		if d.carryKeys {
			// A key row that exists is left as it is (see dialect.carryKeys): the
			// statement takes the write lock and reads, after it, the carried number and
			// the highest number of the key's open rows. A new key's row starts at 0.
			b.w(" ON CONFLICT (order_key) DO UPDATE SET last_seq = last_seq RETURNING order_key, last_seq, (SELECT max(e.order_seq) FROM ",
				d.qualified(t), " e WHERE e.order_key = ", d.quote(keyTable(t).name), ".order_key", d.orderOpen("e"), ")")
			qs = append(qs, b.query())
			continue
		}
		b.w(" ON CONFLICT (order_key) DO UPDATE SET last_seq = ", target, "last_seq + excluded.last_seq, updated_at = excluded.updated_at",
			" RETURNING order_key, last_seq")
		if d.headInUpsert {
			// The upserted row by its table's bare name: SQLite rejects a schema there.
			b.w(", EXISTS (SELECT 1 FROM ", d.qualified(t), " e WHERE e.", d.orderColumn(), " = ", d.quote(keyTable(t).name), ".order_key",
				d.orderOpen("e"), ")")
		}
		qs = append(qs, b.query())
	}
	return qs
}

// insertByVersionQuery builds the one statement that writes p.Events, all ordered,
// whose keys are keys (dialect.headByVersion). A data-modifying WITH upserts the key
// rows as lockKeysQueries does, except that an existing row is advanced only while it
// is still the version the statement's snapshot holds (its last_seq and updated_at,
// read by a subquery in that snapshot); then the INSERT writes the events of the keys
// the upsert returned, numbered below their key's counter, the first event of each key
// NEW unless the snapshot holds an event of the key that is not DONE.
//
// That is safe for the same reason as headBySnapshot: every write of a key advances its
// row under the row's lock, so a row still at the snapshot's version when the upsert
// holds its lock had no write committed since the snapshot, and the snapshot holds
// every event of the key. A row that changed (or appeared) since then is locked but not
// advanced, and its events are not inserted: the statement returns none of them, and
// Insert writes them with the two statements of lockKeys and the event INSERT, which
// run after the lock. The statement returns event_id, status and order_seq of the rows
// it inserted, and skips rows whose ID exists (skipExisting). It reports false, and
// builds nothing, when the events do not fit one statement.
func (d *dialect) insertByVersionQuery(t tableName, p storage.InsertParams, keys []keyCount, now time.Time) (query, bool, error) {
	if err := p.Validate(); err != nil {
		return query{}, false, err
	}
	claims, listeners := false, false
	for i := range p.Events {
		claims = claims || p.Events[i].LockedBy != ""
		listeners = listeners || p.Events[i].Listener != ""
	}
	columns, _ := insertColumns(claims, true, listeners)
	kt := d.qualified(keyTable(t))
	b := d.newBuilder()
	b.w("WITH ks AS (INSERT INTO ", kt, " AS k (order_key, last_seq, updated_at) VALUES ")
	left := make(map[string]int64, len(keys)) // events of each key still to number
	for i, k := range keys {
		if i > 0 {
			b.w(", ")
		}
		b.w("(", b.arg(k.key), ", ", b.arg(k.n), ", ", d.dbNow, ")")
		left[k.key] = k.n
	}
	b.w(" ON CONFLICT (order_key) DO UPDATE SET last_seq = k.last_seq + excluded.last_seq, updated_at = excluded.updated_at",
		" WHERE (k.last_seq, k.updated_at) = (SELECT s.last_seq, s.updated_at FROM ", kt, " s WHERE s.order_key = excluded.order_key)",
		" RETURNING order_key, last_seq) INSERT INTO ", d.qualified(t), " (", columns, ") SELECT ")
	for i, c := range strings.Split(columns, ", ") {
		if i > 0 {
			b.w(", ")
		}
		if c == "order_seq" {
			b.w("ks.last_seq - v.order_seq") // v.order_seq: how far below the counter
		} else {
			b.w("v.", c)
		}
	}
	b.w(" FROM (VALUES ")
	first := make(map[string]bool, len(keys))
	for i, e := range p.Events {
		if e.ID == "" || e.OrderKey == "" {
			return query{}, false, check.Invalid("insert", "event %d has no ID or no order key", i)
		}
		r, err := d.encodeRow(e, now)
		if err != nil {
			return query{}, false, err
		}
		if i > 0 {
			b.w(", ")
		}
		left[e.OrderKey]--
		r.claims, r.ordered, r.listeners, r.typed = claims, true, listeners, true
		r.decide, r.seq = !first[e.OrderKey], left[e.OrderKey]
		first[e.OrderKey] = true
		b.insertRow(t, e, p.ClaimTTL, r)
	}
	b.w(") AS v (", columns, ") JOIN ks ON ks.order_key = v.order_key", d.skipExisting, " RETURNING event_id, status, order_seq")
	if len(b.args) > d.maxBindParams {
		return query{}, false, nil
	}
	return query{SQL: b.sb.String(), Args: b.args}, true, nil
}

// promoteQuery builds [OrderStore.Promote]: one update of the heads of the keys p.Keys
// (or of any keys, at most p.Limit) that nothing holds. On MySQL it builds only the
// read of the heads, a plain SELECT, whose rows promoteIDsQuery then updates.
//
// The heads are read in one consistent snapshot (PostgreSQL's statement snapshot,
// MySQL's consistent read; SQLite runs one writer at a time), and the update re-checks
// status = 4 on each row's current version after locking it. That is enough: in any
// snapshot, a key's head is its lowest WAITING row when no row of the key is NEW or
// RETRY (or DEAD), and only a promote makes a WAITING row NEW, so a head read in an
// older snapshot that is still WAITING now is still the head now. MariaDB, asked the
// same in one UPDATE … JOIN, reads the subqueries as locking reads of the current rows,
// waiting on locks in between: two promotes of one key then each saw a different head
// (found by the fault harness's order checker), and their shared locks on the order
// index deadlocked DONE writes. Hence the two statements there.
func (d *dialect) promoteQuery(t tableName, p storage.PromoteParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	table, col := d.qualified(t), d.orderColumn()
	b := d.newBuilder()
	// MariaDB may turn a subquery into an anti-join over a materialised scan of the
	// whole table: the hint keeps the subqueries on the order index.
	force := ""
	if d.orderOpenColumn != "" {
		force = " FORCE INDEX (" + d.quote(t.indexName(orderIndexSuffix)) + ")"
	}
	// first writes the key's first open row by order_seq, skipping DEAD rows when they
	// do not block: one probe of the order index. A key's head is its WAITING row with
	// the lowest order_seq when no row of the key is NEW or RETRY (or DEAD); when the
	// first open row is WAITING, it is that row, and otherwise the key is held. Finding
	// the lowest WAITING row by checking each WAITING row of the key against the key's
	// minimum cost a probe per row: a promote, and so each event of a key with
	// thousands waiting, cost as much as the backlog. The check that nothing holds the
	// key stays a scan of the key's open rows (a NEW row can be behind a WAITING one: a
	// DEAD event replayed under DeadKeySkips waits for the key's current head).
	blocking := "0, 2"
	if p.DeadBlocks {
		blocking = "0, 2, 3"
	}
	notHeld := func() {
		b.w(" AND NOT EXISTS (SELECT 1 FROM ", table, " a", force, " WHERE a.", col, " = w.", col,
			d.orderOpen("a"), " AND a.status IN (", blocking, ")", d.perRowProbe, ")")
	}
	first := func(key string) {
		b.w("(SELECT f.event_id FROM ", table, " f", force, " WHERE f.", col, " = ", key, d.orderOpen("f"))
		if !p.DeadBlocks {
			b.w(" AND f.status <> 3")
		}
		b.w(" ORDER BY f.order_seq LIMIT 1)")
	}
	heads := func() {
		switch {
		case len(p.IDs) > 0:
			b.w("SELECT w.event_id FROM ", table, " w WHERE w.").matchIDs(p.IDs)
			b.w(d.orderOpen("w"), " AND w.status = 4 AND w.event_id = ")
			first("w." + col)
			notHeld()
		case len(p.Keys) > 0:
			// Each key's first open row, by the key table (one row per key).
			b.w("SELECT w.event_id FROM (SELECT ")
			first("k.order_key")
			b.w(" AS id FROM ", d.qualified(keyTable(t)), " k WHERE ")
			if d.idsAsArray {
				b.w("k.order_key = ANY(CAST(", b.arg(textArrayLiteral(p.Keys)), " AS TEXT[]))")
			} else {
				b.w("k.order_key IN (")
				for i, k := range p.Keys {
					if i > 0 {
						b.w(", ")
					}
					b.w(b.arg(k))
				}
				b.w(")")
			}
			b.w(") h JOIN ", table, " w ON w.event_id = h.id WHERE w.status = 4")
			notHeld()
		default:
			// The sweep: any key. It walks the WAITING rows (at most once a second).
			b.w("SELECT w.event_id FROM ", table, " w WHERE w.", col, " IS NOT NULL")
			b.w(d.orderOpen("w"), " AND w.status = 4 AND w.order_seq = (SELECT MIN(m.order_seq) FROM ", table, " m", force, " WHERE m.", col, " = w.", col,
				d.orderOpen("m"), " AND m.status = 4)")
			notHeld()
		}
		limit := int64(p.Limit)
		if n := len(p.Keys) + len(p.IDs); n > 0 {
			limit = int64(n)
		}
		b.w(" ").limit(limit)
	}
	if d.orderOpenColumn != "" {
		heads()
		return b.query(), nil
	}
	if d.idsAsArray {
		// PostgreSQL locks the heads in event_id order first, so that promotes of
		// overlapping keys never deadlock; FOR UPDATE re-checks status = 4 on the
		// current version of a row another transaction changed meanwhile.
		// The heads drive the lock by primary key (= ANY(ARRAY(…))): as IN (…), the
		// planner may scan the table's WAITING rows and match each against them.
		b.w("WITH h AS MATERIALIZED (SELECT event_id FROM ", table, " WHERE event_id = ANY(ARRAY(")
		heads()
		b.w(")) AND status = 4 ORDER BY event_id FOR UPDATE) UPDATE ", table, " AS t SET status = 0")
		if p.Token != "" {
			b.w(", locked_by = ", b.arg(p.Token), ", locked_until = ", d.dbTimeOffset(b, p.TTL))
		}
		b.w(" FROM h WHERE t.event_id = h.event_id AND t.status = 4")
		if p.Read {
			b.w(" RETURNING ", prefixedColumns("t."))
		}
		return b.query(), nil
	}
	b.w("UPDATE ", table, " SET status = 0")
	if p.Token != "" {
		b.w(", locked_by = ", b.arg(p.Token), ", locked_until = ", d.dbTimeOffset(b, p.TTL))
	}
	b.w(" WHERE event_id IN (")
	heads()
	b.w(") AND status = 4")
	if p.Read {
		b.w(" RETURNING ", selectColumns)
	}
	return b.query(), nil
}

// promoteIdleQuery builds, on MySQL (headBySnapshot), promoteQuery's read of the heads of
// p.Keys together with what snapshotKeysQuery reads of those of the keys that have no
// event left that is not DONE (idleKeys): rows (event_id, NULL, NULL, NULL) for the
// heads, then (NULL, order_key, last_seq, updated_at as microseconds since
// snapshotEpoch) for the idle keys. One statement, so one consistent read per part.
func (d *dialect) promoteIdleQuery(t tableName, p storage.PromoteParams) (query, error) {
	if len(p.Keys) == 0 || len(p.IDs) > 0 || !d.headBySnapshot {
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

// idleCarriedQuery builds, on SQLite (dialect.carryKeys), the read that follows a
// promote of keys: (order_key, last_seq) of those of the keys that have no event left
// that is not DONE, for idleKeys.
func (d *dialect) idleCarriedQuery(t tableName, keys []string) query {
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

// insertCarriedQuery builds, on SQLite (dialect.carryKeys), the INSERT of one ordered
// event e of a key that a promote read idle with last_seq seq (idleKeys): e NEW,
// numbered seq+1, on the condition, read by the statement itself, that the key has
// still no event that is not DONE and its key row still carries seq. The condition is
// the event_id's value (NULL when it fails), and INSERT OR IGNORE skips a row whose
// event_id is NULL: the statement then inserts nothing and returns no error (as for an
// ID that exists). Being a write, it takes SQLite's one write lock before it reads, so
// that what it reads is every commit.
func (d *dialect) insertCarriedQuery(t tableName, e outboxtype.Event, seq int64, claimTTL time.Duration, now time.Time) (query, error) {
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

// promotedReadQuery builds the read of the rows a promote on MySQL made NEW (the ids
// promoteIDsQueries updated), with [PromoteParams.Read]: by primary key, those still
// NEW (and still claimed by p.Token, when set). A row finished or rescheduled since is
// not read.
func (d *dialect) promotedReadQuery(t tableName, ids []string, p storage.PromoteParams) query {
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, " FROM ", d.byID(t), " WHERE ")
	b.matchIDs(ids).w(" AND status = 0")
	if p.Token != "" {
		b.w(" AND locked_by = ", b.arg(p.Token))
	}
	return b.query()
}

// promoteIDsQueries builds the second statement of a promote on MySQL: the heads read
// by promoteQuery, by primary key, each only while it is still WAITING.
func (d *dialect) promoteIDsQueries(t tableName, ids []string, p storage.PromoteParams) []query {
	var qs []query
	for _, chunk := range d.chunkIDs(ids) {
		b := d.newBuilder()
		b.w("UPDATE ", d.byID(t), " SET status = 0")
		if p.Token != "" {
			b.w(", locked_by = ", b.arg(p.Token), ", locked_until = ", d.dbTimeOffset(b, p.TTL))
		}
		b.w(" WHERE ")
		b.matchIDs(chunk).w(" AND status = 4")
		qs = append(qs, b.query())
	}
	return qs
}

// keyBoundQuery builds the read of the next stretch of the key table that one batch of
// a key purge examines: the order_key of the limit-th key row after after, in primary
// key order ("" starts at the first row); none when fewer rows are left. The key table
// has no index on updated_at (an ordered write updates it, and an index on it cost the
// write more than a purge's walk of the primary key costs, docs/ordering.md), so a purge
// walks the key table by primary key, limit rows a batch.
func (d *dialect) keyBoundQuery(t tableName, after string, limit int) query {
	b := d.newBuilder()
	b.w("SELECT order_key FROM ", d.qualified(keyTable(t)), " WHERE order_key > ", b.arg(after),
		" ORDER BY order_key LIMIT 1 OFFSET ", b.arg(int64(limit-1)))
	return b.query()
}

// purgeKeysQuery builds the deletion of the key rows after after and up to upTo (to the
// end of the table when upTo is nil) not written since before whose keys have no row
// that is not DONE: their counters are not needed any more (a key written again starts
// from 1, behind nothing). A transaction that writes the key meanwhile updates
// updated_at under the row's lock, which the outer test re-checks.
func (d *dialect) purgeKeysQuery(t tableName, before any, after string, upTo *string) query {
	kt, table, col := d.qualified(keyTable(t)), d.qualified(t), d.orderColumn()
	b := d.newBuilder()
	stretch := func(alias string) {
		b.w(alias, "order_key > ", b.arg(after))
		if upTo != nil {
			b.w(" AND ", alias, "order_key <= ", b.arg(*upTo))
		}
	}
	if d.orderedDML {
		b.w("DELETE FROM ", kt, " WHERE ")
		stretch("")
		b.w(" AND updated_at < ", b.arg(before), " AND NOT EXISTS (SELECT 1 FROM ", table, " e WHERE e.", col, " = ", kt, ".order_key)")
		return b.query()
	}
	b.w("DELETE FROM ", kt, " WHERE order_key IN (SELECT k.order_key FROM ", kt, " k WHERE ")
	stretch("k.")
	b.w(" AND k.updated_at < ", b.arg(before), " AND NOT EXISTS (SELECT 1 FROM ", table, " e WHERE e.", col, " = k.order_key", d.orderOpen("e"),
		d.perRowProbe, ")")
	if d.skipLocked {
		// Keys another purger, or a writer's transaction, holds are left for later.
		b.w(" FOR UPDATE OF k SKIP LOCKED")
	}
	b.w(") AND updated_at < ", b.arg(before))
	return b.query()
}

// orderSeqs assigns each ordered event of events its OrderSeq, in place, from the
// counters after the increment (top) of its key: a key's events in insert order take
// the numbers up to top.
func orderSeqs(events []outboxtype.Event, keys []keyCount, top map[string]int64) error {
	next := make(map[string]int64, len(keys))
	for _, k := range keys {
		t, ok := top[k.key]
		if !ok {
			return fmt.Errorf("lock order key %q: no counter returned", k.key)
		}
		next[k.key] = t - k.n + 1
	}
	for i := range events {
		if k := events[i].OrderKey; k != "" {
			events[i].OrderSeq = next[k]
			next[k]++
		}
	}
	return nil
}

// blockedKeysQuery builds the part of [StatsStore.Stats] about ordered events: how many
// keys have WAITING events held by a RETRY or DEAD event (and no NEW one), and the
// oldest created_at of those holding events. It reads the order index by key.
func (d *dialect) blockedKeysQuery(t tableName) query {
	table, col := d.qualified(t), d.orderColumn()
	b := d.newBuilder()
	b.w("SELECT COUNT(*), MIN(oldest) FROM (SELECT f.", col, ", MIN(f.created_at) AS oldest FROM ", table, " f WHERE f.", col, " IS NOT NULL",
		d.orderOpen("f"), " AND f.status IN (2, 3) AND EXISTS (SELECT 1 FROM ", table, " w WHERE w.", col, " = f.", col, d.orderOpen("w"),
		" AND w.status = 4", d.perRowProbe, ") AND NOT EXISTS (SELECT 1 FROM ", table, " n WHERE n.", col, " = f.", col, d.orderOpen("n"),
		" AND n.status = 0", d.perRowProbe, ") GROUP BY f.", col, ") b")
	return b.query()
}
