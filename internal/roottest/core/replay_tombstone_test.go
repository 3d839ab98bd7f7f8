package outbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
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
	if n, err := ob.Store().(outbox.DeadStore).Replay(ctx, outbox.ReplayParams{IDs: []string{id}, Now: time.Now().Add(-time.Second)}); err != nil || n != 1 {
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
