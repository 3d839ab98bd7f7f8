package outboxbun_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"testing"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/schema"

	outboxbun "github.com/outboxkit/outbox/adapters/bun"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/internal/adaptertest"
)

var errBoom = errors.New("boom")

// bundle is the harness's bundle with a bun.DB over its database. The bun.DB is never
// closed: closing it would close the harness's *sql.DB, which the harness closes itself.
type bundle struct {
	*adaptertest.Bundle
	bun *bun.DB
}

func setup(t *testing.T, be adaptertest.Backend) *bundle {
	t.Helper()
	b := adaptertest.Setup(t, be, adaptertest.Options{})
	var d schema.Dialect
	switch be.Name {
	case "postgres":
		d = pgdialect.New()
	case "mysql":
		d = mysqldialect.New()
	default:
		d = sqlitedialect.New()
	}
	return &bundle{Bundle: b, bun: bun.NewDB(b.DB, d)}
}

// order inserts a business row through bun, which rewrites the ? placeholder.
func (b *bundle) order(ctx context.Context, tx bun.Tx, id string) error {
	_, err := tx.NewRaw("INSERT INTO "+b.Orders+" (id) VALUES (?)", id).Exec(ctx)
	return err
}

// write inserts a business row and an event for it.
func (b *bundle) write(ctx context.Context, tx bun.Tx, eventID string) error {
	orderID := "o-" + eventID
	if err := b.order(ctx, tx, orderID); err != nil {
		return err
	}
	_, err := outboxbun.Write(ctx, tx, b.Writer, b.Envelope(eventID, orderID))
	return err
}

// assertGone checks that the events and their business rows were never committed and
// that the events are never delivered.
func (b *bundle) assertGone(t *testing.T, ids ...string) {
	t.Helper()
	b.AssertNotDelivered(t, ids...)
	for _, id := range ids {
		if _, ok := b.Status(t, id); ok {
			t.Errorf("event %s has a row; it was rolled back", id)
		}
		if b.HasOrder(t, "o-"+id) {
			t.Errorf("order o-%s exists; it was rolled back", id)
		}
	}
}

// assertPolled checks that the events were committed but not handed to the hot path,
// then runs the poller and waits for their delivery.
func (b *bundle) assertPolled(t *testing.T, ids ...string) {
	t.Helper()
	b.Settle(t)
	for _, id := range ids {
		if s, ok := b.Status(t, id); !ok || s != outbox.StatusNew {
			t.Errorf("event %s: status %v (row %v) before polling, want NEW", id, s, ok)
		}
		if !b.HasOrder(t, "o-"+id) {
			t.Errorf("order o-%s missing", id)
		}
	}
	if n := b.Poll(t); n != len(ids) {
		t.Errorf("poll handed over %d events, want %d", n, len(ids))
	}
	b.WaitDelivered(t, ids...)
}

func newIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = outbox.NewID()
	}
	return ids
}

func TestRunInTxCommit(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()
		one, batch := outbox.NewID(), newIDs(2)
		err := outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := b.write(ctx, tx, one); err != nil {
				return err
			}
			if err := b.order(ctx, tx, "o-batch"); err != nil {
				return err
			}
			ids, err := outboxbun.WriteAll(ctx, tx, b.Writer, []outbox.Envelope{
				b.Envelope(batch[0], "o-batch"), b.Envelope(batch[1], "o-batch"),
			})
			if err == nil && len(ids) != 2 {
				t.Errorf("WriteAll returned %d IDs, want 2", len(ids))
			}
			return err
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		// The poller runs once an hour: a delivery now came through the hot path.
		b.WaitDelivered(t, append(batch, one)...)
		if !b.HasOrder(t, "o-"+one) || !b.HasOrder(t, "o-batch") {
			t.Error("business rows missing")
		}
	})
}

func TestRunInTxRollback(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()
		failed, panicked := outbox.NewID(), outbox.NewID()

		err := outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := b.write(ctx, tx, failed); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("RunInTx returned %v, want %v", err, errBoom)
		}

		func() {
			defer func() {
				if r := recover(); r != errBoom {
					t.Errorf("recovered %v, want the panic of fn", r)
				}
			}()
			_ = outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
				if err := b.write(ctx, tx, panicked); err != nil {
					return err
				}
				panic(errBoom)
			})
		}()

		b.assertGone(t, failed, panicked)
		if n := b.HotEnqueued(); n != 2 { // the sentinels of AssertNotDelivered only
			t.Errorf("hot queue took %d events, want the 2 sentinels", n)
		}
	})
}

