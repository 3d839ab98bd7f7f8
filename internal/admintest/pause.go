package admintest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

type (
	subscriptionsBody struct {
		Subscriptions  []subscriptionBody `json:"subscriptions"`
		PauseSupported *bool              `json:"pause_supported"` // always present
	}
	subscriptionBody struct {
		Listener   string     `json:"listener"`
		Queued     int        `json:"queued"`
		Running    int        `json:"running"`
		Limited    bool       `json:"limited"`
		Paused     bool       `json:"paused"`
		Pause      *pauseBody `json:"pause"`
		Registered bool       `json:"registered"`
	}
	pauseBody struct {
		Since  time.Time `json:"since"`
		Actor  string    `json:"actor"`
		Reason string    `json:"reason"`
	}
	pausedBody struct {
		Listener string `json:"listener"`
		Paused   bool   `json:"paused"`
	}
)

// subscription returns the subscription named name of GET /api/subscriptions, or nil.
func (b subscriptionsBody) subscription(name string) *subscriptionBody {
	for i := range b.Subscriptions {
		if b.Subscriptions[i].Listener == name {
			return &b.Subscriptions[i]
		}
	}
	return nil
}

// listenerBody is the body of a pause or resume of name, with reason when not empty.
func listenerBody(name, reason string) string {
	m := map[string]string{"listener": name}
	if reason != "" {
		m["reason"] = reason
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// runPause covers the pause and resume routes and the subscriptions' pauses in GET
// /api/subscriptions on one backend.
func runPause(t *testing.T, mount Mount, backend string) {
	tests := []struct {
		name string
		fn   func(t *testing.T, mount Mount, backend string)
	}{
		{"PauseAndResume", testPauseAndResume},
		{"Refused", testPauseRefused},
		{"Unsupported", testPauseUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, mount, backend)
		})
	}
}

