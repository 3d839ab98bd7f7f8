package outbox

import (
	"context"
	"database/sql"
	"embed"
	"io/fs"

	"github.com/outboxkit/outbox/core/internal/sqlstore"
)

// migrationFiles holds the DDL of the default table, one directory per dialect in
// golang-migrate layout (migrations/<dialect>/0001_create_outbox_event.up.sql and
// .down.sql, then one pair per later version) and the same statements for goose
// (migrations/goose/<dialect>/). A test keeps the files equal to what [MigrateTable] runs.
//
//go:embed migrations
var migrationFiles embed.FS

// Migrations returns the golang-migrate files of the default outbox table for d (nil
// for a nil dialect): 0001_create_outbox_event, then PostgreSQL 0002_ordering,
// 0003_fallback, 0004_listener, 0005_admin, 0006_key_index_dropped, 0007_lease,
// 0008_pause, 0009_aggregate_index_dropped, 0010_undelivered_index; SQLite the same
// to 0006, then 0007_key_carry, 0008_lease, 0009_pause, 0010_aggregate_index_dropped;
// MySQL 0002_poll_index, 0003_ordering, 0004_fallback, 0005_listener, 0006_admin,
// 0007_key_index_dropped, 0008_lease, 0009_pause, 0010_poll_index_dropped,
// 0011_aggregate_index_dropped.
func Migrations(d Dialect) fs.FS {
	return subFS("migrations", d)
}

// GooseMigrations returns [Migrations] as goose files (nil for a nil dialect).
func GooseMigrations(d Dialect) fs.FS {
	return subFS("migrations/goose", d)
}

func subFS(dir string, d Dialect) fs.FS {
	if d == nil {
		return nil
	}
	sub, err := fs.Sub(migrationFiles, dir+"/"+d.Name())
	if err != nil {
		return nil
	}
	return sub
}

// Migrate is [MigrateTable] of [DefaultTable].
func Migrate(ctx context.Context, db *sql.DB, d Dialect) error {
	return MigrateTable(ctx, db, d, DefaultTable)
}

// MigrateTable creates the outbox table named table (optionally "schema.table") and its
// indexes if they do not exist, then applies the versions of [Migrations] it lacks. It is
// idempotent; an invalid name returns a *[ConfigError].
func MigrateTable(ctx context.Context, db *sql.DB, d Dialect, table string) error {
	if db == nil {
		return &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	return sqlstore.MigrateTable(ctx, db, d.sql(), table)
}

// MigrateAggregateIndex adds the index that lists by EventQuery.AggregateID need to the
// named outbox table: opt-in, as it costs every write (docs/databases.md).
func MigrateAggregateIndex(ctx context.Context, db *sql.DB, d Dialect, table string) error {
	if db == nil {
		return &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	return sqlstore.CreateAggregateIndex(ctx, db, d.sql(), table)
}

// SchemaVersion reports the schema version of the named outbox table (have: 0 when it
// does not exist) and the one this release ships, which [Outbox.Start] requires
// (docs/databases.md).
func SchemaVersion(ctx context.Context, db *sql.DB, d Dialect, table string) (have, latest int, err error) {
	if db == nil {
		return 0, 0, &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return 0, 0, &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	return sqlstore.SchemaVersion(ctx, db, d.sql(), table)
}
