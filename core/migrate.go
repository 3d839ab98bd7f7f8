package outbox

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
)

// migrationFiles holds the DDL of the default table, one directory per dialect in
// golang-migrate layout (migrations/<dialect>/0001_create_outbox_event.up.sql and
// .down.sql) and the same statements for goose (migrations/goose/<dialect>/). A test
// keeps the files equal to what [MigrateTable] runs.
//
//go:embed migrations
var migrationFiles embed.FS

// Migrations returns the migration files that create the default outbox table for d, in
// golang-migrate layout: 0001_create_outbox_event.up.sql and
// 0001_create_outbox_event.down.sql. Use them with golang-migrate's iofs source, or copy
// them into your own migrations (atlas, a hand-rolled runner). It returns nil for a nil
// dialect.
func Migrations(d Dialect) fs.FS {
	return subFS("migrations", d)
}

// GooseMigrations returns the same DDL as [Migrations] as one goose file,
// 00001_create_outbox_event.sql with "-- +goose Up" and "-- +goose Down" sections. It
// returns nil for a nil dialect.
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
// one transaction (on MySQL one CREATE TABLE IF NOT EXISTS). Running it again, or on a
// database migrated with the files from [Migrations], changes nothing. An invalid name
// returns a *[ConfigError].
func MigrateTable(ctx context.Context, db *sql.DB, d Dialect, table string) (err error) {
	if db == nil {
		return &ConfigError{Field: "DB", Reason: "nil *sql.DB"}
	}
	if d == nil {
		return &ConfigError{Field: "Dialect", Reason: "nil"}
	}
	t, err := parseTableName(table)
	if err != nil {
		return err
	}
	dd := d.builder()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: begin: %w", t, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	for _, s := range dd.ddl(dd, t).up {
		if _, err := tx.ExecContext(ctx, s.sql); err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", t, err)
	}
	return nil
}

// ignoreDone drops the error a rollback returns after the transaction already ended.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
