package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// Ordered events (docs/ordering.md): the parts every database shares. An ordered row
// carries order_key and order_seq and is inserted WAITING, or NEW when it is the first
// event of a key that has nothing else open (not DONE nor another handled outcome). The
// key table, one row per key, numbers a key's events. Promote makes a key's lowest
// WAITING row NEW when nothing of the key is NEW or RETRY (or DEAD, when DEAD blocks).
// The order index holds the open rows of a key, in order_seq order: Promote reads a
// key's head and blocker from it.
//
// How a database numbers the events, decides which is NEW and promotes, and why that is
// safe under concurrent writers, claimers and purges, is its orderStrategy, in the file
// of its dialect: postgresOrder (postgres.go), mysqlOrder (mysql.go) and sqliteOrder
// (sqlite.go).

// orderStrategy is how one database keeps the events of a key in order: how Insert
// numbers the ordered events of each key and decides which is NEW and which WAITING, and
// how Promote makes the next WAITING event of a key NEW. Each database has one, whose
// doc comment is the database's whole concurrency argument.
type orderStrategy interface {
	// insert implements Store.Insert of p.Events, some of them ordered under keys (not
	// empty, in orderKeys' order), through exec, the caller's executor: p is valid and
	// fits the server's packet limit. It sets the ordered events' Status and OrderSeq.
	insert(ctx context.Context, s *Store, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error)
	// lockKeysQueries builds the statements with which a write in the caller's
	// transaction locks keys and numbers their events: on MySQL with snap, what the
	// read before the lock saw of each key; now is the process's clock.
	lockKeysQueries(d *dialect, t tableName, keys []keyCount, snap map[string]keySnapshot, now time.Time) []query
	// promoteStatement builds the promote of the heads that builder.heads reads for p,
	// which is valid (see dialect.promoteQuery).
	promoteStatement(d *dialect, t tableName, p storage.PromoteParams) query
	// promote runs one batch of [OrderStore.Promote], p, of at most maxIDs keys or IDs,
	// and adds what it promoted to res.
	promote(ctx context.Context, s *Store, p storage.PromoteParams, res *storage.PromoteResult) error
	// keepsIdleKeys reports whether the store keeps what its promotes read of keys left
	// idle, for its writers (idleKeys).
	keepsIdleKeys() bool
}

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
// that are open (not DONE, FALLBACK or DISCARDED) on MySQL.
func (d *dialect) orderColumn() string {
	if d.orderOpenColumn != "" {
		return d.orderOpenColumn
	}
	return "order_key"
}

