package outbox_test

import (
	"context"
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
	"github.com/outboxkit/outbox/core/storage"
)

func TestNewPurgerValidates(t *testing.T) {
	t.Parallel()
	store := outboxtest.NewMemoryStore()
	tests := []struct {
		name      string
		store     storage.Store
		cfg       outbox.PurgerConfig
		wantField string
	}{
		{name: "zero value", store: store},
		{name: "explicit values", store: store, cfg: outbox.PurgerConfig{
			Interval: time.Minute, Retention: time.Hour, BatchSize: 1, QueryTimeout: -1,
		}},
		{name: "nil store", wantField: "Store"},
		{name: "negative interval", store: store, cfg: outbox.PurgerConfig{Interval: -1}, wantField: "Interval"},
		{name: "negative retention", store: store, cfg: outbox.PurgerConfig{Retention: -time.Hour}, wantField: "Retention"},
		{name: "negative dead retention", store: store, cfg: outbox.PurgerConfig{DeadRetention: -time.Hour}, wantField: "PurgeDeadRetention"},
		{name: "negative batch size", store: store, cfg: outbox.PurgerConfig{BatchSize: -5}, wantField: "BatchSize"},
		{name: "negative undelivered retention", store: store, cfg: outbox.PurgerConfig{UndeliveredRetention: -time.Hour},
			wantField: "PurgeUndeliveredAfter"},
		{name: "query timeout below -1", store: store, cfg: outbox.PurgerConfig{QueryTimeout: -2}, wantField: "QueryTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := outbox.NewPurger(tt.store, tt.cfg)
			if tt.wantField == "" {
				if err != nil || p == nil {
					t.Fatalf("NewPurger = %v, %v; want a purger", p, err)
				}
				return
			}
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField || !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Fatalf("NewPurger error = %v, want ConfigError on %s", err, tt.wantField)
			}
		})
	}
}

type purgeBundle struct {
	store *faultStore
	logs  *logSink
	p     *outbox.Purger
}

func setupPurger(t *testing.T, cfg outbox.PurgerConfig) *purgeBundle {
	t.Helper()
	b := &purgeBundle{store: newFaultStore(), logs: newLogSink()}
	cfg.Logger = b.logs.logger()
	p, err := outbox.NewPurger(b.store, cfg)
	if err != nil {
		t.Fatalf("NewPurger: %v", err)
	}
	b.p = p
	return b
}

// put stores n rows with the given status, finished (or created, for rows without
// done_at) age ago.
func (b *purgeBundle) put(prefix string, n int, status outbox.Status, age time.Duration) {
	at := time.Now().Add(-age)
	for i := range n {
		e := newEvent(fmt.Sprintf("%s-%04d", prefix, i), "Thing")
		e.Status = status
		e.CreatedAt, e.AvailableAt = at.Add(-time.Hour), at.Add(-time.Hour)
		if status == outbox.StatusDone {
			e.DoneAt = at
		} else {
			e.CreatedAt, e.AvailableAt = at, at
		}
		b.store.Put(e)
	}
}

func TestPurgerRunOnce(t *testing.T) {
	t.Parallel()
	week := outbox.DefaultRetention
	tests := []struct {
		name        string
		oldDone     int
		wantDeleted int64
		wantCalls   int
	}{
		{name: "short last batch", oldDone: 1195, wantDeleted: 1200, wantCalls: 3},
		{name: "exact multiple needs an empty batch", oldDone: 995, wantDeleted: 1000, wantCalls: 3},
		{name: "one short batch", oldDone: 10, wantDeleted: 15, wantCalls: 1},
		{name: "nothing to delete", oldDone: 0, wantDeleted: 5, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setupPurger(t, outbox.PurgerConfig{})
				b.put("old-done", tt.oldDone, outbox.StatusDone, week+time.Second)
				b.put("old-dead", 5, outbox.StatusDead, week+time.Second)
				b.put("recent-done", 3, outbox.StatusDone, week-time.Second)
				b.put("recent-dead", 3, outbox.StatusDead, week-time.Second)
				b.put("old-new", 2, outbox.StatusNew, 2*week)
				b.put("old-retry", 2, outbox.StatusRetry, 2*week)
				n, err := b.p.RunOnce(t.Context())
				if err != nil || n != tt.wantDeleted {
					t.Fatalf("RunOnce = %d, %v; want %d, nil", n, err, tt.wantDeleted)
				}
				if got := b.store.purges(); got != tt.wantCalls {
					t.Errorf("Purge calls = %d, want %d", got, tt.wantCalls)
				}
				if got := len(b.store.Events()); got != 10 {
					t.Errorf("%d rows left, want the 10 recent or pending ones", got)
				}
			})
		})
	}
}

func TestPurgerRunOnceReturnsStoreErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupPurger(t, outbox.PurgerConfig{BatchSize: 10})
		b.put("old", 25, outbox.StatusDone, 30*24*time.Hour)
		b.store.purgeErr = func(_ context.Context, call int) error {
			if call == 2 {
				return errors.New("disk full")
			}
			return nil
		}
		n, err := b.p.RunOnce(t.Context())
		if n != 10 || err == nil || err.Error() != "purge: disk full" {
			t.Fatalf("RunOnce = %d, %v; want 10, purge: disk full", n, err)
		}
	})
}

func TestPurgerLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupPurger(t, outbox.PurgerConfig{Retention: time.Hour})
		b.store.purgeErr = func(_ context.Context, call int) error {
			switch call {
			case 1:
				return errors.New("db down")
			case 2:
				return context.Canceled
			}
			return nil
		}
		b.put("a", 3, outbox.StatusDone, 2*time.Hour)
		if err := b.p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := b.p.Stop(context.Background()); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
		synctest.Wait()
		logs := b.logs.atLevel(slog.LevelError)
		if len(logs) != 1 || logs[0].msg != "purge failed" || logs[0].attrs["error"] != "purge: db down" ||
			logs[0].attrs["component"] != "purger" {
			t.Fatalf("error logs = %+v, want one for the failed run", logs)
		}
		time.Sleep(outbox.DefaultPurgeInterval) // second run: context.Canceled, not logged
		synctest.Wait()
		if got := len(b.store.Events()); got != 3 {
			t.Fatalf("%d rows left after two failed runs, want 3", got)
		}
		time.Sleep(outbox.DefaultPurgeInterval)
		synctest.Wait()
		if got := len(b.store.Events()); got != 0 {
			t.Errorf("%d rows left after the third run, want 0", got)
		}
		if got := len(b.logs.atLevel(slog.LevelError)); got != 1 {
			t.Errorf("error logs = %d, want still 1", got)
		}
		if got := b.logs.find(slog.LevelInfo, "purged finished events"); len(got) != 1 || got[0].attrs["deleted"] != "3" ||
			got[0].attrs["took"] == "" {
			t.Errorf("info logs = %+v, want one reporting 3 deleted and the time it took", got)
		}
	})
}

func TestPurgerStartStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupPurger(t, outbox.PurgerConfig{})
		if err := b.p.Stop(t.Context()); err != nil {
			t.Fatalf("Stop before Start = %v", err)
		}
		for range 2 {
			if err := b.p.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		for range 2 {
			if err := b.p.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if got := b.store.purges(); got != 1 {
			t.Errorf("Purge calls = %d, want 1", got)
		}
		// Hard stop cancels a statement that does not return.
		b.store.purgeErr = func(ctx context.Context, _ int) error {
			<-ctx.Done()
			return ctx.Err()
		}
		if err := b.p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := b.p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want DeadlineExceeded", err)
		}
		if logs := b.logs.atLevel(slog.LevelError); len(logs) != 0 {
			t.Errorf("error logs after a hard stop: %+v", logs)
		}
	})
}

func TestPurgerGracefulStopBetweenBatches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupPurger(t, outbox.PurgerConfig{BatchSize: 1})
		b.put("old", 5, outbox.StatusDone, 30*24*time.Hour)
		release := make(chan struct{})
		b.store.purgeErr = func(_ context.Context, call int) error {
			if call == 2 {
				<-release
			}
			return nil
		}
		if err := b.p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // second batch in progress
		stopped := make(chan error)
		go func() { stopped <- b.p.Stop(context.Background()) }()
		synctest.Wait()
		close(release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if got := b.store.purges(); got != 2 {
			t.Errorf("Purge calls = %d, want 2: the batch in progress finishes, no new batch starts", got)
		}
	})
}

