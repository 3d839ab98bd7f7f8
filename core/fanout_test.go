package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// TestFanOutIndependentOutcomes: an event with three listeners is split into three
// deliveries; each has its own attempts and outcome, a failing listener never re-runs
// one that succeeded, and a replay of one listener's dead delivery runs that listener
// alone.
func TestFanOutIndependentOutcomes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: 2, Retry: fixedDelay(10 * time.Second)})
		mailDown := true
		broker := newDeliveries(nil)
		readModel := newDeliveries(func(_ context.Context, e *outbox.Event) error {
			if e.Attempts == 0 {
				return errors.New("read model busy")
			}
			return nil
		})
		mail := newDeliveries(func(context.Context, *outbox.Event) error {
			if mailDown {
				return errors.New("smtp down")
			}
			return nil
		})
		for _, s := range []outbox.Subscription{
			{Name: "broker", EventType: "Thing", Listener: broker},
			{Name: "read-model", EventType: "Thing", Listener: readModel},
			{Name: "mail", EventType: "Thing", Listener: mail},
		} {
			if err := b.reg.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		startPoller(t, b, outbox.PollerConfig{Interval: time.Second, SkipRecent: -1})
		b.write(t, newEvent("e1", "Thing"))
		synctest.Wait()
		if got := b.row(t, "e1"); got.Status != outbox.StatusDone {
			t.Fatalf("event e1 is %s after the split, want DONE", got.Status)
		}
		ids := map[string]string{}
		for _, name := range []string{"broker", "read-model", "mail"} {
			ids[name] = outbox.DeliveryID("e1", name)
			got := b.row(t, ids[name])
			if got.Listener != name || got.Type != "Thing" || string(got.Payload) != `{"n":1}` {
				t.Fatalf("delivery for %s: %+v", name, got)
			}
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := broker.of(ids["broker"]); n != 1 {
			t.Errorf("broker ran %d times, want 1", n)
		}
		if n := readModel.of(ids["read-model"]); n != 2 {
			t.Errorf("read model ran %d times, want 2 (one failure, one success)", n)
		}
		if got := b.row(t, ids["read-model"]); got.Status != outbox.StatusDone {
			t.Errorf("read model delivery is %s, want DONE", got.Status)
		}
		dead := b.row(t, ids["mail"])
		if dead.Status != outbox.StatusDead || dead.Attempts != 2 || dead.Listener != "mail" || dead.LastError != "smtp down" {
			t.Fatalf("mail delivery %s attempts %d listener %q error %q; want DEAD after 2 for mail",
				dead.Status, dead.Attempts, dead.Listener, dead.LastError)
		}
		for _, e := range broker.seen() {
			if e.ID != ids["broker"] || e.Listener != "broker" {
				t.Errorf("broker got event %s for listener %q", e.ID, e.Listener)
			}
		}

		// Per listener: the dead delivery is listed under mail only, and replaying it
		// runs mail alone.
		for name, want := range map[string]int64{"mail": 1, "broker": 0} {
			n, err := b.store.CountDead(t.Context(), outbox.DeadFilter{Listener: name})
			if err != nil || n != want {
				t.Errorf("dead deliveries of %s: %d, %v; want %d", name, n, err, want)
			}
		}
		mailDown = false
		if n, err := b.store.Replay(t.Context(), storage.ReplayParams{DeadFilter: outbox.DeadFilter{Listener: "mail"}, Limit: 10, Now: time.Now()}); err != nil || n != 1 {
			t.Fatalf("replay mail: %d, %v", n, err)
		}
		time.Sleep(2 * time.Minute) // the poller's idle wait has grown; Events.Replay would wake it
		synctest.Wait()
		if got := b.row(t, ids["mail"]); got.Status != outbox.StatusDone {
			t.Errorf("replayed mail delivery is %s, want DONE", got.Status)
		}
		if broker.total() != 1 || readModel.total() != 2 || mail.total() != 3 {
			t.Errorf("calls: broker %d, read model %d, mail %d; want 1, 2, 3", broker.total(), readModel.total(), mail.total())
		}
	})
}

