package sqlstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The statement builder (query, builder), the pieces every statement shares (bound
// arguments, LIMIT, statuses, ID lists, keyset conditions) and the plain reads: the
// poller's scan, Get, the read of existing IDs and Stats.

// query is one statement with its arguments.
type query struct {
	SQL  string
	Args []any
	// returnsStatus marks an INSERT that returns event_id and status of every row it
	// inserts (dialect.skipExisting): it decides the status of some of its rows (the
	// candidates of insertQueriesHeads), and it skips rows whose ID exists.
	returnsStatus bool
	// skipsByCount marks a one-row INSERT that skips its row when the ID exists
	// (dialect.skipExisting) without returning it: no row affected means the event
	// existed.
	skipsByCount bool
	// first and n are the events of InsertParams.Events an INSERT writes: n of them
	// from index first.
	first, n int
}

// builder accumulates SQL text and arguments; arg returns the placeholder for a value.
type builder struct {
	d    *dialect
	sb   strings.Builder
	args []any
	// returnsStatus, skipsByCount: see query.
	returnsStatus, skipsByCount bool
}

func (d *dialect) newBuilder() *builder { return &builder{d: d} }

func (b *builder) w(parts ...string) *builder {
	for _, p := range parts {
		b.sb.WriteString(p)
	}
	return b
}

func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return b.d.bindVar(len(b.args))
}

// limit writes "LIMIT n": n bound as an argument, or, with literalLimit, written as an
// integer literal.
func (b *builder) limit(n int64) *builder {
	if b.d.literalLimit {
		return b.w("LIMIT ", strconv.FormatInt(n, 10))
	}
	return b.w("LIMIT ", b.arg(n))
}

func (b *builder) query() query {
	q := query{SQL: b.sb.String(), Args: b.args, returnsStatus: b.returnsStatus, skipsByCount: b.skipsByCount}
	switch {
	case q.returnsStatus:
		q.SQL += b.d.skipExisting + " RETURNING event_id, status"
	case q.skipsByCount:
		q.SQL += b.d.skipExisting
	}
	return q
}

// sqlStatus is status s as a statement writes it: its number. Every status in the SQL
// the builders write comes from the named constants through sqlStatus or sqlStatuses.
func sqlStatus(s outboxtype.Status) string { return strconv.Itoa(int(s)) }

// sqlStatuses is ss as the list of an IN (…): "0, 2".
func sqlStatuses(ss ...outboxtype.Status) string {
	var sb strings.Builder
	for i, s := range ss {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(sqlStatus(s))
	}
	return sb.String()
}

// pendingStatuses are the statuses of the rows a poll or a claim takes, NEW and RETRY,
// as an IN list.
func pendingStatuses() string { return sqlStatuses(outboxtype.StatusNew, outboxtype.StatusRetry) }

// selectColumns are the columns every event SELECT reads, in the order rawRow.decode
// expects.
const selectColumns = "event_id, event_type, aggregate_type, aggregate_id, tenant_id, payload, headers, " +
	"status, attempts, last_error, available_at, created_at, done_at, locked_by, locked_until, order_key, order_seq, " +
	"first_attempt_at, listener"

// chunkIDs splits ids into lists of at most the dialect's maxIDs.
func (d *dialect) chunkIDs(ids []string) [][]string {
	var out [][]string
	for start := 0; start < len(ids); start += d.maxIDs {
		out = append(out, ids[start:min(start+d.maxIDs, len(ids))])
	}
	return out
}

// matchIDs writes a predicate matching event_id against ids.
func (b *builder) matchIDs(ids []string) *builder {
	if b.d.idsAsArray {
		return b.w("event_id = ANY(CAST(", b.arg(textArrayLiteral(ids)), " AS TEXT[]))")
	}
	b.w("event_id IN (")
	for i, id := range ids {
		if i > 0 {
			b.w(", ")
		}
		b.w(b.arg(id))
	}
	return b.w(")")
}