func TestRunInTxNested(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()

		t.Log("a failed nested RunInTx loses its own events only")
		a, nb, c := outbox.NewID(), outbox.NewID(), outbox.NewID()
		err := outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := b.write(ctx, tx, a); err != nil {
				return err
			}
			err := outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
				if err := b.write(ctx, tx, nb); err != nil {
					return err
				}
				return errBoom
			})
			if !errors.Is(err, errBoom) {
				t.Errorf("nested RunInTx returned %v, want %v", err, errBoom)
			}
			return b.write(ctx, tx, c)
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		b.WaitDelivered(t, a, c)
		b.assertGone(t, nb)

		t.Log("a nested panic rolls the savepoint back and reaches the enclosing fn")
		a, nb = outbox.NewID(), outbox.NewID()
		err = outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := b.write(ctx, tx, a); err != nil {
				return err
			}
			func() {
				defer func() {
					if r := recover(); r != errBoom {
						t.Errorf("recovered %v, want the nested panic", r)
					}
				}()
				_ = outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
					if err := b.write(ctx, tx, nb); err != nil {
						return err
					}
					panic(errBoom)
				})
			}()
			return nil
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		b.WaitDelivered(t, a)
		b.assertGone(t, nb)

		t.Log("doubly nested: the innermost fails, the middle one commits")
		ids := newIDs(4) // outer, middle, innermost (fails), middle after it
		err = outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := b.write(ctx, tx, ids[0]); err != nil {
				return err
			}
			return outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
				if err := b.write(ctx, tx, ids[1]); err != nil {
					return err
				}
				err := outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
					if err := b.write(ctx, tx, ids[2]); err != nil {
						return err
					}
					return errBoom
				})
				if !errors.Is(err, errBoom) {
					t.Errorf("innermost RunInTx returned %v, want %v", err, errBoom)
				}
				return b.write(ctx, tx, ids[3])
			})
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		b.WaitDelivered(t, ids[0], ids[1], ids[3])
		b.assertGone(t, ids[2])

		t.Log("a nested success is dispatched only with the outer commit")
		ids = newIDs(2)
		err = outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			return outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
				return b.write(ctx, tx, ids[0])
			})
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		b.WaitDelivered(t, ids[0])
		err = outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
				return b.write(ctx, tx, ids[1])
			}); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("RunInTx returned %v, want %v", err, errBoom)
		}
		b.assertGone(t, ids[1])
	})
}

// TestBunSavepointInRunInTx checks bun's own savepoints inside RunInTx: they share the
// *sql.Tx, so their events must not take the hot path, or a savepoint rolled back would
// publish an event that was never committed.
func TestBunSavepointInRunInTx(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()

		t.Log("bun's tx.RunInTx rolled back: no row, no delivery")
		outer, viaSavepoint, viaOuter := outbox.NewID(), outbox.NewID(), outbox.NewID()
		err := outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := b.write(ctx, tx, outer); err != nil {
				return err
			}
			err := tx.RunInTx(ctx, nil, func(ctx context.Context, sp bun.Tx) error {
				if err := b.write(ctx, sp, viaSavepoint); err != nil {
					return err
				}
				// The enclosing tx, with the context bun passes: no hot path either.
				if err := b.write(ctx, tx, viaOuter); err != nil {
					return err
				}
				return errBoom
			})
			if !errors.Is(err, errBoom) {
				t.Errorf("tx.RunInTx returned %v, want %v", err, errBoom)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		b.WaitDelivered(t, outer)
		b.assertGone(t, viaSavepoint, viaOuter)

		t.Log("bun's tx.RunInTx committed: delivered by the poller")
		ids := newIDs(2)
		err = outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			return tx.RunInTx(ctx, nil, func(ctx context.Context, sp bun.Tx) error {
				if err := b.write(ctx, sp, ids[0]); err != nil {
					return err
				}
				// Our RunInTx inside bun's savepoint: a savepoint without hooks.
				return outboxbun.RunInTx(ctx, sp, nil, func(ctx context.Context, tx bun.Tx) error {
					return b.write(ctx, tx, ids[1])
				})
			})
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		b.assertPolled(t, ids...)

		t.Log("bun's tx.BeginTx: its savepoint Tx gets no hot path")
		rolledBack := outbox.NewID()
		err = outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
			sp, err := tx.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := b.write(ctx, sp, rolledBack); err != nil {
				return err
			}
			return sp.Rollback()
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		b.assertGone(t, rolledBack)
	})
}

func TestWriteWithoutTransaction(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()
		before := b.EventRows(t)
		if _, err := outboxbun.Write(ctx, bun.Tx{}, b.Writer, b.Envelope(outbox.NewID(), "o-1")); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("Write: got %v, want ErrNoTransaction", err)
		}
		if _, err := outboxbun.WriteAll(ctx, bun.Tx{}, b.Writer, []outbox.Envelope{b.Envelope(outbox.NewID(), "o-1")}); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("WriteAll: got %v, want ErrNoTransaction", err)
		}
		if _, err := outboxbun.Executor(ctx, bun.Tx{}); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("Executor: got %v, want ErrNoTransaction", err)
		}
		if after := b.EventRows(t); after != before {
			t.Errorf("outbox rows: %d, want %d", after, before)
		}
	})
}