// TestFanOutRoutes: catch-all routes match every event type of an aggregate, or every
// event; an event with one matching subscription is delivered as it is, with several
// it is split; a delivery whose listener is gone is DEAD, naming it.
func TestFanOutRoutes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		relay := newDeliveries(nil)
		orders := newDeliveries(nil)
		placed := newDeliveries(nil)
		for _, s := range []outbox.Subscription{
			{Name: "relay", AggregateType: outbox.AnyType, EventType: outbox.AnyType, Listener: relay},
			{Name: "orders", AggregateType: "Order", EventType: outbox.AnyType, Listener: orders},
			{Name: "placed", AggregateType: "Order", EventType: "Placed", Listener: placed},
		} {
			if err := b.reg.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		lone := newEvent("lone", "Anything")
		shipped := newEvent("shipped", "Shipped")
		shipped.AggregateType = "Order"
		placedEv := newEvent("placed", "Placed")
		placedEv.AggregateType = "Order"
		orphan := newEvent("orphan", "Anything")
		orphan.ID, orphan.Listener = outbox.DeliveryID("old", "gone"), "gone"
		b.write(t, lone, shipped, placedEv, orphan)
		synctest.Wait()

		if n := relay.of("lone"); n != 1 {
			t.Errorf("the catch-all got the lone event %d times under its own ID, want 1", n)
		}
		if got := b.row(t, "lone"); got.Status != outbox.StatusDone {
			t.Errorf("lone event %s, want DONE (not split)", got.Status)
		}
		for id, want := range map[string][]string{"shipped": {"relay", "orders"}, "placed": {"relay", "orders", "placed"}} {
			for _, name := range want {
				d := b.row(t, outbox.DeliveryID(id, name))
				if d.Status != outbox.StatusDone || d.Listener != name {
					t.Errorf("%s for %s: %s, listener %q", id, name, d.Status, d.Listener)
				}
			}
		}
		if placed.total() != 1 || orders.total() != 2 || relay.total() != 3 {
			t.Errorf("calls: placed %d, orders %d, relay %d; want 1, 2, 3", placed.total(), orders.total(), relay.total())
		}
		got := b.row(t, orphan.ID)
		if got.Status != outbox.StatusDead || !strings.Contains(got.LastError, `no listener named "gone"`) {
			t.Errorf("delivery for a listener that is gone: %s %q", got.Status, got.LastError)
		}
	})
}

// TestFanOutSkipsExistingDeliveries: a split that finds some of its deliveries stored
// (an earlier split interrupted before its outcome was known) creates and hands over
// only the others.
func TestFanOutSkipsExistingDeliveries(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		a, c := newDeliveries(nil), newDeliveries(nil)
		for _, s := range []outbox.Subscription{{Name: "a", EventType: "Thing", Listener: a}, {Name: "c", EventType: "Thing", Listener: c}} {
			if err := b.reg.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		done := newEvent(outbox.DeliveryID("e1", "a"), "Thing")
		done.Listener = "a"
		b.store.Put(done)
		if _, err := b.store.MarkDone(t.Context(), storage.MarkDoneParams{IDs: []string{done.ID}, DoneAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		b.write(t, newEvent("e1", "Thing"))
		synctest.Wait()
		if a.total() != 0 || c.of(outbox.DeliveryID("e1", "c")) != 1 {
			t.Errorf("a ran %d times (want 0: its delivery was done), c %d (want 1)", a.total(), c.total())
		}
	})
}

// TestFanOutSplitsQueuedEventsTogether: events to split that are queued behind one are
// split with it, in one store call, and an event of a single listener queued among them
// is delivered as it is, in its own lane: it does not cut the split.
func TestFanOutSplitsQueuedEventsTogether(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		g := newGate()
		b.listen(t, "Block", g)
		a, c, single := newDeliveries(nil), newDeliveries(nil), newDeliveries(nil)
		for _, s := range []outbox.Subscription{
			{Name: "a", EventType: "Thing", Listener: a}, {Name: "c", EventType: "Thing", Listener: c},
			{Name: "single", EventType: "Single", Listener: single},
		} {
			if err := b.reg.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		b.write(t, newEvent("block", "Block"))
		synctest.Wait() // the only worker waits in the gate
		var events []outbox.Event
		for i := range 5 {
			events = append(events, newEvent(fmt.Sprint("e", i), "Thing"))
		}
		events = append(events, newEvent("s", "Single"), newEvent("e5", "Thing"))
		b.write(t, events...)
		g.open()
		synctest.Wait()
		if got := b.store.fanOutCalls(); !slices.Equal(got, []int{6}) {
			t.Errorf("FanOut calls took %v events, want [6]: the six queued together, the single one in its own lane", got)
		}
		if a.total() != 6 || c.total() != 6 || single.of("s") != 1 {
			t.Errorf("calls: a %d, c %d, single %d; want 6, 6, 1", a.total(), c.total(), single.total())
		}
	})
}

