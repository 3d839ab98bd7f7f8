package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestMySQLPurgeAndReplayRace: Purge (oldest finished first) and Replay by filter
// (oldest created first) run at the same time over the same DEAD rows, whose two
// orders are opposite, so their READ COMMITTED statements lock rows in opposite orders
// and InnoDB resolves the cycle by failing one with a deadlock (1213). Both are one
// statement in their own transaction, so they are retried, as claims are: neither may
// return the error to its caller (a purge loop logs it; an admin replay would fail).
func TestMySQLPurgeAndReplayRace(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	const rows = 40
	var failures []error
	for round := range 30 {
		events := make([]outbox.Event, rows)
		for i := range events {
			created := base.Add(time.Duration(i) * time.Second)
			events[i] = outbox.Event{ID: fmt.Sprintf("r%02d-%02d", round, i), Type: "T", AggregateType: "A",
				Payload: []byte(`{}`), CreatedAt: created, AvailableAt: created}
		}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for i, e := range events { // finished in the opposite order
			deadAt := base.Add(time.Duration(rows-i) * time.Second)
			if _, err := b.store.MarkDead(ctx, storage.MarkDeadParams{ID: e.ID, DeadAt: deadAt, Reason: "r"}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wg.Go(func() {
			if _, err := b.store.Purge(ctx, storage.PurgeParams{Before: time.Now(), Limit: rows}); err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}
		})
		wg.Go(func() {
			if _, err := b.store.Replay(ctx, storage.ReplayParams{Limit: rows, Now: time.Now()}); err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}
		})
		wg.Wait()
	}
	for _, err := range failures {
		t.Error(err)
	}
}

// TestMySQLStatusUpdatesAndPurgeRace: outcome updates (MarkDead, MarkDone, Reschedule)
// of pending rows run while Purge deletes finished rows and Replay brings DEAD ones
// back. InnoDB can pick an outcome update as the victim of a deadlock with them; the
// update is one statement on its own, so it is retried instead of failing (a failed
// outcome update leaves the event for the poller, which delivers it again).
func TestMySQLStatusUpdatesAndPurgeRace(t *testing.T) {
	t.Parallel()
	b := setupMySQL(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	const rows = 40
	var mu sync.Mutex
	var failures []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, err)
	}
	for round := range 100 {
		events := make([]outbox.Event, 2*rows)
		for i := range events {
			created := base.Add(time.Duration(i) * time.Second)
			events[i] = outbox.Event{ID: fmt.Sprintf("s%02d-%02d", round, i), Type: "T", AggregateType: "A",
				Payload: []byte(`{}`), CreatedAt: created, AvailableAt: created}
		}
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Insert(ctx, tx, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for i := range rows { // the purge's rows: DEAD an hour ago, interleaved with the others
			if _, err := b.store.MarkDead(ctx, storage.MarkDeadParams{ID: events[2*i].ID, DeadAt: base, Reason: "r"}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := b.store.Purge(ctx, storage.PurgeParams{Before: time.Now(), Limit: rows}); err != nil {
				fail(err)
			}
		})
		wg.Go(func() {
			if _, err := b.store.Replay(ctx, storage.ReplayParams{Limit: rows / 2, Now: time.Now()}); err != nil {
				fail(err)
			}
		})
		wg.Go(func() {
			for i := range rows {
				id := events[2*i+1].ID
				var err error
				switch i % 3 {
				case 0:
					_, err = b.store.MarkDead(ctx, storage.MarkDeadParams{ID: id, DeadAt: time.Now(), Reason: "r"})
				case 1:
					_, err = b.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{id}, DoneAt: time.Now()})
				default:
					_, err = b.store.Reschedule(ctx, storage.RescheduleParams{ID: id, Status: outbox.StatusRetry,
						AvailableAt: time.Now(), CountAttempt: true, LastError: "e"})
				}
				if err != nil {
					fail(err)
				}
			}
		})
		wg.Wait()
	}
	for _, err := range failures {
		t.Error(err)
	}
}
