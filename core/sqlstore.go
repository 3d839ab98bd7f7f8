package outbox

import (
	"cmp"
	"database/sql"
	"time"

	"github.com/outboxkit/outbox/core/internal/sqlstore"
	"github.com/outboxkit/outbox/core/storage"
)

// MySQLDSNParams are the DSN parameters the [MySQL] dialect needs from
// github.com/go-sql-driver/mysql, to append to the DSN:
// "user:password@tcp(127.0.0.1:3306)/app?" + outbox.MySQLDSNParams.
const MySQLDSNParams = "parseTime=true&loc=UTC"

// SQLStoreConfig configures [NewSQLStore]. The zero value is ready to use.
type SQLStoreConfig struct {
	// Table is the outbox table, optionally schema-qualified ("app.outbox_event"). It
	// must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$, optionally "schema.table", and is always quoted. Defaults to DefaultTable.
	Table string
	// QueryTimeout bounds every statement the store runs on its own connection (all
	// methods but Insert, which runs on the caller's executor under the caller's
	// context). -1 disables the bound. Defaults to 10 seconds.
	QueryTimeout time.Duration
}

// NewSQLStore returns the [storage.Store] for PostgreSQL, MySQL/MariaDB and SQLite on
// db, for dialect d, with every optional capability of package storage. [New] builds
// one from the Config; call it yourself to wrap the store or share it. Create the table
// with [Migrate], [MigrateTable] or the files from [Migrations]. It does no I/O. It
// returns a *[ConfigError] when db or d is nil, the table name is invalid or
// QueryTimeout is negative other than -1.
//
// Values are bound as arguments; times are stored in UTC, truncated to microseconds.
// Insert writes a batch with one multi-row INSERT, split only past the database's limits
// (atomic together inside a transaction). A row that cannot be decoded is reported in
// [storage.PendingBatch].Undecodable; Get and ListDead return it leniently so that it
// can be inspected. The store is safe for concurrent use.
func NewSQLStore(db *sql.DB, d Dialect, cfg SQLStoreConfig) (storage.Store, error) {
	if d == nil {
		return nil, &ConfigError{Field: "Dialect", Reason: "nil; use outbox.Postgres, outbox.MySQL or outbox.SQLite"}
	}
	s, err := sqlstore.New(db, d.sql(), sqlstore.Config{Table: cmp.Or(cfg.Table, DefaultTable), QueryTimeout: cfg.QueryTimeout, TxOf: txOf})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// txOf returns the database and transaction behind a *Tx, for the SQL store's
// statement cache.
func txOf(exec Executor) (*sql.DB, *sql.Tx, bool) {
	if t, ok := exec.(*Tx); ok {
		return t.db, t.tx, true
	}
	return nil, nil, false
}
