package outbox_test

import (
	"context"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestMySQLMarkDoneTakesNoGapLocks: a MarkDone of several events runs while a business
// transaction has inserted an event between them and goes on inserting. Under InnoDB's
// default REPEATABLE READ the multi-row UPDATE's range scan takes next-key locks: it
// waits for the business transaction's uncommitted row while holding the gap before
// it, the business transaction's next insert into that gap waits for the UPDATE, and
// InnoDB kills one of them with a deadlock (1213), sometimes the business transaction.
// MarkDone must neither wait for a business transaction nor make one fail.
func TestMySQLMarkDoneTakesNoGapLocks(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx := context.Background()
	now := time.Now()
	ev := func(id string) outbox.Event {
		return outbox.Event{ID: id, Type: "T", AggregateType: "A", Payload: []byte(`{}`), CreatedAt: now, AvailableAt: now}
	}
	insert := func(exec outbox.Executor, ids ...string) error {
		events := make([]outbox.Event, len(ids))
		for i, id := range ids {
			events[i] = ev(id)
		}
		_, err := b.store.Insert(ctx, exec, storage.InsertParams{Events: events})
		return err
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := insert(tx, "k1", "k4", "k9"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	business, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer business.Rollback()
	if err := insert(business, "k5"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"k1", "k4", "k9"}, DoneAt: now})
		done <- result{n, err}
	}()
	check := func(r result) {
		if r.err != nil || r.n != 3 {
			t.Errorf("MarkDone = %d, %v; want 3, nil", r.n, r.err)
		}
	}
	// A MarkDone that waited for the business transaction would wait until it ends or
	// until InnoDB's lock wait timeout (50 s) fails it; 20 s tells that apart from a
	// MarkDone slowed down by a loaded machine.
	finished := false
	select {
	case r := <-done:
		check(r)
		finished = true
	case <-time.After(20 * time.Second):
		t.Error("MarkDone waits for a business transaction's insert")
	}
	if err := insert(business, "k3"); err != nil {
		t.Fatalf("business insert after MarkDone: %v", err)
	}
	if err := business.Commit(); err != nil {
		t.Fatalf("business commit: %v", err)
	}
	if !finished {
		check(<-done)
	}
}
