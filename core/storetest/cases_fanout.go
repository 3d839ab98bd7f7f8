package storetest

import (
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// fanOut returns the store as an storage.FanOutStore, or skips the test.
func (x *fixture) fanOut() storage.FanOutStore {
	fs, ok := x.h.Store.(storage.FanOutStore)
	if !ok {
		x.Skipf("%T does not implement storage.FanOutStore", x.h.Store)
	}
	return fs
}

// delivery returns the delivery of event e to listener, as the dispatcher makes it.
func delivery(e outbox.Event, listener string) outbox.Event {
	e.ID, e.Listener = outbox.DeliveryID(e.ID, listener), listener
	return e
}

// split returns the FanOutEvent of e to listeners, with token.
func split(e outbox.Event, token string, listeners ...string) storage.FanOutEvent {
	fe := storage.FanOutEvent{ID: e.ID, Token: token}
	for _, l := range listeners {
		d := delivery(e, l)
		d.LockedBy = token
		fe.Deliveries = append(fe.Deliveries, d)
	}
	return fe
}

// testFanOut: FanOut marks each event DONE and inserts its deliveries, with their
// listener, as one change; a second split of the same event changes nothing; an event
// fenced out by a claim keeps its row and gets no deliveries while the others of the
// same call are split; deliveries that exist are skipped and reported. MarkDead stores
// the failing listener, and the dead filters and replay select by it.
func testFanOut(x *fixture) {
	fs := x.fanOut()
	e := ev("e1", base)
	x.insert(e)
	p := storage.FanOutParams{DoneAt: at(time.Second), Events: []storage.FanOutEvent{split(e, "", "broker", "mail")}}
	res, err := fs.FanOut(x.ctx, p)
	if err != nil || len(res.Split) != 1 || res.Split[0] != "e1" || len(res.Existing) != 0 {
		x.Fatalf("FanOut = %+v, %v; want e1 split, nothing existing", res, err)
	}
	stored := x.wantStatus("e1", outbox.StatusDone)
	for _, name := range []string{"broker", "mail"} {
		d := x.wantStatus(outbox.DeliveryID("e1", name), outbox.StatusNew)
		if d.Listener != name || d.Type != e.Type || string(d.Payload) != string(stored.Payload) {
			x.Fatalf("delivery for %s: %+v", name, d)
		}
	}
	// Again: the event is DONE, nothing changes.
	p.Events = []storage.FanOutEvent{split(e, "", "broker", "mail", "late")}
	if res, err := fs.FanOut(x.ctx, p); err != nil || len(res.Split) != 0 {
		x.Fatalf("second FanOut = %+v, %v; want nothing split", res, err)
	}
	x.notFound(outbox.DeliveryID("e1", "late"))

	// A delivery that exists is skipped and reported, the others inserted.
	e2 := ev("e2", base)
	x.insert(e2, delivery(e2, "broker"))
	res, err = fs.FanOut(x.ctx, storage.FanOutParams{DoneAt: at(time.Second), Events: []storage.FanOutEvent{split(e2, "", "broker", "mail")}})
	if err != nil || len(res.Split) != 1 || len(res.Existing) != 1 || res.Existing[0] != outbox.DeliveryID("e2", "broker") {
		x.Fatalf("FanOut with one delivery stored = %+v, %v", res, err)
	}
	x.wantStatus(outbox.DeliveryID("e2", "mail"), outbox.StatusNew)

	// A claim fences its event alone.
	if _, ok := x.h.Store.(storage.ClaimStore); ok {
		e3, e4 := ev("e3", base), ev("e4", base)
		e3.LockedBy, e4.LockedBy = "node-a/1", "node-a/1"
		if _, err := x.store().Insert(x.ctx, x.exec(), storage.InsertParams{Events: []outbox.Event{e3, e4}, ClaimTTL: time.Hour}); err != nil {
			x.Fatal(err)
		}
		res, err := fs.FanOut(x.ctx, storage.FanOutParams{DoneAt: at(time.Second), ClaimTTL: time.Hour,
			Events: []storage.FanOutEvent{split(e3, "node-b/1", "broker"), split(e4, "node-a/1", "broker", "mail")}})
		if err != nil || len(res.Split) != 1 || res.Split[0] != "e4" {
			x.Fatalf("FanOut of e3 under another claim and e4 under its own = %+v, %v; want e4 split alone", res, err)
		}
		x.wantStatus("e3", outbox.StatusNew)
		x.notFound(outbox.DeliveryID("e3", "broker"))
		x.wantStatus("e4", outbox.StatusDone)
		if d := x.get(outbox.DeliveryID("e4", "mail")); d.LockedBy != "node-a/1" || d.LockedUntil.IsZero() {
			x.Fatalf("e4's delivery is not claimed: %q until %v", d.LockedBy, d.LockedUntil)
		}
	}

	// The failing listener is stored by MarkDead; dead events are selected by it.
	mail := outbox.DeliveryID("e1", "mail")
	n, err := x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: mail, DeadAt: at(time.Minute), Reason: "smtp down", CountAttempt: true, Listener: "mail"})
	x.changed("MarkDead of a delivery", n, err, 1)
	x.insert(ev("plain", base))
	n, err = x.store().MarkDead(x.ctx, storage.MarkDeadParams{ID: "plain", DeadAt: at(time.Minute), Reason: "bad", Listener: "orders"})
	x.changed("MarkDead naming its listener", n, err, 1)
	if got := x.get("plain"); got.Listener != "orders" {
		x.Fatalf("plain: listener %q after MarkDead, want orders", got.Listener)
	}
	x.wantIDs("dead of mail", x.listDead(storage.ListDeadParams{DeadFilter: outbox.DeadFilter{Listener: "mail"}, Limit: 10}), mail)
	if c, err := x.dead().CountDead(x.ctx, outbox.DeadFilter{Listener: "orders"}); err != nil || c != 1 {
		x.Fatalf("CountDead of orders = %d, %v; want 1", c, err)
	}
	n, err = x.dead().Replay(x.ctx, storage.ReplayParams{DeadFilter: outbox.DeadFilter{Listener: "mail"}, Limit: 10, Now: at(time.Hour)})
	x.changed("Replay of mail", n, err, 1)
	if got := x.wantStatus(mail, outbox.StatusNew); got.Listener != "mail" {
		x.Fatalf("replayed delivery lost its listener: %q", got.Listener)
	}
	x.wantStatus("plain", outbox.StatusDead)
}

