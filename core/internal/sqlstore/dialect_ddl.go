package sqlstore

import (
	"strings"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// ddlStatement is one DDL statement with the comment that explains it in the migration
// files.
type ddlStatement struct {
	comment string
	sql     string
}

// compound reports whether s has semicolons of its own (a trigger's body): its file
// text is wrapped in goose's StatementBegin and StatementEnd annotations, so that goose
// does not split it (golang-migrate sends a file whole).
func (s ddlStatement) compound() bool { return strings.HasPrefix(s.sql, "CREATE TRIGGER") }

// migration creates (up) and drops (down) the outbox table. later holds the versions
// after the first, in order: each changes the table that the earlier ones made, and
// ships as a file of its own, since a shipped migration is never edited.
type migration struct {
	up, down []ddlStatement
	later    []laterMigration
}

// laterMigration is one version after the first. [MigrateTable] applies it when the
// table lacks column, or, for a version that adds no column, the index named by the
// suffix index.
type laterMigration struct {
	name   string // the file name after the version number
	column string
	index  string // an index suffix, detected instead of column when set
	// droppedKeyIndex, when set, is the suffix of an index of the key table that the
	// version drops: the version is detected by the index being gone.
	droppedKeyIndex string
	// droppedIndex is droppedKeyIndex for an index of the outbox table.
	droppedIndex string
	// orColumn, when set, is a column of a later version that marks this one applied
	// too: a version after that dropped this one's column (or index). With orTableOf,
	// the column is of the table beside the outbox table that this version creates.
	orColumn, orTableOf string
	// trigger, when set, is the suffix of a trigger the version creates (SQLite), by
	// which it is detected.
	trigger string
	// tableOf, when set, is the suffix of a table the version creates beside the outbox
	// table: the version is detected by column in that table.
	tableOf string
	// optional marks a version that [Outbox.Start] does not require: it runs on a table
	// without it, with a warning (the lease, see [LeaseStore]).
	optional bool
	up, down []ddlStatement
}

// renderDDL formats statements as a migration file: each preceded by its comment,
// terminated by a semicolon, separated by a blank line. Comments hold no semicolons, so
// tools that split files on them (goose) see exactly these statements.
func renderDDL(stmts []ddlStatement) string {
	var sb strings.Builder
	for i, s := range stmts {
		if i > 0 {
			sb.WriteByte('\n')
		}
		for line := range strings.SplitSeq(s.comment, "\n") {
			if line != "" {
				sb.WriteString("-- " + line + "\n")
			}
		}
		if s.compound() {
			sb.WriteString("-- +goose StatementBegin\n" + s.sql + ";\n-- +goose StatementEnd\n")
			continue
		}
		sb.WriteString(s.sql + ";\n")
	}
	return sb.String()
}

// Index comments shared by the dialects. They say why each index exists.
const (
	pendingIndexComment = "Pending: the poller's scan of due NEW/RETRY rows, oldest created_at first. The\n" +
		"scan walks the index in the query's order and stops after its LIMIT, skipping the\n" +
		"rows that are not due yet. Partial, so only NEW and RETRY rows are in it."
	claimIndexComment = "Claim (MultiNode) walks due NEW/RETRY rows in its order, due longest first\n" +
		"(available_at, created_at, event_id), and stops after its LIMIT, skipping rows\n" +
		"that another node holds."
	deadIndexComment = "ListDead and Replay walk DEAD rows in (created_at, event_id) keyset order.\n" +
		"Partial, so the DONE rows that make up most of the table are not in it."
	finishedIndexComment = "Purge deletes the oldest DONE/DEAD rows by COALESCE(done_at, created_at) in\n" +
		"small batches. The expression matches the purge query so each batch is an index\n" +
		"range scan instead of a sort of every finished row."
)

// sqliteHintComment explains the "+status" of the SQLite partial indexes. The queries
// they serve write the same "+status".
const sqliteHintComment = "\nThe unary + in +status keeps SQLite's planner, which usually has no statistics,\n" +
	"from using status as an index key. Queries write the same +status, which SQLite\n" +
	"needs to match them to the index's condition."

// The suffixes of the derived index names.
const (
	pendingIndexSuffix  = "_pending_idx"
	claimIndexSuffix    = "_claim_idx"
	deadIndexSuffix     = "_dead_idx"
	finishedIndexSuffix = "_finished_idx"
	pollIndexSuffix     = "_poll_idx"
	// undeliveredIndexSuffix is PostgreSQL's index of NEW and RETRY rows in creation
	// order since version 10, which replaced its pending index (undeliveredIndexMigration).
	undeliveredIndexSuffix = "_undelivered_idx"
)

// tableComment heads the CREATE TABLE statement.
const tableComment = "The transactional outbox. status: 0 NEW, 1 DONE, 2 RETRY, 3 DEAD.\n" +
	"locked_by/locked_until hold a claim in MultiNode mode: the claim token (node ID/ULID)\n" +
	"and its expiry by the database clock. Outcome updates are fenced by the token."

func postgresDDL(d *dialect, t tableName) migration {
	table := d.qualified(t)
	// PostgreSQL creates an index in its table's schema and rejects a qualified index name.
	index := func(suffix string) string { return d.quote(t.indexName(suffix)) }
	return migration{
		up: []ddlStatement{
			{tableComment, "CREATE TABLE IF NOT EXISTS " + table + " (\n" +
				"    event_id       VARCHAR(64)  NOT NULL PRIMARY KEY,\n" +
				"    event_type     VARCHAR(128) NOT NULL,\n" +
				"    aggregate_type VARCHAR(64)  NOT NULL,\n" +
				"    aggregate_id   VARCHAR(128) NULL,\n" +
				"    tenant_id      VARCHAR(64)  NULL,\n" +
				"    payload        JSONB        NOT NULL,\n" +
				"    headers        JSONB        NULL,\n" +
				"    status         SMALLINT     NOT NULL DEFAULT " + sqlStatus(outboxtype.StatusNew) + ",\n" +
				"    attempts       INTEGER      NOT NULL DEFAULT 0,\n" +
				"    last_error     TEXT         NULL,\n" +
				"    available_at   TIMESTAMPTZ  NOT NULL,\n" +
				"    created_at     TIMESTAMPTZ  NOT NULL,\n" +
				"    done_at        TIMESTAMPTZ  NULL,\n" +
				"    locked_by      VARCHAR(128) NULL,\n" +
				"    locked_until   TIMESTAMPTZ  NULL\n" +
				")"},
			{pendingIndexComment, "CREATE INDEX IF NOT EXISTS " + index(pendingIndexSuffix) + " ON " + table +
				" (created_at, event_id) WHERE status IN (" + pendingStatuses() + ")"},
			{claimIndexComment, "CREATE INDEX IF NOT EXISTS " + index(claimIndexSuffix) + " ON " + table +
				" (available_at, created_at, event_id) WHERE status IN (" + pendingStatuses() + ")"},
			{deadIndexComment, "CREATE INDEX IF NOT EXISTS " + index(deadIndexSuffix) + " ON " + table +
				" (created_at, event_id) WHERE " + d.hintedStatus() + " = " + sqlStatus(outboxtype.StatusDead)},
			{finishedIndexComment, "CREATE INDEX IF NOT EXISTS " + index(finishedIndexSuffix) + " ON " + table +
				" (" + finishedAt + ", event_id) WHERE " + d.hintedStatus() + " IN (" + doneOrDead() + ")"},
		},
		down: []ddlStatement{{"Drops the table and its indexes.", "DROP TABLE IF EXISTS " + table}},
		later: []laterMigration{orderingMigration(d, t), fallbackMigration(d, t), listenerMigration(d, t), adminMigration(d, t),
			keyIndexMigration(d, t), leaseMigration(d, t), pauseMigration(d, t), aggregateDropMigration(d, t), undeliveredIndexMigration(d, t)},
	}
}

func sqliteDDL(d *dialect, t tableName) migration {
	table := d.qualified(t)
	// SQLite qualifies the index name with the schema and requires a bare table name.
	index := func(suffix string) string {
		name := d.quote(t.indexName(suffix))
		if t.schema != "" {
			name = d.quote(t.schema) + "." + name
		}
		return name + " ON " + d.quote(t.name)
	}
	return migration{
		up: []ddlStatement{
			{tableComment + "\nTimes are UTC text in the fixed-width form 2006-01-02T15:04:05.000000Z, so text\n" +
				"order is time order.", "CREATE TABLE IF NOT EXISTS " + table + " (\n" +
				"    event_id       VARCHAR(64)  NOT NULL PRIMARY KEY,\n" +
				"    event_type     VARCHAR(128) NOT NULL,\n" +
				"    aggregate_type VARCHAR(64)  NOT NULL,\n" +
				"    aggregate_id   VARCHAR(128) NULL,\n" +
				"    tenant_id      VARCHAR(64)  NULL,\n" +
				"    payload        TEXT         NOT NULL,\n" +
				"    headers        TEXT         NULL,\n" +
				"    status         SMALLINT     NOT NULL DEFAULT " + sqlStatus(outboxtype.StatusNew) + ",\n" +
				"    attempts       INTEGER      NOT NULL DEFAULT 0,\n" +
				"    last_error     TEXT         NULL,\n" +
				"    available_at   TEXT         NOT NULL,\n" +
				"    created_at     TEXT         NOT NULL,\n" +
				"    done_at        TEXT         NULL,\n" +
				"    locked_by      VARCHAR(128) NULL,\n" +
				"    locked_until   TEXT         NULL\n" +
				")"},
			{pendingIndexComment, "CREATE INDEX IF NOT EXISTS " + index(pendingIndexSuffix) +
				" (created_at, event_id) WHERE status IN (" + pendingStatuses() + ")"},
			{claimIndexComment, "CREATE INDEX IF NOT EXISTS " + index(claimIndexSuffix) +
				" (available_at, created_at, event_id) WHERE status IN (" + pendingStatuses() + ")"},
			{deadIndexComment + sqliteHintComment, "CREATE INDEX IF NOT EXISTS " + index(deadIndexSuffix) +
				" (created_at, event_id) WHERE " + d.hintedStatus() + " = " + sqlStatus(outboxtype.StatusDead)},
			{finishedIndexComment + sqliteHintComment, "CREATE INDEX IF NOT EXISTS " + index(finishedIndexSuffix) +
				" (" + finishedAt + ", event_id) WHERE " + d.hintedStatus() + " IN (" + doneOrDead() + ")"},
		},
		down: []ddlStatement{{"Drops the table and its indexes.", "DROP TABLE IF EXISTS " + table}},
		later: []laterMigration{orderingMigration(d, t), fallbackMigration(d, t), listenerMigration(d, t), adminMigration(d, t),
			keyIndexMigration(d, t), keyCarryMigration(d, t), leaseMigration(d, t), pauseMigration(d, t), aggregateDropMigration(d, t)},
	}
}

// The suffixes of the triggers of keyCarryMigration.
const (
	keyCarryDoneSuffix   = "_key_carry_done"
	keyCarryDeleteSuffix = "_key_carry_delete"
)

// keyCarryComment explains keyCarryMigration.
const keyCarryComment = "The key row carries a key's counter from when its events leave the order index, not\n" +
	"from when they are written (docs/ordering.md). An ordered write numbers its events from\n" +
	"the highest order_seq of the key's open rows, or when it has none from the key row's\n" +
	"last_seq, and writes nothing to the key row. SQLite runs one writer at a time, so the\n" +
	"numbers follow commit order without a lock on the key row. These triggers raise the\n" +
	"key row's last_seq to the order_seq of a row that leaves the order index: finished\n" +
	"(DONE, FALLBACK, DISCARDED) or deleted while open. After this version no process of\n" +
	"an earlier release may write ordered events to the table: it would number them from\n" +
	"the key row alone."

// keyCarryMigration is version 7 on SQLite: the triggers that carry a key's counter
// into its key row when an event leaves the order index, so that an ordered write
// writes nothing to the key table (see sqliteOrder).
func keyCarryMigration(d *dialect, t tableName) laterMigration {
	// Bare table names: a trigger's body names tables of the trigger's own schema.
	table, kt := d.quote(t.name), d.quote(keyTable(t).name)
	name := func(suffix string) string {
		n := d.quote(t.indexName(suffix))
		if t.schema != "" {
			n = d.quote(t.schema) + "." + n
		}
		return n
	}
	carry := "INSERT INTO " + kt + " (order_key, last_seq, updated_at) VALUES (old.order_key, old.order_seq, " + d.dbNow + ")\n" +
		"            ON CONFLICT (order_key) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq), updated_at = excluded.updated_at;\n"
	open := func(row string) string { return strings.ReplaceAll(orderOpenStatus(), "status", row+".status") }
	left := "old.order_key IS NOT NULL AND " + open("old")
	return laterMigration{
		name:    "key_carry",
		trigger: keyCarryDoneSuffix,
		up: []ddlStatement{
			{keyCarryComment + "\nThe first trigger: a row finished.", "CREATE TRIGGER IF NOT EXISTS " + name(keyCarryDoneSuffix) +
				" AFTER UPDATE OF status ON " + table + "\n" +
				"    WHEN " + left + " AND NOT (" + open("new") + ")\n" +
				"    BEGIN\n        " + carry + "    END"},
			{"The second: an open row deleted (a DEAD row, by DeadEvents.Delete or a purge).", "CREATE TRIGGER IF NOT EXISTS " + name(keyCarryDeleteSuffix) +
				" AFTER DELETE ON " + table + "\n" +
				"    WHEN " + left + "\n" +
				"    BEGIN\n        " + carry + "    END"},
		},
		down: []ddlStatement{
			{"Drops the triggers, and raises each key row to its key's highest open order_seq,\n" +
				"from which the earlier versions' writers number.", "DROP TRIGGER IF EXISTS " + name(keyCarryDeleteSuffix)},
			{"", "DROP TRIGGER IF EXISTS " + name(keyCarryDoneSuffix)},
			{"", "UPDATE " + d.qualified(keyTable(t)) + " SET last_seq = max(last_seq, COALESCE((SELECT max(e.order_seq) FROM " + d.qualified(t) +
				" e WHERE e.order_key = " + kt + ".order_key AND e.order_key IS NOT NULL AND " + open("e") + "), 0))"},
		},
	}
}

// Comments of the ordering migration.
const (
	orderingComment = "Ordering (docs/ordering.md): an ordered event has order_key and order_seq, its place\n" +
		"in its key, and is WAITING (status 4) until every earlier event of its key is finished."
	orderIndexComment = "Order: the rows of a key that are not DONE, in order_seq order. Promote reads a key's\n" +
		"next WAITING row and what holds it from here. Partial, so unordered and DONE rows are\n" +
		"not in it."
	keyTableComment = "The key table: one row per order key, holding the key's counter. Writing an ordered\n" +
		"event updates its key's row, which locks it until the transaction ends, so that\n" +
		"transactions writing one key commit one after the other, numbered in that order.\n" +
		"Purge deletes rows of keys with nothing left to order."
	keyIndexComment = "Purge finds the key rows not written for the retention by updated_at."
)

// keyIndexDropComment explains the migration that drops the key table's index.
const keyIndexDropComment = "Drops the key table's index on updated_at. Every ordered write updates its key's row,\n" +
	"updated_at with it, and so wrote a new entry in that index (on PostgreSQL it also kept\n" +
	"the update from being HOT); purge reads the key table along its primary key instead."

// keyIndexMigration is the version that drops the key table's updated_at index (the
// ordering version made it): 6 on PostgreSQL and SQLite, 7 on MySQL.
func keyIndexMigration(d *dialect, t tableName) laterMigration {
	kt := keyTable(t)
	index := d.quote(t.indexName(keyIndexSuffix))
	m := laterMigration{name: "key_index_dropped", droppedKeyIndex: keyIndexSuffix}
	if d.name == "mysql" {
		m.up = []ddlStatement{{keyIndexDropComment, "ALTER TABLE " + d.qualified(kt) + " DROP INDEX " + index}}
		m.down = []ddlStatement{{keyIndexComment, "ALTER TABLE " + d.qualified(kt) + " ADD INDEX " + index + " (updated_at)"}}
		return m
	}
	drop, create := d.indexDDL(t, kt, keyIndexSuffix)
	m.up = []ddlStatement{{keyIndexDropComment, "DROP INDEX IF EXISTS " + drop}}
	m.down = []ddlStatement{{keyIndexComment, "CREATE INDEX IF NOT EXISTS " + create + " (updated_at)"}}
	return m
}

// indexDDL returns, on PostgreSQL and SQLite, how a DROP INDEX names the index of t
// with suffix, and how a CREATE INDEX names it and the table on (t or a table beside
// it), up to the column list: both qualify a dropped index's name with the schema;
// PostgreSQL creates an index in its table's schema and rejects a qualified name,
// SQLite wants the index name qualified and the table bare.
func (d *dialect) indexDDL(t, on tableName, suffix string) (drop, create string) {
	index := d.quote(t.indexName(suffix))
	drop = index
	if t.schema != "" {
		drop = d.quote(t.schema) + "." + index
	}
	if d.name == "sqlite" {
		return drop, drop + " ON " + d.quote(on.name)
	}
	return drop, index + " ON " + d.qualified(on)
}

// pollIndexDropComment explains pollIndexMigration. It is the text of a migration
// already on main, kept as it was written: its "so does the purge of undelivered rows"
// is not so, that purge walks the status index (dead_idx, purgeUndeliveredQuery).
const pollIndexDropComment = "Drops the poll index and its column. The poller reads due NEW and RETRY rows in the\n" +
	"claim's order, due longest first (due_at, created_at, event_id), along pending_idx,\n" +
	"and so does the purge of undelivered rows; each NEW row cost an entry in both, and\n" +
	"the poller's walk of the poll index from the oldest row passed rows not due yet.\n" +
	"Dropping a STORED column rebuilds the table: on a large table, run it when the\n" +
	"outbox is quiet."

// pollIndexMigration is MySQL's version 10: it drops the poll index and its column,
// pending_created_at (version 2). The queries use neither, so a table without this
// version works, paying the index's upkeep on every write until it is migrated.
// PostgreSQL and SQLite keep their index on (created_at, event_id) of pending rows: the
// admin's list of NEW events reads it (MySQL's reads the status index).
func pollIndexMigration(d *dialect, t tableName) laterMigration {
	table := d.qualified(t)
	poll := d.quote(t.indexName(pollIndexSuffix))
	return laterMigration{name: "poll_index_dropped", droppedIndex: pollIndexSuffix,
		up: []ddlStatement{{pollIndexDropComment, "ALTER TABLE " + table + " DROP INDEX " + poll + ", DROP COLUMN " + d.pollColumn}},
		down: []ddlStatement{{"Adds the poll index and its column back.", "ALTER TABLE " + table + " ADD COLUMN " + d.pollColumn +
			" DATETIME(6) AS (CASE WHEN status IN (" + pendingStatuses() + ") THEN created_at END) STORED,\n" +
			"    ADD INDEX " + poll + " (" + d.pollColumn + ", event_id)"}},
	}
}

// orderingMigration is version 2 on PostgreSQL and SQLite.
func orderingMigration(d *dialect, t tableName) laterMigration {
	kt := keyTable(t)
	table, kq := d.qualified(t), d.qualified(kt)
	// PostgreSQL creates an index in its table's schema and rejects a qualified index
	// name; SQLite qualifies the index name with the schema and wants a bare table name.
	orderIndex, keyIndex := d.quote(t.indexName(orderIndexSuffix)), d.quote(t.indexName(keyIndexSuffix))
	orderOn, keyOn := table, kq
	dropOrderIndex := orderIndex
	if t.schema != "" {
		dropOrderIndex = d.quote(t.schema) + "." + orderIndex
	}
	timeType := "TIMESTAMPTZ"
	addColumns := []ddlStatement{{orderingComment, "ALTER TABLE " + table + " ADD COLUMN order_key VARCHAR(255) NULL, ADD COLUMN order_seq BIGINT NULL"}}
	if d.name == "sqlite" {
		if t.schema != "" {
			orderIndex, keyIndex = d.quote(t.schema)+"."+orderIndex, d.quote(t.schema)+"."+keyIndex
		}
		orderOn, keyOn = d.quote(t.name), d.quote(kt.name)
		timeType = "TEXT"
		addColumns = []ddlStatement{
			{orderingComment, "ALTER TABLE " + table + " ADD COLUMN order_key VARCHAR(255) NULL"},
			{"", "ALTER TABLE " + table + " ADD COLUMN order_seq BIGINT NULL"},
		}
	}
	return laterMigration{
		name:   "ordering",
		column: "order_key",
		up: append(addColumns,
			ddlStatement{orderIndexComment, "CREATE INDEX IF NOT EXISTS " + orderIndex + " ON " + orderOn +
				" (order_key, order_seq) WHERE order_key IS NOT NULL AND " + notDone()},
			ddlStatement{keyTableComment, "CREATE TABLE IF NOT EXISTS " + kq + " (\n" +
				"    order_key  VARCHAR(255) NOT NULL PRIMARY KEY,\n" +
				"    last_seq   BIGINT       NOT NULL,\n" +
				"    updated_at " + timeType + " NOT NULL\n" +
				")"},
			ddlStatement{keyIndexComment, "CREATE INDEX IF NOT EXISTS " + keyIndex + " ON " + keyOn + " (updated_at)"},
		),
		down: []ddlStatement{
			{"Drops the key table and the order columns and index.", "DROP TABLE IF EXISTS " + kq},
			{"", "DROP INDEX IF EXISTS " + dropOrderIndex},
			{"", "ALTER TABLE " + table + " DROP COLUMN order_seq"},
			{"", "ALTER TABLE " + table + " DROP COLUMN order_key"},
		},
	}
}

// fallbackComment explains the fallback migration.
const fallbackComment = "Fallback (docs/listeners.md): status 5 FALLBACK is an event whose listener failed for\n" +
	"good and whose fallback handled it. Statuses 5 and above are handled outcomes besides\n" +
	"DONE and DEAD: purged like them, and releasing their order key like DONE.\n" +
	"first_attempt_at is when the first failed attempt was recorded, for the fallback's\n" +
	"failure context; a replay clears it."

// finishedStatus and orderOpenStatus are the status conditions of the fallback
// migration's indexes: finished (purged) rows, and rows that hold their order key. The
// queries that use the indexes write the same.
func finishedStatus() string {
	return "status IN (" + doneOrDead() + ") OR status >= " + sqlStatus(outboxtype.StatusFallback)
}

func orderOpenStatus() string {
	return notDone() + " AND status < " + sqlStatus(outboxtype.StatusFallback)
}

// doneOrDead and notDone are the conditions of the versions before the fallback
// migration: finished rows were DONE or DEAD ("status IN (" + doneOrDead() + ")"), and a
// row held its order key until DONE (notDone).
func doneOrDead() string { return sqlStatuses(outboxtype.StatusDone, outboxtype.StatusDead) }

func notDone() string { return "status <> " + sqlStatus(outboxtype.StatusDone) }

// finishedStatus is finishedStatus as the queries that the finished index serves write
// it (SQLite: +status).
func (d *dialect) finishedStatus() string {
	return strings.ReplaceAll(finishedStatus(), "status", d.hintedStatus())
}

// fallbackMigration is version 3 on PostgreSQL and SQLite, 4 on MySQL: the
// first_attempt_at column, and the finished and order indexes (or MySQL's generated
// columns that stand in for their conditions) rebuilt to count statuses 5 and above.
func fallbackMigration(d *dialect, t tableName) laterMigration {
	table := d.qualified(t)
	m := laterMigration{name: "fallback", column: "first_attempt_at"}
	if d.name == "mysql" {
		genFinished := func(cond string) string {
			return "MODIFY COLUMN " + d.finishedColumn + " DATETIME(6) AS (CASE WHEN " + cond + " THEN " + finishedAt + " END) STORED"
		}
		genOpen := func(cond string) string {
			return "MODIFY COLUMN " + d.orderOpenColumn + " VARCHAR(255) AS (CASE WHEN " + cond + " THEN order_key END) STORED"
		}
		m.up = []ddlStatement{{fallbackComment + "\nChanging STORED columns rebuilds the table: on a large table, run it when the\n" +
			"outbox is quiet.", "ALTER TABLE " + table + " ADD COLUMN first_attempt_at DATETIME(6) NULL,\n" +
			"    " + genFinished(finishedStatus()) + ",\n    " + genOpen(orderOpenStatus())}}
		m.down = []ddlStatement{{"Drops first_attempt_at and restores the generated columns of version 3.",
			"ALTER TABLE " + table + " DROP COLUMN first_attempt_at,\n" +
				"    " + genFinished("status IN ("+doneOrDead()+")") + ",\n    " + genOpen(notDone())}}
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
	create, on, timeType := name, table, "TIMESTAMPTZ"
	if d.name == "sqlite" {
		create, on, timeType = qualifiedName, d.quote(t.name), "TEXT"
	}
	hinted := d.finishedStatus()
	indexes := func(finished, open string) []ddlStatement {
		return []ddlStatement{
			{"", "DROP INDEX IF EXISTS " + qualifiedName(finishedIndexSuffix)},
			{"", "CREATE INDEX IF NOT EXISTS " + create(finishedIndexSuffix) + " ON " + on +
				" (" + finishedAt + ", event_id) WHERE " + finished},
			{"", "DROP INDEX IF EXISTS " + qualifiedName(orderIndexSuffix)},
			{"", "CREATE INDEX IF NOT EXISTS " + create(orderIndexSuffix) + " ON " + on +
				" (order_key, order_seq) WHERE order_key IS NOT NULL AND " + open},
		}
	}
	m.up = append([]ddlStatement{{fallbackComment + "\nThe indexes are rebuilt with the new conditions.",
		"ALTER TABLE " + table + " ADD COLUMN first_attempt_at " + timeType + " NULL"}},
		indexes(hinted, orderOpenStatus())...)
	m.down = append(indexes(d.hintedStatus()+" IN ("+doneOrDead()+")", notDone()),
		ddlStatement{"", "ALTER TABLE " + table + " DROP COLUMN first_attempt_at"})
	m.down[0].comment = "Restores the indexes of version 2 and drops first_attempt_at."
	return m
}

// listenerMigration is version 4 on PostgreSQL and SQLite, 5 on MySQL: the listener
// column, the subscription a fan-out delivery is for or whose delivery failed for good
// (docs/listeners.md). A nullable column without a default: no table rewrite.
func listenerMigration(d *dialect, t tableName) laterMigration {
	table := d.qualified(t)
	return laterMigration{
		name:   "listener",
		column: "listener",
		up: []ddlStatement{{"Fan-out (docs/listeners.md): an event with several listeners is split into one row\n" +
			"per listener, whose listener column names it; a row whose listener failed for good\n" +
			"(DEAD, FALLBACK) names that listener, so that dead events are listed and replayed\n" +
			"per listener.", "ALTER TABLE " + table + " ADD COLUMN listener VARCHAR(255) NULL"}},
		down: []ddlStatement{{"Drops the listener column.", "ALTER TABLE " + table + " DROP COLUMN listener"}},
	}
}

// mysqlComment explains what the MySQL table does differently.
const mysqlComment = "\nTimes are DATETIME(6) in UTC: connect with parseTime=true&loc=UTC.\n" +
	"event_id is VARBINARY so that IDs compare byte by byte, and the other text columns use\n" +
	"the case-sensitive utf8mb4_bin collation. On MariaDB, JSON is LONGTEXT with a JSON_VALID check.\n" +
	"The indexes are declared here because MySQL has no CREATE INDEX IF NOT EXISTS. MySQL has no\n" +
	"partial indexes either, so due_at and finished_at stand in for them: generated columns that\n" +
	"are NULL except on the rows their index is for.\n" +
	"pending_idx serves the poller's scan of due NEW/RETRY rows (due_at <= now), oldest first,\n" +
	"and the claim of MultiNode pollers, which walks it in order (due_at, created_at, event_id)\n" +
	"with FORCE INDEX so that its locking read locks only the rows it claims.\n" +
	"dead_idx serves ListDead and Replay, which walk DEAD rows in (created_at, event_id) order,\n" +
	"and Stats. It is the only index that starts with status.\n" +
	"finished_idx serves Purge, which deletes the oldest DONE/DEAD rows by finished_at,\n" +
	"COALESCE(done_at, created_at), in small batches."

func mysqlDDL(d *dialect, t tableName) migration {
	table := d.qualified(t)
	// MySQL index names are per table, so they need no schema.
	index := func(suffix string) string { return d.quote(t.indexName(suffix)) }
	return migration{
		up: []ddlStatement{
			{tableComment + mysqlComment, "CREATE TABLE IF NOT EXISTS " + table + " (\n" +
				"    event_id       VARBINARY(64) NOT NULL PRIMARY KEY,\n" +
				"    event_type     VARCHAR(128)  NOT NULL,\n" +
				"    aggregate_type VARCHAR(64)   NOT NULL,\n" +
				"    aggregate_id   VARCHAR(128)  NULL,\n" +
				"    tenant_id      VARCHAR(64)   NULL,\n" +
				"    payload        JSON          NOT NULL,\n" +
				"    headers        JSON          NULL,\n" +
				"    status         SMALLINT      NOT NULL DEFAULT " + sqlStatus(outboxtype.StatusNew) + ",\n" +
				"    attempts       INTEGER       NOT NULL DEFAULT 0,\n" +
				"    last_error     TEXT          NULL,\n" +
				"    available_at   DATETIME(6)   NOT NULL,\n" +
				"    created_at     DATETIME(6)   NOT NULL,\n" +
				"    done_at        DATETIME(6)   NULL,\n" +
				"    locked_by      VARCHAR(128)  NULL,\n" +
				"    locked_until   DATETIME(6)   NULL,\n" +
				"    " + d.dueColumn + "         DATETIME(6)   AS (CASE WHEN status IN (" + pendingStatuses() + ") THEN available_at END) STORED,\n" +
				"    " + d.finishedColumn + "    DATETIME(6)   AS (CASE WHEN status IN (" + doneOrDead() + ") THEN " + finishedAt + " END) STORED,\n" +
				"    INDEX " + index(pendingIndexSuffix) + " (" + d.dueColumn + ", created_at),\n" +
				"    INDEX " + index(deadIndexSuffix) + " (status, created_at, event_id),\n" +
				"    INDEX " + index(finishedIndexSuffix) + " (" + d.finishedColumn + ", event_id)\n" +
				") ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"},
		},
		down: []ddlStatement{{"Drops the table and its indexes.", "DROP TABLE IF EXISTS " + table}},
		later: []laterMigration{{
			name:   "poll_index",
			column: d.pollColumn,
			// Version 10 drops the column again; a table with the next version's column
			// had this one applied before it.
			orColumn: "order_key",
			up: []ddlStatement{{"Poll: the poller's scan of due NEW/RETRY rows walks poll_idx in its order,\n" +
				"oldest created_at first, and stops after its LIMIT, instead of sorting every due row\n" +
				"found by pending_idx. pending_created_at is created_at on NEW and RETRY rows and NULL\n" +
				"on the others, so the index holds only those. Adding a STORED column rebuilds the\n" +
				"table: on a large table, run it when the outbox is quiet.",
				"ALTER TABLE " + table + " ADD COLUMN " + d.pollColumn +
					" DATETIME(6) AS (CASE WHEN status IN (" + pendingStatuses() + ") THEN created_at END) STORED,\n" +
					"    ADD INDEX " + index(pollIndexSuffix) + " (" + d.pollColumn + ", event_id)"}},
			down: []ddlStatement{{"Drops the poll index and its column.",
				"ALTER TABLE " + table + " DROP INDEX " + index(pollIndexSuffix) + ", DROP COLUMN " + d.pollColumn}},
		}, {
			name:   "ordering",
			column: "order_key",
			up: []ddlStatement{
				{keyTableComment, "CREATE TABLE IF NOT EXISTS " + d.qualified(keyTable(t)) + " (\n" +
					"    order_key  VARCHAR(255) NOT NULL PRIMARY KEY,\n" +
					"    last_seq   BIGINT       NOT NULL,\n" +
					"    updated_at DATETIME(6)  NOT NULL,\n" +
					"    INDEX " + index(keyIndexSuffix) + " (updated_at)\n" +
					") ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"},
				{orderingComment + "\n" + orderIndexComment + "\n" + d.orderOpenColumn + " is order_key on rows that are not DONE, else NULL:\n" +
					"the order index holds only those. Adding a STORED column rebuilds the table: on a\n" +
					"large table, run it when the outbox is quiet. The key table comes first, so that a\n" +
					"migration stopped between the two statements is completed by running it again.",
					"ALTER TABLE " + table + " ADD COLUMN order_key VARCHAR(255) NULL,\n" +
						"    ADD COLUMN order_seq BIGINT NULL,\n" +
						"    ADD COLUMN " + d.orderOpenColumn + " VARCHAR(255) AS (CASE WHEN " + notDone() + " THEN order_key END) STORED,\n" +
						"    ADD INDEX " + index(orderIndexSuffix) + " (" + d.orderOpenColumn + ", order_seq)"},
			},
			down: []ddlStatement{
				{"Drops the order columns and index, and the key table.", "ALTER TABLE " + table + " DROP INDEX " + index(orderIndexSuffix) +
					", DROP COLUMN " + d.orderOpenColumn + ", DROP COLUMN order_seq, DROP COLUMN order_key"},
				{"", "DROP TABLE IF EXISTS " + d.qualified(keyTable(t))},
			},
		}, fallbackMigration(d, t), listenerMigration(d, t), adminMigration(d, t), keyIndexMigration(d, t), leaseMigration(d, t), pauseMigration(d, t),
			pollIndexMigration(d, t), aggregateDropMigration(d, t)},
	}
}

// undeliveredIndexComment explains undeliveredIndexMigration's index.
const undeliveredIndexComment = "Undelivered: the admin's list and count of NEW events and the purge of undelivered\n" +
	"rows walk NEW and RETRY rows in (created_at, event_id) order. It replaces the pending\n" +
	"index, which held the same rows under the condition of the claim index: now and then,\n" +
	"right after an autoanalyze, the planner read the poller's rows along it, whose\n" +
	"entries of delivered events no other read had marked dead, tens of thousands of\n" +
	"buffers for a read of a few rows. attempts >= 0 is always true: it keeps the planner\n" +
	"from using this index for the queries that do not write it, the poller's reads and\n" +
	"the claims, which walk the claim index."

// undeliveredIndexMigration is PostgreSQL's version 10: the undelivered index, which
// replaces the pending index (created_at, event_id) of NEW and RETRY rows, in one
// transaction (the index marks the version applied). Optional: the queries are correct
// on a table without it (Start runs), but its NEW list and undelivered purge, which
// write the new index's condition, then read the claim index and sort, or the table.
func undeliveredIndexMigration(d *dialect, t tableName) laterMigration {
	dropPending, createPending := d.indexDDL(t, t, pendingIndexSuffix)
	dropUndelivered, createUndelivered := d.indexDDL(t, t, undeliveredIndexSuffix)
	return laterMigration{name: "undelivered_index", index: undeliveredIndexSuffix, optional: true,
		up: []ddlStatement{
			{undeliveredIndexComment, "CREATE INDEX IF NOT EXISTS " + createUndelivered + " (created_at, event_id) WHERE " + d.undeliveredCondition()},
			{"Drops the pending index, which undelivered_idx replaces. It comes after the build\n" +
				"so that the DROP's exclusive lock, which the transaction holds to its end, holds\n" +
				"off the table's reads for a moment only: the build holds off its writes alone.", "DROP INDEX IF EXISTS " + dropPending},
		},
		down: []ddlStatement{
			{pendingIndexComment, "CREATE INDEX IF NOT EXISTS " + createPending + " (created_at, event_id) WHERE status IN (" + pendingStatuses() + ")"},
			{"", "DROP INDEX IF EXISTS " + dropUndelivered},
		},
	}
}

// undeliveredCondition is the condition of the index that the admin's NEW list and
// count and the purge of undelivered rows walk, which they write: PostgreSQL's
// undelivered index's, whose attempts >= 0 (always true) keeps the poller's reads and
// the claims off it (undeliveredIndexMigration), and SQLite's pending index's.
func (d *dialect) undeliveredCondition() string {
	cond := "status IN (" + pendingStatuses() + ")"
	if d.name == "postgres" {
		return cond + " AND attempts >= 0"
	}
	return cond
}