// matchIDTokens writes a predicate matching the rows of t whose event_id is ids[i] and
// whose claim token (locked_by) is tokens[i], for some i: each row fenced by its own
// claim. Both forms find the rows by primary key. MySQL and SQLite compare row values
// with a list of pairs.
//
// PostgreSQL walks the pairs and looks each row up by primary key, locking it, in a
// LATERAL subquery that the planner cannot turn around, then changes the rows by that
// list of IDs. A semi-join of the table with the pairs ("(event_id, locked_by) IN
// (SELECT * FROM unnest(…))") lets the planner put the table on the outer side, which
// it does when its statistics say no row is NEW, RETRY or DEAD (an outbox table whose
// rows are almost all DONE, analyzed before a backlog built up): a scan of every
// pending row, each compared with every pair, 0.25 s for 467 pairs against 3,000
// pending rows instead of 3 ms, and seconds under load
// (TestPostgresTokenFencesDriveFromTheIDs). The lock (FOR NO KEY UPDATE, the one an
// update takes anyway; a delete strengthens its own) keeps each row's token as the
// subquery checked it, on the row's latest version, until the statement ends. The
// pairs are sorted by ID, so that two statements lock the rows they share in one order.
func (b *builder) matchIDTokens(t tableName, ids, tokens []string) *builder {
	if b.d.idsAsArray {
		ids, tokens = sortedPairs(ids, tokens)
		return b.w("event_id = ANY(ARRAY(SELECT m.event_id FROM unnest(CAST(", b.arg(textArrayLiteral(ids)),
			" AS TEXT[]), CAST(", b.arg(textArrayLiteral(tokens)), " AS TEXT[])) AS u (id, tok), LATERAL (SELECT x.event_id FROM ",
			b.d.qualified(t), " AS x WHERE x.event_id = u.id AND x.locked_by = u.tok FOR NO KEY UPDATE) AS m))")
	}
	b.w("(event_id, locked_by) IN (")
	for i := range ids {
		if i > 0 {
			b.w(", ")
		}
		b.w("(", b.arg(ids[i]), ", ", b.arg(tokens[i]), ")")
	}
	return b.w(")")
}

// sortedPairs returns ids and tokens sorted together by ID, in new slices.
func sortedPairs(ids, tokens []string) ([]string, []string) {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ids[a], ids[b]) })
	sids, stoks := make([]string, len(ids)), make([]string, len(ids))
	for i, j := range order {
		sids[i], stoks[i] = ids[j], tokens[j]
	}
	return sids, stoks
}

// textArrayLiteral encodes ids as a PostgreSQL array literal, {"a","b"}. Sent as a plain
// string and cast in SQL, it needs no driver support for arrays.
func textArrayLiteral(ids []string) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		appendArrayText(&sb, id)
	}
	sb.WriteByte('}')
	return sb.String()
}

// pendingQuery builds the poller's scan of [Store.Pending].
func (d *dialect) pendingQuery(t tableName, p storage.PendingParams) (query, error) {
	if err := p.Validate(); err != nil {
		return query{}, err
	}
	now, err := d.time(p.Now)
	if err != nil {
		return query{}, fmt.Errorf("the Now time: %w", err)
	}
	createdBefore, err := d.time(p.Now.Add(-p.SkipRecent))
	if err != nil {
		return query{}, fmt.Errorf("the Now-SkipRecent time: %w", err)
	}
	b := d.newBuilder()
	// The pending index (due time, created_at, event_id), which the claims walk too, in
	// its order: the walk starts at the After cursor and stops after the LIMIT, and rows
	// not due yet are past its end. MySQL's is on due_at, NULL unless the row is NEW or
	// RETRY, so no status test is needed there; the index is forced so that the
	// optimizer never prefers a sort.
	due := "available_at"
	if col := d.dueColumn; col != "" {
		due = col
		b.w("SELECT ", selectColumns, " FROM ", d.qualified(t), " FORCE INDEX (", d.quote(t.indexName(pendingIndexSuffix)), ")")
		b.w(" WHERE ", col, " <= ", b.arg(now))
	} else {
		b.w("SELECT ", selectColumns, " FROM ", d.qualified(t))
		b.w(" WHERE status IN (", pendingStatuses(), ") AND available_at <= ", b.arg(now))
	}
	b.w(" AND created_at <= ", b.arg(createdBefore))
	b.skip(p.Skip)
	if err := b.pendingAfter(due, p.After); err != nil {
		return query{}, err
	}
	if d == postgresDialect && p.After.IsZero() {
		// A read from the head walks the claim index, the one the reads from the
		// low-water mark and the claims walk, and not the pending index (created_at,
		// event_id), which has the same rows and which PostgreSQL picked about as often
		// (the two cost the same by its estimate when few rows are pending; a Sort
		// makes up the order). Each delivered event leaves a dead entry in both, and
		// the first read that meets one visits its row: the mark's reads have met
		// those of the claim index already, none of the pending index's, which on a
		// PostgreSQL soak at 1,500 events/s made the minute's read from the head walk
		// about 47,000 buffers (docs/BENCHMARKS.md, "The poll statement's dead index
		// entries"). A lower bound that the planner cannot estimate, the earliest due
		// time of a pending row, makes it take the claim index for the range. (Since
		// version 10 PostgreSQL's tables have no pending index, and the undelivered
		// index that replaced it is not for this query; the bound stays for the tables
		// not migrated yet.)
		b.w(" AND available_at >= (SELECT MIN(available_at) FROM ", d.qualified(t), " WHERE status IN (", pendingStatuses(), "))")
	}
	b.w(" ORDER BY ", due, ", created_at, event_id ").limit(int64(p.Limit))
	return b.query(), nil
}

