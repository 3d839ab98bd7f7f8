package outboxfx_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// The config type converts to outbox.Config without loss: it covers every field.
var _ = outbox.Config(outboxfx.Config{})

func TestModuleDeliversThroughHotPath(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		testHotPath(t, b, outboxfx.Module)
	})
}

// TestListenersOnlyAppDelivers is the wiring of an app that registers listeners and
// takes nothing from the outbox (its events are written elsewhere): fx builds nothing
// that nothing depends on, so a constructor provided with fx.Provide would never run
// and the events would stay NEW. The first thing one tries, fx.Provide(outboxfx.Module),
// makes fx.New and Start fail with an error that says to pass the module to fx.New; the
// module passed to fx.New delivers the events written before and after the start.
func TestListenersOnlyAppDelivers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		tb := setup(t, b)
		// The events are written with an Outbox of their own, as another service would.
		writer, err := outbox.New(tb.db, outbox.Config{Dialect: tb.dialect, Table: tb.table, Mode: outbox.WriterOnly, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		before := []string{tb.write(t, writer.Writer(), "before-1"), tb.write(t, writer.Writer(), "before-2")}

		cfg := tb.config()
		cfg.PollInterval = 50 * time.Millisecond
		cfg.SkipRecent = -1
		l := newRecordingListener(false)
		wiring := func(outboxOption fx.Option) []fx.Option {
			return []fx.Option{
				fx.Supply(cfg),
				outboxOption,
				tb.provideDB(),
				fx.Provide(outboxfx.AsListener(l.asListener())),
				// Nothing takes the *outbox.Writer, the *outbox.Outbox or the Events.
			}
		}

		t.Run("ModuleInProvide", func(t *testing.T) {
			app := fx.New(append(wiring(fx.Provide(outboxfx.Module)), fx.NopLogger)...)
			requireErrorContains(t, app.Err(), "fx.Option should be passed to fx.New directly, not to fx.Provide", `fx.Module("outbox"`)
			err := app.Start(t.Context())
			if err == nil || err.Error() != app.Err().Error() {
				t.Fatalf("Start = %v, want the error of fx.New", err)
			}
			if got := l.handled(); len(got) != 0 {
				t.Errorf("the listener handled %v in an app that did not start", got)
			}
		})

		t.Run("Module", func(t *testing.T) {
			app := fxtest.New(t, wiring(outboxfx.Module)...)
			app.RequireStart()
			after := []string{tb.writeBare(t, writer.Writer(), "after-1"), tb.writeBare(t, writer.Writer(), "after-2")}
			written := append(before, after...)
			tb.metrics.await(t, len(written), outbox.PathCold)
			requireStatus(t, writer, outbox.StatusDone, written...)
			app.RequireStop()

			got := l.handled()
			slices.Sort(got)
			slices.Sort(written)
			if !slices.Equal(got, written) {
				t.Errorf("listener handled %v, want %v", got, written)
			}
		})
	})
}

// testHotPath starts an app wired with wiring, writes events in transactions and
// checks that the hot path delivered them and that the app provides the writer and the
// events of the Outbox it provides.
func testHotPath(t *testing.T, b backend, wiring fx.Option) {
	tb := setup(t, b)
	l := newRecordingListener(false)
	var (
		ob   *outbox.Outbox
		w    *outbox.Writer
		dead *outbox.Events
	)
	app := fxtest.New(t,
		fx.Supply(tb.config()),
		wiring,
		tb.provideDB(),
		fx.Provide(outboxfx.AsListener(l.asListener())),
		fx.Populate(&ob, &w, &dead),
	)
	if w != ob.Writer() || dead != ob.Events() {
		t.Error("the provided writer and events are not the Outbox's")
	}
	app.RequireStart()

	var written []string
	for _, order := range ids(3) {
		written = append(written, tb.write(t, w, order))
	}
	tb.metrics.await(t, len(written), outbox.PathHot)
	requireStatus(t, ob, outbox.StatusDone, written...)
	app.RequireStop()

	got := l.handled()
	slices.Sort(got)
	slices.Sort(written)
	if !slices.Equal(got, written) {
		t.Errorf("listener handled %v, want %v", got, written)
	}
	if n, err := dead.CountDead(t.Context(), outbox.DeadFilter{}); err != nil || n != 0 {
		t.Errorf("dead events: %d, %v; want 0", n, err)
	}
}

