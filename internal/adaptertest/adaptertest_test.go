package adaptertest_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/adaptertest"
	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }

// TestHarness checks the harness itself with the core's own transaction type, so that an
// adapter test that fails points at the adapter.
func TestHarness(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := adaptertest.Setup(t, be, adaptertest.Options{})
		ctx := context.Background()

		committed, rolledBack := outbox.NewID(), outbox.NewID()
		if err := outbox.RunInTx(ctx, b.DB, func(ctx context.Context, tx *outbox.Tx) error {
			if _, err := tx.ExecContext(ctx, b.InsertOrderSQL(), "o-1"); err != nil {
				return err
			}
			_, err := b.Writer.Write(ctx, tx, b.Envelope(committed, "o-1"))
			return err
		}); err != nil {
			t.Fatalf("commit: %v", err)
		}
		b.WaitDelivered(t, committed)
		if !b.HasOrder(t, "o-1") {
			t.Error("business row missing")
		}
		if got := b.EventIDsFor(t, "o-1"); !slices.Equal(got, []string{committed}) {
			t.Errorf("EventIDsFor(o-1) = %v, want [%s]", got, committed)
		}
		if got := b.EventIDsFor(t, "o-none"); len(got) != 0 {
			t.Errorf("EventIDsFor(o-none) = %v, want none", got)
		}

		errBoom := errors.New("boom")
		err := outbox.RunInTx(ctx, b.DB, func(ctx context.Context, tx *outbox.Tx) error {
			if _, err := b.Writer.Write(ctx, tx, b.Envelope(rolledBack, "o-2")); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("rollback: got %v", err)
		}
		b.AssertNotDelivered(t, rolledBack)
		if _, ok := b.Status(t, rolledBack); ok {
			t.Error("rolled-back event has a row")
		}

		// A plain *sql.Tx: committed atomically, delivered by the poller, warned about once.
		plain := []string{outbox.NewID(), outbox.NewID()}
		for _, id := range plain {
			tx, err := b.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Writer.Write(ctx, tx, b.Envelope(id, "o-"+id)); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		b.Settle(t)
		for _, id := range plain {
			if s, _ := b.Status(t, id); s != outbox.StatusNew {
				t.Errorf("plain-tx event %s: status %v before polling, want NEW", id, s)
			}
		}
		if n := b.Poll(t); n != 2 {
			t.Errorf("poll handed over %d events, want 2", n)
		}
		b.WaitDelivered(t, plain...)
		if n := b.LogCount(slog.LevelWarn, "no after-commit hooks"); n != 1 {
			t.Errorf("no-hooks warning logged %d times, want 1 (at most one a minute)", n)
		}
	})
}
