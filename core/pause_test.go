package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// pauseBundle is an Outbox over a MemoryStore with subscriptions named after their
// event types, each recording what it gets.
type pauseBundle struct {
	ob    *outbox.Outbox
	store *outboxtest.MemoryStore
	got   map[string]*outboxtest.RecordingListener
}

func newPauseBundle(t *testing.T, cfg outbox.Config, subs ...outbox.Subscription) *pauseBundle {
	t.Helper()
	b := newStoppedPauseBundle(t, cfg, subs...)
	b.start(t)
	return b
}

// newStoppedPauseBundle is newPauseBundle before Start: a test puts the rows that the
// poller's first cycle must find, then calls start. Rows put after Start, with their
// old created_at, may land behind the low-water mark of a cycle that ran before them,
// and wait for the next read from the head (core/internal/poll/lowwater.go).
func newStoppedPauseBundle(t *testing.T, cfg outbox.Config, subs ...outbox.Subscription) *pauseBundle {
	t.Helper()
	b := &pauseBundle{store: outboxtest.NewMemoryStore(), got: map[string]*outboxtest.RecordingListener{}}
	cfg.Store, cfg.Logger, cfg.PurgeInterval = b.store, discardLogger(), -1
	ob, err := outbox.New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		if s.Listener == nil {
			l := &outboxtest.RecordingListener{}
			b.got[s.Name] = l
			s.Listener = l
		}
		if err := ob.Subscribe(s); err != nil {
			t.Fatal(err)
		}
	}
	b.ob = ob
	return b
}

// start starts the bundle's Outbox and stops it when the test ends.
func (b *pauseBundle) start(t *testing.T) {
	t.Helper()
	if err := b.ob.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.ob.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
}

// put stores events of typ, created 5 s ago: older than SkipRecent (the poller reads
// them at once), younger than the low-water mark of any cycle before the put (the
// cycle's start less SkipRecent and 10 s), which would leave them to the next read
// from the head.
func (b *pauseBundle) put(typ string, ids ...string) {
	for _, id := range ids {
		e := newEvent(id, typ)
		e.CreatedAt = e.CreatedAt.Add(-5 * time.Second)
		e.AvailableAt = e.CreatedAt
		b.store.Put(e)
	}
}

// load returns the named subscription's load.
func (b *pauseBundle) load(t *testing.T, name string) outbox.SubscriptionLoad {
	t.Helper()
	loads, err := b.ob.Events().Subscriptions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range loads {
		if l.Listener == name {
			return l
		}
	}
	t.Fatalf("no load of %s in %+v", name, loads)
	return outbox.SubscriptionLoad{}
}

// TestPauseHoldsEventsUntilResume: a paused subscription's events stay NEW, pinned to it
// (routed by type, they get its name in the listener column), while another
// subscription's events are delivered; Resume delivers them, oldest first. Both changes
// are in the audit trail, and the load shows the pause.
func TestPauseHoldsEventsUntilResume(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newPauseBundle(t, outbox.Config{PollInterval: time.Second, Workers: 1},
			outbox.Subscription{Name: "A", EventType: "A"}, outbox.Subscription{Name: "B", EventType: "B"})
		ctx := outbox.WithActor(t.Context(), "ops")
		if err := b.ob.Events().Pause(ctx, "A", "downstream down"); err != nil {
			t.Fatal(err)
		}
		b.put("A", "a1", "a2", "a3")
		b.put("B", "b1")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := b.got["B"].IDs(); !slices.Equal(got, []string{"b1"}) {
			t.Fatalf("B got %v, want b1", got)
		}
		if got := b.got["A"].IDs(); len(got) != 0 {
			t.Fatalf("paused A got %v", got)
		}
		for _, id := range []string{"a1", "a2", "a3"} {
			e, _ := b.store.Event(id)
			if e.Status != outbox.StatusNew || e.Listener != "A" || e.Attempts != 0 {
				t.Fatalf("%s: status %v listener %q attempts %d, want NEW, pinned to A, no attempt", id, e.Status, e.Listener, e.Attempts)
			}
		}
		if l := b.load(t, "A"); !l.Paused || l.Queued != 0 {
			t.Fatalf("load of A %+v, want paused, nothing queued", l)
		}
		if l := b.load(t, "B"); l.Paused {
			t.Fatalf("load of B %+v, want not paused", l)
		}
		paused, err := b.ob.Events().Paused(ctx)
		if err != nil || len(paused) != 1 || paused[0].Listener != "A" || paused[0].Actor != "ops" || paused[0].Reason != "downstream down" {
			t.Fatalf("Paused() = %+v, %v", paused, err)
		}
		if err := b.ob.Events().Pause(ctx, "A", "again"); err != nil { // no change
			t.Fatal(err)
		}
		if err := b.ob.Events().Resume(ctx, "A"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := b.got["A"].IDs(); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
			t.Fatalf("after Resume A got %v, want a1 a2 a3 at once", got)
		}
		if l := b.load(t, "A"); l.Paused {
			t.Fatalf("load of A %+v after Resume", l)
		}
		page, err := b.ob.Events().Audit(ctx, outbox.AuditQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var trail []string
		for _, e := range slices.Backward(page.Entries) {
			trail = append(trail, fmt.Sprintf("%s %s %s %d", e.Actor, e.Action, e.Target, e.Count))
		}
		if want := []string{"ops pause A 1", "ops pause A 0", "ops resume A 1"}; !slices.Equal(trail, want) {
			t.Fatalf("audit %q, want %q", trail, want)
		}
	})
}