// TestModuleStartsWithoutConsumers checks that adding the module is enough: nothing in
// the app depends on the Outbox, and events written before the app started are
// delivered by the poller when it starts.
func TestModuleStartsWithoutConsumers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		tb := setup(t, b)
		// Write with an Outbox of its own, before the app exists.
		pre, err := outbox.New(tb.db, outbox.Config{Dialect: tb.dialect, Table: tb.table, Mode: outbox.WriterOnly, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		var written []string
		for _, order := range ids(3) {
			written = append(written, tb.write(t, pre.Writer(), order))
		}

		cfg := tb.config()
		cfg.SkipRecent = -1 // the events were just written
		l := newRecordingListener(false)
		app := fxtest.New(t,
			fx.Supply(cfg),
			outboxfx.Module,
			tb.provideDB(),
			fx.Provide(outboxfx.AsListener(l.asListener())),
		)
		app.RequireStart()
		tb.metrics.await(t, len(written), outbox.PathCold)
		requireStatus(t, pre, outbox.StatusDone, written...)
		app.RequireStop()
	})
}

// TestStopDrainsQueuedEvents stops the app while one delivery is blocked and four
// events wait in the hot queue: Stop lets them all finish within fx's stop context.
func TestStopDrainsQueuedEvents(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		tb := setup(t, b)
		cfg := tb.config()
		cfg.Workers = 1
		pollerStopped := newSignalHandler("poller stopped")
		cfg.Logger = slog.New(pollerStopped)
		l := newRecordingListener(true)
		var (
			ob *outbox.Outbox
			w  *outbox.Writer
		)
		app := fxtest.New(t,
			fx.Supply(cfg),
			outboxfx.Module,
			tb.provideDB(),
			fx.Provide(outboxfx.AsListener(l.asListener())),
			fx.Populate(&ob, &w),
		)
		app.RequireStart()

		var written []string
		for _, order := range ids(5) {
			written = append(written, tb.write(t, w, order))
		}
		l.awaitHandling(t) // the only worker holds one event
		if hot, _ := outboxtest.QueueDepths(ob); hot != len(written)-1 {
			t.Fatalf("hot queue holds %d events, want %d", hot, len(written)-1)
		}

		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
			defer cancel()
			stopped <- app.Stop(ctx)
		}()
		select {
		case <-pollerStopped.ch: // Stop is under way: the dispatcher stops next
		case <-time.After(waitTimeout):
			t.Fatal("the poller did not stop")
		}
		l.open()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatalf("Stop = %v, want nil", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("Stop did not return")
		}

		if got := l.handled(); len(got) != len(written) {
			t.Errorf("listener handled %d events, want %d", len(got), len(written))
		}
		tb.metrics.await(t, len(written), outbox.PathHot)
		requireStatus(t, ob, outbox.StatusDone, written...)
	})
}

