package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The dialect type: what differs between the databases (each database's values are in
// postgres.go, mysql.go and sqlite.go), and what every builder uses of it: quoting,
// table names and times.

// Dialect is one database's SQL: its query builders, DDL and the strategy it keeps
// ordered events in order with. The values are [Postgres], [MySQL] and [SQLite].
type Dialect = dialect

// The dialects. Package outbox wraps each in its public Dialect value of the same name,
// which documents the database and driver it needs.
var (
	Postgres = postgresDialect
	MySQL    = mysqlDialect
	SQLite   = sqliteDialect
)

// dialect is the one implementation of Dialect. Each database's values are in its file
// (postgres.go, mysql.go, sqlite.go): the differences in SQL are fields, and how the
// database keeps ordered events in order, under concurrent writers, claimers and
// purges, is its orderStrategy (order), whose doc comment is that database's argument.
type dialect struct {
	name string
	// order is how Insert writes ordered events and how Promote moves a key on.
	order orderStrategy
	// bindVar returns the placeholder of the n-th argument, counting from 1.
	bindVar func(n int) string
	// quoteChar encloses identifiers: '"' (standard SQL) or '`' (MySQL).
	quoteChar byte
	// encodeTime turns a UTC time truncated to microseconds into a driver argument.
	encodeTime func(time.Time) (any, error)
	// decodeTime turns a scanned column value into a UTC time.
	decodeTime func(v any) (time.Time, error)
	// maxBindParams is the most placeholders one statement may carry.
	maxBindParams int
	// idsAsArray matches ID lists with "event_id = ANY(CAST(? AS TEXT[]))" and one
	// text-array-literal argument (one plan for any list length, with every driver)
	// instead of "event_id IN (?, ?, …)".
	idsAsArray bool
	// maxIDs is the most IDs one statement matches; longer lists are split.
	maxIDs int
	// arrayInsert writes the event INSERT of two events or more as INSERT … SELECT …
	// FROM unnest(…), one array argument per column (insertArrayQueries), instead of a
	// multi-row VALUES: its text and its few arguments do not change with the batch's
	// size, so the server (and pgx's statement cache) prepares it once. It needs encodeTime to
	// return a time.Time, which it writes as text in the array of its column.
	arrayInsert bool
	// maxStatementBytes, when positive, bounds the argument bytes of one multi-row
	// INSERT (payloads, headers and the other columns): MySQL rejects a statement larger
	// than max_allowed_packet. A single row larger than the bound still goes alone.
	maxStatementBytes int
	// packetLimited: the server refuses a statement larger than its max_allowed_packet
	// by closing the connection (MySQL), so the store reads that limit and refuses a
	// larger row before any SQL (Store.checkPacket).
	packetLimited bool
	// sizeFunc is the SQL function that returns a column's stored size in bytes without
	// returning its value (sizedSQL).
	sizeFunc string
	// skipLocked: the purge's subquery locks its rows FOR UPDATE SKIP LOCKED (PostgreSQL),
	// so that purgers never wait for each other.
	skipLocked bool
	// literalLimit writes a statement's LIMIT as an integer literal instead of a bound
	// argument (builder.limit). SQLite reads the value bound to "LIMIT ?" when it plans
	// the statement (to estimate the rows out) and marks the statement for a new
	// preparation whenever that parameter is bound again: every run of a cached
	// statement prepared it anew, which cost the promote after each DONE batch of
	// ordered events about 3 % of the CPU of an ordered write. The literal costs one
	// cached statement per distinct limit, and the limits are few.
	literalLimit bool
	// orderedDML writes bounded updates and deletes as "UPDATE/DELETE … ORDER BY … LIMIT ?"
	// (MySQL) instead of "… WHERE event_id IN (SELECT event_id … ORDER BY … LIMIT ?)".
	orderedDML bool
	// expandKeyset writes the keyset condition (created_at, event_id) > (?, ?) as
	// (created_at > ? OR (created_at = ? AND event_id > ?)): MySQL and MariaDB do not
	// turn a row comparison into an index range, the expanded form they do.
	expandKeyset bool
	// splitKeyset writes the keyset condition (created_at, event_id) > (?, ?) as
	// created_at >= ? AND (created_at > ? OR event_id > ?): a range on one column and a
	// filter of the rows at its edge. SQLite, once ANALYZE has given it statistics,
	// sorted a page of the state index (RETRY, WAITING) read with the row value or the
	// expanded form, after a cursor, instead of walking the index in order
	// (TestEventListsUseIndexes): the query must repeat the index's status IN (2, 4),
	// and with status = 2 beside it SQLite took the range to hold few rows.
	splitKeyset bool
	// dueColumn and finishedColumn, when set, name columns that stand in for partial
	// indexes (MySQL has none, and MariaDB no expression indexes either): generated
	// columns that are NULL except on the rows a query looks for, so that their indexes
	// hold just those rows in the query's order and no other index starts with status.
	// dueColumn is available_at on NEW and RETRY rows, and Pending filters on it instead
	// of status and available_at. finishedColumn is COALESCE(done_at, created_at) on DONE
	// and DEAD rows, and Purge filters and orders by it alone. pollColumn is created_at
	// on NEW and RETRY rows: Pending filters and orders by it, so that the scan walks
	// its index in the poller's order and stops after the LIMIT instead of sorting every
	// due row.
	dueColumn, finishedColumn, pollColumn string
	// statusHint prefixes the status column in the predicates that the partial dead and
	// finished indexes serve, and in those indexes' WHERE clauses. SQLite sets it to "+":
	// unary + keeps status from ever being used as an index key, so that its planner,
	// which has no statistics in most SQLite databases (they never run ANALYZE), picks
	// the partial index declared with the same "+status" predicate instead of scanning
	// by status and sorting every DEAD or DONE row.
	statusHint string
	// dbNow is the database's current time as an SQL expression, in the form the time
	// columns hold: every claim decision compares with it, so that claims follow one
	// clock. PostgreSQL uses statement_timestamp(), the start of the statement (now() is
	// the start of the transaction, which may be long before an insert in a business
	// transaction); MySQL UTC_TIMESTAMP(6), which does not depend on the session
	// time_zone; SQLite the fixed-width text of strftime('now'), milliseconds followed by
	// "000Z".
	dbNow string
	// dbTimeOffset returns an expression for dbNow plus d, binding d as an argument of b.
	dbTimeOffset func(b *builder, d time.Duration) string
	// claimInTx claims in a READ COMMITTED transaction of two statements, a locking
	// SELECT … FOR UPDATE SKIP LOCKED and an UPDATE by primary key (MySQL, which has no
	// UPDATE … RETURNING), instead of one UPDATE … RETURNING statement.
	claimInTx bool
	// readCommittedDML runs the statements that change a range of rows (Purge, Replay,
	// and MarkDone of several IDs) in a READ COMMITTED transaction, retried after a
	// deadlock: under InnoDB's default REPEATABLE READ their range scans take gap
	// locks, which make concurrent INSERTs into the table wait until the statement
	// ends, or deadlock with them.
	readCommittedDML bool
	// byIDHint follows the table's name in the statements that find rows by a list of
	// IDs and lock or change them (byID). On a table of a few dozen rows MariaDB
	// estimates a scan cheaper than looking ten IDs up, and a locking scan, even under
	// READ COMMITTED, checks every row it meets, among them the rows an open business
	// transaction inserted: that turns the inserting transaction's implicit lock into
	// an explicit one, which InnoDB passes on as gap locks (the transaction runs
	// REPEATABLE READ), and later DONE updates wait in those gaps until the business
	// transaction ends (see claimReadQuery). FORCE INDEX (PRIMARY) makes it a range of
	// primary-key lookups at any table size (MySQL).
	byIDHint string
	// orderOpenColumn, when set, names the generated column that stands in for the
	// partial order index (MySQL): order_key on open rows (not DONE, FALLBACK or
	// DISCARDED), else NULL.
	orderOpenColumn string
	// perRowProbe ends the correlated [NOT] EXISTS subqueries of ordering (promote,
	// blocked keys, key purge) so that each runs per outer row as a probe of the order
	// index by key. PostgreSQL otherwise turns them into (anti-)joins, and on a table
	// analyzed while it held few WAITING rows it picked a nested loop whose inner side
	// scanned the whole order index for every outer row: 1.2 s per promote sweep, 3.5
	// ms per promote of one key, in a profile of W6m on a table in service. An OFFSET
	// keeps PostgreSQL from pulling an EXISTS up into a join.
	perRowProbe string
	// cachedStatements is how many prepared statements the store keeps across calls
	// (see stmtCache); 0 keeps none. modernc.org/sqlite parses every statement it is
	// not given prepared; go-sql-driver/mysql prepares it on the server and closes it
	// after one use (a round trip more), and each kept statement is one per connection
	// on the server, counted against max_prepared_stmt_count, hence few. PostgreSQL's
	// pgx keeps its own statement cache.
	cachedStatements int
	// skipExisting ends the event INSERT so that a row whose event_id exists is skipped
	// instead of failing the statement, and the INSERT returns the rows it wrote
	// (PostgreSQL, where a failed statement aborts the caller's whole transaction).
	// Without it, Insert runs the INSERT, and after a unique violation, which undoes
	// only that statement (MySQL/MariaDB, SQLite), reads which of its IDs exist and runs
	// it again without them.
	skipExisting string
	// skipOnlyDeciding uses skipExisting only in the INSERTs that decide statuses (the
	// candidates of insertQueriesHeads), and insertSkipping's retry in the others
	// (SQLite, where a unique violation undoes only its statement; with RETURNING on
	// every insert, W1's median was 8 % lower in the A/B of the INSERT deciding, five
	// rounds a side). SQLite's store decides in the key upsert (sqliteOrder), so its
	// INSERTs never return.
	skipOnlyDeciding bool
	// transactionalDDL applies a later migration in one transaction (PostgreSQL,
	// SQLite), so that a crash leaves the table at one version or the next.
	transactionalDDL bool
	// ddl returns the statements that create and drop the table.
	ddl func(d *dialect, t tableName) migration
	// checkConn, when set, verifies that a connection pool is configured the way the
	// dialect needs ([SQLStore.CheckConnection] runs it). It is the one part of a
	// dialect that does I/O, and it only reads.
	checkConn func(ctx context.Context, db *sql.DB, maxPayload int) error
}

// byID is the table as named in a statement that finds its rows by a list of IDs and
// locks or changes them: with byIDHint, so that they are looked up by primary key.
func (d *dialect) byID(t tableName) string { return d.qualified(t) + d.byIDHint }

// hintedStatus is the status column as written in predicates the partial indexes serve.
func (d *dialect) hintedStatus() string { return d.statusHint + "status" }

// Name implements Dialect.
func (d *dialect) Name() string { return d.name }

// String returns the dialect's name.
func (d *dialect) String() string { return d.name }

// quote quotes one identifier.
func (d *dialect) quote(ident string) string {
	q := string(d.quoteChar)
	return q + strings.ReplaceAll(ident, q, q+q) + q
}

// qualified returns the quoted, possibly schema-qualified table name.
func (d *dialect) qualified(t tableName) string {
	if t.schema == "" {
		return d.quote(t.name)
	}
	return d.quote(t.schema) + "." + d.quote(t.name)
}

// utcMicro is the canonical form of every stored time: UTC, truncated to microseconds
// (the precision of timestamptz), so that what is read back equals what was written.
func utcMicro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// time encodes a time argument in the dialect's format.
func (d *dialect) time(t time.Time) (any, error) { return d.encodeTime(utcMicro(t)) }

// timeTextLayouts are the textual time forms decodeTime accepts: the SQLite dialect's
// own, then what drivers or hand-written rows commonly hold.
var timeTextLayouts = []string{
	sqliteTimeLayout,
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z07",
	"2006-01-02 15:04:05.999999999 -0700 MST", // time.Time.String
	"2006-01-02 15:04:05.999999999",
}

// decodeTime accepts what drivers return for a time column: time.Time, or text.
func decodeTime(v any) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return utcMicro(x), nil
	case string:
		return parseTimeText(x)
	case []byte:
		return parseTimeText(string(x))
	case nil:
		return time.Time{}, errors.New("time is NULL")
	default:
		return time.Time{}, fmt.Errorf("time has unexpected type %T", v)
	}
}

func parseTimeText(s string) (time.Time, error) {
	for _, layout := range timeTextLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return utcMicro(t), nil
		}
	}
	return time.Time{}, fmt.Errorf("unparsable time %q", s)
}
