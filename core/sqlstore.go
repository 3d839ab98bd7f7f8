package outbox

import (
	"cmp"
	"database/sql"
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/purge"
	"github.com/outboxkit/outbox/core/internal/sqlstore"
	"github.com/outboxkit/outbox/core/storage"
)

// The SQL store gives back refused claims with one statement per chunk, where another
// claim store renews each claim to expire at once.
var _ dispatch.ClaimReleaser = (*sqlstore.Store)(nil)

// The SQL store maintains a partitioned table's partitions at each purge
// (package outboxpartition).
var _ purge.PartitionMaintainer = (*sqlstore.Store)(nil)

// MySQLDSNParams are the DSN parameters the [MySQL] dialect needs (after "?").
const MySQLDSNParams = "parseTime=true&loc=UTC"

// SQLStoreConfig configures [NewSQLStore]. The zero value is ready to use.
type SQLStoreConfig struct {
	// Table is the outbox table, optionally "schema.table", each part
	// ^[A-Za-z_][A-Za-z0-9_]{0,62}$. Defaults to DefaultTable.
	Table string
	// QueryTimeout bounds each statement but Insert (the caller's); -1: none. Defaults to 10 s.
	QueryTimeout time.Duration
}

// NewSQLStore returns the [storage.Store] of dialect d on db with every capability of
// package storage; [New] builds one. It does no I/O; the store is safe for concurrent
// use. It returns a *[ConfigError] for a nil db or d, a bad table or QueryTimeout < -1.
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
