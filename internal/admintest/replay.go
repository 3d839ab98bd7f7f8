package admintest

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
)

type replayBody struct {
	Replayed int64  `json:"replayed"`
	ID       string `json:"id"`
}

// runReplay covers the replay routes on one backend.
func runReplay(t *testing.T, mount Mount, backend string) {
	tests := []struct {
		name string
		fn   func(t *testing.T, mount Mount, backend string)
	}{
		{"One", testReplayOne},
		{"NotDead", testReplayNotDead},
		{"AllMatching", testReplayAll},
		{"ByListener", testReplayByListener},
		{"Concurrent", testReplayConcurrent},
		{"Delete", testDelete},
		{"Discard", testDiscard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, mount, backend)
		})
	}
}

func testReplayOne(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	ids := e.fx.SeedDead(t, Seed{}, Seed{})
	a, b := ids[0], ids[1]
	e.fx.Fix()

	var r replayBody
	e.c.post(t, "api/dead-events/"+a+"/replay", "{}").decode(t, http.StatusOK, &r)
	if r.Replayed != 1 || r.ID != a {
		t.Fatalf("replay = %+v, want 1 and %s", r, a)
	}
	// The replay wakes the poller, which may have delivered it already.
	if got := e.fx.Status(t, a); got != outbox.StatusNew && got != outbox.StatusDone {
		t.Fatalf("status after replay = %s, want NEW (or DONE)", got)
	}
	// It is no longer listed, and the other one is.
	var page listBody
	e.c.get(t, "api/dead-events").decode(t, http.StatusOK, &page)
	if len(page.Events) != 1 || page.Events[0].ID != b {
		t.Fatalf("list after replay = %+v, want only %s", page.Events, b)
	}
	e.fx.Poll(t)
	e.fx.WaitStatus(t, outbox.StatusDone, a)
	if n := e.fx.Deliveries(a); n != 1 {
		t.Errorf("%d deliveries of the replayed event, want 1", n)
	}
	if n, s := e.fx.Deliveries(b), e.fx.Status(t, b); n != 0 || s != outbox.StatusDead {
		t.Errorf("the other event: %d deliveries, status %s; want 0, DEAD", n, s)
	}
	// Again: it is DONE now.
	e.c.post(t, "api/dead-events/"+a+"/replay", "{}").wantError(t, http.StatusConflict, "not_dead")
	e.c.post(t, "api/dead-events/"+outbox.NewID()+"/replay", "{}").wantError(t, http.StatusNotFound, "not_found")
	e.c.post(t, "api/dead-events/no%00such/replay", "{}").wantError(t, http.StatusBadRequest, "invalid_parameter")
	var ev eventBody
	e.c.get(t, "api/dead-events/"+a).decode(t, http.StatusOK, &ev)
	if ev.Status != "DONE" || ev.Attempts != 0 || ev.LastError != "" {
		t.Errorf("replayed event = %+v, want DONE with attempts and last_error reset", ev)
	}
	if e.logs.find("INFO", "replayed dead event", a) == "" {
		t.Error("the replay left no audit log line")
	}
}

// testDelete: deleting a DEAD event removes it for good (never delivered, not listed, a
// 404 afterwards), leaves the others, refuses what is not DEAD, and is audited.
func testDelete(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	ids := e.fx.SeedDead(t, Seed{}, Seed{})
	a, b := ids[0], ids[1]
	e.fx.Fix()
	var r struct {
		Deleted int64  `json:"deleted"`
		ID      string `json:"id"`
	}
	e.c.post(t, "api/dead-events/"+a+"/delete", "{}").decode(t, http.StatusOK, &r)
	if r.Deleted != 1 || r.ID != a {
		t.Fatalf("delete = %+v, want 1 and %s", r, a)
	}
	e.c.get(t, "api/dead-events/"+a).wantError(t, http.StatusNotFound, "not_found")
	var page listBody
	e.c.get(t, "api/dead-events").decode(t, http.StatusOK, &page)
	if len(page.Events) != 1 || page.Events[0].ID != b {
		t.Fatalf("list after delete = %+v, want only %s", page.Events, b)
	}
	e.fx.Poll(t)
	if n := e.fx.Deliveries(a); n != 0 {
		t.Errorf("%d deliveries of the deleted event, want 0", n)
	}
	e.c.post(t, "api/dead-events/"+a+"/delete", "{}").wantError(t, http.StatusNotFound, "not_found")
	done := e.fx.Write(t, Seed{})[0]
	e.fx.WaitStatus(t, outbox.StatusDone, done)
	e.c.post(t, "api/dead-events/"+done+"/delete", "{}").wantError(t, http.StatusConflict, "not_dead")
	e.c.post(t, "api/dead-events/no%00such/delete", "{}").wantError(t, http.StatusBadRequest, "invalid_parameter")
	if e.logs.find("INFO", "deleted dead event", a) == "" {
		t.Error("the delete left no audit log line")
	}
}