// TestStopDeadlineLeavesEventsPending stops the app with a listener that never
// finishes: Stop returns at fx's deadline, and the queued events stay in the table,
// delivered by the poller of the next app.
func TestStopDeadlineLeavesEventsPending(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		tb := setup(t, b)
		cfg := tb.config()
		cfg.Workers = 1
		// A stop that abandons a running attempt leaves the dispatch lease to expire
		// (the attempt may still run): the next app delivers once it has.
		cfg.LeaseTTL = 2 * time.Second
		stuck := newRecordingListener(true) // never opened
		var (
			ob *outbox.Outbox
			w  *outbox.Writer
		)
		app := fxtest.New(t,
			fx.Supply(cfg),
			outboxfx.Module,
			tb.provideDB(),
			fx.Provide(outboxfx.AsListener(stuck.asListener())),
			fx.Populate(&ob, &w),
		)
		app.RequireStart()
		var written []string
		for _, order := range ids(3) {
			written = append(written, tb.write(t, w, order))
		}
		stuck.awaitHandling(t)

		// The stuck listener never returns, so Stop always reaches the deadline; a short
		// one could pass before fx even calls the outbox's OnStop hook on a loaded
		// machine, and the graceful Stop below would then wait for the listener timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := app.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want context.DeadlineExceeded", err)
		}
		// fx returns at the deadline without waiting for the hook; Stop again waits
		// until the first Stop has cancelled the delivery and its workers returned.
		if err := ob.Stop(context.Background()); err != nil {
			t.Fatalf("second Stop = %v", err)
		}
		requireStatus(t, ob, outbox.StatusNew, written...)
		if got := stuck.handled(); len(got) != 0 {
			t.Errorf("the stuck listener completed %v", got)
		}

		// The next app's poller delivers them.
		cfg.Metrics = newDispatchRecorder()
		cfg.SkipRecent = -1
		l := newRecordingListener(false)
		next := fxtest.New(t,
			fx.Supply(cfg),
			outboxfx.Module,
			tb.provideDB(),
			fx.Provide(outboxfx.AsListener(l.asListener())),
		)
		next.RequireStart()
		cfg.Metrics.(*dispatchRecorder).await(t, len(written), outbox.PathCold)
		requireStatus(t, ob, outbox.StatusDone, written...)
		next.RequireStop()
	})
}

// TestRunLoopsOutliveStartContext ends OnStart's context right after the app started,
// as fx.App.Run and fxtest do, and checks that the dispatcher and the poller still
// deliver afterwards.
func TestRunLoopsOutliveStartContext(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		tb := setup(t, b)
		cfg := tb.config()
		cfg.PollInterval = 50 * time.Millisecond
		l := newRecordingListener(false)
		var w *outbox.Writer
		app := fx.New(
			fx.NopLogger,
			fx.Supply(cfg),
			outboxfx.Module,
			tb.provideDB(),
			fx.Provide(outboxfx.AsListener(l.asListener())),
			fx.Populate(&w),
		)
		startCtx, cancel := context.WithTimeout(context.Background(), app.StartTimeout())
		if err := app.Start(startCtx); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-startCtx.Done()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
			defer cancel()
			if err := app.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})

		tb.write(t, w, "hot")
		tb.metrics.await(t, 1, outbox.PathHot)
		// A bare *sql.Tx has no after-commit hooks: the poller delivers the event once
		// it is older than SkipRecent.
		tb.writeBare(t, w, "cold")
		tb.metrics.await(t, 1, outbox.PathCold)
	})
}

// TestStartFailsWithoutTable checks that OnStart reports a missing table.
func TestStartFailsWithoutTable(t *testing.T) {
	t.Parallel()
	db := backends[0].open(t)
	app := fx.New(
		fx.NopLogger,
		fx.Supply(outboxfx.Config{Dialect: outbox.SQLite, Logger: quietLogger()}),
		outboxfx.Module,
		fx.Provide(func() *sql.DB { return db }),
	)
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	err := app.Start(t.Context())
	requireErrorContains(t, err, "outbox: start: table check")
}

// TestStopLeavesNothingRunning checks with goleak that a stopped app leaves no
// goroutine behind. It is not parallel: goleak.VerifyNone needs a quiet process.
func TestStopLeavesNothingRunning(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the DB is closed
	tb := setup(t, backends[0])
	l := newRecordingListener(false)
	var w *outbox.Writer
	app := fxtest.New(t,
		fx.Supply(tb.config()),
		outboxfx.Module,
		tb.provideDB(),
		fx.Provide(outboxfx.AsListener(l.asListener())),
		fx.Populate(&w),
	)
	app.RequireStart()
	tb.write(t, w, "o-1")
	tb.metrics.await(t, 1, outbox.PathHot)
	app.RequireStop()
}
