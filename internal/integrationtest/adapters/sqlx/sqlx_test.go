package outboxsqlx_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/jmoiron/sqlx"

	outboxsqlx "github.com/outboxkit/outbox/adapters/sqlx"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/adaptertest"
)

// driverNames maps a backend to the database/sql driver its *sql.DB was opened with, so
// sqlx picks the right bind type.
var driverNames = map[string]string{"sqlite": "sqlite", "postgres": "pgx", "mysql": "mysql"}

type bundle struct {
	*adaptertest.Bundle
	db *sqlx.DB
}

func setup(t *testing.T, be adaptertest.Backend) *bundle {
	t.Helper()
	b := adaptertest.Setup(t, be, adaptertest.Options{})
	// sqlx.NewDb wraps the harness's *sql.DB; the harness closes it.
	return &bundle{Bundle: b, db: sqlx.NewDb(b.DB, driverNames[be.Name])}
}

// placeOrder inserts an order and its event in a RunInTx transaction; body runs last and
// decides the outcome.
func (b *bundle) placeOrder(ctx context.Context, eventID, orderID string, body func(tx *sqlx.Tx) error) error {
	return outboxsqlx.RunInTx(ctx, b.db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO `+b.Orders+` (id) VALUES (?)`), orderID); err != nil {
			return err
		}
		if _, err := outboxsqlx.Write(ctx, tx, b.Writer, b.Envelope(eventID, orderID)); err != nil {
			return err
		}
		if body != nil {
			return body(tx)
		}
		return nil
	})
}

func TestCommitDeliversThroughHotPath(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		id := outbox.NewID()
		if err := b.placeOrder(context.Background(), id, "o-1", nil); err != nil {
			t.Fatalf("run in tx: %v", err)
		}
		b.WaitDelivered(t, id) // the poller runs once an hour: this is the hot path
		if !b.HasOrder(t, "o-1") {
			t.Error("business row missing")
		}
		if got := b.HotEnqueued(); got != 1 {
			t.Errorf("hot enqueued %d, want 1", got)
		}
	})
}

func TestWriteAllDeliversEveryEvent(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		var ids []string
		err := outboxsqlx.RunInTx(context.Background(), b.db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
			var err error
			ids, err = outboxsqlx.WriteAll(ctx, tx, b.Writer, []outbox.Envelope{
				b.Envelope(outbox.NewID(), "o-1"), b.Envelope(outbox.NewID(), "o-2"),
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		b.WaitDelivered(t, ids...)
	})
}

func TestRollbackWritesAndDeliversNothing(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()
		errBoom := errors.New("boom")
		failed, panicked := outbox.NewID(), outbox.NewID()

		err := b.placeOrder(ctx, failed, "o-failed", func(*sqlx.Tx) error { return errBoom })
		if !errors.Is(err, errBoom) {
			t.Fatalf("got %v, want fn's error", err)
		}

		func() {
			defer func() {
				if r := recover(); r != "listener bug" {
					t.Errorf("recovered %v, want the panic from fn", r)
				}
			}()
			_ = b.placeOrder(ctx, panicked, "o-panicked", func(*sqlx.Tx) error { panic("listener bug") })
		}()

		b.AssertNotDelivered(t, failed, panicked)
		for _, id := range []string{failed, panicked} {
			if _, ok := b.Status(t, id); ok {
				t.Errorf("event %s has a row after rollback", id)
			}
		}
		if b.HasOrder(t, "o-failed") || b.HasOrder(t, "o-panicked") {
			t.Error("business row present after rollback")
		}
		if got := b.EventRows(t); got != b.Sentinels() {
			t.Errorf("outbox rows %d, want only the %d sentinels", got, b.Sentinels())
		}
	})
}

func TestWriteOutsideTransaction(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()
		for name, tx := range map[string]*sqlx.Tx{"nil": nil, "zero": {}} {
			if _, err := outboxsqlx.Write(ctx, tx, b.Writer, b.Envelope(outbox.NewID(), "o")); !errors.Is(err, outbox.ErrNoTransaction) {
				t.Errorf("%s tx: got %v, want ErrNoTransaction", name, err)
			}
			if _, err := outboxsqlx.WriteAll(ctx, tx, b.Writer, []outbox.Envelope{b.Envelope(outbox.NewID(), "o")}); !errors.Is(err, outbox.ErrNoTransaction) {
				t.Errorf("%s tx: WriteAll got %v, want ErrNoTransaction", name, err)
			}
		}
		err := outboxsqlx.RunInTx(ctx, b.db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
			_, err := outboxsqlx.Write(ctx, tx, nil, b.Envelope(outbox.NewID(), "o"))
			return err
		})
		if !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("nil writer: got %v, want ErrInvalidArgument", err)
		}
		if err := outboxsqlx.RunInTx(ctx, nil, nil, nil); !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("nil db: got %v, want ErrInvalidArgument", err)
		}
		if err := outboxsqlx.RunInTx(ctx, b.db, nil, nil); !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("nil fn: got %v, want ErrInvalidArgument", err)
		}
		if got := b.EventRows(t); got != 0 {
			t.Errorf("outbox rows %d, want 0", got)
		}
	})
}

func TestPlainTransactionIsDeliveredByPoller(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := setup(t, be)
		ctx := context.Background()
		var ids []string
		for range 2 {
			tx, err := b.db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := outboxsqlx.Write(ctx, tx, b.Writer, b.Envelope(outbox.NewID(), "o"))
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		b.Settle(t)
		for _, id := range ids {
			if s, _ := b.Status(t, id); s != outbox.StatusNew {
				t.Fatalf("event %s is %v before polling; a plain transaction has no hot path", id, s)
			}
		}
		if n := b.Poll(t); n != 2 {
			t.Errorf("poll handed over %d events, want 2", n)
		}
		b.WaitDelivered(t, ids...)
		if n := b.LogCount(slog.LevelWarn, "no after-commit hooks"); n != 1 {
			t.Errorf("no-hooks warning logged %d times, want once (at most one a minute)", n)
		}
	})
}

// TestOtherTransactionInContextGetsNoHooks writes through a transaction RunInTx did not
// start while the ctx carries another one: its events must not ride on the other
// transaction's commit.
func TestOtherTransactionInContextGetsNoHooks(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		if be.Name == "sqlite" {
			t.Skip("SQLite allows one write transaction at a time; two open ones would deadlock")
		}
		b := setup(t, be)
		id := outbox.NewID()
		err := outboxsqlx.RunInTx(context.Background(), b.db, nil, func(ctx context.Context, _ *sqlx.Tx) error {
			other, err := b.db.BeginTxx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := outboxsqlx.Write(ctx, other, b.Writer, b.Envelope(id, "o")); err != nil {
				_ = other.Rollback()
				return err
			}
			return other.Rollback()
		})
		if err != nil {
			t.Fatal(err)
		}
		b.AssertNotDelivered(t, id)
		if _, ok := b.Status(t, id); ok {
			t.Error("rolled-back event has a row")
		}
	})
}

// TestFailedCommitRunsNoHotPath makes the commit itself fail with a deferred unique
// constraint, which PostgreSQL checks at COMMIT. MariaDB has no deferred constraints, and
// the code path under test is the same on every database.
func TestFailedCommitRunsNoHotPath(t *testing.T) {
	t.Parallel()
	b := setup(t, adaptertest.Backend{Name: "postgres", Dialect: outbox.Postgres})
	ctx := context.Background()
	uniq := b.Qualify("uniq")
	if _, err := b.DB.ExecContext(ctx, `CREATE TABLE `+uniq+` (k INT UNIQUE DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	id := outbox.NewID()
	err := b.placeOrder(ctx, id, "o-1", func(tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO `+uniq+` (k) VALUES (1), (1)`)
		return err
	})
	if err == nil {
		t.Fatal("commit succeeded; want the deferred constraint to fail it")
	}
	b.AssertNotDelivered(t, id)
	if got := b.HotEnqueued(); got != b.Sentinels() {
		t.Errorf("hot enqueued %d, want only the %d sentinels", got, b.Sentinels())
	}
}
