package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestPauseOnEveryDatabase (docs/listeners.md, pause): a paused subscription's events,
// written through the hot path after the pause, ordered ones among them, stay pending
// with no attempt, pinned to it, while another subscription's events of the same
// transaction are delivered; its load shows it paused. Resume delivers them once each,
// the ordered key in order.
func TestPauseOnEveryDatabase(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 100 * time.Millisecond})
		mail, search := newDeliveries(nil), newDeliveries(nil)
		if err := a.ob.Register("Order", "Mail", mail); err != nil {
			t.Fatal(err)
		}
		if err := a.ob.Register("Order", "Search", search); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		ctx := outbox.WithActor(t.Context(), "ops")
		if err := a.ob.Events().Pause(ctx, "Order/Mail", "smtp down"); err != nil {
			t.Fatal(err)
		}
		var envs []outbox.Envelope
		for i := range 5 {
			envs = append(envs, outbox.Envelope{Type: "Mail", AggregateType: "Order", OrderKey: "k1", Payload: i})
		}
		envs = append(envs, outbox.Envelope{Type: "Mail", AggregateType: "Order", Payload: "unordered"})
		for i := range 3 {
			envs = append(envs, outbox.Envelope{Type: "Search", AggregateType: "Order", Payload: i})
		}
		var ids []string
		err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
			var err error
			ids, err = a.ob.Writer().WriteAll(ctx, tx, envs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the search events delivered", func() bool { return search.total() == 3 })
		// The poller pins the two pending mail events (the key's head and the unordered
		// one); the key's other four wait behind its head.
		pinned := func() int {
			page, err := a.ob.Events().List(ctx, outbox.EventQuery{Status: outbox.StatusNew,
				EventFilter: outbox.EventFilter{Listener: "Order/Mail"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Events {
				if e.Attempts != 0 {
					t.Fatalf("paused event %s has %d attempts", e.ID, e.Attempts)
				}
			}
			return len(page.Events)
		}
		eventually(t, "the paused events pinned", func() bool { return pinned() == 2 })
		if n := mail.total(); n != 0 {
			t.Fatalf("the paused subscription got %d events", n)
		}
		loads, err := a.ob.Events().Subscriptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range loads {
			if l.Paused != (l.Listener == "Order/Mail") || l.Queued != 0 {
				t.Fatalf("load %+v: want Order/Mail alone paused, nothing queued", l)
			}
		}
		if err := a.ob.Events().Resume(ctx, "Order/Mail"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the mail events delivered after Resume", func() bool { return mail.total() == 6 })
		var key []string
		for _, e := range mail.seen() {
			if e.OrderKey != "" {
				key = append(key, e.ID)
			}
		}
		if !slices.Equal(key, ids[:5]) {
			t.Fatalf("key k1 delivered in the order %v, want %v", key, ids[:5])
		}
		for _, id := range ids[:6] {
			if n := mail.of(id); n != 1 {
				t.Fatalf("%s delivered %d times", id, n)
			}
		}
	})
}

// TestPauseIsGlobalInMultiNode: a pause made through one node holds on the other; the
// events written through that other node's hot path, and those its poller claims, are
// pinned and their claims cleared (none waits out ClaimTTL); a resume through the
// second node delivers every one.
func TestPauseIsGlobalInMultiNode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		got := newDeliveries(nil)
		cfg := outbox.Config{ClaimTTL: time.Minute, PollInterval: 100 * time.Millisecond}
		n1, n2 := c.node(t, cfg, got), c.node(t, cfg, got)
		ctx := t.Context()
		if err := n1.Events().Pause(ctx, "Thing/Ping", ""); err != nil {
			t.Fatal(err)
		}
		paused := func(ob *outbox.Outbox) bool {
			loads, err := ob.Events().Subscriptions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return len(loads) == 1 && loads[0].Paused
		}
		eventually(t, "both nodes paused", func() bool { return paused(n1) && paused(n2) })
		var want []string
		for range 10 {
			id, err := writeVia(ctx, c.db, n2.Writer())
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		want = append(want, c.seed(t, "old-", 10)...)
		eventually(t, "every event pinned and unclaimed", func() bool {
			n := 0
			for _, id := range want {
				e, err := c.store.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if e.Status == outbox.StatusNew && e.Listener == "Thing/Ping" && e.LockedBy == "" {
					n++
				}
			}
			return n == len(want)
		})
		if n := got.total(); n != 0 {
			t.Fatalf("%d events delivered while paused", n)
		}
		if err := n2.Events().Resume(ctx, "Thing/Ping"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "every event delivered after Resume", func() bool {
			for _, id := range want {
				if got.of(id) == 0 {
					return false
				}
			}
			return true
		})
	})
}

