package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The [Postgres] dialect: its values, and postgresOrder, how PostgreSQL keeps the events
// of a key in order, whose doc comment is PostgreSQL's whole concurrency argument.

var postgresDialect = &dialect{
	sizeFunc:         "pg_column_size",
	name:             "postgres",
	bindVar:          func(n int) string { return "$" + strconv.Itoa(n) },
	quoteChar:        '"',
	encodeTime:       func(t time.Time) (any, error) { return t, nil },
	decodeTime:       decodeTime,
	maxBindParams:    65535, // the wire protocol's Int16 parameter count
	idsAsArray:       true,
	arrayInsert:      true,
	maxIDs:           5000,
	transactionalDDL: true,
	dbNow:            "statement_timestamp()",
	dbTimeOffset: func(b *builder, d time.Duration) string {
		return "statement_timestamp() + CAST(" + b.arg(d.Microseconds()) + " AS BIGINT) * INTERVAL '1 microsecond'"
	},
	ddl:          postgresDDL,
	order:        postgresOrder{},
	perRowProbe:  " OFFSET 0",
	skipExisting: " ON CONFLICT (event_id) DO NOTHING",
	skipLocked:   true,
}

// postgresOrder is how PostgreSQL writes ordered events and promotes them. Why the
// events of a key are numbered in commit order and delivered one at a time, under
// concurrent writers, claimers and purges:
//
// Numbering. Writing an ordered event upserts its key's row in the key table, which
// holds the key's counter (lockKeysQueries: INSERT … ON CONFLICT DO UPDATE … RETURNING,
// one statement for many keys). The upsert locks the row until the writer's transaction
// ends, so the transactions that write one key commit one after the other, and each
// takes the key's next numbers in that order: write order is commit order, and a
// transaction that committed late was simply later (the earlier one held the key). A
// rolled-back transaction gives its numbers back. Keys are locked in one (byte) order
// (orderKeys), so that two writes of the same keys do not deadlock.
//
// NEW or WAITING. The first event of a key in the transaction is inserted NEW when the
// key has no open event (none that is not DONE, FALLBACK or DISCARDED), the others
// WAITING. Deciding that in the writer's transaction is safe where the read that
// decides sees every commit of the key before the key's lock was granted. A write whose
// events are all ordered is one statement (insertByVersionQuery): a data-modifying WITH
// upserts the keys and returns their counters, and the INSERT reads them, with a CASE
// WHEN EXISTS probe of the order index per key deciding the first event's status (and
// claim) and RETURNING the statuses and numbers. One statement has one snapshot, taken
// before the upsert waits for another writer's lock on a key, so the upsert advances a
// key's row only while it is still the version that snapshot holds (its last_seq and
// updated_at, read by a subquery in the statement's snapshot). Every write of a key
// advances its row under the row's lock, so a row that is still that version had no
// write committed since the snapshot: the snapshot holds every event of the key, and
// its EXISTS is the truth. A key whose row changed (or appeared) meanwhile is locked
// but not advanced, the statement writes none of its events, and insertLocked writes
// them with two statements of their own: the upsert, then the INSERT, which decides
// with the same probes (insertQueriesHeads' candidates: an EXISTS per row rather than a
// read before it, one statement fewer in the writer's transaction). That INSERT starts
// after the lock, and under READ COMMITTED its snapshot sees every commit before it.
// Under REPEATABLE READ and SERIALIZABLE the upsert of a key written since the
// transaction's snapshot fails with a serialization error, as PostgreSQL's upserts do.
// A write that also has unordered events, or that does not fit one statement, takes the
// two statements. TestPostgresHeadsFollowTheVersion makes the statement wait for
// another transaction that creates or writes the key, commits or rolls back, and checks
// the statuses and numbers.
//
// Promote. A key's next event becomes NEW when nothing earlier of the key is NEW, RETRY
// (or DEAD, when DEAD blocks); only a promote turns a WAITING row NEW. The promote is one
// statement (promoteStatement): it reads the heads in the statement's snapshot, locks
// them in event_id order (FOR UPDATE in a MATERIALIZED CTE, driven by primary key), so
// that promotes of overlapping keys never deadlock, and FOR UPDATE re-checks status =
// WAITING on the current version of a row another transaction changed meanwhile. That
// suffices: in any snapshot a key's head is its lowest WAITING row when nothing holds
// the key, and since only a promote makes a WAITING row NEW, a head read in an older
// snapshot that is still WAITING now is still the head now; two promotes of one key make
// at most one event NEW. A promote runs after the commit it follows (the writer's,
// after its transaction; the deliverer's, after a DONE outcome), so of the two the later
// one sees both commits, and the poller's sweep moves on the keys nobody did.
// TestPromoteKeepsOneHeadPerKey races promotes with claims, outcomes and writers.
//
// Claimers. A NEW ordered event is an ordinary NEW row, and only one event of a key is
// ever NEW or RETRY, so claims need nothing of their own: a claim locks due rows FOR
// UPDATE SKIP LOCKED in a MATERIALIZED CTE and updates exactly those (claimQuery), and
// every outcome is fenced by the row's status and claim token (matchIDTokens locks each
// row FOR NO KEY UPDATE, the pairs sorted by ID). A WAITING event is inserted
// unclaimed; a promote with a token claims the rows it makes NEW in the same statement.
//
// Purges. A purge batch locks its rows FOR UPDATE SKIP LOCKED, so that purgers never
// wait for each other, and its outer conditions repeat the subquery's, which PostgreSQL
// re-checks on a row's new version (a concurrent replay) without re-running the
// subquery (purgeQuery). The key purge (purgeKeysQuery) deletes the key rows whose keys
// have no open row and that were not written since the cutoff, skipping with SKIP LOCKED
// the rows another purger or a writer's transaction holds; a transaction that writes the
// key meanwhile updates updated_at under the row's lock, which the outer test re-checks.
// A key whose row is gone starts again from 1, behind nothing. The purge of undelivered
// rows (PurgeParams.UndeliveredBefore, WriterOnly mode) deletes open rows, locked SKIP
// LOCKED too: the key's counter stays in its key row, a deleted row never comes back to
// the open rows, and the key's lowest WAITING row left is its head, which a promote
// makes NEW.
//
// The correlated [NOT] EXISTS probes of ordering end with perRowProbe (OFFSET 0), so
// that each stays a probe of the order index per outer row (TestQueriesUseIndexes).
type postgresOrder struct{}

