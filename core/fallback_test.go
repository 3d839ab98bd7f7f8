package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestFallback: a subscription's fallback runs when a delivery is about to become DEAD,
// with the failure's context; its success makes the event FALLBACK, its failure or panic
// DEAD with the fallback's error added. It never runs for a retry.
func TestFallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		listener   func(n int) error
		fallback   func(outbox.Failure) error
		attempts   int // failed attempts when the fallback runs
		wantStatus outbox.Status
		wantError  string // last_error
	}{
		{name: "handled after the last attempt", listener: func(n int) error { return fmt.Errorf("boom %d", n) },
			fallback: func(outbox.Failure) error { return nil }, attempts: 3, wantStatus: outbox.StatusFallback, wantError: "boom 3"},
		{name: "handled after a permanent error", listener: func(int) error { return fmt.Errorf("bad: %w", outbox.ErrUnrecoverable) },
			fallback: func(outbox.Failure) error { return nil }, attempts: 1, wantStatus: outbox.StatusFallback, wantError: "bad: outbox: unrecoverable"},
		{name: "fallback fails", listener: func(n int) error { return fmt.Errorf("boom %d", n) },
			fallback: func(outbox.Failure) error { return errors.New("dead letter topic down") }, attempts: 3,
			wantStatus: outbox.StatusDead, wantError: "boom 3; fallback failed: dead letter topic down"},
		{name: "fallback panics", listener: func(n int) error { return fmt.Errorf("boom %d", n) },
			fallback: func(outbox.Failure) error { panic("compensation bug") }, attempts: 3,
			wantStatus: outbox.StatusDead, wantError: "boom 3; fallback failed: panic: compensation bug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: 3, Retry: fixedDelay(10 * time.Second)})
				var (
					mu       sync.Mutex
					failures []outbox.Failure
					calls    int
				)
				if err := b.reg.Subscribe(outbox.Subscription{Name: "mailer", EventType: "Thing",
					Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
						mu.Lock()
						calls++
						n := calls
						mu.Unlock()
						return tt.listener(n)
					}),
					Fallback: func(ctx context.Context, f outbox.Failure) error {
						if _, ok := ctx.Deadline(); !ok {
							t.Error("the fallback's context has no deadline")
						}
						mu.Lock()
						failures = append(failures, f)
						mu.Unlock()
						return tt.fallback(f)
					},
				}); err != nil {
					t.Fatal(err)
				}
				startPoller(t, b, outbox.PollerConfig{Interval: time.Second, SkipRecent: -1})
				start := time.Now()
				b.write(t, newEvent("e1", "Thing"))
				synctest.Wait()
				for range tt.attempts - 1 {
					got := b.row(t, "e1")
					if got.Status != outbox.StatusRetry {
						t.Fatalf("status %s before the last attempt", got.Status)
					}
					time.Sleep(time.Until(got.AvailableAt))
					synctest.Wait()
				}
				got := b.row(t, "e1")
				if got.Status != tt.wantStatus || got.Attempts != tt.attempts || got.LastError != tt.wantError {
					t.Fatalf("status %s attempts %d last error %q; want %s %d %q", got.Status, got.Attempts, got.LastError,
						tt.wantStatus, tt.attempts, tt.wantError)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(failures) != 1 {
					t.Fatalf("fallback ran %d times, want once", len(failures))
				}
				f := failures[0]
				if f.Event == nil || f.Event.ID != "e1" || f.Listener != "mailer" || f.Attempts != tt.attempts ||
					f.Err == nil || !strings.Contains(tt.wantError, f.Err.Error()) {
					t.Errorf("failure %+v", f)
				}
				wantLast := start.Add(time.Duration(tt.attempts-1) * 10 * time.Second)
				if !f.LastAttemptAt.Equal(wantLast) || f.FirstAttemptAt.After(f.LastAttemptAt) ||
					tt.attempts > 1 && !f.FirstAttemptAt.Before(f.LastAttemptAt) {
					t.Errorf("first attempt %v, last %v; want the last at %v", f.FirstAttemptAt, f.LastAttemptAt, wantLast)
				}
				wantOutcome := outbox.OutcomeDead
				if tt.wantStatus == outbox.StatusFallback {
					wantOutcome = outbox.OutcomeFallback
					if len(b.logs.find(slog.LevelWarn, "delivery failed for good; the fallback handled the event")) != 1 {
						t.Error("no log of the fallback's success")
					}
				}
				ds := b.metrics.dispatches()
				if last := ds[len(ds)-1]; last.Outcome != wantOutcome || last.Listener != "mailer" {
					t.Errorf("last dispatch %+v, want outcome %s", last, wantOutcome)
				}
			})
		})
	}
}

// TestFallbackHardStop: a hard stop while the fallback runs cancels its context and
// leaves the event pending, its attempt not counted.
func TestFallbackHardStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		reg := outbox.NewRegistry()
		d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{MaxAttempts: 1, Logger: newLogSink().logger()})
		if err != nil {
			t.Fatal(err)
		}
		entered := make(chan struct{})
		if err := reg.Subscribe(outbox.Subscription{EventType: "Thing",
			Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return errors.New("no") }),
			Fallback: func(ctx context.Context, _ outbox.Failure) error {
				close(entered)
				<-ctx.Done()
				return ctx.Err()
			},
		}); err != nil {
			t.Fatal(err)
		}
		if err := d.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		e := newEvent("h1", "Thing")
		if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
			t.Fatal(err)
		}
		if err := d.WriterHook().AfterCommit(t.Context(), []outbox.Event{e}); err != nil {
			t.Fatal(err)
		}
		<-entered
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := d.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want the deadline's error", err)
		}
		if got, _ := store.Event("h1"); got.Status != outbox.StatusNew || got.Attempts != 0 {
			t.Errorf("status %s attempts %d; want the event left pending (NEW 0)", got.Status, got.Attempts)
		}
	})
}