// TestPauseTakesQueuedEventsOut: pausing a subscription whose events wait in its lane
// behind a running attempt takes them out; the running attempt finishes and is DONE, the
// others stay NEW until Resume.
func TestPauseTakesQueuedEventsOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		started := make(chan string, 10)
		l := &outboxtest.RecordingListener{}
		slow := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			started <- e.ID
			<-release
			return l.Handle(ctx, e)
		})
		b := newPauseBundle(t, outbox.Config{PollInterval: time.Second, Workers: 1},
			outbox.Subscription{Name: "A", EventType: "A", Listener: slow})
		b.put("A", "a1", "a2", "a3")
		if id := <-started; id != "a1" {
			t.Fatalf("first attempt %s", id)
		}
		synctest.Wait()
		if q := b.load(t, "A").Queued; q != 2 {
			t.Fatalf("queued %d behind the running attempt, want 2", q)
		}
		if err := b.ob.Events().Pause(t.Context(), "A", ""); err != nil {
			t.Fatal(err)
		}
		if ld := b.load(t, "A"); ld.Queued != 0 || ld.Running != 1 || !ld.Paused {
			t.Fatalf("load after Pause %+v, want nothing queued, one running, paused", ld)
		}
		close(release)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := l.IDs(); !slices.Equal(got, []string{"a1"}) {
			t.Fatalf("delivered %v while paused, want the running a1 only", got)
		}
		if e, _ := b.store.Event("a1"); e.Status != outbox.StatusDone {
			t.Fatalf("a1 is %v, want DONE", e.Status)
		}
		if err := b.ob.Events().Resume(t.Context(), "A"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := l.IDs(); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
			t.Fatalf("delivered %v, want a1 a2 a3", got)
		}
	})
}

// TestPauseHoldsOneDeliveryOfAFanOut: an event two subscriptions take is split as
// usual; the paused subscription's delivery waits, the other's is delivered.
func TestPauseHoldsOneDeliveryOfAFanOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newPauseBundle(t, outbox.Config{PollInterval: time.Second},
			outbox.Subscription{Name: "mail", EventType: "X"}, outbox.Subscription{Name: "search", EventType: "X"})
		if err := b.ob.Events().Pause(t.Context(), "mail", ""); err != nil {
			t.Fatal(err)
		}
		b.put("X", "x1")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := b.got["search"].IDs(); !slices.Equal(got, []string{outbox.DeliveryID("x1", "search")}) {
			t.Fatalf("search got %v", got)
		}
		if n := b.got["mail"].Count(); n != 0 {
			t.Fatalf("paused mail got %d events", n)
		}
		if e, _ := b.store.Event(outbox.DeliveryID("x1", "mail")); e.Status != outbox.StatusNew || e.Listener != "mail" {
			t.Fatalf("mail's delivery %+v, want NEW", e)
		}
		if err := b.ob.Events().Resume(t.Context(), "mail"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := b.got["mail"].Count(); n != 1 {
			t.Fatalf("mail got %d events after Resume, want 1", n)
		}
	})
}

// TestPauseInMultiNodeClearsClaims: under claims, an event of a paused subscription
// that a poll claimed is pinned and its claim cleared at once, so no node waits out
// ClaimTTL for it; later claims leave it out, and Resume delivers it.
func TestPauseInMultiNodeClearsClaims(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newPauseBundle(t, outbox.Config{Mode: outbox.MultiNode, ClaimTTL: 2 * time.Minute, PollInterval: time.Second},
			outbox.Subscription{Name: "A", EventType: "A"})
		if err := b.ob.Events().Pause(t.Context(), "A", ""); err != nil {
			t.Fatal(err)
		}
		b.put("A", "a1")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		e, _ := b.store.Event("a1")
		if e.Status != outbox.StatusNew || e.Listener != "A" || e.LockedBy != "" || !e.LockedUntil.IsZero() {
			t.Fatalf("a1 %+v, want NEW, pinned to A, unclaimed", e)
		}
		if err := b.ob.Events().Resume(t.Context(), "A"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := b.got["A"].IDs(); !slices.Equal(got, []string{"a1"}) {
			t.Fatalf("A got %v after Resume", got)
		}
	})
}

// TestPauseRejectsBadNames: an empty or oversized name is ErrInvalidArgument.
func TestPauseRejectsBadNames(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newPauseBundle(t, outbox.Config{})
		for _, name := range []string{"", string(make([]byte, outbox.MaxListenerLen+1)), "bad\x00name"} {
			if err := b.ob.Events().Pause(t.Context(), name, ""); !errors.Is(err, outbox.ErrInvalidArgument) {
				t.Errorf("Pause(%q) = %v, want ErrInvalidArgument", name, err)
			}
		}
	})
}