// TestPauseMigrationUpgradesATableWithRows: a table of the version before the pause
// (its pause table dropped), holding rows, starts with one WARN and delivers them;
// Pause says the table lacks the migration; MigrateTable adds the table, keeps the rows,
// and Pause then works.
func TestPauseMigrationUpgradesATableWithRows(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		db, table := b.open(t)
		if err := outbox.MigrateTable(ctx, db, b.dialect, table); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "DROP TABLE "+quoteTable(b.dialect, table+"_pause")); err != nil {
			t.Fatal(err)
		}
		have, latest, err := outbox.SchemaVersion(ctx, db, b.dialect, table)
		if want := versionOf(t, b.dialect, "pause") - 1; err != nil || have != want {
			t.Fatalf("without the pause table: version %d of %d, %v; want %d", have, latest, err, want)
		}
		s, err := outbox.NewSQLStore(db, b.dialect, outbox.SQLStoreConfig{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-time.Minute)
		var events []outbox.Event
		for i := range 3 {
			events = append(events, outbox.Event{ID: fmt.Sprintf("old-%d", i), Type: "Ping", AggregateType: "Thing",
				Payload: []byte(`{}`), CreatedAt: at, AvailableAt: at})
		}
		if _, err := s.Insert(ctx, db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		start := func(logs *logSink, got *deliveries) *outbox.Outbox {
			t.Helper()
			ob, err := outbox.New(db, outbox.Config{Dialect: b.dialect, Table: table, Logger: logs.logger(),
				PollInterval: 50 * time.Millisecond, SkipRecent: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.Register("Thing", "Ping", got); err != nil {
				t.Fatal(err)
			}
			if err := ob.Start(ctx); err != nil {
				t.Fatalf("Start: %v", err)
			}
			return ob
		}
		logs, got := newLogSink(), newDeliveries(nil)
		ob := start(logs, got)
		eventually(t, "the old rows delivered", func() bool { return got.total() == 3 })
		if w := logs.find(slog.LevelWarn, "no pause table"); len(w) != 1 {
			t.Fatalf("WARN lines about the pause table %+v, want one", logs.atLevel(slog.LevelWarn))
		}
		if err := ob.Events().Pause(ctx, "Thing/Ping", ""); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Pause without the pause table: %v, want ErrUnsupported", err)
		}
		if err := ob.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := outbox.MigrateTable(ctx, db, b.dialect, table); err != nil {
			t.Fatalf("MigrateTable: %v", err)
		}
		if have, latest, err := outbox.SchemaVersion(ctx, db, b.dialect, table); err != nil || have != latest {
			t.Fatalf("after MigrateTable: version %d of %d, %v", have, latest, err)
		}
		for _, e := range events {
			if got, err := s.Get(ctx, e.ID); err != nil || got.Status != outbox.StatusDone {
				t.Fatalf("row %s after the upgrade: %+v, %v; want DONE", e.ID, got, err)
			}
		}
		logs = newLogSink()
		ob = start(logs, newDeliveries(nil))
		defer func() {
			if err := ob.Stop(ctx); err != nil {
				t.Error(err)
			}
		}()
		if err := ob.Events().Pause(ctx, "Thing/Ping", ""); err != nil {
			t.Fatalf("Pause after the upgrade: %v", err)
		}
		if w := logs.find(slog.LevelWarn, "pause"); len(w) != 0 {
			t.Errorf("WARN lines about the pause after the upgrade: %+v", w)
		}
	})
}

// TestPauseHoldsInAProcessStartedDuringIt: a process that starts while a subscription
// is paused (paused by another process: here directly in the table) reads the pause
// before it takes any event, so an event its hot path gets at once is not delivered;
// the poller pins it. (Before, the set was first read by the poller's first cycle, and
// such events went through: the fault suite's pause check caught it.)
func TestPauseHoldsInAProcessStartedDuringIt(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 100 * time.Millisecond})
		got := newDeliveries(nil)
		if err := a.ob.Register("Order", "Mail", got); err != nil {
			t.Fatal(err)
		}
		s, err := outbox.NewSQLStore(a.db, b.dialect, outbox.SQLStoreConfig{Table: a.table})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.(storage.PauseStore).SetPaused(t.Context(), storage.SetPausedParams{Listener: "Order/Mail", Pause: true,
			Entry: outbox.AuditEntry{ID: outbox.NewID(), At: time.Now(), Actor: "other process", Action: outbox.AuditPause,
				Target: "Order/Mail"}}); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		var id string
		err = outbox.RunInTx(t.Context(), a.db, func(ctx context.Context, tx *outbox.Tx) error {
			var err error
			id, err = a.ob.Writer().Write(ctx, tx, outbox.Envelope{Type: "Mail", AggregateType: "Order", Payload: 1})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the event pinned to the paused subscription", func() bool {
			e, err := s.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			return e.Listener == "Order/Mail" || e.Status != outbox.StatusNew
		})
		if e, _ := s.Get(t.Context(), id); e.Status != outbox.StatusNew || got.total() != 0 {
			t.Fatalf("event %s is %v and the listener got %d events; want it NEW and none delivered", id, e.Status, got.total())
		}
	})
}

// versionOf returns the number of d's migration named name (0009_pause: 9), from the
// files outbox.Migrations ships.
func versionOf(t *testing.T, d outbox.Dialect, name string) int {
	t.Helper()
	ups, err := fs.Glob(outbox.Migrations(d), "*_"+name+".up.sql")
	if err != nil || len(ups) != 1 {
		t.Fatalf("%s: migration %s: %v, %v", d.Name(), name, ups, err)
	}
	n, err := strconv.Atoi(strings.SplitN(ups[0], "_", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
