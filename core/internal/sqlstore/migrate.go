package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// MigrateTable creates the outbox table with the given name, optionally schema-qualified
// ("app.outbox_event"; the schema must exist), and its indexes, if they do not exist, in
// one transaction (on MySQL one CREATE TABLE IF NOT EXISTS), then applies the later
// versions of [Migrations] that the table lacks, so it upgrades a table made by an
// earlier release, rows and all. Running it again, or on a database migrated with the
// files from [Migrations], changes nothing. An invalid name returns a *[ConfigError].
func MigrateTable(ctx context.Context, db *sql.DB, d *Dialect, table string) error {
	t, err := parseTableName(table)
	if err != nil {
		return err
	}
	return migrateTable(ctx, db, d, t, false)
}

// migrateTable is MigrateTable of t; partitioned makes the CREATE TABLE that of a
// partitioned table (MigratePartitionedTable, PostgreSQL).
func migrateTable(ctx context.Context, db *sql.DB, dd *dialect, t tableName, partitioned bool) (err error) {
	up := dd.ddl(dd, t).up
	if partitioned {
		up = slices.Clone(up)
		if up[0], err = partitionedCreate(up[0]); err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s: begin: %w", t, err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	for _, s := range up {
		if _, err := tx.ExecContext(ctx, s.sql); err != nil {
			return fmt.Errorf("migrate %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", t, err)
	}
	for _, m := range dd.ddl(dd, t).later {
		has, err := m.applied(ctx, db, dd, t)
		if err != nil {
			return fmt.Errorf("migrate %s: %s: %w", t, m.name, err)
		}
		if has {
			continue
		}
		if err := applyLater(ctx, db, dd, m); err != nil {
			return fmt.Errorf("migrate %s: %s: %w", t, m.name, err)
		}
	}
	return nil
}

// CreateAggregateIndex creates the opt-in index that lists of one aggregate's events
// read (aggregateIndexQuery) on the outbox table with the given name for d, if it does
// not exist. The table must exist.
func CreateAggregateIndex(ctx context.Context, db *sql.DB, d *Dialect, table string) error {
	t, err := parseTableName(table)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, d.aggregateIndexQuery(t)); err != nil && !isDuplicateIndex(err) {
		return fmt.Errorf("create the aggregate index of %s: %w", t, err)
	}
	return nil
}

// SchemaVersion reports the schema version of the outbox table with the given name for
// d: have is 0 when the table does not exist, else 1 plus the later versions of
// [Migrations] it has; latest is the version this release ships. [MigrateTable] brings
// have to latest; [Outbox.Start] refuses a table below it, except for a table that
// lacks only the lease version, on which it runs without the dispatch lease
// (see [LeaseStore]).
func SchemaVersion(ctx context.Context, db *sql.DB, d *Dialect, table string) (have, latest int, err error) {
	t, err := parseTableName(table)
	if err != nil {
		return 0, 0, err
	}
	dd := d
	later := dd.ddl(dd, t).later
	latest = 1 + len(later)
	exists, err := hasColumn(ctx, db, dd, t, "event_id")
	if err != nil || !exists {
		return 0, latest, err
	}
	have = 1
	for _, m := range later {
		has, err := m.applied(ctx, db, dd, t)
		if err != nil {
			return 0, latest, err
		}
		if !has {
			break
		}
		have++
	}
	return have, latest, nil
}

