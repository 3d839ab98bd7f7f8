package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

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

var (
	postgresDialect = &dialect{
		sizeFunc:         "pg_column_size",
		name:             "postgres",
		bindVar:          func(n int) string { return "$" + strconv.Itoa(n) },
		quoteChar:        '"',
		encodeTime:       func(t time.Time) (any, error) { return t, nil },
		decodeTime:       decodeTime,
		maxBindParams:    65535, // the wire protocol's Int16 parameter count
		idsAsArray:       true,
		maxIDs:           5000,
		transactionalDDL: true,
		dbNow:            "statement_timestamp()",
		dbTimeOffset: func(b *builder, d time.Duration) string {
			return "statement_timestamp() + CAST(" + b.arg(d.Microseconds()) + " AS BIGINT) * INTERVAL '1 microsecond'"
		},
		ddl:               postgresDDL,
		lockKeysReturning: true,
		headInTx:          true,
		headInInsert:      true,
		headByVersion:     true,
		perRowProbe:       " OFFSET 0",
		skipExisting:      " ON CONFLICT (event_id) DO NOTHING",
		skipLocked:        true,
	}

	mysqlDialect = &dialect{
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
		headBySnapshot:   true,
		ddl:              mysqlDDL,
		checkConn:        checkMySQLConn,
		cachedStatements: 16,
	}

	sqliteDialect = &dialect{
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
		ddl:               sqliteDDL,
		literalLimit:      true,
		processClock:      true,
		lockKeysReturning: true,
		upsertTargetBare:  true,
		transactionalDDL:  true,
		headInTx:          true,
		headInUpsert:      true,
		carryKeys:         true,
		skipExisting:      " ON CONFLICT (event_id) DO NOTHING",
		skipOnlyDeciding:  true,
		cachedStatements:  128,
		splitKeyset:       true,
	}
)

// sqliteTimeLayout is how the [SQLite] dialect stores times: UTC with exactly six
// fractional digits, so that comparing the text compares the times.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// dialect is the one implementation of Dialect. Every difference between databases is a
// field, so a new database is a new value, not a new code path through the store.
type dialect struct {
	name string
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
	// processClock: the database's clock is this process's (SQLite, a library in the
	// process), so a time the statement would read from it may be bound instead.
	processClock bool
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
	// partial order index (MySQL): order_key on rows that are not DONE, else NULL.
	orderOpenColumn string
	// lockKeysReturning locks order keys with one multi-row upsert … RETURNING
	// (PostgreSQL, SQLite) instead of one INSERT … ON DUPLICATE KEY UPDATE per key.
	lockKeysReturning bool
	// upsertTargetBare refers to the existing row of an upsert by bare column names
	// (SQLite, which has no INSERT … AS alias) instead of through the alias k.
	upsertTargetBare bool
	// headInTx lets Insert find, after locking the keys, which keys have events that
	// are not DONE, and insert the first event of each other key NEW at once instead of
	// WAITING for a promote after commit; the event INSERT reads it (headInInsert, which
	// every dialect with headInTx has). Safe where that read sees every commit of the
	// key before the lock was granted: PostgreSQL (a statement's snapshot under READ
	// COMMITTED; under REPEATABLE READ the upsert of a key that changed since the
	// snapshot fails), SQLite (one writer at a time). Not MySQL, whose REPEATABLE READ
	// snapshot may predate the lock (see headBySnapshot).
	headInTx bool
	// headBySnapshot lets Insert insert the first event of an idle key NEW where
	// headInTx is not safe (MySQL): a consistent read before the key lock
	// (snapshotKeysQuery) reads each key's row and whether the key has events that are
	// not DONE, and the upsert that takes the lock reports whether the row is still the
	// version that read saw (lockKeysQueries). If it is, the read saw every commit of
	// the key, so a key it saw idle is idle; if not, the key's events wait for a promote.
	// Keys that the promote after a DONE outcome read idle need no read in the writer's
	// transaction (idleKeys).
	headBySnapshot bool
	// headInInsert, with headInTx, lets the event INSERT itself decide whether the
	// first event of each key is NEW, with an EXISTS per row, instead of a read before
	// it: one statement fewer in the writer's transaction, with the same snapshot
	// argument (the INSERT is a statement after the key lock). The INSERT returns the
	// statuses, with skipExisting's RETURNING (PostgreSQL, and SQLite, where it needs
	// 3.35, as the key upsert's RETURNING does: with the statements kept prepared, an
	// A/B of W1o / W1 gave 0.64 with the read and 0.70 without, docs/BENCHMARKS.md).
	headInInsert bool
	// headInUpsert, with headInTx and lockKeysReturning, lets the key upsert decide
	// instead: its RETURNING also reads, per key, whether the key has an event that is
	// not DONE (an EXISTS on the order index; with carryKeys, the highest order_seq of
	// those events, NULL when there is none), and the event INSERT writes the statuses
	// Insert decides from it, as a plain INSERT that returns nothing. The same snapshot
	// argument holds (SQLite: the upsert holds the one write lock, so what it reads is
	// every commit), with one result set fewer a write: eight alternations of W1o / W1
	// on SQLite gave a median of 0.625 with the INSERT deciding and 0.665 with the
	// upsert (docs/BENCHMARKS.md).
	headInUpsert bool
	// carryKeys, with headInUpsert (SQLite): the key row holds the highest number of the
	// key's events that left the order index, which triggers carry into it (schema
	// version 7, keyCarryMigration), not a counter that every write advances. A write
	// numbers its events from the highest order_seq of the key's open rows, or when the
	// key has none from the key row, and writes nothing to the key row. The key upsert
	// of lockKeysQueries then changes nothing in a key row that exists (SQLite rewrites
	// no page for an unchanged row), so that a write dirties no key-table page, and
	// serves to take SQLite's one write lock before the read: every commit is then
	// visible to it, and the numbers follow commit order. A key that the promote after
	// a DONE outcome read idle is written by one guarded INSERT instead
	// (insertCarriedQuery, idleKeys). Eight alternations of W1o / W1 on SQLite gave
	// medians of 0.77 this way against 0.665 with a counter every write advanced
	// (docs/BENCHMARKS.md).
	carryKeys bool
	// headByVersion, with headInInsert, writes a transaction's ordered events in one
	// statement (insertByVersionQuery): the key upsert and the event INSERT of
	// headInInsert, joined in a data-modifying WITH. One statement has one snapshot,
	// taken before the upsert waits for a key's lock, so the upsert advances only rows
	// still at the snapshot's version (the argument of headBySnapshot), and the events
	// of the other keys are written by the two statements of headInInsert (PostgreSQL).
	headByVersion bool
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
	// skipOnlyDeciding uses skipExisting only in the INSERTs that decide statuses
	// (headInInsert), and insertSkipping's retry in the others (SQLite, where a unique
	// violation undoes only its statement; with RETURNING on every insert, W1's median
	// was 8 % lower in the A/B of headInInsert, five rounds a side).
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

func (d *dialect) builder() *dialect { return d }

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

// encodeMySQLTime passes t (UTC, microseconds) to the driver, which formats it in its
// loc: UTC when the DSN is right, see [MySQL].
func encodeMySQLTime(t time.Time) (any, error) {
	if y := t.Year(); y < 1000 || y > 9999 {
		return nil, fmt.Errorf("time %s is outside the years 1000 to 9999 that MySQL DATETIME holds", t)
	}
	return t, nil
}

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
