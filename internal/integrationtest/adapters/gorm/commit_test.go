package outboxgorm_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	outboxgorm "github.com/outboxkit/outbox/adapters/gorm"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/adaptertest"
)

// TestTransactionCommitFails: when the commit itself fails, the after-rollback callbacks
// run and nothing reaches the hot path. The failure is made deterministic per database:
// a deferred unique constraint (PostgreSQL), a deferred foreign key (SQLite) and a
// connection killed before the commit (MariaDB, which has no deferred constraints).
func TestTransactionCommitFails(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := adaptertest.Setup(t, be, adaptertest.Options{})
		ctx := context.Background()
		gdb := openGorm(t, b, false)
		var breakCommit func(tx *gorm.DB) error
		afterCommit := func() {}
		switch be.Name {
		case "postgres":
			mustExec(t, gdb, `CREATE TABLE `+b.Qualify("dedup")+` (k INT, CONSTRAINT dedup_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)`)
			breakCommit = func(tx *gorm.DB) error {
				return tx.Exec(`INSERT INTO ` + b.Qualify("dedup") + ` (k) VALUES (1), (1)`).Error
			}
		case "sqlite":
			var conn *sql.Conn
			gdb, conn = sqliteForeignKeys(t, b)
			// A COMMIT that fails on a deferred foreign key leaves SQLite's transaction
			// open, holding the write lock: end it before the harness writes again.
			afterCommit = func() { _, _ = conn.ExecContext(ctx, `ROLLBACK`) }
			mustExec(t, gdb, `CREATE TABLE parent (id INT PRIMARY KEY)`)
			mustExec(t, gdb, `CREATE TABLE child (ref INT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`)
			breakCommit = func(tx *gorm.DB) error {
				return tx.Exec(`INSERT INTO child (ref) VALUES (1)`).Error
			}
		case "mysql":
			breakCommit = func(tx *gorm.DB) error {
				var id int64
				if err := tx.Raw(`SELECT CONNECTION_ID()`).Scan(&id).Error; err != nil {
					return err
				}
				_, err := b.DB.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
				return err
			}
		}

		id := outbox.NewID()
		var counter txCounter
		hotBefore := b.HotEnqueued() - b.Sentinels()
		err := outboxgorm.Transaction(ctx, gdb, func(tx *gorm.DB) error {
			if _, err := outboxgorm.Write(tx, b.Writer, b.Envelope(id, "o-1")); err != nil {
				return err
			}
			exec, err := outboxgorm.Executor(tx)
			if err != nil {
				return err
			}
			counter.register(t, exec)
			return breakCommit(tx)
		})
		afterCommit()
		if err == nil {
			t.Fatal("Transaction succeeded; the commit should have failed")
		}
		t.Logf("commit error: %v", err)
		if c, r := counter.get(); c != 0 || r != 1 {
			t.Errorf("committed %d, rolled back %d; want 0, 1", c, r)
		}
		b.AssertNotDelivered(t, id)
		if _, ok := b.Status(t, id); ok {
			t.Error("event of a failed commit has a row")
		}
		if n := b.HotEnqueued() - b.Sentinels() - hotBefore; n != 0 {
			t.Errorf("%d hot hand-offs besides the harness's sentinels, want 0", n)
		}
	})
}

// sqliteForeignKeys opens GORM on one pinned connection of the bundle's database with
// foreign keys enforced (a per-connection pragma, and a no-op inside a transaction).
func sqliteForeignKeys(t *testing.T, b *adaptertest.Bundle) (*gorm.DB, *sql.Conn) {
	t.Helper()
	ctx := context.Background()
	conn, err := b.DB.Conn(ctx)
	if err != nil {
		t.Fatalf("conn: %v", err)
	}
	t.Cleanup(func() {
		_, _ = conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`)
		_ = conn.Close()
	})
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`); err != nil {
		t.Fatalf("enable foreign keys: %v", err)
	}
	gdb, err := gorm.Open(sqlite.New(sqlite.Config{Conn: conn}), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatalf("open gorm: %v", err)
	}
	return gdb, conn
}

func mustExec(t *testing.T, gdb *gorm.DB, query string) {
	t.Helper()
	if err := gdb.Exec(query).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
