package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// TestLogLevels: an event whose listener fails twice and ends DEAD, with the outbox
// started and stopped around it. INFO has exactly one line for the start and one for the
// stop; each failed attempt that will be retried is one WARN line with its number and
// the next attempt's due time; DEAD is one ERROR line with the reason; the parts'
// lifecycle lines are at DEBUG.
func TestLogLevels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		logs := newLogSink()
		store := outboxtest.NewMemoryStore()
		ob, err := outbox.New(nil, outbox.Config{Store: store, Logger: logs.logger(), MaxAttempts: 3,
			Retry: outbox.ExponentialBackoff{Base: time.Second, Max: time.Second}, SkipRecent: -1})
		mustOK(t, err)
		mustOK(t, ob.Register("", "Bounce", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			return errors.New("mailbox unavailable")
		})))
		mustOK(t, ob.Start(t.Context()))
		at := time.Now().Add(-time.Minute)
		store.Put(outbox.Event{ID: "e1", Type: "Bounce", AggregateType: outbox.GlobalAggregateType,
			Payload: json.RawMessage(`{}`), Status: outbox.StatusNew, CreatedAt: at, AvailableAt: at})
		for range 3 {
			if _, err := outboxtest.Poll(t.Context(), ob); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			time.Sleep(2 * time.Second) // past any retry's due time (1 s, jitter up to 1.5 s)
		}
		mustOK(t, ob.Stop(t.Context()))

		var infos []string
		for _, r := range logs.atLevel(slog.LevelInfo) {
			infos = append(infos, r.msg)
		}
		if want := []string{"outbox started", "outbox stopped"}; !slices.Equal(infos, want) {
			t.Errorf("INFO lines %q, want %q", infos, want)
		}
		warns := logs.atLevel(slog.LevelWarn)
		if len(warns) != 2 {
			t.Fatalf("%d WARN lines, want 2 (one per retried attempt): %+v", len(warns), warns)
		}
		for i, w := range warns {
			if w.attrs["attempt"] != fmt.Sprint(i+1) || w.attrs["next_attempt_at"] == "" ||
				w.attrs["error"] != "mailbox unavailable" || w.attrs["event_id"] != "e1" {
				t.Errorf("WARN %d = %q %v, want attempt=%d, next_attempt_at, error and event_id", i, w.msg, w.attrs, i+1)
			}
		}
		errs := logs.atLevel(slog.LevelError)
		if len(errs) != 1 || errs[0].msg != "event moved to dead" || errs[0].attrs["reason"] != "mailbox unavailable" ||
			errs[0].attrs["attempts"] != "3" {
			t.Errorf("ERROR lines %+v, want one DEAD line with attempts=3 and the reason", errs)
		}
		for _, msg := range []string{"dispatcher started", "poller started", "purger started",
			"dispatcher stopped", "poller stopped", "purger stopped"} {
			if n := len(logs.find(slog.LevelDebug, msg)); n != 1 {
				t.Errorf("%d DEBUG %q lines, want 1", n, msg)
			}
		}
	})
}

// TestBareTransactionWarns: a write through a transaction without after-commit hooks,
// while this process has a hot path, logs a WARN that names the executor, the caller
// and the fix: at once, then at most once a minute with the writes not logged in
// between. A transaction with hooks, a disabled hot path and WriterOnly mode (without a
// Notifier) log nothing.
func TestBareTransactionWarns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		logs := newLogSink()
		ob, err := outbox.New(nil, outbox.Config{Store: outboxtest.NewMemoryStore(), Logger: logs.logger(), PurgeInterval: -1})
		mustOK(t, err)
		write := func(tx outbox.Executor) {
			t.Helper()
			if _, err := ob.Writer().Write(t.Context(), tx, outbox.Envelope{Type: "T", Payload: 1}); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			write(fakeTx{})
		}
		warns := logs.find(slog.LevelWarn, "no after-commit hooks")
		if len(warns) != 1 {
			t.Fatalf("%d WARN lines after 3 bare writes, want 1: %+v", len(warns), warns)
		}
		w := warns[0]
		if w.attrs["executor"] != "outbox_test.fakeTx" || !strings.Contains(w.attrs["caller"], "logs_test.go:") ||
			w.attrs["writes_not_logged"] != "0" || !strings.Contains(w.msg, "hot path") || !strings.Contains(w.msg, "outbox.RunInTx") {
			t.Errorf("WARN %q %v, want the executor, a caller in logs_test.go, writes_not_logged=0 and the fix", w.msg, w.attrs)
		}
		write(&hookedTx{}) // hooks: the hot path sees the commit
		time.Sleep(time.Minute)
		write(fakeTx{})
		if warns = logs.find(slog.LevelWarn, "no after-commit hooks"); len(warns) != 2 || warns[1].attrs["writes_not_logged"] != "2" {
			t.Errorf("WARN lines a minute later: %+v, want a second one with writes_not_logged=2", warns)
		}
	})
	for _, cfg := range []outbox.Config{{HotQueueSize: -1}, {Mode: outbox.WriterOnly}} {
		logs := newLogSink()
		cfg.Store, cfg.Logger, cfg.PurgeInterval = outboxtest.NewMemoryStore(), logs.logger(), -1
		ob, err := outbox.New(nil, cfg)
		mustOK(t, err)
		if _, err := ob.Writer().Write(t.Context(), fakeTx{}, outbox.Envelope{Type: "T", Payload: 1}); err != nil {
			t.Fatal(err)
		}
		if warns := logs.atLevel(slog.LevelWarn); len(warns) != 0 {
			t.Errorf("mode %s, HotQueueSize %d: WARN lines %+v, want none (no hot path to miss)", cfg.Mode, cfg.HotQueueSize, warns)
		}
	}
}
