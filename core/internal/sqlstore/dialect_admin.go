package sqlstore

import (
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// The admin migration: version 5 on PostgreSQL and SQLite, 6 on MySQL. It adds what the
// admin's lists (docs/operations.md) and its audit trail need: an index that finds an
// aggregate's events, one for the RETRY and WAITING lists where the other indexes do not
// serve them, and the audit table.

// stateIndexCondition is the state index's condition; the lists that use it write it.
// On PostgreSQL "created_at IS NOT NULL" (always true) keeps the planner from using the
// index for any query that does not write it: the order sweep's "status = 4" would
// imply "status IN (2, 4)". SQLite drops such a term from a query (the column is NOT
// NULL), and its order queries write +status, which no index matches.
func (d *dialect) stateIndexCondition() string {
	cond := "status IN (" + sqlStatuses(outboxtype.StatusRetry, outboxtype.StatusWaiting) + ")"
	if d.name == "sqlite" {
		return cond
	}
	return cond + " AND created_at IS NOT NULL"
}

const (
	aggregateIndexSuffix = "_aggregate_idx"
	stateIndexSuffix     = "_state_idx"
	auditTableSuffix     = "_audit"
	// aggregateListIndexSuffix is the aggregate index of CreateAggregateIndex, opt-in
	// since the version that drops the admin version's (aggregateDropMigration).
	aggregateListIndexSuffix = "_aggregate_list_idx"
)

// auditTable is the audit trail's table beside t: <table>_audit.
func auditTable(t tableName) tableName {
	return tableName{schema: t.schema, name: t.indexName(auditTableSuffix)}
}

const (
	aggregateIndexComment = "Aggregate: the admin's lists of one aggregate's events (aggregate_id, then\n" +
		"creation order) read this index, whatever their status."
	stateIndexComment = "State: the admin's RETRY and WAITING lists walk these rows in (created_at,\n" +
		"event_id) keyset order. Partial, so NEW and finished rows are not in it."
	auditTableComment = "Audit trail: one row per change made through DeadEvents (the admin page and API,\n" +
		"the command-line tool): who, when, what and how many rows it changed. audit_id is a\n" +
		"ULID, so it sorts by time. Rows are kept until deleted by hand."
)

// adminMigration is the admin version: the aggregate and state indexes and the audit
// table (MySQL: the aggregate index only, its status index serves every list). It is
// detected by the aggregate index, which MySQL adds last, so that a migration stopped
// half-way runs again.
func adminMigration(d *dialect, t tableName) laterMigration {
	table, at := d.qualified(t), d.qualified(auditTable(t))
	timeType := "TIMESTAMPTZ"
	switch d.name {
	case "sqlite":
		timeType = "TEXT"
	case "mysql":
		timeType = "DATETIME(6)"
	}
	idType, suffix := "VARCHAR(64)  ", ""
	if d.name == "mysql" {
		idType, suffix = "VARBINARY(64)", " ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"
	}
	audit := ddlStatement{auditTableComment, "CREATE TABLE IF NOT EXISTS " + at + " (\n" +
		"    audit_id " + idType + " NOT NULL PRIMARY KEY,\n" +
		"    at       " + fmt.Sprintf("%-12s", timeType) + " NOT NULL,\n" +
		"    actor    VARCHAR(255) NOT NULL,\n" +
		"    action   VARCHAR(32)  NOT NULL,\n" +
		"    target   TEXT         NOT NULL,\n" +
		"    affected BIGINT       NOT NULL\n" +
		")" + suffix}
	// A later version drops the aggregate index (aggregateDropMigration): a table with
	// the audit table has this version too. (On MySQL the audit table comes first: a
	// version stopped before the index counts as applied, and the later version's end
	// state, no aggregate index, is what it leaves.)
	m := laterMigration{name: "admin", index: aggregateIndexSuffix, orTableOf: auditTableSuffix, orColumn: "audit_id"}
	if d.name == "mysql" {
		m.up = []ddlStatement{audit, {aggregateIndexComment + "\nThe index comes last: it is what marks the version as applied.",
			"ALTER TABLE " + table + " ADD INDEX " + d.quote(t.indexName(aggregateIndexSuffix)) + " (aggregate_id, created_at, event_id)"}}
		m.down = []ddlStatement{{"Drops the aggregate index and the audit table.",
			"ALTER TABLE " + table + " DROP INDEX " + d.quote(t.indexName(aggregateIndexSuffix))},
			{"", "DROP TABLE IF EXISTS " + at}}
		return m
	}
	// PostgreSQL creates an index in its table's schema and rejects a qualified index
	// name; SQLite qualifies the index name with the schema and wants a bare table name.
	name := func(suffix string) string { return d.quote(t.indexName(suffix)) }
	qualifiedName := func(suffix string) string {
		if t.schema != "" {
			return d.quote(t.schema) + "." + name(suffix)
		}
		return name(suffix)
	}
	create, on := name, table
	if d.name == "sqlite" {
		create, on = qualifiedName, d.quote(t.name)
	}
	stateComment := stateIndexComment
	if d.name == "postgres" {
		stateComment += "\ncreated_at IS NOT NULL is always true: it keeps the planner from using the index\n" +
			"for queries that do not write it, such as the order sweep's status = 4."
	}
	m.up = []ddlStatement{
		{stateComment, "CREATE INDEX IF NOT EXISTS " + create(stateIndexSuffix) + " ON " + on +
			" (status, created_at, event_id) WHERE " + d.stateIndexCondition()},
		audit,
		{aggregateIndexComment, "CREATE INDEX IF NOT EXISTS " + create(aggregateIndexSuffix) + " ON " + on +
			" (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL"},
	}
	m.down = []ddlStatement{
		{"Drops the audit table and the aggregate and state indexes.", "DROP TABLE IF EXISTS " + at},
		{"", "DROP INDEX IF EXISTS " + qualifiedName(aggregateIndexSuffix)},
		{"", "DROP INDEX IF EXISTS " + qualifiedName(stateIndexSuffix)},
	}
	return m
}

// aggregateDropComment explains aggregateDropMigration.
const aggregateDropComment = "Drops the aggregate index. Every event with an aggregate ID wrote an entry in it, and\n" +
	"its DONE update another (an update that changes the status is never HOT): the lists\n" +
	"of one aggregate's events cost every write. outbox.MigrateAggregateIndex creates it\n" +
	"again, under another name, for those who list by aggregate."

// aggregateDropMigration is the version that drops the admin version's aggregate index:
// 9 on PostgreSQL, 10 on SQLite, 11 on MySQL. The queries use it only to list one
// aggregate's events, which then need CreateAggregateIndex's index, so a table without
// this version works, paying the index's upkeep until it is migrated.
func aggregateDropMigration(d *dialect, t tableName) laterMigration {
	table := d.qualified(t)
	index := d.quote(t.indexName(aggregateIndexSuffix))
	m := laterMigration{name: "aggregate_index_dropped", droppedIndex: aggregateIndexSuffix}
	if d.name == "mysql" {
		m.up = []ddlStatement{{aggregateDropComment, "ALTER TABLE " + table + " DROP INDEX " + index}}
		m.down = []ddlStatement{{aggregateIndexComment, "ALTER TABLE " + table + " ADD INDEX " + index + " (aggregate_id, created_at, event_id)"}}
		return m
	}
	drop, create := d.indexDDL(t, t, aggregateIndexSuffix)
	m.up = []ddlStatement{{aggregateDropComment, "DROP INDEX IF EXISTS " + drop}}
	m.down = []ddlStatement{{aggregateIndexComment, "CREATE INDEX IF NOT EXISTS " + create +
		" (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL"}}
	return m
}

// aggregateIndexQuery is CreateAggregateIndex's statement: the admin version's aggregate
// index under aggregateListIndexSuffix.
func (d *dialect) aggregateIndexQuery(t tableName) string {
	if d.name == "mysql" {
		return "ALTER TABLE " + d.qualified(t) + " ADD INDEX " + d.quote(t.indexName(aggregateListIndexSuffix)) + " (aggregate_id, created_at, event_id)"
	}
	_, create := d.indexDDL(t, t, aggregateListIndexSuffix)
	return "CREATE INDEX IF NOT EXISTS " + create + " (aggregate_id, created_at, event_id) WHERE aggregate_id IS NOT NULL"
}

// listPlan is how one list of [EventStore.ListEvents] reads its index: the index's
// condition (pred), the key that orders it (timeCol, then event_id), MySQL's index hint,
// and the conditions the index does not hold (extra), which bound the scan.
type listPlan struct {
	force   string
	timeCol string
	pred    func(b *builder)
	extra   func(b *builder)
	window  bool // extra is not empty: the page bounds the rows it reads
	seq     bool // timeCol is order_seq (a list by OrderKey): cursors hold Cursor.OrderSeq
}

// listPlan picks the index of the list p selects.
func (d *dialect) listPlan(t tableName, p storage.ListEventsParams) listPlan {
	return d.readPlan(t, p, false)
}

// countPlan picks the index a count of the events p selects reads: the list's, but on
// MySQL the status index for DONE, FALLBACK and DISCARDED events too, which holds them
// by status where the finished index holds every finished row (a count has no order).
func (d *dialect) countPlan(t tableName, p storage.CountEventsParams) listPlan {
	return d.readPlan(t, p.List(), true)
}

// readPlan is listPlan, or with byStatus countPlan.
func (d *dialect) readPlan(t tableName, p storage.ListEventsParams, byStatus bool) listPlan {
	st := sqlStatus(p.Status)
	mysql := d.name == "mysql"
	force := func(suffix string) string {
		if !mysql {
			return ""
		}
		return " FORCE INDEX (" + d.quote(t.indexName(suffix)) + ")"
	}
	var pl listPlan
	var extraStatus string
	switch {
	case p.OrderKey != "":
		// The order index (order_key, order_seq) over the rows that are not finished;
		// the status is checked on the rows read.
		col := d.orderColumn()
		pl = listPlan{force: force(orderIndexSuffix), timeCol: "order_seq", seq: true,
			pred: func(b *builder) { b.w(col, " = ", b.arg(p.OrderKey), d.orderOpen("")) }}
		extraStatus = d.hintedStatus() + " = " + st
	case p.AggregateID != "":
		// The opt-in aggregate index (CreateAggregateIndex); the store checks that the
		// table has it, or the admin version's, and forces the one it has.
		pl = listPlan{force: force(aggregateListIndexSuffix), timeCol: "created_at",
			pred: func(b *builder) { b.w("aggregate_id = ", b.arg(p.AggregateID)) }}
		extraStatus = d.hintedStatus() + " = " + st
	case p.EventFilter.ListsByFinish(p.Status) && !(mysql && byStatus):
		pl.force, pl.timeCol = force(finishedIndexSuffix), finishedAt
		if mysql {
			pl.timeCol = d.finishedColumn
			pl.pred = func(b *builder) { b.w(d.finishedColumn, " IS NOT NULL") }
		} else {
			pl.pred = func(b *builder) { b.w("(", d.finishedStatus(), ")") }
		}
		extraStatus = d.hintedStatus() + " = " + st
	case mysql:
		// The status index (dead_idx: status, created_at, event_id) serves them all.
		pl = listPlan{force: force(deadIndexSuffix), timeCol: "created_at",
			pred: func(b *builder) { b.w("status = ", st) }}
	case p.Status == outboxtype.StatusDead:
		pl = listPlan{timeCol: "created_at", pred: func(b *builder) { b.w(d.hintedStatus(), " = ", sqlStatus(outboxtype.StatusDead)) }}
	case p.Status == outboxtype.StatusNew:
		pl = listPlan{timeCol: "created_at", pred: func(b *builder) { b.w(d.undeliveredCondition()) }}
		extraStatus = d.hintedStatus() + " = " + sqlStatus(outboxtype.StatusNew)
	case d.name == "postgres": // RETRY, WAITING: the state index
		// status = 2 implies the index's status IN (2, 4); written beside it, the IN
		// made PostgreSQL count the status twice, expect a few hundred of 20,000 RETRY
		// rows, and sort them all for a window (TestEventListsUseIndexes).
		pl = listPlan{timeCol: "created_at", pred: func(b *builder) { b.w("status = ", st, " AND created_at IS NOT NULL") }}
	default: // RETRY, WAITING: the state index
		pl = listPlan{timeCol: "created_at", pred: func(b *builder) { b.w(d.stateIndexCondition(), " AND status = ", st) }}
	}
	f := p.EventFilter
	pl.window = extraStatus != "" || scannedFilter(f)
	pl.extra = func(b *builder) {
		if extraStatus != "" {
			b.w(" AND ", extraStatus)
		}
		if f.EventType != "" {
			b.w(" AND event_type = ", b.arg(f.EventType))
		}
		if f.AggregateType != "" {
			b.w(" AND aggregate_type = ", b.arg(f.AggregateType))
		}
		if f.Listener != "" {
			b.w(" AND listener = ", b.arg(f.Listener))
		}
		if f.ErrorContains != "" {
			// A superset of the matches: ListEvents keeps those MatchesError accepts.
			b.w(" AND LOWER(last_error) LIKE ", b.arg(check.ErrorPrefilter(f.ErrorContains)), " ESCAPE '!'")
		}
		if f.Blocking {
			d.holdsKey(b, t, p.Status == outboxtype.StatusDead)
		}
	}
	return pl
}

// holdsKey writes the condition of EventFilter.Blocking on a row of t (the list's
// table, unaliased): WAITING rows of its key wait (an unordered row's NULL key matches
// none), and, for a DEAD row (dead), nothing of its key is NEW or RETRY (else the key
// moved on past it, as under DeadKeySkips). Each probe reads the order index for the
// row's key; the row's own order_key IS NOT NULL is left out, as PostgreSQL then read
// the order index for the list itself and sorted it.
func (d *dialect) holdsKey(b *builder, t tableName, dead bool) {
	table, col := d.qualified(t), d.orderColumn()
	// exists writes whether a row of the key with one of statuses exists (or not). On
	// MySQL it is a scalar subquery, (SELECT 1 … LIMIT 1) IS [NOT] NULL, with the order
	// index forced: MariaDB turned an EXISTS into a semi-join over a materialized scan
	// of the rows of every key (its EXISTS-to-IN rewrite drops a LIMIT), 0.36 s a page.
	exists := func(alias, statuses string, yes bool) {
		if d.orderOpenColumn != "" {
			if yes { // most rows have no key: no probe for them (the list's index is forced)
				b.w(" AND ", table, ".", col, " IS NOT NULL")
			}
			b.w(" AND (SELECT 1 FROM ", table, " ", alias, " FORCE INDEX (", d.quote(t.indexName(orderIndexSuffix)), ") WHERE ", alias, ".", col,
				" = ", table, ".", col, " AND ", alias, ".status IN (", statuses, ") LIMIT 1) IS ", map[bool]string{true: "NOT NULL", false: "NULL"}[yes])
			return
		}
		b.w(map[bool]string{true: " AND EXISTS", false: " AND NOT EXISTS"}[yes], " (SELECT 1 FROM ", table, " ", alias, " WHERE ", alias, ".", col, " = ", table, ".", col,
			d.orderOpen(alias), " AND ", alias, ".status IN (", statuses, ")", d.perRowProbe, ")")
	}
	exists("w", sqlStatus(outboxtype.StatusWaiting), true)
	if dead {
		exists("a", pendingStatuses(), false)
	}
}

// keyset restricts a scan in (col, event_id) order to the rows on one side of (at, id):
// op is >, <, >= or <=.
func (b *builder) keyset(col, op string, at any, id string) {
	if b.d.splitKeyset {
		strict := op[:1]
		b.w(" AND ", col, " ", strict, "= ", b.arg(at), " AND (", col, " ", strict, " ", b.arg(at), " OR event_id ", op, " ", b.arg(id), ")")
		return
	}
	if b.d.expandKeyset {
		strict := op[:1]
		b.w(" AND (", col, " ", strict, " ", b.arg(at), " OR (", col, " = ", b.arg(at), " AND event_id ", op, " ", b.arg(id), "))")
		return
	}
	b.w(" AND (", col, ", event_id) ", op, " (", b.arg(at), ", ", b.arg(id), ")")
}

// listRange writes the conditions on the list's index key: after the cursor, within
// From and To, and, when bound is set, up to the window's last row.
func (d *dialect) listRange(b *builder, pl listPlan, p storage.ListEventsParams, bound *outboxtype.Cursor) error {
	after, upTo := ">", "<="
	if p.Newest {
		after, upTo = "<", ">="
	}
	if !p.After.IsZero() {
		at, err := pl.position(d, p.After)
		if err != nil {
			return fmt.Errorf("the After cursor: %w", err)
		}
		b.keyset(pl.timeCol, after, at, p.After.ID)
	}
	for _, r := range [...]struct {
		t  time.Time
		op string
	}{{p.From, " >= "}, {p.To, " < "}} {
		if r.t.IsZero() {
			continue
		}
		at, err := d.time(r.t)
		if err != nil {
			return fmt.Errorf("From/To: %w", err)
		}
		b.w(" AND ", pl.timeCol, r.op, b.arg(at))
	}
	if bound != nil {
		at, err := pl.position(d, *bound)
		if err != nil {
			return err
		}
		b.keyset(pl.timeCol, upTo, at, bound.ID)
	}
	return nil
}

// position is the value of c in the list's order column: its OrderSeq in a list by
// order key, else its time.
func (pl listPlan) position(d *dialect, c outboxtype.Cursor) (any, error) {
	if pl.seq {
		return c.OrderSeq, nil
	}
	return d.time(c.CreatedAt)
}

// listOrder writes the list's ORDER BY.
func listOrder(b *builder, pl listPlan, newest bool) {
	if newest {
		b.w(" ORDER BY ", pl.timeCol, " DESC, event_id DESC")
		return
	}
	b.w(" ORDER BY ", pl.timeCol, ", event_id")
}

// listWindowQuery builds the read of the last row of the scan window of a list page: the
// ScanLimit-th row of the index after the cursor (an index-only read).
func (d *dialect) listWindowQuery(t tableName, pl listPlan, p storage.ListEventsParams) (query, error) {
	b := d.newBuilder()
	b.w("SELECT ", pl.timeCol, ", event_id FROM ", d.qualified(t), pl.force, " WHERE ")
	pl.pred(b)
	if err := d.listRange(b, pl, p, nil); err != nil {
		return query{}, err
	}
	listOrder(b, pl, p.Newest)
	b.w(" LIMIT 1 OFFSET ", b.arg(int64(p.ScanLimit-1)))
	return b.query(), nil
}

// listPageQuery builds a list page: the rows of the index after the cursor (and up to
// bound) that match every filter.
func (d *dialect) listPageQuery(t tableName, pl listPlan, p storage.ListEventsParams, bound *outboxtype.Cursor) (query, error) {
	b := d.newBuilder()
	b.w("SELECT ", selectColumns, " FROM ", d.qualified(t), pl.force, " WHERE ")
	pl.pred(b)
	if err := d.listRange(b, pl, p, bound); err != nil {
		return query{}, err
	}
	pl.extra(b)
	listOrder(b, pl, p.Newest)
	b.w(" ").limit(int64(p.Limit))
	return b.query(), nil
}

// groupColumns are the columns of [GroupCount].
const groupColumns = "aggregate_type, event_type, listener"

// countQuery builds the count of [EventCountStore.CountEvents] on plan pl: the
// matching rows of the index up to bound, the last row of the count's window (nil: the
// index has fewer rows than the window), so that the statement reads a range of at
// most p.ScanLimit rows of the index whatever plan runs it. With p.Groups it counts
// per groupColumns; with p.ErrorContains it returns the rows' last_error and
// groupColumns instead, for MatchesError to decide (the LIKE is a superset).
func (d *dialect) countQuery(t tableName, pl listPlan, p storage.CountEventsParams, bound *outboxtype.Cursor) (query, error) {
	lp := p.List()
	b := d.newBuilder()
	switch {
	case p.ErrorContains != "":
		b.w("SELECT last_error, ", groupColumns)
	case p.Groups:
		b.w("SELECT ", groupColumns, ", COUNT(*)")
	default:
		b.w("SELECT COUNT(*)")
	}
	b.w(" FROM ", d.qualified(t), pl.force, " WHERE ")
	pl.pred(b)
	if err := d.listRange(b, pl, lp, bound); err != nil {
		return query{}, err
	}
	if bound != nil && !d.expandKeyset && !d.splitKeyset {
		// PostgreSQL estimates a row comparison, (t, event_id) <= (…), to hold for a
		// third of the rows, and then scanned the table to count DONE events; this
		// redundant bound on the time alone it estimates from the index's statistics.
		at, err := pl.position(d, *bound)
		if err != nil {
			return query{}, err
		}
		op := " <= "
		if lp.Newest {
			op = " >= "
		}
		b.w(" AND ", pl.timeCol, op, b.arg(at))
	}
	pl.extra(b)
	if p.Groups && p.ErrorContains == "" {
		b.w(" GROUP BY ", groupColumns)
		if d.name == "mysql" {
			b.w(" ORDER BY NULL") // MariaDB would sort the groups
		}
	}
	return b.query(), nil
}

// countWindowQuery builds the read of the last row of a count's window: the
// ScanLimit-th row of the index (an index-only read).
func (d *dialect) countWindowQuery(t tableName, pl listPlan, p storage.CountEventsParams) (query, error) {
	return d.listWindowQuery(t, pl, p.List())
}

// blockedKeysWindowQuery builds [EventCountStore.CountBlockedKeys]: the blocked keys
// among the first limit rows of the order index, in its order, their holders' oldest
// created_at, and how many rows of the index it read. Each row read is a RETRY or DEAD
// event that holds its key when WAITING events of the key exist and no NEW one, each
// probed in the order index by key (as blockedKeysQuery does over the whole index).
func (d *dialect) blockedKeysWindowQuery(t tableName, limit int) query {
	table, col := d.qualified(t), d.orderColumn()
	force := ""
	if d.name == "mysql" {
		force = " FORCE INDEX (" + d.quote(t.indexName(orderIndexSuffix)) + ")"
	}
	b := d.newBuilder()
	window := func(cols string) {
		b.w("SELECT ", cols, " FROM ", table, force, " WHERE ", col, " IS NOT NULL", d.orderOpen(""), " ORDER BY ", col, ", order_seq ")
		b.limit(int64(limit))
	}
	b.w("SELECT COUNT(*), MIN(oldest), (SELECT COUNT(*) FROM (")
	window("1")
	b.w(") r) FROM (SELECT f.", col, ", MIN(f.created_at) AS oldest FROM (")
	window(col + ", status, created_at")
	b.w(") f WHERE f.status IN (", sqlStatuses(outboxtype.StatusRetry, outboxtype.StatusDead), ")")
	probe := func(alias, status string, yes bool) {
		if d.name == "mysql" {
			// A scalar subquery with the order index forced, as holdsKey writes it:
			// MariaDB turned an EXISTS into a semi-join over every WAITING row.
			b.w(" AND (SELECT 1 FROM ", table, " ", alias, force, " WHERE ", alias, ".", col, " = f.", col, " AND ", alias,
				".status = ", status, " LIMIT 1) IS ", map[bool]string{true: "NOT NULL", false: "NULL"}[yes])
			return
		}
		b.w(map[bool]string{true: " AND EXISTS", false: " AND NOT EXISTS"}[yes], " (SELECT 1 FROM ", table, " ", alias, " WHERE ",
			alias, ".", col, " = f.", col, d.orderOpen(alias), " AND ", alias, ".status = ", status, d.perRowProbe, ")")
	}
	probe("w", sqlStatus(outboxtype.StatusWaiting), true)
	probe("n", sqlStatus(outboxtype.StatusNew), false)
	b.w(" GROUP BY f.", col)
	if d.name == "mysql" {
		b.w(" ORDER BY NULL")
	}
	b.w(") b")
	return b.query()
}

// countByTypeQuery builds [EventStore.CountByType].
func (d *dialect) countByTypeQuery(t tableName) query {
	return query{SQL: "SELECT status, event_type, COUNT(*) FROM " + d.qualified(t) + " GROUP BY status, event_type ORDER BY status, event_type"}
}

// recordAuditQuery builds [AuditStore.RecordAudit].
func (d *dialect) recordAuditQuery(t tableName, e outboxtype.AuditEntry) (query, error) {
	at, err := d.time(e.At)
	if err != nil {
		return query{}, err
	}
	b := d.newBuilder()
	b.w("INSERT INTO ", d.qualified(auditTable(t)), " (audit_id, at, actor, action, target, affected) VALUES (",
		b.arg(e.ID), ", ", b.arg(at), ", ", b.arg(e.Actor), ", ", b.arg(e.Action), ", ", b.arg(e.Target), ", ", b.arg(e.Count), ")")
	return b.query(), nil
}

// addAuditCountQuery builds the UPDATE of [AuditedChangeParams.Continue]: n more
// events for the entry id.
func (d *dialect) addAuditCountQuery(t tableName, id string, n int64) query {
	b := d.newBuilder()
	b.w("UPDATE ", d.qualified(auditTable(t)), " SET affected = affected + ", b.arg(n), " WHERE audit_id = ", b.arg(id))
	return b.query()
}

// listAuditQuery builds [AuditStore.ListAudit].
func (d *dialect) listAuditQuery(t tableName, p storage.ListAuditParams) query {
	b := d.newBuilder()
	b.w("SELECT audit_id, at, actor, action, target, affected FROM ", d.qualified(auditTable(t)))
	if p.Before != "" {
		b.w(" WHERE audit_id < ", b.arg(p.Before))
	}
	b.w(" ORDER BY audit_id DESC ").limit(int64(p.Limit))
	return b.query()
}

// scanned reports whether f filters on a column outside the list's index, so that a
// page must bound the rows it reads.
func scannedFilter(f outboxtype.EventFilter) bool {
	return f.EventType != "" || f.AggregateType != "" || f.Listener != "" || f.ErrorContains != "" || f.Blocking
}
