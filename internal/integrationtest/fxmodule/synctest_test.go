package outboxfx_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/fx"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/core/outboxtest"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// TestRunLoopsOutliveStartTimeout runs an app with fx's default 15 s start timeout on
// an in-memory store in a synctest bubble, whose clock only moves when every goroutine
// waits, and checks that more than 15 s after the start the dispatcher, the poller and
// the purger all still work.
func TestRunLoopsOutliveStartTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := outboxtest.NewMemoryStore()
		l := newRecordingListener(false)
		var w *outbox.Writer
		app := fx.New(
			fx.NopLogger,
			fx.Supply(outboxfx.Config{
				Store:          store, // no *sql.DB needed
				Logger:         quietLogger(),
				PurgeInterval:  time.Minute,
				PurgeRetention: time.Minute,
			}),
			outboxfx.Module,
			fx.Provide(outboxfx.AsListener(l.asListener())),
			fx.Populate(&w),
		)
		if app.StartTimeout() != fx.DefaultTimeout {
			t.Fatalf("start timeout %s, want fx's default %s", app.StartTimeout(), fx.DefaultTimeout)
		}
		// As fx.App.Run does.
		startCtx, cancel := context.WithTimeout(context.Background(), app.StartTimeout())
		defer cancel()
		if err := app.Start(startCtx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(app.StartTimeout() + time.Second)
		if !errors.Is(startCtx.Err(), context.DeadlineExceeded) {
			t.Fatalf("start context: %v, want its deadline passed", startCtx.Err())
		}

		// The hot path: a transaction with after-commit hooks.
		var tx adapterkit.Callbacks
		hot, err := w.Write(t.Context(), adapterkit.Join(fakeTx{}, &tx), orderPlaced("hot"))
		if err != nil {
			t.Fatal(err)
		}
		tx.Committed()
		synctest.Wait()
		time.Sleep(outbox.DefaultDoneBatchWindow) // the DONE outcome's batch
		synctest.Wait()
		requireMemStatus(t, store, outbox.StatusDone, hot)

		// The poller: a transaction without hooks leaves the event to it.
		cold, err := w.Write(t.Context(), fakeTx{}, orderPlaced("cold"))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		requireMemStatus(t, store, outbox.StatusNew, cold)
		// The poller has been idle since Start: its wait has grown to PollMaxInterval.
		time.Sleep(outbox.DefaultPollMaxInterval + outbox.DefaultSkipRecent)
		synctest.Wait()
		requireMemStatus(t, store, outbox.StatusDone, cold)

		// The purger: both DONE rows are older than the retention at its next run.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := len(store.Events()); n != 0 {
			t.Errorf("%d rows left, want the purger to have deleted both", n)
		}

		stopCtx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
		defer cancel()
		if err := app.Stop(stopCtx); err != nil {
			t.Fatal(err)
		}
	})
}

func requireMemStatus(t *testing.T, store *outboxtest.MemoryStore, want outbox.Status, id string) {
	t.Helper()
	e, ok := store.Event(id)
	if !ok {
		t.Fatalf("event %s not found", id)
	}
	if e.Status != want {
		t.Errorf("event %s: status %s, want %s", id, e.Status, want)
	}
}

// fakeTx looks like a transaction (Commit and Rollback) to the writer; the in-memory
// store never runs its SQL.
type fakeTx struct{}

func (fakeTx) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("fakeTx runs no SQL")
}

func (fakeTx) QueryContext(context.Context, string, ...any) (*sql.Rows, error) {
	return nil, errors.New("fakeTx runs no SQL")
}

func (fakeTx) Commit() error   { return nil }
func (fakeTx) Rollback() error { return nil }
