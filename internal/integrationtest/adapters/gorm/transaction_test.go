package outboxgorm_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"gorm.io/gorm"

	outboxgorm "github.com/outboxkit/outbox/adapters/gorm"
	outbox "github.com/outboxkit/outbox/core"
)

var errBoom = errors.New("boom")

// TestTransactionCommit: committed events are delivered through the hot path (the
// harness polls once an hour) with the business rows, whether written with Write,
// WriteAll or Executor and the writer, and tx.DB() still works inside the transaction.
func TestTransactionCommit(t *testing.T) {
	t.Parallel()
	forEach(t, modes, func(t *testing.T, b *bundle, m mode) {
		ctx := context.Background()
		ev := ids("write", "all1", "all2", "exec")
		var counter txCounter
		err := outboxgorm.Transaction(ctx, b.gdb, func(tx *gorm.DB) error {
			tx = m.in(tx)
			if err := b.insertOrder(tx, "o-1"); err != nil {
				return err
			}
			id, err := outboxgorm.Write(tx.Where("1 = 1"), b.Writer, b.Envelope(ev["write"], "o-1"))
			if err != nil {
				return err
			}
			if id != ev["write"] {
				t.Errorf("Write returned ID %q, want %q", id, ev["write"])
			}
			all, err := outboxgorm.WriteAll(tx, b.Writer, []outbox.Envelope{b.Envelope(ev["all1"], "o-1"), b.Envelope(ev["all2"], "o-1")})
			if err != nil {
				return err
			}
			if want := pick(ev, "all1", "all2"); !slices.Equal(all, want) {
				t.Errorf("WriteAll returned IDs %v, want %v", all, want)
			}
			exec, err := outboxgorm.Executor(tx.WithContext(ctx))
			if err != nil {
				return err
			}
			counter.register(t, exec)
			id, err = b.Writer.Write(ctx, exec, b.Envelope(ev["exec"], "o-1"))
			if err != nil {
				return err
			}
			if id != ev["exec"] {
				t.Errorf("Write returned ID %q, want %q", id, ev["exec"])
			}
			sqlDB, err := tx.DB()
			if err != nil || sqlDB != b.DB {
				t.Errorf("tx.DB() = %p, %v; want the bundle's *sql.DB %p", sqlDB, err, b.DB)
			}
			if c, _ := counter.get(); c != 0 {
				t.Error("after-commit callback ran before the commit")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		if c, r := counter.get(); c != 1 || r != 0 {
			t.Errorf("callbacks after commit: committed %d, rolled back %d; want 1, 0", c, r)
		}
		b.WaitDelivered(t, pick(ev, "write", "all1", "all2", "exec")...)
		if !b.HasOrder(t, "o-1") {
			t.Error("business row missing")
		}
		want := slices.Sorted(slices.Values(pick(ev, "write", "all1", "all2", "exec")))
		if got := b.EventIDsFor(t, "o-1"); !slices.Equal(got, want) {
			t.Errorf("rows of the transaction's events: %v, want %v", got, want)
		}
	})
}

// TestTransactionRollback: when fn returns an error or panics, nothing is inserted or
// delivered and the after-rollback callbacks run.
func TestTransactionRollback(t *testing.T) {
	t.Parallel()
	forEach(t, modes, func(t *testing.T, b *bundle, m mode) {
		ctx := context.Background()
		for _, panics := range []bool{false, true} {
			id := outbox.NewID()
			order := "o-" + id
			var counter txCounter
			hotBefore := b.HotEnqueued() - b.Sentinels()
			run := func() (recovered any, err error) {
				defer func() { recovered = recover() }()
				return nil, outboxgorm.Transaction(ctx, b.gdb, func(tx *gorm.DB) error {
					tx = m.in(tx)
					if err := b.insertOrder(tx, order); err != nil {
						return err
					}
					if _, err := outboxgorm.Write(tx, b.Writer, b.Envelope(id, order)); err != nil {
						return err
					}
					exec, err := outboxgorm.Executor(tx)
					if err != nil {
						return err
					}
					counter.register(t, exec)
					if panics {
						panic(errBoom)
					}
					return errBoom
				})
			}
			recovered, err := run()
			if panics {
				if recovered != errBoom {
					t.Fatalf("panic: recovered %v, want %v", recovered, errBoom)
				}
			} else if !errors.Is(err, errBoom) || recovered != nil {
				t.Fatalf("Transaction = %v (panic %v), want %v", err, recovered, errBoom)
			}
			if c, r := counter.get(); c != 0 || r != 1 {
				t.Errorf("panic %v: committed %d, rolled back %d; want 0, 1", panics, c, r)
			}
			b.AssertNotDelivered(t, id)
			if _, ok := b.Status(t, id); ok {
				t.Errorf("panic %v: rolled-back event has a row", panics)
			}
			if b.HasOrder(t, order) {
				t.Errorf("panic %v: rolled-back business row exists", panics)
			}
			if n := b.HotEnqueued() - b.Sentinels() - hotBefore; n != 0 {
				t.Errorf("panic %v: %d hot hand-offs besides the harness's sentinels, want 0", panics, n)
			}
		}
	})
}

// TestTransactionSavepoints: events written after a savepoint that is rolled back are
// neither inserted nor delivered, however the savepoint was made; the others are.
func TestTransactionSavepoints(t *testing.T) {
	t.Parallel()
	type writeFunc func(tx *gorm.DB, label string) error
	cases := []struct {
		name string
		// run is the outer transaction's body; it writes events by label.
		run                func(ctx context.Context, tx *gorm.DB, write writeFunc) error
		delivered, dropped []string
	}{
		{
			name: "nested Transaction rolls back",
			run: func(ctx context.Context, tx *gorm.DB, write writeFunc) error {
				if err := write(tx, "A"); err != nil {
					return err
				}
				err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
					if err := write(tx, "B"); err != nil {
						return err
					}
					return errBoom
				})
				if !errors.Is(err, errBoom) {
					return errors.New("nested transaction did not fail")
				}
				return write(tx, "C")
			},
			delivered: []string{"A", "C"}, dropped: []string{"B"},
		},
		{
			name: "gorm nested Transaction rolls back",
			run: func(_ context.Context, tx *gorm.DB, write writeFunc) error {
				if err := write(tx, "A"); err != nil {
					return err
				}
				err := tx.Transaction(func(tx *gorm.DB) error {
					if err := write(tx, "B"); err != nil {
						return err
					}
					return errBoom
				})
				if !errors.Is(err, errBoom) {
					return errors.New("nested transaction did not fail")
				}
				return write(tx, "C")
			},
			delivered: []string{"A", "C"}, dropped: []string{"B"},
		},
		{
			name: "gorm nested Transaction panics",
			run: func(_ context.Context, tx *gorm.DB, write writeFunc) error {
				if err := write(tx, "A"); err != nil {
					return err
				}
				func() {
					defer func() { _ = recover() }()
					_ = tx.Transaction(func(tx *gorm.DB) error {
						if err := write(tx, "B"); err != nil {
							return err
						}
						panic(errBoom)
					})
				}()
				return write(tx, "C")
			},
			delivered: []string{"A", "C"}, dropped: []string{"B"},
		},
		{
			name: "SavePoint and RollbackTo",
			run: func(_ context.Context, tx *gorm.DB, write writeFunc) error {
				if err := write(tx, "A"); err != nil {
					return err
				}
				if err := tx.SavePoint("manual_sp").Error; err != nil {
					return err
				}
				if err := write(tx, "B"); err != nil {
					return err
				}
				if err := tx.SavePoint("later_sp").Error; err != nil {
					return err
				}
				if err := write(tx, "D"); err != nil {
					return err
				}
				if err := tx.RollbackTo("manual_sp").Error; err != nil {
					return err
				}
				if err := write(tx, "C"); err != nil {
					return err
				}
				// manual_sp survives its rollback: roll back to it once more.
				if err := write(tx, "E"); err != nil {
					return err
				}
				return tx.RollbackTo("manual_sp").Error
			},
			delivered: []string{"A"}, dropped: []string{"B", "C", "D", "E"},
		},
		{
			name: "SQL savepoint statements",
			run: func(_ context.Context, tx *gorm.DB, write writeFunc) error {
				for _, step := range []string{"A", "savepoint sql_sp;", "B", "  Rollback To Savepoint SQL_SP ", "release savepoint sql_sp", "C"} {
					var err error
					if len(step) == 1 {
						err = write(tx, step)
					} else {
						err = tx.Exec(step).Error
					}
					if err != nil {
						return err
					}
				}
				return nil
			},
			delivered: []string{"A", "C"}, dropped: []string{"B"},
		},
		{
			name: "nested Transaction commits",
			run: func(ctx context.Context, tx *gorm.DB, write writeFunc) error {
				if err := write(tx, "A"); err != nil {
					return err
				}
				if err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error { return write(tx, "B") }); err != nil {
					return err
				}
				if err := tx.Transaction(func(tx *gorm.DB) error { return write(tx, "D") }); err != nil {
					return err
				}
				return write(tx, "C")
			},
			delivered: []string{"A", "B", "C", "D"},
		},
		{
			name: "doubly nested",
			run: func(ctx context.Context, tx *gorm.DB, write writeFunc) error {
				if err := write(tx, "A"); err != nil {
					return err
				}
				err := outboxgorm.Transaction(ctx, tx, func(tx *gorm.DB) error {
					if err := write(tx, "B"); err != nil {
						return err
					}
					err := tx.Transaction(func(tx *gorm.DB) error {
						if err := write(tx, "D"); err != nil {
							return err
						}
						return errBoom
					})
					if !errors.Is(err, errBoom) {
						return errors.New("inner-inner transaction did not fail")
					}
					return write(tx, "E")
				})
				if err != nil {
					return err
				}
				return write(tx, "C")
			},
			delivered: []string{"A", "B", "C", "E"}, dropped: []string{"D"},
		},
	}
	forEach(t, modes, func(t *testing.T, b *bundle, m mode) {
		// The cases share the bundle, which is not safe for concurrent use: they run in
		// turn (the backends and modes run in parallel).
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				ev := ids("A", "B", "C", "D", "E")
				write := func(tx *gorm.DB, label string) error {
					if err := b.insertOrder(tx, ev[label]); err != nil {
						return err
					}
					id, err := outboxgorm.Write(tx, b.Writer, b.Envelope(ev[label], ev[label]))
					if err == nil && id != ev[label] {
						t.Errorf("%s: Write returned ID %q, want %q", label, id, ev[label])
					}
					return err
				}
				err := outboxgorm.Transaction(ctx, b.gdb, func(tx *gorm.DB) error {
					return tc.run(ctx, m.in(tx), write)
				})
				if err != nil {
					t.Fatalf("transaction: %v", err)
				}
				b.WaitDelivered(t, pick(ev, tc.delivered...)...)
				b.AssertNotDelivered(t, pick(ev, tc.dropped...)...)
				for _, l := range tc.dropped {
					if _, ok := b.Status(t, ev[l]); ok {
						t.Errorf("event %s has a row", l)
					}
					if b.HasOrder(t, ev[l]) {
						t.Errorf("business row %s exists", l)
					}
				}
				for _, l := range tc.delivered {
					if !b.HasOrder(t, ev[l]) {
						t.Errorf("business row %s missing", l)
					}
					if got := b.EventIDsFor(t, ev[l]); !slices.Equal(got, []string{ev[l]}) {
						t.Errorf("rows of event %s: %v, want one with its ID", l, got)
					}
				}
			})
		}
	})
}

// TestTransactionInvalid: nil arguments are rejected before anything runs.
func TestTransactionInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := outboxgorm.Transaction(ctx, nil, func(*gorm.DB) error { return nil }); !errors.Is(err, outbox.ErrInvalidArgument) {
		t.Errorf("nil db: %v, want ErrInvalidArgument", err)
	}
	if err := outboxgorm.Transaction(ctx, &gorm.DB{}, func(*gorm.DB) error { return nil }); !errors.Is(err, outbox.ErrInvalidArgument) {
		t.Errorf("zero db: %v, want ErrInvalidArgument", err)
	}
	if err := outboxgorm.Transaction(ctx, &gorm.DB{Statement: &gorm.Statement{}}, nil); !errors.Is(err, outbox.ErrInvalidArgument) {
		t.Errorf("nil fn: %v, want ErrInvalidArgument", err)
	}
}
