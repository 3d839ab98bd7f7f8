package outbox

import "github.com/outboxkit/outbox/core/internal/sqlstore"

// Dialect describes one SQL database to [NewSQLStore] and [Migrate]. The values are
// [Postgres], [MySQL] and [SQLite]; the interface is sealed (docs/how-it-works.md).
type Dialect interface {
	// Name returns the dialect's name: "postgres", "mysql" or "sqlite".
	Name() string
	// sql returns the SQL store's dialect behind it.
	sql() *sqlstore.Dialect
}

// The supported dialects (docs/databases.md).
var (
	// Postgres is PostgreSQL 12 or newer, through any database/sql driver.
	Postgres Dialect = dialect{sqlstore.Postgres}
	// MySQL is MySQL 8.0 or newer and MariaDB 10.6 or newer, through
	// github.com/go-sql-driver/mysql. The DSN must carry [MySQLDSNParams] and the utf8mb4
	// character set, or [Outbox.Start] returns a *[ConfigError].
	MySQL Dialect = dialect{sqlstore.MySQL}
	// SQLite is SQLite 3.15 or newer (3.35 for [MultiNode] claims), through modernc.org/sqlite
	// and [SQLiteDSN].
	SQLite Dialect = dialect{sqlstore.SQLite}
)

// dialect is a [Dialect]: one of the SQL store's.
type dialect struct{ d *sqlstore.Dialect }

func (d dialect) Name() string           { return d.d.Name() }
func (d dialect) String() string         { return d.d.Name() }
func (d dialect) sql() *sqlstore.Dialect { return d.d }
