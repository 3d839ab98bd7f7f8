package outboxgorm_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"gorm.io/gorm"

	outboxgorm "github.com/outboxkit/outbox/adapters/gorm"
	outbox "github.com/outboxkit/outbox/core"
)

// TestWriteOutsideTransaction: outside a transaction Write fails with ErrNoTransaction
// and inserts nothing; a nil writer is an invalid argument.
func TestWriteOutsideTransaction(t *testing.T) {
	t.Parallel()
	forEach(t, modes[:2], func(t *testing.T, b *bundle, _ mode) {
		rows := b.EventRows(t)
		env := b.Envelope(outbox.NewID(), "o-1")
		for name, tx := range map[string]*gorm.DB{
			"db":          b.gdb,
			"derived":     b.gdb.Where("1 = 1").WithContext(context.Background()),
			"PrepareStmt": b.gdb.Session(&gorm.Session{PrepareStmt: true}),
			"nil":         nil,
			"zero":        {},
		} {
			if err := outboxgorm.Write(tx, b.Writer, env); !errors.Is(err, outbox.ErrNoTransaction) {
				t.Errorf("%s: Write = %v, want ErrNoTransaction", name, err)
			}
			if err := outboxgorm.WriteAll(tx, b.Writer, env, env); !errors.Is(err, outbox.ErrNoTransaction) {
				t.Errorf("%s: WriteAll = %v, want ErrNoTransaction", name, err)
			}
			if exec, err := outboxgorm.Executor(tx); !errors.Is(err, outbox.ErrNoTransaction) || exec != nil {
				t.Errorf("%s: Executor = %v, %v; want nil, ErrNoTransaction", name, exec, err)
			}
		}
		err := outboxgorm.Transaction(context.Background(), b.gdb, func(tx *gorm.DB) error {
			return outboxgorm.Write(tx, nil, env)
		})
		if !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("nil writer: %v, want ErrInvalidArgument", err)
		}
		if n := b.EventRows(t); n != rows {
			t.Errorf("outbox rows: %d, want %d", n, rows)
		}
	})
}

// TestWritePlainGormTransaction: an event written through a GORM transaction that did
// not come from outboxgorm.Transaction is committed atomically and delivered by the
// poller, and the writer says so once at debug level.
func TestWritePlainGormTransaction(t *testing.T) {
	t.Parallel()
	forEach(t, modes[:2], func(t *testing.T, b *bundle, _ mode) {
		ctx := context.Background()
		ev := ids("transaction", "begin", "nested", "rolledBack")
		err := b.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := b.insertOrder(tx, ev["transaction"]); err != nil {
				return err
			}
			if err := outboxgorm.Write(tx, b.Writer, b.Envelope(ev["transaction"], ev["transaction"])); err != nil {
				return err
			}
			// Our Transaction inside a plain one is a savepoint of the plain one.
			if err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
				return outboxgorm.Write(tx, b.Writer, b.Envelope(ev["nested"], ev["nested"]))
			}); err != nil {
				return err
			}
			_ = outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
				if err := outboxgorm.Write(tx, b.Writer, b.Envelope(ev["rolledBack"], ev["rolledBack"])); err != nil {
					return err
				}
				return errBoom
			})
			return nil
		})
		if err != nil {
			t.Fatalf("db.Transaction: %v", err)
		}
		tx := b.gdb.Begin()
		if err := outboxgorm.Write(tx, b.Writer, b.Envelope(ev["begin"], "o-begin")); err != nil {
			t.Fatalf("write after Begin: %v", err)
		}
		if err := tx.Commit().Error; err != nil {
			t.Fatalf("commit: %v", err)
		}

		b.Settle(t)
		for _, id := range pick(ev, "transaction", "begin", "nested") {
			if s, ok := b.Status(t, id); !ok || s != outbox.StatusNew {
				t.Errorf("event %s: status %v (row %v) before polling, want NEW", id, s, ok)
			}
		}
		if _, ok := b.Status(t, ev["rolledBack"]); ok {
			t.Error("event of a rolled-back savepoint has a row")
		}
		if !b.HasOrder(t, ev["transaction"]) {
			t.Error("business row missing")
		}
		if n := b.Poll(t); n != 3 {
			t.Errorf("poll handed over %d events, want 3", n)
		}
		b.WaitDelivered(t, pick(ev, "transaction", "begin", "nested")...)
		if n := b.LogCount(slog.LevelDebug, "no after-commit hooks"); n != 1 {
			t.Errorf("no-hooks debug log written %d times, want 1", n)
		}
	})
}