// TestPlainBunTransaction writes through transactions RunInTx did not begin: the events
// commit with the business rows and the poller delivers them.
func TestPlainBunTransaction(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()
		ids := newIDs(3)
		for _, id := range ids[:2] {
			if err := b.bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				return b.write(ctx, tx, id)
			}); err != nil {
				t.Fatalf("bun RunInTx: %v", err)
			}
		}
		// A bun transaction given to RunInTx is not ours: a savepoint without hooks.
		tx, err := b.bun.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = outboxbun.RunInTx(ctx, tx, nil, func(ctx context.Context, tx bun.Tx) error {
			return b.write(ctx, tx, ids[2])
		})
		if err != nil {
			t.Fatalf("RunInTx: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		b.assertPolled(t, ids...)
		if n := b.LogCount(slog.LevelWarn, "no after-commit hooks"); n != 1 {
			t.Errorf("no-hooks warning logged %d times, want 1 (at most one a minute)", n)
		}
	})
}

// TestExecutor checks which executor each bun.Tx gets.
func TestExecutor(t *testing.T) {
	t.Parallel()
	b := setup(t, adaptertest.Backends[0])
	ctx := context.Background()
	hooked := func(ctx context.Context, tx bun.Tx) bool {
		exec, err := outboxbun.Executor(ctx, tx)
		if err != nil {
			t.Fatalf("Executor: %v", err)
		}
		_, ok := exec.(adapterkit.Registrar)
		if !ok {
			if _, plain := exec.(*sql.Tx); !plain {
				t.Errorf("executor without hooks is %T, want *sql.Tx", exec)
			}
		}
		return ok
	}
	err := outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
		if !hooked(ctx, tx) {
			t.Error("RunInTx's tx with its fn's context has no hooks")
		}
		if hooked(context.Background(), tx) {
			t.Error("RunInTx's tx without its context has hooks")
		}
		if err := outboxbun.RunInTx(ctx, tx, nil, func(inner context.Context, sp bun.Tx) error {
			if !hooked(inner, sp) {
				t.Error("nested RunInTx's tx has no hooks")
			}
			if hooked(inner, tx) {
				t.Error("the enclosing tx with the nested context has hooks")
			}
			if !hooked(ctx, tx) {
				t.Error("the enclosing tx with its own context has no hooks")
			}
			return sp.RunInTx(inner, nil, func(bunCtx context.Context, _ bun.Tx) error {
				if hooked(bunCtx, tx) || hooked(bunCtx, sp) {
					t.Error("an enclosing tx with the context of bun's savepoint has hooks")
				}
				return nil
			})
		}); err != nil {
			return err
		}
		return tx.RunInTx(ctx, nil, func(bunCtx context.Context, sp bun.Tx) error {
			if hooked(ctx, sp) || hooked(bunCtx, sp) {
				t.Error("bun's savepoint has hooks")
			}
			if hooked(bunCtx, tx) {
				t.Error("the enclosing tx with bun's context has hooks")
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("RunInTx: %v", err)
	}
}

// mapCtx is a context whose type is not comparable.
type mapCtx struct {
	context.Context
	_ map[string]int // a map field makes the type not comparable
}

// ctxHook is a bun query hook that replaces the context with a mapCtx.
type ctxHook struct{}

func (ctxHook) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return mapCtx{Context: ctx}
}

func (ctxHook) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestUncomparableContext checks that a query hook storing a context of a type that is
// not comparable in the bun.Tx does not make the comparison panic: the transaction is
// then not recognised, and its events go to the poller.
func TestUncomparableContext(t *testing.T) {
	t.Parallel()
	b := setup(t, adaptertest.Backends[0])
	b.bun = b.bun.WithQueryHook(ctxHook{})
	ctx := context.Background()
	id := outbox.NewID()
	err := outboxbun.RunInTx(ctx, b.bun, nil, func(ctx context.Context, tx bun.Tx) error {
		return b.write(ctx, tx, id)
	})
	if err != nil {
		t.Fatalf("RunInTx: %v", err)
	}
	b.assertPolled(t, id)
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fn := func(context.Context, bun.Tx) error { return nil }
	cases := map[string]error{
		"nil db":       outboxbun.RunInTx(ctx, nil, nil, fn),
		"nil *bun.DB":  outboxbun.RunInTx(ctx, (*bun.DB)(nil), nil, fn),
		"zero bun.Tx":  outboxbun.RunInTx(ctx, bun.Tx{}, nil, fn),
		"nil *bun.Tx":  outboxbun.RunInTx(ctx, (*bun.Tx)(nil), nil, fn),
		"zero Conn":    outboxbun.RunInTx(ctx, bun.Conn{}, nil, fn),
		"nil *Conn":    outboxbun.RunInTx(ctx, (*bun.Conn)(nil), nil, fn),
		"nil fn":       outboxbun.RunInTx(ctx, bun.Tx{}, nil, nil),
		"nil writer":   func() error { _, err := outboxbun.Write(ctx, bun.Tx{}, nil, outbox.Envelope{}); return err }(),
		"nil writer 2": func() error { _, err := outboxbun.WriteAll(ctx, bun.Tx{}, nil, nil); return err }(),
	}
	for name, err := range cases {
		if !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
		}
	}
}
