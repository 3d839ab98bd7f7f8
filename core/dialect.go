package outbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dialect describes one SQL database to [NewSQLStore] and [Migrate]: placeholders,
// identifier quoting, time encoding, statement limits and DDL. It is a pure query
// builder: it does no I/O and holds no state. The implementations are the values
// [Postgres] and [SQLite]; the interface has unexported methods so that no other exist.
type Dialect interface {
	// Name returns the dialect's name: "postgres" or "sqlite".
	Name() string
	// builder returns the query builder behind the dialect.
	builder() *dialect
}

// The supported dialects.
var (
	// Postgres is PostgreSQL (tested with 15) through any database/sql driver: pgx's
	// stdlib driver, lib/pq. Payload and headers are jsonb, times timestamptz; ID lists
	// are sent as one text-array literal, so no driver array support is needed.
	Postgres Dialect = &dialect{
		name:          "postgres",
		bindVar:       func(n int) string { return "$" + strconv.Itoa(n) },
		quoteChar:     '"',
		encodeTime:    func(t time.Time) (any, error) { return t, nil },
		decodeTime:    decodeTime,
		maxBindParams: 65535, // the wire protocol's Int16 parameter count
		idsAsArray:    true,
		maxIDs:        5000,
		ddl:           postgresDDL,
	}
	// SQLite is SQLite 3.15 or newer, normally through modernc.org/sqlite opened with
	// [SQLiteDSN]. Payload and headers are TEXT; times are TEXT in a fixed-width UTC
	// format ([SQLiteTimeLayout]) that the dialect encodes itself, so that text order is
	// time order whatever the driver's own time handling.
	SQLite Dialect = &dialect{
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
		ddl:           sqliteDDL,
	}
)

// SQLiteTimeLayout is how the [SQLite] dialect stores times: UTC with exactly six
// fractional digits, so that comparing the text compares the times.
const SQLiteTimeLayout = "2006-01-02T15:04:05.000000Z"

// dialect is the one implementation of Dialect. Every difference between databases is a
// field, so a new database (MySQL/MariaDB: "?" placeholders, backtick quoting,
// DELETE … ORDER BY … LIMIT, no RETURNING) is a new value, not a new code path through
// the store.
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
	// orderedDML writes bounded updates and deletes as "UPDATE/DELETE … ORDER BY … LIMIT ?"
	// (MySQL) instead of "… WHERE event_id IN (SELECT event_id … ORDER BY … LIMIT ?)".
	orderedDML bool
	// statusHint prefixes the status column in the predicates that the partial dead and
	// finished indexes serve, and in those indexes' WHERE clauses. SQLite sets it to "+":
	// without statistics (most SQLite databases never run ANALYZE) its planner prefers
	// an equality on the pending index's leading status column and then sorts every
	// DEAD or DONE row; unary + keeps that term off the pending index, so the partial
	// index declared with the same "+status" predicate is used.
	statusHint string
	// ddl returns the statements that create and drop the table.
	ddl func(d *dialect, t tableName) migration
}

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

func encodeSQLiteTime(t time.Time) (any, error) {
	if y := t.Year(); y < 1 || y > 9999 {
		return nil, fmt.Errorf("time %s is outside the years 1 to 9999 that SQLite text times hold", t)
	}
	return t.Format(SQLiteTimeLayout), nil
}

// timeTextLayouts are the textual time forms decodeTime accepts: the SQLite dialect's
// own, then what drivers or hand-written rows commonly hold.
var timeTextLayouts = []string{
	SQLiteTimeLayout,
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