// insert writes events that are all ordered with insertByVersion, others with
// insertLocked.
func (o postgresOrder) insert(ctx context.Context, s *Store, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	exec = s.on(exec)
	if !slices.ContainsFunc(p.Events, func(e outboxtype.Event) bool { return e.OrderKey == "" }) {
		return o.insertByVersion(ctx, s, exec, p, keys)
	}
	return o.insertLocked(ctx, s, exec, p, keys)
}

// insertLocked is Insert with the key upsert as a statement of its own before the event
// INSERT, which decides whether the first event of each key is NEW.
func (o postgresOrder) insertLocked(ctx context.Context, s *Store, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	if err := o.lockKeys(ctx, s, exec, p.Events, keys); err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: lock order keys: %w", err)
	}
	candidates := markHeads(p.Events, map[string]bool{})
	for i := range p.Events {
		if candidates[p.Events[i].ID] {
			p.Events[i].Status = outboxtype.StatusWaiting // until the INSERT says NEW
		}
	}
	return s.insertEvents(ctx, exec, p, nil, candidates)
}

// lockKeys advances the counters of keys in the key table through exec, which locks
// their rows until exec's transaction ends, and sets the events' OrderSeq.
func (o postgresOrder) lockKeys(ctx context.Context, s *Store, exec outboxtype.Executor, events []outboxtype.Event, keys []keyCount) error {
	top := make(map[string]int64, len(keys))
	for _, q := range o.lockKeysQueries(s.d, s.table, keys, nil, time.Now()) {
		err := scanRows(ctx, exec, q, func(rows *sql.Rows) error {
			var key string
			var last int64
			if err := rows.Scan(&key, &last); err != nil {
				return err
			}
			top[key] = last
			return nil
		})
		if err != nil {
			return err
		}
	}
	return orderSeqs(events, keys, top)
}