// pendingAfter restricts the poller's read, in (due, created_at, event_id) order, to
// the rows after c: with c's CreatedAt and ID zero, the rows due at or after its
// AvailableAt (the poller's low-water mark).
func (b *builder) pendingAfter(due string, c outboxtype.Cursor) error {
	if c.IsZero() {
		return nil
	}
	at, err := b.d.time(c.AvailableAt)
	if err != nil {
		return fmt.Errorf("the After cursor: %w", err)
	}
	if c.CreatedAt.IsZero() {
		b.w(" AND ", due, " >= ", b.arg(at))
		return nil
	}
	created, err := b.d.time(c.CreatedAt)
	if err != nil {
		return fmt.Errorf("the After cursor: %w", err)
	}
	b.dueKeysetAfter(due, at, created, c.ID)
	return nil
}

// dueKeysetAfter restricts a walk of the pending index in (due, created_at, event_id)
// order to the rows after (at, created, id): a row comparison, or on MySQL, whose range
// optimizer does not turn one into an index range, its expanded form. The poller's
// reads and MySQL's claim reads write it.
func (b *builder) dueKeysetAfter(due string, at, created any, id string) {
	if b.d.expandKeyset {
		b.w(" AND (", due, " > ", b.arg(at), " OR ", due, " = ", b.arg(at), " AND (created_at > ", b.arg(created),
			" OR created_at = ", b.arg(created), " AND event_id > ", b.arg(id), "))")
		return
	}
	b.w(" AND (", due, ", created_at, event_id) > (", b.arg(at), ", ", b.arg(created), ", ", b.arg(id), ")")
}

// keysetAfter restricts a scan in (col, event_id) order to rows after (after, id); a nil
// after leaves it unrestricted.
func (b *builder) keysetAfter(col string, after any, id string) {
	switch {
	case after == nil:
	case b.d.expandKeyset:
		b.w(" AND (", col, " > ", b.arg(after), " OR (", col, " = ", b.arg(after), " AND event_id > ", b.arg(id), "))")
	default:
		b.w(" AND (", col, ", event_id) > (", b.arg(after), ", ", b.arg(id), ")")
	}
}

// existingQuery reads which of ids are rows of the table. On MySQL it is a locking
// read: it sees the newest committed rows, which a REPEATABLE READ snapshot taken
// before they committed would not. It is ordered by event_id there because MariaDB,
// even with the primary key forced, scanned the whole key of a small table for this
// read of the key's column alone, and checked the rows of open transactions on the way;
// with the order it reads ranges.
func (d *dialect) existingQuery(t tableName, ids []string) query {
	b := d.newBuilder()
	b.w("SELECT event_id FROM ", d.byID(t), " WHERE ").matchIDs(ids)
	if d.name == "mysql" {
		b.w(" ORDER BY event_id LOCK IN SHARE MODE")
	}
	return b.query()
}

// getQuery builds the lookup of [Store.Get].
func (d *dialect) getQuery(t tableName, id string) query {
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, " FROM ", d.qualified(t), " WHERE event_id = ", b.arg(id))
	return b.query()
}

// statsQuery builds [StatsStore.Stats]: per status, the row count and the oldest created_at.
func (d *dialect) statsQuery(t tableName) query {
	return query{SQL: "SELECT status, COUNT(*), MIN(created_at) FROM " + d.qualified(t) + " GROUP BY status"}
}
