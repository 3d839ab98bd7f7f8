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

// Migrations returns the migration files of the default outbox table for d, in
// golang-migrate layout: 0001_create_outbox_event.up.sql and .down.sql, then one pair per
// later version (PostgreSQL: 0002_ordering, 0003_fallback, 0004_listener, 0005_admin,
// 0006_key_index_dropped, 0007_lease; SQLite the same to 0006, then 0007_key_carry and
// 0008_lease; MySQL: 0002_poll_index, 0003_ordering, 0004_fallback, 0005_listener,
// 0006_admin, 0007_key_index_dropped, 0008_lease). Use them with golang-migrate's iofs
// source, or copy them into your own migrations. It returns nil for a nil dialect.
func Migrations(d Dialect) fs.FS {
	return subFS("migrations", d)
}

// GooseMigrations returns the same DDL as [Migrations] as goose files (one per version:
// 00001_create_outbox_event.sql, ...). It returns nil for a nil dialect.
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

// Migrate creates the outbox table [DefaultTable] and its indexes for dialect d if they
// do not exist. It is idempotent; see [MigrateTable].
func Migrate(ctx context.Context, db *sql.DB, d Dialect) error {
	return MigrateTable(ctx, db, d, DefaultTable)
}

// MigrateTable creates the outbox table with the given name, optionally schema-qualified
// ("app.outbox_event"; the schema must exist), and its indexes, if they do not exist, in
// one transaction (on MySQL one CREATE TABLE IF NOT EXISTS), then applies the later
// versions of [Migrations] that the table lacks, so it upgrades a table made by an
// earlier release, rows and all. Running it again, or on a database migrated with the
// files from [Migrations], changes nothing. An invalid name returns a *[ConfigError].
func MigrateTable(ctx context.Context, db *sql.DB, d Dialect, table string) error {
	if db == nil {
		return &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	return sqlstore.MigrateTable(ctx, db, d.sql(), table)
}

// SchemaVersion reports the schema version of the outbox table with the given name for
// d: have is 0 when the table does not exist, else 1 plus the later versions of
// [Migrations] it has; latest is the version this release ships. [MigrateTable] brings
// have to latest; [Outbox.Start] refuses a table below it, except for a table that
// lacks only the lease version, on which it runs without the dispatch lease
// (see [LeaseStore]).
func SchemaVersion(ctx context.Context, db *sql.DB, d Dialect, table string) (have, latest int, err error) {
	if db == nil {
		return 0, 0, &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return 0, 0, &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	return sqlstore.SchemaVersion(ctx, db, d.sql(), table)
}