// orderOpen is the condition the order index holds besides its key: the row is open,
// neither DONE nor another handled outcome (orderOpenStatus). Written in every query that reads the
// index so that SQLite matches it to the partial index (MySQL's generated column
// implies it).
func (d *dialect) orderOpen(alias string) string {
	if d.orderOpenColumn != "" {
		return ""
	}
	if alias != "" {
		alias += "."
	}
	return " AND " + alias + "status <> " + sqlStatus(outboxtype.StatusDone) + " AND " + alias + "status < " + sqlStatus(outboxtype.StatusFallback)
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

// keySnapshot is what a read saw of one key's row that found the key idle, or, on
// MySQL, what snapshotKeysQuery read of one key before its lock.
type keySnapshot struct {
	seq, at int64 // the key row's last_seq and (MySQL) updated_at, in microseconds since snapshotEpoch
	open    bool  // the key had an open event
}

// promoteQuery builds [OrderStore.Promote] as the dialect's orderStrategy runs it: one
// statement that makes the heads of the keys p.Keys (or of the events p.IDs, or of any
// keys, at most p.Limit) that nothing holds NEW, or on MySQL the read of those heads
// (mysqlOrder).
func (d *dialect) promoteQuery(t tableName, p storage.PromoteParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	return d.order.promoteStatement(d, t, p), nil
}

// heads writes the read of the heads a promote of p moves on: the event_id of each
// key's WAITING row with the lowest order_seq when no row of the key is NEW or RETRY
// (or DEAD, with p.DeadBlocks). force follows the table's name in the reads of the
// order index by key (MySQL's index hint).
func (b *builder) heads(t tableName, p storage.PromoteParams, force string) {
	d := b.d
	table, col := d.qualified(t), d.orderColumn()
	waiting := sqlStatus(outboxtype.StatusWaiting)
	// first writes the key's first open row by order_seq, skipping DEAD rows when they
	// do not block: one probe of the order index. A key's head is its WAITING row with
	// the lowest order_seq when no row of the key is NEW or RETRY (or DEAD); when the
	// first open row is WAITING, it is that row, and otherwise the key is held. Finding
	// the lowest WAITING row by checking each WAITING row of the key against the key's
	// minimum cost a probe per row: a promote, and so each event of a key with
	// thousands waiting, cost as much as the backlog. The check that nothing holds the
	// key stays a scan of the key's open rows (a NEW row can be behind a WAITING one: a
	// DEAD event replayed under DeadKeySkips waits for the key's current head).
	blocking := pendingStatuses()
	if p.DeadBlocks {
		blocking = sqlStatuses(outboxtype.StatusNew, outboxtype.StatusRetry, outboxtype.StatusDead)
	}
	notHeld := func() {
		b.w(" AND NOT EXISTS (SELECT 1 FROM ", table, " a", force, " WHERE a.", col, " = w.", col,
			d.orderOpen("a"), " AND a.status IN (", blocking, ")", d.perRowProbe, ")")
	}
	first := func(key string) {
		b.w("(SELECT f.event_id FROM ", table, " f", force, " WHERE f.", col, " = ", key, d.orderOpen("f"))
		if !p.DeadBlocks {
			b.w(" AND f.status <> ", sqlStatus(outboxtype.StatusDead))
		}
		b.w(" ORDER BY f.order_seq LIMIT 1)")
	}
	switch {
	case len(p.IDs) > 0:
		b.w("SELECT w.event_id FROM ", table, " w WHERE w.").matchIDs(p.IDs)
		b.w(d.orderOpen("w"), " AND w.status = ", waiting, " AND w.event_id = ")
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
		b.w(") h JOIN ", table, " w ON w.event_id = h.id WHERE w.status = ", waiting)
		notHeld()
	default:
		// The sweep: any key. It walks the WAITING rows (at most once a second).
		b.w("SELECT w.event_id FROM ", table, " w WHERE w.", col, " IS NOT NULL")
		b.w(d.orderOpen("w"), " AND w.status = ", waiting, " AND w.order_seq = (SELECT MIN(m.order_seq) FROM ", table, " m", force, " WHERE m.", col, " = w.", col,
			d.orderOpen("m"), " AND m.status = ", waiting, ")")
		notHeld()
	}
	limit := int64(p.Limit)
	if n := len(p.Keys) + len(p.IDs); n > 0 {
		limit = int64(n)
	}
	b.w(" ").limit(limit)
}

// promoteSet writes the assignments of a promote: NEW, due from now by the database
// clock unless it is due later, and claimed by p.Token for p.TTL when it is set. The due
// time moves so that a promoted row enters the pending index at the promote, where the
// poller's low-water mark (core/internal/poll) reads it, not at its write.
func (b *builder) promoteSet(p storage.PromoteParams) *builder {
	greatest := "GREATEST"
	if b.d.name == "sqlite" {
		greatest = "MAX"
	}
	b.w(" SET status = ", sqlStatus(outboxtype.StatusNew), ", available_at = ", greatest, "(available_at, ", b.d.dbNow, ")")
	if p.Token != "" {
		b.w(", locked_by = ", b.arg(p.Token), ", locked_until = ", b.d.dbTimeOffset(b, p.TTL))
	}
	return b
}

// promotedReadQuery builds the read of the rows a promote on MySQL made NEW (the ids
// promoteIDsQueries updated), with [PromoteParams.Read]: by primary key, those still
// NEW (and still claimed by p.Token, when set). A row finished or rescheduled since is
// not read.
func (d *dialect) promotedReadQuery(t tableName, ids []string, p storage.PromoteParams) query {
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, " FROM ", d.byID(t), " WHERE ")
	b.matchIDs(ids).w(" AND status = ", sqlStatus(outboxtype.StatusNew))
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
		b.w("UPDATE ", d.byID(t)).promoteSet(p).w(" WHERE ")
		b.matchIDs(chunk).w(" AND status = ", sqlStatus(outboxtype.StatusWaiting))
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
// updated_at under the row's lock, which the outer test re-checks (on SQLite, whose
// writes leave the key row as it is, the one writer at a time: see sqliteOrder).
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
		d.orderOpen("f"), " AND f.status IN (", sqlStatuses(outboxtype.StatusRetry, outboxtype.StatusDead), ") AND EXISTS (SELECT 1 FROM ", table,
		" w WHERE w.", col, " = f.", col, d.orderOpen("w"), " AND w.status = ", sqlStatus(outboxtype.StatusWaiting), d.perRowProbe,
		") AND NOT EXISTS (SELECT 1 FROM ", table, " n WHERE n.", col, " = f.", col, d.orderOpen("n"),
		" AND n.status = ", sqlStatus(outboxtype.StatusNew), d.perRowProbe, ") GROUP BY f.", col, ") b")
	return b.query()
}
