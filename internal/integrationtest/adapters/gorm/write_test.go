package outboxgorm_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
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
			if id, err := outboxgorm.Write(tx, b.Writer, env); !errors.Is(err, outbox.ErrNoTransaction) || id != "" {
				t.Errorf("%s: Write = %q, %v; want \"\", ErrNoTransaction", name, id, err)
			}
			if ids, err := outboxgorm.WriteAll(tx, b.Writer, []outbox.Envelope{env, env}); !errors.Is(err, outbox.ErrNoTransaction) || ids != nil {
				t.Errorf("%s: WriteAll = %v, %v; want nil, ErrNoTransaction", name, ids, err)
			}
			if exec, err := outboxgorm.Executor(tx); !errors.Is(err, outbox.ErrNoTransaction) || exec != nil {
				t.Errorf("%s: Executor = %v, %v; want nil, ErrNoTransaction", name, exec, err)
			}
		}
		err := outboxgorm.Transaction(context.Background(), b.gdb, func(tx *gorm.DB) error {
			_, err := outboxgorm.Write(tx, nil, env)
			return err
		})
		if !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("nil writer: %v, want ErrInvalidArgument", err)
		}
		err = outboxgorm.Transaction(context.Background(), b.gdb, func(tx *gorm.DB) error {
			_, err := outboxgorm.WriteAll(tx, nil, []outbox.Envelope{env})
			return err
		})
		if !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("nil writer: WriteAll = %v, want ErrInvalidArgument", err)
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
		// write writes the event labelled label, with its own ID as the aggregate ID, and
		// checks the ID Write returns.
		write := func(tx *gorm.DB, label string) error {
			id, err := outboxgorm.Write(tx, b.Writer, b.Envelope(ev[label], ev[label]))
			if err == nil && id != ev[label] {
				t.Errorf("%s: Write returned ID %q, want %q", label, id, ev[label])
			}
			return err
		}
		err := b.gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := b.insertOrder(tx, ev["transaction"]); err != nil {
				return err
			}
			if err := write(tx, "transaction"); err != nil {
				return err
			}
			// Our Transaction inside a plain one is a savepoint of the plain one.
			if err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
				return write(tx, "nested")
			}); err != nil {
				return err
			}
			_ = outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
				if err := write(tx, "rolledBack"); err != nil {
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
		if err := write(tx, "begin"); err != nil {
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
		for _, id := range pick(ev, "transaction", "begin", "nested") {
			if got := b.EventIDsFor(t, id); !slices.Equal(got, []string{id}) {
				t.Errorf("rows of event %s: %v, want one with its ID", id, got)
			}
		}
		if n := b.LogCount(slog.LevelWarn, "no after-commit hooks"); n != 1 {
			t.Errorf("no-hooks warning logged %d times, want 1 (at most one a minute)", n)
		}
	})
}

// TestWriteReturnsRowIDs: Write and WriteAll return the IDs the writer gave the events,
// which are the IDs of the rows they inserted (read back from the table), in the order
// of the envelopes; an empty batch writes nothing and returns no ID.
func TestWriteReturnsRowIDs(t *testing.T) {
	t.Parallel()
	forEach(t, modes, func(t *testing.T, b *bundle, m mode) {
		ctx := context.Background()
		// No envelope has an ID: the writer assigns them. Each has an aggregate ID of its
		// own, by which its row is found.
		run := outbox.NewID()
		one := "o-one-" + run
		batch := []string{"o-batch0-" + run, "o-batch1-" + run, "o-batch2-" + run}
		var (
			oneID    string
			batchIDs []string
		)
		err := outboxgorm.Transaction(ctx, b.gdb, func(tx *gorm.DB) error {
			tx = m.in(tx)
			var err error
			if oneID, err = outboxgorm.Write(tx.Where("1 = 1"), b.Writer, b.Envelope("", one)); err != nil {
				return err
			}
			envs := make([]outbox.Envelope, len(batch))
			for i, order := range batch {
				envs[i] = b.Envelope("", order)
			}
			if batchIDs, err = outboxgorm.WriteAll(tx, b.Writer, envs); err != nil {
				return err
			}
			empty, err := outboxgorm.WriteAll(tx, b.Writer, nil)
			if err != nil || len(empty) != 0 {
				t.Errorf("WriteAll(nil) = %v, %v; want no IDs, nil", empty, err)
			}
			return err
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if oneID == "" {
			t.Fatal("Write returned no ID")
		}
		if got := b.EventIDsFor(t, one); !slices.Equal(got, []string{oneID}) {
			t.Errorf("row of Write's event: %v, want [%s]", got, oneID)
		}
		if len(batchIDs) != len(batch) {
			t.Fatalf("WriteAll returned %d IDs, want %d", len(batchIDs), len(batch))
		}
		for i, order := range batch {
			if got := b.EventIDsFor(t, order); !slices.Equal(got, []string{batchIDs[i]}) {
				t.Errorf("row of WriteAll's event %d: %v, want [%s]", i, got, batchIDs[i])
			}
		}
		if slices.Contains(batchIDs, oneID) || len(slices.Compact(slices.Sorted(slices.Values(batchIDs)))) != len(batchIDs) {
			t.Errorf("IDs are not distinct: Write %s, WriteAll %v", oneID, batchIDs)
		}
		b.WaitDelivered(t, append([]string{oneID}, batchIDs...)...)
	})
}