func TestPurgerStartStopStress(t *testing.T) {
	t.Parallel()
	p, err := outbox.NewPurger(outboxtest.NewMemoryStore(), outbox.PurgerConfig{Interval: time.Millisecond, Logger: newLogSink().logger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 50 {
				if (g+i)%2 == 0 {
					_ = p.Start(context.Background())
				} else {
					_ = p.Stop(context.Background())
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPurgerDeadRetention: with a DeadRetention, DEAD and FALLBACK rows are kept for it
// while DONE rows keep Retention.
func TestPurgerDeadRetention(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		week := 7 * 24 * time.Hour
		b := setupPurger(t, outbox.PurgerConfig{Retention: week, DeadRetention: 4 * week})
		b.put("old-done", 3, outbox.StatusDone, week+time.Second)
		b.put("old-dead", 2, outbox.StatusDead, week+time.Second)
		b.put("old-fallback", 2, outbox.StatusFallback, week+time.Second)
		b.put("ancient-dead", 4, outbox.StatusDead, 4*week+time.Second)
		b.put("ancient-fallback", 1, outbox.StatusFallback, 4*week+time.Second)
		n, err := b.p.RunOnce(t.Context())
		if err != nil || n != 8 {
			t.Fatalf("RunOnce = %d, %v; want the 3 old DONE and the 5 ancient DEAD and FALLBACK rows", n, err)
		}
		for _, e := range b.store.Events() {
			if !strings.HasPrefix(e.ID, "old-dead") && !strings.HasPrefix(e.ID, "old-fallback") {
				t.Errorf("%s (%s) was kept", e.ID, e.Status)
			}
		}
	})
}

// TestPurgerUndeliveredRetention: with an UndeliveredRetention, NEW, RETRY and WAITING
// rows created longer ago go too, in the same batches as the finished ones, and the
// purger's logs say so.
func TestPurgerUndeliveredRetention(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		day := 24 * time.Hour
		b := setupPurger(t, outbox.PurgerConfig{BatchSize: 4, UndeliveredRetention: 30 * day})
		b.put("old-done", 3, outbox.StatusDone, 8*day)
		b.put("old-new", 2, outbox.StatusNew, 31*day)
		b.put("old-retry", 2, outbox.StatusRetry, 31*day)
		b.put("old-waiting", 2, outbox.StatusWaiting, 31*day)
		b.put("young-new", 1, outbox.StatusNew, 29*day)
		b.put("young-waiting", 1, outbox.StatusWaiting, 29*day)
		if err := b.p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := b.p.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, e := range b.store.Events() {
			left = append(left, e.ID)
		}
		slices.Sort(left)
		if want := []string{"young-new-0000", "young-waiting-0000"}; !slices.Equal(left, want) {
			t.Errorf("rows left %v, want %v", left, want)
		}
		if got := b.store.purges(); got != 3 {
			t.Errorf("Purge calls = %d, want 3 (4 + 4 + 1 rows)", got)
		}
		if got := b.logs.find(slog.LevelInfo, "purged finished and undelivered events"); len(got) != 1 || got[0].attrs["deleted"] != "9" {
			t.Errorf("info logs = %+v, want one reporting 9 deleted", got)
		}
		if got := b.logs.find(slog.LevelDebug, "purger started"); len(got) != 1 || got[0].attrs["undelivered_retention"] != (30*day).String() {
			t.Errorf("start logs = %+v, want one with undelivered_retention", got)
		}
	})
}

// TestConfigPurgeUndeliveredAfter: the retention of undelivered rows is WriterOnly
// mode's alone (a dispatching process must never delete what it has to deliver), needs
// the purge, and is never negative; Start's log says when it is on, and the outbox's
// purge deletes what it names.
func TestConfigPurgeUndeliveredAfter(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, tc := range []struct {
		cfg   outbox.Config
		field string // "" when valid
	}{
		{outbox.Config{Mode: outbox.WriterOnly, PurgeUndeliveredAfter: 30 * day}, ""},
		{outbox.Config{Mode: outbox.WriterOnly}, ""},
		{outbox.Config{PurgeUndeliveredAfter: 30 * day}, "PurgeUndeliveredAfter"},
		{outbox.Config{Mode: outbox.MultiNode, ClaimTTL: time.Minute, PurgeUndeliveredAfter: 30 * day}, "PurgeUndeliveredAfter"},
		{outbox.Config{Mode: outbox.WriterOnly, PurgeUndeliveredAfter: -time.Hour}, "PurgeUndeliveredAfter"},
		{outbox.Config{PurgeUndeliveredAfter: -time.Hour}, "PurgeUndeliveredAfter"},
		{outbox.Config{Mode: outbox.WriterOnly, PurgeInterval: -1, PurgeUndeliveredAfter: 30 * day}, "PurgeUndeliveredAfter"},
	} {
		tc.cfg.Store = outboxtest.NewMemoryStore()
		_, err := outbox.New(nil, tc.cfg)
		var ce *outbox.ConfigError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("mode %s, PurgeUndeliveredAfter %s: %v, want valid", tc.cfg.Mode, tc.cfg.PurgeUndeliveredAfter, err)
		case tc.field != "" && (!errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, outbox.ErrInvalidConfig)):
			t.Errorf("mode %s, PurgeUndeliveredAfter %s: %v, want a ConfigError on %s", tc.cfg.Mode, tc.cfg.PurgeUndeliveredAfter, err, tc.field)
		}
	}

	store, logs := outboxtest.NewMemoryStore(), newLogSink()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeUndeliveredAfter: 30 * day, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	old := newEvent("old", "Thing")
	old.CreatedAt, old.AvailableAt = time.Now().Add(-31*day), time.Now().Add(-31*day)
	young := newEvent("young", "Thing")
	store.Put(old, young)
	if n, err := outboxtest.Purge(t.Context(), ob); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want the old NEW row", n, err)
	}
	if got := store.Events(); len(got) != 1 || got[0].ID != "young" {
		t.Fatalf("rows left %+v, want young", got)
	}
	if err := ob.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := ob.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := logs.find(slog.LevelInfo, "outbox started"); len(got) != 1 || got[0].attrs["purge_undelivered_after"] != (30*day).String() {
		t.Errorf("start logs = %+v, want purge_undelivered_after", got)
	}
}
