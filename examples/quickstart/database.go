package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	// gorm's SQLite dialect over a pure-Go driver: its go-sqlite package registers the
	// "sqlite" driver (modernc.org/sqlite's engine), so no C compiler is involved. Do not
	// import modernc.org/sqlite beside it: both register the name "sqlite".
	"github.com/glebarez/sqlite"
	"go.uber.org/fx"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	outbox "github.com/outboxkit/outbox/core"
)

// openDB opens the SQLite database at cfg.dbPath and creates the outbox table if it
// does not exist. fx closes the database when the app stops, after the outbox has
// drained (the outbox depends on it, so it stops first).
func openDB(lc fx.Lifecycle, cfg config) (*sql.DB, error) {
	// SQLiteDSN sets WAL mode, a busy timeout and write transactions that take the lock
	// at BEGIN, so concurrent writers wait instead of failing.
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(cfg.dbPath))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.dbPath, err)
	}
	// SQLite has one writer at a time, and connections waiting for the write lock in its
	// busy handler are not served in order: with one connection, writers queue in Go
	// instead, fairly, and the outbox's own updates are not starved.
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Migrate creates the outbox_event table and its indexes; it does nothing when they
	// exist. With a migration tool, apply the SQL files of package outbox instead.
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		return nil, errors.Join(fmt.Errorf("create the outbox table: %w", err), db.Close())
	}
	lc.Append(fx.StopHook(db.Close))
	return db, nil
}

// openGorm puts gorm on top of db, so that gorm and the outbox share one connection pool
// and therefore one transaction, and creates the orders table.
func openGorm(db *sql.DB, logger *slog.Logger) (*gorm.DB, error) {
	gdb, err := gorm.Open(sqlite.Dialector{Conn: db}, &gorm.Config{
		Logger: gormlogger.NewSlogLogger(logger, gormlogger.Config{
			LogLevel:             gormlogger.Warn,
			SlowThreshold:        200 * time.Millisecond,
			ParameterizedQueries: true, // log "?" rather than the customers' data
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("open gorm: %w", err)
	}
	if err := gdb.AutoMigrate(&Order{}); err != nil {
		return nil, fmt.Errorf("create the orders table: %w", err)
	}
	return gdb, nil
}