// testPauseAndResume: a pause of a subscription (a name with "/") holds its events
// pending, shows in GET /api/subscriptions with since, actor and reason, and is
// audited; a subscription this process does not run can be paused too and is listed as
// such; a resume delivers the held event and is audited.
func testPauseAndResume(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, actorFromHeader)
	e.fx.Fix()
	placed := RouteListener(AggregateOrder, TypeOrderPlaced)
	const elsewhere = "reports/Order/Nightly" // registered by no process of the test

	var subs subscriptionsBody
	e.c.get(t, "api/subscriptions").decode(t, http.StatusOK, &subs)
	if subs.PauseSupported == nil || !*subs.PauseSupported || len(subs.Subscriptions) != len(routes)+len(fanOutListeners) {
		t.Fatalf("subscriptions before any pause: %+v", subs)
	}
	for _, s := range subs.Subscriptions {
		if s.Paused || s.Pause != nil || !s.Registered {
			t.Fatalf("subscription before any pause: %+v", s)
		}
	}

	before := time.Now().Add(-time.Minute)
	var r pausedBody
	e.postAs(t, "alice", "api/subscriptions/pause", listenerBody(placed, "inventory is down")).decode(t, http.StatusOK, &r)
	if r != (pausedBody{Listener: placed, Paused: true}) {
		t.Fatalf("pause = %+v", r)
	}
	// Pausing it again changes nothing: its first pause, actor and reason stay.
	e.postAs(t, "bob", "api/subscriptions/pause", listenerBody(placed, "again")).decode(t, http.StatusOK, &r)
	// A body without reason: the reason is optional.
	e.postAs(t, "carol", "api/subscriptions/pause", `{"listener":"`+elsewhere+`"}`).decode(t, http.StatusOK, &r)

	// Its events stay pending: the hot path and the poller leave them alone.
	held := e.fx.Write(t, Seed{})[0]
	other := e.fx.Write(t, Seed{Type: TypeOrderShipped})[0]
	e.fx.WaitStatus(t, outbox.StatusDone, other)
	e.fx.Poll(t)
	if got := e.fx.Status(t, held); got != outbox.StatusNew || e.fx.Deliveries(held) != 0 {
		t.Fatalf("an event of the paused subscription is %s after a poll, %d deliveries; want NEW, 0", got, e.fx.Deliveries(held))
	}

	subs = subscriptionsBody{}
	e.c.get(t, "api/subscriptions").decode(t, http.StatusOK, &subs)
	p := subs.subscription(placed)
	if p == nil || !p.Paused || !p.Registered || p.Queued != 0 || p.Pause == nil || p.Pause.Actor != "alice" ||
		p.Pause.Reason != "inventory is down" || p.Pause.Since.Before(before) || p.Pause.Since.After(time.Now().Add(time.Minute)) {
		t.Fatalf("the paused subscription: %+v (pause %+v)", p, pauseOf(p))
	}
	o := subs.subscription(elsewhere)
	if o == nil || !o.Paused || o.Registered || o.Pause == nil || o.Pause.Actor != "carol" || o.Pause.Reason != "" {
		t.Fatalf("the paused subscription no process here runs: %+v (pause %+v)", o, pauseOf(o))
	}
	if s := subs.subscription(RouteListener(AggregateOrder, TypeOrderShipped)); s == nil || s.Paused || s.Pause != nil {
		t.Fatalf("a subscription that was not paused: %+v", s)
	}
	for i := 1; i < len(subs.Subscriptions); i++ {
		if subs.Subscriptions[i-1].Listener >= subs.Subscriptions[i].Listener {
			t.Fatalf("subscriptions not by name: %+v", subs.Subscriptions)
		}
	}

	e.postAs(t, "dave", "api/subscriptions/resume", listenerBody(placed, "")).decode(t, http.StatusOK, &r)
	if r != (pausedBody{Listener: placed, Paused: false}) {
		t.Fatalf("resume = %+v", r)
	}
	e.postAs(t, "dave", "api/subscriptions/resume", listenerBody(elsewhere, "")).decode(t, http.StatusOK, &r)
	e.fx.Poll(t)
	e.fx.WaitStatus(t, outbox.StatusDone, held)
	subs = subscriptionsBody{}
	e.c.get(t, "api/subscriptions").decode(t, http.StatusOK, &subs)
	if p := subs.subscription(placed); p == nil || p.Paused || p.Pause != nil {
		t.Fatalf("the resumed subscription: %+v", p)
	}
	if o := subs.subscription(elsewhere); o != nil {
		t.Fatalf("a resumed subscription no process here runs is still listed: %+v", o)
	}

	// Newest first: each change with its actor, the subscription, and 1 when it
	// changed its state (the second pause did not).
	var got []string
	for _, a := range e.auditEntries(t) {
		got = append(got, fmt.Sprint(a.Actor, " ", a.Action, " ", a.Target, " ", a.Count))
	}
	want := []string{"dave resume " + elsewhere + " 1", "dave resume " + placed + " 1", "carol pause " + elsewhere + " 1",
		"bob pause " + placed + " 0", "alice pause " + placed + " 1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit trail:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e.logs.find("INFO", "paused subscription", placed, "alice", "inventory is down") == "" ||
		e.logs.find("INFO", "resumed subscription", placed, "dave") == "" {
		t.Error("no audit log line of the pause and the resume")
	}
}

func pauseOf(s *subscriptionBody) any {
	if s == nil {
		return nil
	}
	return s.Pause
}