// applyLater runs the statements of one later version: in one transaction where DDL is
// transactional (PostgreSQL, SQLite), else one by one (MySQL, whose versions add the
// column they are detected by in their last statement, after idempotent ones).
func applyLater(ctx context.Context, db *sql.DB, d *dialect, m laterMigration) (err error) {
	if !d.transactionalDDL {
		for _, s := range m.up {
			if _, err := db.ExecContext(ctx, s.sql); err != nil && !isDuplicateIndex(err) {
				return err
			}
		}
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	for _, s := range m.up {
		if _, err := tx.ExecContext(ctx, s.sql); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// applied reports whether the table already has version m: its column, or its index,
// or for a version that drops an index of the key table, that index being gone, or for
// a version that creates a table beside it, that table's column.
func (m laterMigration) applied(ctx context.Context, db *sql.DB, d *dialect, t tableName) (bool, error) {
	if m.droppedKeyIndex != "" {
		has, err := hasIndex(ctx, db, d, keyTable(t), t.indexName(m.droppedKeyIndex))
		return !has, err
	}
	if m.droppedIndex != "" {
		has, err := hasIndex(ctx, db, d, t, t.indexName(m.droppedIndex))
		return !has, err
	}
	if m.index != "" {
		has, err := hasIndex(ctx, db, d, t, t.indexName(m.index))
		if err != nil || has || m.orColumn == "" {
			return has, err
		}
		return hasColumn(ctx, db, d, tableName{schema: t.schema, name: t.indexName(m.orTableOf)}, m.orColumn)
	}
	if m.trigger != "" {
		return hasTrigger(ctx, db, d, t, t.indexName(m.trigger))
	}
	if m.tableOf != "" {
		return hasColumn(ctx, db, d, tableName{schema: t.schema, name: t.indexName(m.tableOf)}, m.column)
	}
	has, err := hasColumn(ctx, db, d, t, m.column)
	if err != nil || has || m.orColumn == "" {
		return has, err
	}
	or := t
	if m.orTableOf != "" {
		or = tableName{schema: t.schema, name: t.indexName(m.orTableOf)}
	}
	return hasColumn(ctx, db, d, or, m.orColumn)
}

// hasTrigger reports whether table t has the named trigger (SQLite: its schema's
// sqlite_master, which no table-valued pragma lists triggers of).
func hasTrigger(ctx context.Context, db *sql.DB, d *dialect, t tableName, name string) (bool, error) {
	schema := "main"
	if t.schema != "" {
		schema = t.schema
	}
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d.quote(schema)+".sqlite_master WHERE type = 'trigger' AND tbl_name = ? AND name = ?",
		t.name, name).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look for trigger %s: %w", name, err)
	}
	return n > 0, nil
}

// isDuplicateIndex reports MySQL's error 1061 (duplicate key name): an ADD INDEX of a
// migration that stopped after it and runs again (MySQL has no ADD INDEX IF NOT
// EXISTS), which finds the index made.
func isDuplicateIndex(err error) bool { return strings.Contains(err.Error(), "Error 1061") }

// hasIndex reports whether table t has the named index.
func hasIndex(ctx context.Context, db *sql.DB, d *dialect, t tableName, index string) (bool, error) {
	return inCatalog(ctx, db, d, t, "index", index, [3]string{
		"SELECT COUNT(*) FROM pragma_index_list(?2, COALESCE(?1, 'main')) WHERE name = ?3",
		"SELECT COUNT(*) FROM pg_indexes WHERE schemaname = COALESCE($1, current_schema()) AND tablename = $2 AND indexname = $3",
		"SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND INDEX_NAME = ?",
	})
}

// hasColumn reports whether table t has the named column.
func hasColumn(ctx context.Context, db *sql.DB, d *dialect, t tableName, column string) (bool, error) {
	return inCatalog(ctx, db, d, t, "column", column, [3]string{
		"SELECT COUNT(*) FROM pragma_table_info(?2, COALESCE(?1, 'main')) WHERE name = ?3",
		"SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2 AND column_name = $3",
		"SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?",
	})
}

// inCatalog runs the catalog query of d (SQLite, PostgreSQL, MySQL in that order in qs),
// which takes the schema (NULL: the connection's current one), the table and the name,
// and reports whether it counted a row.
func inCatalog(ctx context.Context, db *sql.DB, d *dialect, t tableName, kind, name string, qs [3]string) (bool, error) {
	var schema any
	if t.schema != "" {
		schema = t.schema
	}
	q := qs[2]
	switch d {
	case sqliteDialect:
		q = qs[0]
	case postgresDialect:
		q = qs[1]
	}
	var n int
	if err := db.QueryRowContext(ctx, q, schema, t.name, name).Scan(&n); err != nil {
		return false, fmt.Errorf("look for %s %s: %w", kind, name, err)
	}
	return n > 0, nil
}

// ignoreDone drops the error a rollback returns after the transaction already ended.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