// testFanOutOrdered: the deliveries of an ordered event are numbered in their own keys.
func testFanOutOrdered(x *fixture) {
	x.orders()
	fs := x.fanOut()
	e := ordered("o1", "K", base)
	x.insert(e)
	x.promote(storage.PromoteParams{Keys: []string{"K"}, DeadBlocks: true}, ifWait(x.headsWait("o1"), 1))
	a := delivery(e, "a")
	a.OrderKey = "K/a"
	fe := storage.FanOutEvent{ID: "o1", Deliveries: []outbox.Event{a}}
	res, err := fs.FanOut(x.ctx, storage.FanOutParams{DoneAt: at(time.Second), Events: []storage.FanOutEvent{fe}})
	if err != nil || len(res.Split) != 1 {
		x.Fatalf("FanOut = %+v, %v", res, err)
	}
	if fe.Deliveries[0].OrderSeq == 0 {
		x.Fatal("FanOut did not report the ordered delivery's OrderSeq")
	}
	got := x.get(a.ID)
	if got.OrderKey != "K/a" || got.OrderSeq == 0 || got.Status != outbox.StatusNew && got.Status != outbox.StatusWaiting {
		x.Fatalf("ordered delivery: key %q seq %d status %s", got.OrderKey, got.OrderSeq, got.Status)
	}
}