// TestDeliveryID: stable, distinct per listener, within MaxIDLen for the longest IDs,
// valid text when the event's ID is cut inside a character.
func TestDeliveryID(t *testing.T) {
	t.Parallel()
	if a1, a2 := outbox.DeliveryID("e1", "a"), outbox.DeliveryID("e1", "a"); a1 != a2 || a1 == outbox.DeliveryID("e1", "b") {
		t.Fatal("DeliveryID is not a function of the event ID and the listener")
	}
	if got := outbox.DeliveryID("01JABC", "mail"); !strings.HasPrefix(got, "01JABC.") || len(got) != len("01JABC.")+16 {
		t.Errorf("DeliveryID = %q, want the event ID, a dot and 16 characters", got)
	}
	long := strings.Repeat("é", outbox.MaxIDLen/2)
	got := outbox.DeliveryID(long, "mail")
	if len(got) > outbox.MaxIDLen || !utf8.ValidString(got) || got == outbox.DeliveryID(long+"x", "mail") {
		t.Errorf("DeliveryID of a %d-byte ID: %q (%d bytes)", len(long), got, len(got))
	}
}

// TestFanOutWithoutFanOutStore: with a store that cannot split, an event with several
// listeners is DEAD with an error matching errors.ErrUnsupported, and no listener runs;
// an event with one listener is delivered as usual.
func TestFanOutWithoutFanOutStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := outboxtest.NewMemoryStore()
		store := struct{ storage.Store }{mem} // Store's methods only: no FanOut
		reg := outbox.NewRegistry()
		a, c, single := newDeliveries(nil), newDeliveries(nil), newDeliveries(nil)
		for _, s := range []outbox.Subscription{
			{Name: "a", EventType: "Thing", Listener: a}, {Name: "c", EventType: "Thing", Listener: c},
			{Name: "single", EventType: "Single", Listener: single},
		} {
			if err := reg.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer d.Stop(context.Background())
		events := []outbox.Event{newEvent("e1", "Thing"), newEvent("s1", "Single")}
		if _, err := mem.Insert(t.Context(), nil, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		if err := d.WriterHook().AfterCommit(t.Context(), events); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, _ := mem.Event("e1")
		if got.Status != outbox.StatusDead || !strings.Contains(got.LastError, errors.ErrUnsupported.Error()) ||
			!strings.Contains(got.LastError, "FanOutStore") {
			t.Errorf("e1: %s %q; want DEAD naming FanOutStore and ErrUnsupported", got.Status, got.LastError)
		}
		if a.total() != 0 || c.total() != 0 || single.of("s1") != 1 {
			t.Errorf("calls: a %d, c %d, single %d; want 0, 0, 1", a.total(), c.total(), single.total())
		}
	})
}