// testDiscard: discarding a DEAD event keeps it, DISCARDED, never delivered and off the
// dead list, refuses a finished event, and is audited.
func testDiscard(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	ids := e.fx.SeedDead(t, Seed{}, Seed{})
	a, b := ids[0], ids[1]
	e.fx.Fix()
	var r struct {
		Discarded int64  `json:"discarded"`
		ID        string `json:"id"`
	}
	e.c.post(t, "api/dead-events/"+a+"/discard", "{}").decode(t, http.StatusOK, &r)
	if r.Discarded != 1 || r.ID != a {
		t.Fatalf("discard = %+v, want 1 and %s", r, a)
	}
	var ev eventBody
	e.c.get(t, "api/dead-events/"+a).decode(t, http.StatusOK, &ev)
	if ev.Status != "DISCARDED" {
		t.Errorf("discarded event = %+v, want DISCARDED", ev)
	}
	var page listBody
	e.c.get(t, "api/dead-events").decode(t, http.StatusOK, &page)
	if len(page.Events) != 1 || page.Events[0].ID != b {
		t.Fatalf("list after discard = %+v, want only %s", page.Events, b)
	}
	e.fx.Poll(t)
	if n := e.fx.Deliveries(a); n != 0 {
		t.Errorf("%d deliveries of the discarded event, want 0", n)
	}
	e.c.post(t, "api/dead-events/"+a+"/discard", "{}").wantError(t, http.StatusConflict, "finished")
	e.c.post(t, "api/dead-events/"+outbox.NewID()+"/discard", "{}").wantError(t, http.StatusNotFound, "not_found")
	e.c.post(t, "api/dead-events/no%00such/discard", "{}").wantError(t, http.StatusBadRequest, "invalid_parameter")
	if e.logs.find("INFO", "discarded event", a) == "" {
		t.Error("the discard left no audit log line")
	}
}

func testReplayNotDead(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	e.fx.Fix()
	done := e.fx.Write(t, Seed{})[0]
	e.fx.WaitStatus(t, outbox.StatusDone, done)
	pending := e.fx.Write(t, Seed{AvailableAt: time.Now().Add(time.Hour)})[0]
	for id, want := range map[string]outbox.Status{done: outbox.StatusDone, pending: outbox.StatusNew} {
		e.c.post(t, "api/dead-events/"+id+"/replay", "{}").wantError(t, http.StatusConflict, "not_dead")
		if got := e.fx.Status(t, id); got != want {
			t.Errorf("status after a refused replay = %s, want %s", got, want)
		}
	}
	if n := e.fx.Deliveries(done); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

func testReplayAll(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, func(o *outboxadmin.Options) { o.ReplayBatchSize = 2 })
	shipped := e.fx.SeedDead(t, Seed{Type: TypeOrderShipped}, Seed{Type: TypeOrderShipped}, Seed{Type: TypeOrderShipped})
	payment := e.fx.SeedDead(t, Seed{AggregateType: AggregatePayment, Type: TypePaymentTaken}, Seed{AggregateType: AggregatePayment, Type: TypePaymentTaken})
	placed := e.fx.SeedDead(t, Seed{}, Seed{}, Seed{}, Seed{}, Seed{})
	e.fx.Fix()

	steps := []struct {
		body    string
		want    int64
		replays []string
	}{
		{`{"event_type":"NoSuchType"}`, 0, nil},
		{`{"event_type":"` + TypeOrderShipped + `"}`, 3, shipped},
		{`{"aggregate_type":"` + AggregatePayment + `","event_type":"` + TypePaymentTaken + `"}`, 2, payment},
		{`{}`, 5, placed},
		{` { } `, 0, nil},
	}
	for _, s := range steps {
		var r replayBody
		e.c.post(t, "api/dead-events/replay", s.body).decode(t, http.StatusOK, &r)
		if r.Replayed != s.want {
			t.Fatalf("replay %s = %d, want %d", s.body, r.Replayed, s.want)
		}
		for _, id := range s.replays {
			if got := e.fx.Status(t, id); got != outbox.StatusNew && got != outbox.StatusDone {
				t.Fatalf("after replay %s: %s is %s, want NEW (or DONE: the replay wakes the poller)", s.body, id, got)
			}
		}
		var c countBody
		e.c.get(t, "api/dead-events/count").decode(t, http.StatusOK, &c)
		if remaining := countDead(t, e.fx, slices.Concat(shipped, payment, placed)); c.Count != remaining {
			t.Fatalf("after replay %s: count %d, %d DEAD in the table", s.body, c.Count, remaining)
		}
	}
	all := slices.Concat(shipped, payment, placed)
	e.fx.Poll(t)
	e.fx.WaitStatus(t, outbox.StatusDone, all...)
	for _, id := range all {
		if n := e.fx.Deliveries(id); n != 1 {
			t.Errorf("%s: %d deliveries, want 1", id, n)
		}
	}
}

