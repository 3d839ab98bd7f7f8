package storetest

import (
	"errors"
	"strings"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// events returns the store as an storage.EventStore, or skips the test.
func (x *fixture) events() storage.EventStore {
	es, ok := x.h.Store.(storage.EventStore)
	if !ok {
		x.Skipf("%T does not implement storage.EventStore", x.h.Store)
	}
	return es
}

func (x *fixture) listEvents(p storage.ListEventsParams) ([]outbox.Event, outbox.Cursor) {
	x.Helper()
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.ScanLimit == 0 {
		p.ScanLimit = outbox.MaxScanRows
	}
	got, stop, err := x.events().ListEvents(x.ctx, p)
	if err != nil {
		x.Fatalf("ListEvents(%+v): %v", p, err)
	}
	return got, stop
}

// eventSet inserts rows of every status the lists show.
func (x *fixture) eventSet() {
	mk := func(id, typ, agg string, created time.Time) outbox.Event {
		e := ev(id, created)
		e.Type, e.AggregateType, e.AggregateID = typ, agg, "a-"+agg
		return e
	}
	l := mk("n-listener", "X", "A", at(4*time.Second))
	l.Listener = "mail"
	x.insert(
		mk("n-2", "X", "A", at(2*time.Second)), mk("n-1", "Y", "B", at(time.Second)), l,
		mk("r-1", "X", "A", at(0)),
		mk("d-1", "X", "A", at(time.Second)), mk("d-2", "Y", "B", at(2*time.Second)),
		mk("done-1", "X", "A", at(0)), mk("done-2", "X", "B", at(time.Second)),
		mk("disc-1", "X", "A", at(3*time.Second)),
	)
	x.retry("r-1", at(time.Hour))
	x.markDead("d-1", "Timeout talking to the broker")
	x.markDead("d-2", "bad request 100%_sure")
	// done-1 was created first and finished last: the DONE list is in finish order.
	x.markDone(at(time.Minute), "done-1")
	x.markDone(at(30*time.Second), "done-2")
	if ds, ok := x.h.Store.(storage.DiscardStore); ok {
		n, err := ds.Discard(x.ctx, []string{"disc-1"}, at(10*time.Second))
		x.changed("Discard", n, err, 1)
	}
}

// testListEvents: each status's list holds its rows in its order (creation, or finish
// for DONE), newest first when asked; every filter narrows it; keyset pages follow on.
func testListEvents(x *fixture) {
	x.events()
	x.eventSet()
	list := func(p storage.ListEventsParams) []outbox.Event { x.Helper(); e, _ := x.listEvents(p); return e }
	x.wantIDs("NEW", list(storage.ListEventsParams{Status: outbox.StatusNew}), "n-1", "n-2", "n-listener")
	x.wantIDs("NEW newest", list(storage.ListEventsParams{Status: outbox.StatusNew, Newest: true}), "n-listener", "n-2", "n-1")
	x.wantIDs("RETRY", list(storage.ListEventsParams{Status: outbox.StatusRetry}), "r-1")
	x.wantIDs("DEAD", list(storage.ListEventsParams{Status: outbox.StatusDead}), "d-1", "d-2")
	x.wantIDs("DONE", list(storage.ListEventsParams{Status: outbox.StatusDone}), "done-2", "done-1")
	x.wantIDs("DONE newest", list(storage.ListEventsParams{Status: outbox.StatusDone, Newest: true}), "done-1", "done-2")
	if _, ok := x.h.Store.(storage.DiscardStore); ok {
		x.wantIDs("DISCARDED", list(storage.ListEventsParams{Status: outbox.StatusDiscarded}), "disc-1")
	}
	x.wantIDs("FALLBACK", list(storage.ListEventsParams{Status: outbox.StatusFallback}))

	f := func(st outbox.Status, f outbox.EventFilter) []outbox.Event {
		x.Helper()
		return list(storage.ListEventsParams{Status: st, EventFilter: f})
	}
	x.wantIDs("type", f(outbox.StatusNew, outbox.EventFilter{EventType: "X"}), "n-2", "n-listener")
	x.wantIDs("aggregate type", f(outbox.StatusNew, outbox.EventFilter{AggregateType: "B"}), "n-1")
	x.wantIDs("aggregate ID", f(outbox.StatusNew, outbox.EventFilter{AggregateID: "a-A"}), "n-2", "n-listener")
	x.wantIDs("aggregate ID, DONE (creation order)", f(outbox.StatusDone, outbox.EventFilter{AggregateID: "a-A"}), "done-1")
	x.wantIDs("aggregate ID and type", f(outbox.StatusDead, outbox.EventFilter{AggregateID: "a-B", EventType: "Y"}), "d-2")
	x.wantIDs("listener", f(outbox.StatusNew, outbox.EventFilter{Listener: "mail"}), "n-listener")
	x.wantIDs("error, any case", f(outbox.StatusDead, outbox.EventFilter{ErrorContains: "TIMEOUT"}), "d-1")
	x.wantIDs("error, wildcards are text", f(outbox.StatusDead, outbox.EventFilter{ErrorContains: "100%_s"}), "d-2")
	x.wantIDs("error, no match", f(outbox.StatusDead, outbox.EventFilter{ErrorContains: "%"}), "d-2")
	x.wantIDs("error, _ is not a wildcard", f(outbox.StatusDead, outbox.EventFilter{ErrorContains: "T_meout"}))
	x.wantIDs("from", f(outbox.StatusNew, outbox.EventFilter{From: at(2 * time.Second)}), "n-2", "n-listener")
	x.wantIDs("to", f(outbox.StatusNew, outbox.EventFilter{To: at(2 * time.Second)}), "n-1")
	x.wantIDs("from-to on finish time", f(outbox.StatusDone, outbox.EventFilter{From: at(time.Minute - time.Second), To: at(2 * time.Minute)}), "done-1")

	// Keyset pages of one, forwards and backwards.
	for _, newest := range []bool{false, true} {
		var got []outbox.Event
		p := storage.ListEventsParams{Status: outbox.StatusNew, Newest: newest, Limit: 1}
		for range 5 {
			page, _ := x.listEvents(p)
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			last := page[len(page)-1]
			p.After = outbox.Cursor{CreatedAt: outboxtype.ListTime(last, p.Status, p.EventFilter), ID: last.ID}
		}
		want := []string{"n-1", "n-2", "n-listener"}
		if newest {
			want = []string{"n-listener", "n-2", "n-1"}
		}
		x.wantIDs("pages", got, want...)
	}
	p := storage.ListEventsParams{Status: outbox.StatusDone, Limit: 1}
	page, _ := x.listEvents(p)
	p.After = outbox.Cursor{CreatedAt: outboxtype.ListTime(page[0], p.Status, p.EventFilter), ID: page[0].ID}
	x.wantIDs("DONE second page", list(p), "done-1")
}

// testListEventsScanLimit: a filter outside the index reads at most ScanLimit rows: a
// page that found too few says where it stopped, and the next page goes on from there.
func testListEventsScanLimit(x *fixture) {
	x.events()
	var events []outbox.Event
	for i := range 5 {
		e := ev(string(rune('a'+i)), at(time.Duration(i)*time.Second))
		e.Type = "Common"
		if i == 3 {
			e.Type = "Rare"
		}
		events = append(events, e)
	}
	x.insert(events...)
	p := storage.ListEventsParams{Status: outbox.StatusNew, EventFilter: outbox.EventFilter{EventType: "Rare"}, ScanLimit: 2}
	var found []outbox.Event
	stops := 0
	for range 10 {
		page, stop := x.listEvents(p)
		found = append(found, page...)
		if stop.IsZero() {
			break
		}
		stops++
		if len(page) > 0 {
			p.After = outbox.Cursor{CreatedAt: outboxtype.ListTime(page[len(page)-1], p.Status, p.EventFilter), ID: page[len(page)-1].ID}
		}
		p.After = stop
	}
	x.wantIDs("rare, found across windows", found, "d")
	if stops == 0 {
		x.Fatal("a scan of 5 rows, 2 at a time, never stopped at its limit")
	}
	// Without a filter outside the index the page is never cut.
	if page, stop := x.listEvents(storage.ListEventsParams{Status: outbox.StatusNew, Limit: 10, ScanLimit: 2}); len(page) < 5 && stop.IsZero() {
		x.Fatalf("unfiltered list: %d events and no stop", len(page))
	}
	// Bad parameters.
	for _, bad := range []storage.ListEventsParams{
		{Status: 9, Limit: 1, ScanLimit: 1},
		{Status: outbox.StatusNew, Limit: 0, ScanLimit: 1},
		{Status: outbox.StatusNew, Limit: 1, ScanLimit: 1, EventFilter: outbox.EventFilter{From: at(time.Second), To: at(0)}},
	} {
		if _, _, err := x.events().ListEvents(x.ctx, bad); !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Fatalf("ListEvents(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// testListEventsByOrderKey: a list by order key holds the key's events of the status
// that are not finished, in the key's order (OrderSeq), whatever their creation times;
// it pages with OrderSeq cursors, bounds a scan of a filter outside the index, and
// refuses the statuses that have left their key and a time cursor.
func testListEventsByOrderKey(x *fixture) {
	x.events()
	x.orders()
	mk := func(id, key string, created time.Duration) outbox.Event {
		e := ev(id, at(created))
		e.OrderKey = key
		return e
	}
	// Creation times against write order: the key's order is OrderSeq, not created_at.
	rareOne := mk("k1-c", "K1", 3*time.Second)
	rareOne.Type = "Rare"
	x.insert(mk("k1-a", "K1", 5*time.Second), mk("k1-b", "K1", 4*time.Second))
	x.insert(rareOne, mk("k2-a", "K2", 0), ev("plain", at(0)))
	x.insert(mk("k1-d", "K1", 2*time.Second))
	if c, a := x.get("k1-c"), x.get("k1-a"); c.OrderSeq != 3 || a.Status != outbox.StatusNew {
		x.Fatalf("k1-c has OrderSeq %d, k1-a status %s; want 3 and NEW", c.OrderSeq, a.Status)
	}
	x.markDead("k1-a", "broker down")
	list := func(st outbox.Status, f outbox.EventFilter, after outbox.Cursor, limit, scan int) ([]outbox.Event, outbox.Cursor) {
		x.Helper()
		return x.listEvents(storage.ListEventsParams{Status: st, EventFilter: f, After: after, Limit: limit, ScanLimit: scan})
	}
	k1 := outbox.EventFilter{OrderKey: "K1"}
	got, _ := list(outbox.StatusWaiting, k1, outbox.Cursor{}, 0, 0)
	x.wantIDs("K1 WAITING", got, "k1-b", "k1-c", "k1-d")
	got, _ = x.listEvents(storage.ListEventsParams{Status: outbox.StatusWaiting, EventFilter: k1, Newest: true})
	x.wantIDs("K1 WAITING newest", got, "k1-d", "k1-c", "k1-b")
	got, _ = list(outbox.StatusDead, k1, outbox.Cursor{}, 0, 0)
	x.wantIDs("K1 DEAD", got, "k1-a")
	got, _ = list(outbox.StatusNew, outbox.EventFilter{OrderKey: "K2"}, outbox.Cursor{}, 0, 0)
	x.wantIDs("K2 NEW", got, "k2-a")
	got, _ = list(outbox.StatusWaiting, outbox.EventFilter{OrderKey: "K3"}, outbox.Cursor{}, 0, 0)
	x.wantIDs("K3", got)

	// Pages of one, with the cursors ListCursor makes.
	var paged []outbox.Event
	var after outbox.Cursor
	for range 5 {
		page, _ := list(outbox.StatusWaiting, k1, after, 1, 0)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = outboxtype.ListCursor(page[0], outbox.StatusWaiting, k1)
		if after.OrderSeq != page[0].OrderSeq || !after.CreatedAt.IsZero() {
			x.Fatalf("ListCursor(%s) = %+v, want its OrderSeq %d and no time", page[0].ID, after, page[0].OrderSeq)
		}
	}
	x.wantIDs("K1 WAITING pages", paged, "k1-b", "k1-c", "k1-d")

	// A filter outside the index: the scan stops after ScanLimit rows and goes on.
	rare := outbox.EventFilter{OrderKey: "K1", EventType: "Rare"}
	var found []outbox.Event
	stops := 0
	for after := (outbox.Cursor{}); stops < 5; stops++ {
		page, stop := list(outbox.StatusWaiting, rare, after, 5, 1)
		found = append(found, page...)
		if stop.IsZero() {
			break
		}
		if stop.OrderSeq == 0 || !stop.CreatedAt.IsZero() {
			x.Fatalf("stop %+v of a list by order key: want an OrderSeq and no time", stop)
		}
		after = stop
	}
	x.wantIDs("K1 WAITING of type Rare", found, "k1-c")
	if stops == 0 {
		x.Fatal("a scan of 3 rows, 1 at a time, never stopped at its limit")
	}

	// A DONE event has left its key: it is in no list by key.
	x.markDone(at(time.Minute), "k2-a")
	for _, bad := range []storage.ListEventsParams{
		{Status: outbox.StatusDone, EventFilter: outbox.EventFilter{OrderKey: "K2"}},
		{Status: outbox.StatusFallback, EventFilter: k1},
		{Status: outbox.StatusDiscarded, EventFilter: k1},
		{Status: outbox.StatusWaiting, EventFilter: outbox.EventFilter{OrderKey: "K1", AggregateID: "agg-k1-b"}},
		{Status: outbox.StatusWaiting, EventFilter: outbox.EventFilter{OrderKey: "K1", From: at(0)}},
		{Status: outbox.StatusWaiting, EventFilter: k1, After: outbox.Cursor{CreatedAt: at(0), ID: "k1-b"}},
		{Status: outbox.StatusWaiting, After: outbox.Cursor{OrderSeq: 2, ID: "k1-b"}},
		{Status: outbox.StatusWaiting, EventFilter: outbox.EventFilter{OrderKey: strings.Repeat("k", outbox.MaxOrderKeyLen+1)}},
	} {
		bad.Limit, bad.ScanLimit = 10, 10
		if _, _, err := x.events().ListEvents(x.ctx, bad); !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Fatalf("ListEvents(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// testListEventsBlocking: the Blocking filter lists the RETRY and DEAD events that hold
// their key (WAITING events wait behind them), not those alone in their key, not a DEAD
// event its key moved on past, and not unordered ones; a scan of it stops at the window.
func testListEventsBlocking(x *fixture) {
	x.events()
	x.orders()
	key := func(k string, ids ...string) {
		x.Helper()
		var events []outbox.Event
		for i, id := range ids {
			e := ev(id, at(time.Duration(i)*time.Second))
			e.OrderKey = k
			events = append(events, e)
		}
		x.insert(events...)
		if x.headsWait(ids[0]) {
			x.promote(storage.PromoteParams{Keys: []string{k}, DeadBlocks: true}, 1)
		}
	}
	key("K1", "k1-a", "k1-b") // DEAD, WAITING: held
	key("K2", "k2-a", "k2-b") // RETRY, WAITING: held
	key("K3", "k3-a")         // DEAD alone
	key("K4", "k4-a", "k4-b", "k4-c")
	key("K5", "k5-a") // RETRY alone
	x.insert(ev("plain", at(0)))
	for _, id := range []string{"k1-a", "k3-a", "k4-a", "plain"} {
		x.markDead(id, "failed")
	}
	// K4 moved on past its DEAD event, as under DeadKeySkips: k4-b is NEW, k4-c waits.
	x.promote(storage.PromoteParams{Keys: []string{"K4"}}, 1)
	x.retry("k2-a", at(time.Hour))
	x.retry("k5-a", at(time.Hour))
	blocking := outbox.EventFilter{Blocking: true}
	got, _ := x.listEvents(storage.ListEventsParams{Status: outbox.StatusDead, EventFilter: blocking})
	x.wantIDs("DEAD holding their keys", got, "k1-a")
	got, _ = x.listEvents(storage.ListEventsParams{Status: outbox.StatusRetry, EventFilter: blocking})
	x.wantIDs("RETRY holding their keys", got, "k2-a")
	got, _ = x.listEvents(storage.ListEventsParams{Status: outbox.StatusDead})
	x.wantIDs("DEAD", got, "k1-a", "k3-a", "k4-a", "plain")

	// A scan of one row at a time stops at its window and goes on to k1-a.
	var found []outbox.Event
	stops := 0
	for p := (storage.ListEventsParams{Status: outbox.StatusDead, EventFilter: blocking, Newest: true, Limit: 5, ScanLimit: 1}); stops < 5; stops++ {
		page, stop := x.listEvents(p)
		found = append(found, page...)
		if stop.IsZero() {
			break
		}
		p.After = stop
	}
	x.wantIDs("DEAD holding their keys, a row a window", found, "k1-a")
	if stops == 0 {
		x.Fatal("a scan of 4 rows, 1 at a time, never stopped at its limit")
	}
	for _, st := range []outbox.Status{outbox.StatusNew, outbox.StatusWaiting, outbox.StatusDone} {
		p := storage.ListEventsParams{Status: st, EventFilter: blocking, Limit: 10, ScanLimit: 10}
		if _, _, err := x.events().ListEvents(x.ctx, p); !errors.Is(err, outbox.ErrInvalidArgument) {
			x.Fatalf("ListEvents(%+v) = %v, want ErrInvalidArgument", p, err)
		}
	}
}

// testCountByType counts per status and type.
func testCountByType(x *fixture) {
	es := x.events()
	x.eventSet()
	counts, err := es.CountByType(x.ctx)
	if err != nil {
		x.Fatal(err)
	}
	got := map[outbox.Status]map[string]int64{}
	for _, c := range counts {
		if got[c.Status] == nil {
			got[c.Status] = map[string]int64{}
		}
		got[c.Status][c.EventType] = c.Count
	}
	if got[outbox.StatusNew]["X"] != 2 || got[outbox.StatusNew]["Y"] != 1 || got[outbox.StatusDone]["X"] != 2 ||
		got[outbox.StatusDead]["Y"] != 1 || got[outbox.StatusRetry]["X"] != 1 {
		x.Fatalf("CountByType = %v", got)
	}
}

// testAudit: entries come back newest first (by ID), with every field, in pages.
func testAudit(x *fixture) {
	as, ok := x.h.Store.(storage.AuditStore)
	if !ok {
		x.Skipf("%T does not implement storage.AuditStore", x.h.Store)
	}
	for i, id := range []string{"01A", "01B", "01C"} {
		e := outbox.AuditEntry{ID: id, At: at(time.Duration(i) * time.Second), Actor: "alice", Action: outbox.AuditReplay,
			Target: "e1,e2", Count: int64(i)}
		if err := as.RecordAudit(x.ctx, e); err != nil {
			x.Fatal(err)
		}
	}
	got, err := as.ListAudit(x.ctx, storage.ListAuditParams{Limit: 2})
	if err != nil || len(got) != 2 || got[0].ID != "01C" || got[1].ID != "01B" {
		x.Fatalf("ListAudit = %+v, %v", got, err)
	}
	if e := got[0]; e.Actor != "alice" || e.Action != outbox.AuditReplay || e.Target != "e1,e2" || e.Count != 2 {
		x.Fatalf("entry = %+v", e)
	}
	x.wantTime("At", got[0].At, at(2*time.Second))
	got, err = as.ListAudit(x.ctx, storage.ListAuditParams{Before: "01B", Limit: 5})
	if err != nil || len(got) != 1 || got[0].ID != "01A" {
		x.Fatalf("ListAudit before 01B = %+v, %v", got, err)
	}
}