// testPauseRefused: a pause or resume without credentials, from another site, with a bad
// name or reason, a bad body, a query string or another method changes nothing.
func testPauseRefused(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	placed := RouteListener(AggregateOrder, TypeOrderPlaced)
	body := listenerBody(placed, "")

	for _, path := range []string{"api/subscriptions/pause", "api/subscriptions/resume"} {
		e.anon.post(t, path, body).wantError(t, http.StatusUnauthorized, "unauthorized")
		req := e.anon.request(t, http.MethodPost, path, body)
		req.Header.Set("Authorization", "Bearer wrong")
		e.anon.do(t, req).wantError(t, http.StatusUnauthorized, "unauthorized")
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Origin": "http://evil.example"},
			{"Sec-Fetch-Site": "cross-site", "Origin": originOf(t, e.base)},
		} {
			req := e.c.request(t, http.MethodPost, path, body)
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			e.c.do(t, req).wantError(t, http.StatusForbidden, "cross_origin")
		}
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			res := e.c.do(t, e.c.request(t, m, path, ""))
			res.wantError(t, http.StatusMethodNotAllowed, "method_not_allowed")
			if got := res.header.Get("Allow"); got != "POST" {
				t.Errorf("%s /%s: Allow = %q, want POST", m, path, got)
			}
		}
		req = e.c.request(t, http.MethodPost, path, body)
		req.Header.Set("Content-Type", "text/plain")
		e.c.do(t, req).wantError(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
	}

	long := strings.Repeat("l", outbox.MaxListenerLen+1)
	for _, c := range []struct {
		path, body  string
		code, param string
	}{
		{"api/subscriptions/pause", `{}`, "invalid_parameter", "listener"},
		{"api/subscriptions/pause", `{"listener":""}`, "invalid_parameter", "listener"},
		{"api/subscriptions/pause", `{"listener":"` + long + `"}`, "invalid_parameter", "listener"},
		{"api/subscriptions/pause", `{"listener":"a\u0000b"}`, "invalid_parameter", "listener"},
		{"api/subscriptions/pause", `{"listener":"` + placed + `","reason":"` + strings.Repeat("r", outbox.MaxLastErrorLen+1) + `"}`,
			"invalid_parameter", "reason"},
		{"api/subscriptions/pause", `{"listener":"` + placed + `","reason":"a\u0000"}`, "invalid_parameter", "reason"},
		{"api/subscriptions/pause", `{"listener":1}`, "invalid_body", ""},
		{"api/subscriptions/pause", `{"name":"` + placed + `"}`, "invalid_body", ""},
		{"api/subscriptions/pause", `null`, "invalid_body", ""},
		{"api/subscriptions/pause?listener=" + placed, `{"listener":"` + placed + `"}`, "invalid_parameter", "listener"},
		{"api/subscriptions/resume", `{"listener":""}`, "invalid_parameter", "listener"},
		{"api/subscriptions/resume", `{"listener":"` + placed + `","reason":"x"}`, "invalid_body", ""},
	} {
		got := e.c.post(t, c.path, c.body).wantError(t, http.StatusBadRequest, c.code)
		if got.Param != c.param {
			t.Errorf("POST /%s %.60q: param %q, want %q", c.path, c.body, got.Param, c.param)
		}
	}
	if got := e.c.post(t, "api/subscriptions/pause", `{"name":"x"}`).wantError(t, http.StatusBadRequest, "invalid_body"); !strings.Contains(got.Message, "accepted: listener, reason") {
		t.Errorf("unknown body field: message %q, want the accepted fields", got.Message)
	}
	e.c.get(t, "api/subscriptions?x=1").wantError(t, http.StatusBadRequest, "invalid_parameter")
	e.anon.get(t, "api/subscriptions").wantError(t, http.StatusUnauthorized, "unauthorized")

	e.wantNothingPaused(t)
	if n := len(e.auditEntries(t)); n != 0 {
		t.Fatalf("%d audit entries after refused requests, want 0", n)
	}
}

// testPauseUnsupported: on a table without the pause table (its migration not run) the
// subscriptions are listed with pause_supported false, and a pause or resume is a 501
// that says what is missing.
func testPauseUnsupported(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	if _, err := e.fx.DB.ExecContext(context.Background(), "DROP TABLE "+e.fx.Table+"_pause"); err != nil {
		t.Fatal(err)
	}
	var subs subscriptionsBody
	e.c.get(t, "api/subscriptions").decode(t, http.StatusOK, &subs)
	if subs.PauseSupported == nil || *subs.PauseSupported || len(subs.Subscriptions) != len(routes)+len(fanOutListeners) {
		t.Fatalf("subscriptions without the pause table: %+v", subs)
	}
	body := listenerBody(RouteListener(AggregateOrder, TypeOrderPlaced), "")
	for _, path := range []string{"api/subscriptions/pause", "api/subscriptions/resume"} {
		if got := e.c.post(t, path, body).wantError(t, http.StatusNotImplemented, "unsupported"); !strings.Contains(got.Message, "pause migration") {
			t.Errorf("POST /%s without the pause table: %q, want the missing migration", path, got.Message)
		}
	}
	if n := len(e.auditEntries(t)); n != 0 {
		t.Fatalf("%d audit entries after unsupported pauses, want 0", n)
	}
}

// wantNothingPaused fails the test when the table has a paused subscription.
func (e *env) wantNothingPaused(t *testing.T) {
	t.Helper()
	paused, err := e.fx.Outbox.Events().Paused(context.Background())
	if err != nil || len(paused) != 0 {
		t.Fatalf("paused subscriptions %+v, %v; want none", paused, err)
	}
}