// testReplayByListener: a replay with a listener filter moves back to NEW the DEAD
// deliveries of that listener only, each delivered once more to it alone; the other
// listener's stay DEAD, and the replay is audited with its filter.
func testReplayByListener(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, func(o *outboxadmin.Options) { o.ReplayBatchSize = 2 })
	fan := e.fx.SeedDeadFanOut(t, Seed{}, Seed{}, Seed{})
	placed := e.fx.SeedDead(t, Seed{})
	billing, mail := fan[ListenerBilling], fan[ListenerMail]
	e.fx.Fix()

	steps := []struct {
		body    string
		want    int64
		replays []string
	}{
		{`{"listener":"NoSuchListener"}`, 0, nil},
		{`{"listener":"` + ListenerMail + `","event_type":"` + TypeOrderPlaced + `"}`, 0, nil},
		{`{"listener":"` + ListenerMail + `","event_type":"` + TypeOrderCancelled + `","aggregate_type":"` + AggregateOrder + `"}`, 3, mail},
		{`{"listener":"` + ListenerMail + `"}`, 0, nil},
	}
	for _, s := range steps {
		var r replayBody
		e.c.post(t, "api/dead-events/replay", s.body).decode(t, http.StatusOK, &r)
		if r.Replayed != s.want {
			t.Fatalf("replay %s = %d, want %d", s.body, r.Replayed, s.want)
		}
		for _, id := range s.replays {
			if got := e.fx.Status(t, id); got != outbox.StatusNew && got != outbox.StatusDone {
				t.Fatalf("after replay %s: %s is %s, want NEW (or DONE)", s.body, id, got)
			}
		}
	}
	if e.logs.find("INFO", "replayed dead events", "listener="+ListenerMail) == "" {
		t.Error("the replay by listener left no audit line naming the listener")
	}
	var c countBody
	e.c.get(t, "api/dead-events/count?by=listener").decode(t, http.StatusOK, &c)
	if c.Count != 4 || len(c.ByListener) != 2 || c.ByListener[0] != (listenerCount{ListenerBilling, 3}) ||
		c.ByListener[1] != (listenerCount{RouteListener(AggregateOrder, TypeOrderPlaced), 1}) {
		t.Fatalf("count after the replay of mail = %+v, want billing's 3 and the placed one", c)
	}
	e.fx.Poll(t)
	e.fx.WaitStatus(t, outbox.StatusDone, mail...)
	for _, id := range mail {
		if n := e.fx.Deliveries(id); n != 1 {
			t.Errorf("mail delivery %s: %d deliveries, want 1", id, n)
		}
		var ev eventBody
		e.c.get(t, "api/dead-events/"+id).decode(t, http.StatusOK, &ev)
		if ev.Status != "DONE" || ev.Listener == nil || *ev.Listener != ListenerMail {
			t.Errorf("replayed mail delivery = %+v, want DONE, still for mail", ev)
		}
	}
	for _, id := range append(slices.Clone(billing), placed...) {
		if n, s := e.fx.Deliveries(id), e.fx.Status(t, id); n != 0 || s != outbox.StatusDead {
			t.Errorf("%s: %d deliveries, status %s; want 0, DEAD", id, n, s)
		}
	}
}

func countDead(t *testing.T, fx *Fixture, ids []string) int64 {
	var n int64
	for _, id := range ids {
		if fx.Status(t, id) == outbox.StatusDead {
			n++
		}
	}
	return n
}

// testReplayConcurrent fires 20 replays of one DEAD event at once: exactly one wins,
// the rest get 409, and the event is delivered exactly once more.
func testReplayConcurrent(t *testing.T, mount Mount, backend string) {
	const n = 20
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	id := e.fx.SeedDead(t, Seed{})[0]
	e.fx.Fix()

	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = e.c.request(t, http.MethodPost, "api/dead-events/"+id+"/replay", "{}")
	}
	statuses := make([]int, n)
	bodies := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := e.c.http.Do(reqs[i])
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			defer res.Body.Close()
			statuses[i] = res.StatusCode
		})
	}
	close(start)
	wg.Wait()
	ok, conflict := 0, 0
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
			conflict++
		default:
			t.Errorf("replay %d: status %d %s", i, s, bodies[i])
		}
	}
	if ok != 1 || conflict != n-1 {
		t.Fatalf("%d replays: %d succeeded and %d got 409; want 1 and %d", n, ok, conflict, n-1)
	}
	e.fx.Poll(t)
	e.fx.WaitStatus(t, outbox.StatusDone, id)
	e.fx.Poll(t) // nothing is left to deliver twice
	if got := e.fx.Deliveries(id); got != 1 {
		t.Fatalf("%d deliveries after %d concurrent replays, want exactly 1", got, n)
	}
}