// lockKeysQueries builds the upserts that lock keys and advance their counters by their
// counts, each statement many keys, returning (order_key, last_seq) for its keys: the
// counter after the increment.
func (postgresOrder) lockKeysQueries(d *dialect, t tableName, keys []keyCount, _ map[string]keySnapshot, _ time.Time) []query {
	kt := d.qualified(keyTable(t))
	var qs []query
	per := min(d.maxIDs, d.maxBindParams/2)
	for start := 0; start < len(keys); start += per {
		b := d.newBuilder()
		b.w("INSERT INTO ", kt, " AS k (order_key, last_seq, updated_at) VALUES ")
		for i, k := range keys[start:min(start+per, len(keys))] {
			if i > 0 {
				b.w(", ")
			}
			b.w("(", b.arg(k.key), ", ", b.arg(k.n), ", ", d.dbNow, ")")
		}
		b.w(" ON CONFLICT (order_key) DO UPDATE SET last_seq = k.last_seq + excluded.last_seq, updated_at = excluded.updated_at",
			" RETURNING order_key, last_seq")
		qs = append(qs, b.query())
	}
	return qs
}

// insertByVersion is Insert of events that are all ordered, with insertByVersionQuery,
// and with insertLocked for the events that statement left to it.
func (o postgresOrder) insertByVersion(ctx context.Context, s *Store, exec outboxtype.Executor, p storage.InsertParams, keys []keyCount) (storage.InsertResult, error) {
	q, fits, err := o.insertByVersionQuery(s.d, s.table, p, keys, time.Now())
	if err != nil {
		return storage.InsertResult{}, fmt.Errorf("insert events: %w", err)
	}
	if !fits {
		return o.insertLocked(ctx, s, exec, p, keys)
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
		// A key all of whose events exist lands here too: insertLocked skips them again.
		rest.ClaimTTL = p.ClaimTTL
		res, err := o.insertLocked(ctx, s, exec, rest, orderKeys(rest.Events))
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

// insertByVersionQuery builds the one statement that writes p.Events, all ordered,
// whose keys are keys. A data-modifying WITH upserts the key rows as lockKeysQueries
// does, except that an existing row is advanced only while it is still the version the
// statement's snapshot holds (its last_seq and updated_at, read by a subquery in that
// snapshot); then the INSERT writes the events of the keys the upsert returned,
// numbered below their key's counter, the first event of each key NEW unless the
// snapshot holds an event of the key that is not DONE (see postgresOrder for why that
// is safe). A row that changed (or appeared) since then is locked but not advanced, and
// its events are not inserted: the statement returns none of them, and insertLocked
// writes them. The statement returns event_id, status and order_seq of the rows it
// inserted, and skips rows whose ID exists (skipExisting). It reports false, and builds
// nothing, when the events do not fit one statement.
func (postgresOrder) insertByVersionQuery(d *dialect, t tableName, p storage.InsertParams, keys []keyCount, now time.Time) (query, bool, error) {
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

// promoteStatement builds the promote as one statement that locks the heads in event_id
// order first, so that promotes of overlapping keys never deadlock; FOR UPDATE re-checks
// status = WAITING on the current version of a row another transaction changed
// meanwhile. The heads drive the lock by primary key (= ANY(ARRAY(…))): as IN (…), the
// planner may scan the table's WAITING rows and match each against them. With p.Read it
// returns the promoted rows.
func (postgresOrder) promoteStatement(d *dialect, t tableName, p storage.PromoteParams) query {
	table, waiting := d.qualified(t), sqlStatus(outboxtype.StatusWaiting)
	b := d.newBuilder()
	b.w("WITH h AS MATERIALIZED (SELECT event_id FROM ", table, " WHERE event_id = ANY(ARRAY(")
	b.heads(t, p, "")
	b.w(")) AND status = ", waiting, " ORDER BY event_id FOR UPDATE) UPDATE ", table, " AS t").promoteSet(p)
	b.w(" FROM h WHERE t.event_id = h.event_id AND t.status = ", waiting)
	if p.Read {
		b.w(" RETURNING ", prefixedColumns("t."))
	}
	return b.query()
}

// promote runs the promote's one statement.
func (postgresOrder) promote(ctx context.Context, s *Store, p storage.PromoteParams, res *storage.PromoteResult) error {
	q, err := s.d.promoteQuery(s.table, p)
	if err != nil {
		return err
	}
	return s.promoteOnce(ctx, q, p.Read, res)
}

// keepsIdleKeys: a writer's one statement decides, so no earlier read helps it.
func (postgresOrder) keepsIdleKeys() bool { return false }
