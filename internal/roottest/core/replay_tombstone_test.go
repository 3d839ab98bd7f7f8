package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestReplayWithEarlierClockIsDelivered: an event dies on its first attempt and is
// replayed by a process whose clock is behind (another host, or a replay whose Now was
// read just before the event was written), so the replayed row's available_at is
// before the available_at of the copy that was delivered. The dispatcher's tombstone
// for the delivered copy must not take the replayed row for a stale copy and refuse
// it until the tombstone expires (a minute): the replay is delivered promptly.
func TestReplayWithEarlierClockIsDelivered(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLiteDB(t)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, PollInterval: 20 * time.Millisecond, SkipRecent: -1,
		Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	if err := ob.Register("A", "T", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		if calls.Add(1) == 1 {
			return fmt.Errorf("first attempt: %w", outbox.ErrUnrecoverable)
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	var id string
	if err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "T", AggregateType: "A", Payload: []byte(`{}`)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the event is DEAD", func() bool {
		e, err := ob.Store().Get(ctx, id)
		return err == nil && e.Status == outbox.StatusDead
	})
	if n, err := ob.Store().(storage.DeadStore).Replay(ctx, storage.ReplayParams{IDs: []string{id}, Now: time.Now().Add(-time.Second)}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	deadline := time.Now().Add(30 * time.Second) // the tombstone would hold it for a minute
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if calls.Load() < 2 {
		e, _ := ob.Store().Get(ctx, id)
		t.Fatalf("the replayed event was not delivered within 30 s (status %v, available at %s)", e.Status, e.AvailableAt)
	}
}

// slowHandOff is a writer hook whose AfterCommit, which runs before the dispatcher's
// (the hot path), lets the poller read and deliver the committed event first, as a
// catch-up poll may when the writer's goroutine is descheduled between its commit and
// the hot path's hand-off.
type slowHandOff struct {
	outbox.NopWriterHook
	run func()
}

func (h slowHandOff) AfterCommit(context.Context, []outbox.Event) error {
	h.run()
	return nil
}

// TestHotCopyOfAnEventThePollerDeliveredIsRefused: the hot path's copy of an event that
// the poller delivered between the commit and the hand-off is refused, so the event is
// delivered once. The tombstone that refuses it is kept because the write's read stays
// open until its after-commit hooks have run, although no poll read is open any more.
func TestHotCopyOfAnEventThePollerDeliveredIsRefused(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLiteDB(t)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	var ob *outbox.Outbox
	dispatched := dispatchSignal{ch: make(chan struct{}, 10)}
	hook := slowHandOff{run: func() {
		// The poll queues the committed event (0: the poll loop's first cycle, which
		// Start runs, was slow enough to read it first; the cold path has it either way).
		if n, err := outboxtest.Poll(ctx, ob); err != nil || n > 1 {
			t.Errorf("Poll = %d, %v; want the committed event queued", n, err)
			return
		}
		// Dispatched is reported once the DONE outcome is written and the event is no
		// longer in flight: only a tombstone can refuse the hot copy now.
		select {
		case <-dispatched.ch:
		case <-time.After(time.Minute):
			t.Error("the polled event was not dispatched within a minute")
		}
	}}
	var err error
	ob, err = outbox.New(db, outbox.Config{Dialect: outbox.SQLite, PollInterval: time.Hour, SkipRecent: -1,
		WriterHooks: []outbox.WriterHook{hook}, Metrics: dispatched, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Register("A", "T", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		calls.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{ID: "e1", Type: "T", AggregateType: "A", Payload: []byte(`{}`)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := ob.Stop(ctx); err != nil { // delivers whatever the hot path queued
		t.Fatal(err)
	}
	if e, err := ob.Store().Get(ctx, "e1"); err != nil || e.Status != outbox.StatusDone {
		t.Fatalf("e1: %+v, %v; want DONE", e, err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the listener ran %d times, want once: the hot copy of the delivered event was accepted", n)
	}
}

// dispatchSignal signals every event dispatched.
type dispatchSignal struct {
	outbox.NopMetrics
	ch chan struct{}
}

func (m dispatchSignal) Dispatched(outbox.DispatchInfo) { m.ch <- struct{}{} }

// TestSQLitePoolOfSeveralConnectionsIsWarnedAbout: SQLite's busy handler is not fair, so
// through a pool of several connections the outbox's status updates can starve behind
// busy writers (the fault suite's listener-panic scenario fell tens of seconds behind);
// Start says so at Warn, and says nothing with one connection.
func TestSQLitePoolOfSeveralConnectionsIsWarnedAbout(t *testing.T) {
	t.Parallel()
	for _, conns := range []int{0, 4, 1} {
		t.Run(fmt.Sprint(conns), func(t *testing.T) {
			t.Parallel()
			db := testdb.NewSQLiteDB(t)
			db.SetMaxOpenConns(conns)
			ctx := context.Background()
			if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
				t.Fatal(err)
			}
			logs := newLogSink()
			ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite, Logger: logs.logger()})
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := ob.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			warned := len(logs.find(slog.LevelWarn, "SQLite through a pool of more than one connection")) == 1
			if want := conns != 1; warned != want {
				t.Errorf("SetMaxOpenConns(%d): warned %v, want %v", conns, warned, want)
			}
		})
	}
}
