package outbox

import "github.com/outboxkit/outbox/core/internal/sqlstore"

// Dialect describes one SQL database to [NewSQLStore] and [Migrate]. The values are
// [Postgres], [MySQL] and [SQLite]; the interface is sealed (see the package doc).
type Dialect interface {
	// Name returns the dialect's name: "postgres", "mysql" or "sqlite".
	Name() string
	// sql returns the SQL store's dialect behind it.
	sql() *sqlstore.Dialect
}

// The supported dialects.
var (
	// Postgres is PostgreSQL 12 or newer (tested with 15) through any database/sql
	// driver (pgx's stdlib, lib/pq). Payload and headers are jsonb, times timestamptz; a
	// claim is one statement (FOR UPDATE SKIP LOCKED, then UPDATE … RETURNING).
	Postgres Dialect = dialect{sqlstore.Postgres}

	// MySQL is MySQL 8.0 or newer and MariaDB 10.6 or newer, through
	// github.com/go-sql-driver/mysql (driver name "mysql"). The DSN must carry
	// [MySQLDSNParams] (parseTime=true&loc=UTC), and the connection character set must
	// be utf8mb4, the driver's default: [Outbox.Start] returns a *[ConfigError] with
	// Field "DSN" naming the fix otherwise. Times are DATETIME(6) in UTC; the table is
	// InnoDB with the case-sensitive utf8mb4_bin collation and a VARBINARY(64) event_id.
	// Claims and the store's range updates run READ COMMITTED, so business transactions
	// inserting into the table never wait for them; deadlocks and lock wait timeouts
	// are retried. A multi-row INSERT is split past 4 MiB of arguments; Start rejects a
	// MaxPayloadBytes above (max_allowed_packet - 64 KiB) / 2. docs/databases.md has the
	// details.
	MySQL Dialect = dialect{sqlstore.MySQL}

	// SQLite is SQLite 3.15 or newer (3.35 for [MultiNode] claims), normally through
	// modernc.org/sqlite opened with [SQLiteDSN]. Payload and headers are TEXT; times are
	// TEXT in the fixed-width UTC layout "2006-01-02T15:04:05.000000Z", so text order is
	// time order. The database clock is the host's, at millisecond precision.
	SQLite Dialect = dialect{sqlstore.SQLite}
)

// dialect is a [Dialect]: one of the SQL store's.
type dialect struct{ d *sqlstore.Dialect }

func (d dialect) Name() string           { return d.d.Name() }
func (d dialect) String() string         { return d.d.Name() }
func (d dialect) sql() *sqlstore.Dialect { return d.d }
