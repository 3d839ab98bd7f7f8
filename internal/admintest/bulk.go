package admintest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
)

// bulkBody is the answer to a bulk action.
type bulkBody struct {
	Count     int64 `json:"count"`
	Requested int   `json:"requested"`
}

// runBulk covers POST /api/events/replay, /discard and /delete and the audit trail of
// every change, on one backend.
func runBulk(t *testing.T, mount Mount, backend string) {
	tests := []struct {
		name string
		fn   func(t *testing.T, mount Mount, backend string)
	}{
		{"Replay", testBulkReplay},
		{"Discard", testBulkDiscard},
		{"Delete", testBulkDelete},
		{"BadBodies", testBulkBadBodies},
		{"AuditOfEveryChange", testAuditOfEveryChange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, mount, backend)
		})
	}
}

// actorFromHeader is an Options.Actor that names the user an authenticating proxy put
// in X-User.
func actorFromHeader(o *outboxadmin.Options) {
	o.Actor = func(r *http.Request) string { return r.Header.Get("X-User") }
}

// postAs posts body to path with X-User: user.
func (e *env) postAs(t *testing.T, user, path, body string) response {
	t.Helper()
	req := e.c.request(t, http.MethodPost, path, body)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	return e.c.do(t, req)
}

func idsBody(ids ...string) string {
	b, _ := json.Marshal(map[string][]string{"ids": ids})
	return string(b)
}

// auditEntries returns the whole audit trail, newest first, page by page.
func (e *env) auditEntries(t *testing.T) []auditEntryBody {
	t.Helper()
	var all []auditEntryBody
	before := ""
	for range 100 {
		var page auditBody
		e.c.get(t, "api/audit?limit=2&before="+before).decode(t, http.StatusOK, &page)
		all = append(all, page.Entries...)
		if page.Next == nil || *page.Next == "" {
			return all
		}
		before = *page.Next
	}
	t.Fatal("audit trail: more than 100 pages")
	return nil
}

// testBulkReplay: a bulk replay moves back to NEW the DEAD events among the IDs and
// counts them, leaves the others alone, and is audited with the actor.
func testBulkReplay(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, actorFromHeader)
	dead := e.fx.SeedDead(t, Seed{}, Seed{}, Seed{})
	pending := e.fx.Write(t, Seed{AvailableAt: time.Now().Add(time.Hour)})[0]
	e.fx.Fix()
	unknown := outbox.NewID()

	var r bulkBody
	e.postAs(t, "alice", "api/events/replay", idsBody(dead[0], dead[1], pending, unknown, dead[0])).decode(t, http.StatusOK, &r)
	if r.Count != 2 || r.Requested != 4 {
		t.Fatalf("bulk replay = %+v, want count 2 of 4 distinct IDs", r)
	}
	for _, id := range dead[:2] {
		if got := e.fx.Status(t, id); got != outbox.StatusNew && got != outbox.StatusDone {
			t.Errorf("replayed %s is %s, want NEW (or DONE)", id, got)
		}
	}
	if got := e.fx.Status(t, dead[2]); got != outbox.StatusDead {
		t.Errorf("the event not asked for is %s, want DEAD", got)
	}
	if got := e.fx.Status(t, pending); got != outbox.StatusNew {
		t.Errorf("the pending event is %s, want NEW", got)
	}
	// Again: nothing is DEAD among them any more; the attempt is audited too.
	e.postAs(t, "bob", "api/events/replay", idsBody(dead[0], dead[1])).decode(t, http.StatusOK, &r)
	if r.Count != 0 || r.Requested != 2 {
		t.Fatalf("second bulk replay = %+v, want 0 of 2", r)
	}
	entries := e.auditEntries(t)
	if len(entries) != 2 {
		t.Fatalf("audit = %+v, want 2 entries", entries)
	}
	first, second := entries[1], entries[0] // newest first
	if first.Actor != "alice" || first.Action != outbox.AuditReplay || first.Count != 2 ||
		!slices.Equal(strings.Split(first.Target, ","), []string{dead[0], dead[1], pending, unknown}) || first.At.IsZero() {
		t.Errorf("audit entry of the replay = %+v", first)
	}
	if second.Actor != "bob" || second.Count != 0 || !second.At.After(first.At.Add(-time.Second)) {
		t.Errorf("audit entry of the empty replay = %+v", second)
	}
	if e.logs.find("INFO", "replayed events", "count=2", "actor=alice", dead[0]) == "" {
		t.Error("the bulk replay left no audit log line with its count, actor and IDs")
	}
	e.fx.Poll(t)
	e.fx.WaitStatus(t, outbox.StatusDone, dead[:2]...)
	for _, id := range dead[:2] {
		if n := e.fx.Deliveries(id); n != 1 {
			t.Errorf("%s: %d deliveries, want 1", id, n)
		}
	}
}

// testBulkDiscard: a bulk discard makes the DEAD and pending events among the IDs
// DISCARDED, never delivered, and leaves a finished one alone; the audit trail names
// the default actor, the client's address.
func testBulkDiscard(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	dead := e.fx.SeedDead(t, Seed{})[0]
	pending := e.fx.Write(t, Seed{AvailableAt: time.Now().Add(time.Hour)})[0]
	e.fx.Fix()
	done := e.fx.Write(t, Seed{})[0]
	e.fx.WaitStatus(t, outbox.StatusDone, done)

	var r bulkBody
	e.c.post(t, "api/events/discard", idsBody(dead, pending, done)).decode(t, http.StatusOK, &r)
	if r.Count != 2 || r.Requested != 3 {
		t.Fatalf("bulk discard = %+v, want 2 of 3", r)
	}
	for id, want := range map[string]outbox.Status{dead: outbox.StatusDiscarded, pending: outbox.StatusDiscarded, done: outbox.StatusDone} {
		if got := e.fx.Status(t, id); got != want {
			t.Errorf("%s after the bulk discard: %s, want %s", id, got, want)
		}
	}
	var page eventsBody
	e.c.get(t, "api/events?status=discarded").decode(t, http.StatusOK, &page)
	if got := page.ids(); len(got) != 2 || !slices.Contains(got, dead) || !slices.Contains(got, pending) {
		t.Errorf("discarded list = %v, want %s and %s", got, dead, pending)
	}
	e.fx.Poll(t)
	if n := e.fx.Deliveries(dead) + e.fx.Deliveries(pending); n != 0 {
		t.Errorf("%d deliveries of discarded events, want 0", n)
	}
	entries := e.auditEntries(t)
	if len(entries) != 1 || entries[0].Action != outbox.AuditDiscard || entries[0].Count != 2 ||
		!strings.HasPrefix(entries[0].Actor, "admin 127.0.0.1:") {
		t.Errorf("audit = %+v, want one discard of 2 by admin 127.0.0.1:<port>", entries)
	}
	if e.logs.find("INFO", "discarded events", "count=2", "actor=admin 127.0.0.1:") == "" {
		t.Error("the bulk discard left no audit log line")
	}
}

// testBulkDelete: a bulk delete removes the DEAD events among the IDs for good and
// leaves a pending one.
func testBulkDelete(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, actorFromHeader)
	dead := e.fx.SeedDead(t, Seed{}, Seed{})
	pending := e.fx.Write(t, Seed{AvailableAt: time.Now().Add(time.Hour)})[0]
	e.fx.Fix()

	var r bulkBody
	e.postAs(t, "carol", "api/events/delete", idsBody(dead[0], dead[1], pending)).decode(t, http.StatusOK, &r)
	if r.Count != 2 || r.Requested != 3 {
		t.Fatalf("bulk delete = %+v, want 2 of 3", r)
	}
	for _, id := range dead {
		e.c.get(t, "api/events/"+id).wantError(t, http.StatusNotFound, "not_found")
	}
	if got := e.fx.Status(t, pending); got != outbox.StatusNew {
		t.Errorf("the pending event is %s, want NEW", got)
	}
	entries := e.auditEntries(t)
	if len(entries) != 1 || entries[0].Action != outbox.AuditDelete || entries[0].Count != 2 || entries[0].Actor != "carol" {
		t.Errorf("audit = %+v, want one delete of 2 by carol", entries)
	}
	if e.logs.find("INFO", "deleted events", "count=2", "actor=carol") == "" {
		t.Error("the bulk delete left no audit log line")
	}
}

func testBulkBadBodies(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	id := e.fx.SeedDead(t, Seed{})[0]
	e.fx.Fix()
	tooMany := make([]string, outbox.MaxBulkIDs+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("id-", i)
	}
	cases := []struct {
		path, body  string
		status      int
		code, param string
	}{
		{path: "api/events/replay", body: `{}`, status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/replay", body: `{"ids":[]}`, status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/replay", body: `{"ids":null}`, status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/discard", body: idsBody(tooMany...), status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/delete", body: idsBody(id, ""), status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/replay", body: idsBody(id, "a\x00b"), status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/replay", body: idsBody(id, strings.Repeat("i", outbox.MaxIDLen+1)), status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/replay", body: `{"ids":"` + id + `"}`, status: 400, code: "invalid_body"},
		{path: "api/events/replay", body: `{"ids":[1]}`, status: 400, code: "invalid_body"},
		{path: "api/events/replay", body: `{"id":["` + id + `"]}`, status: 400, code: "invalid_body"},
		{path: "api/events/replay", body: `[]`, status: 400, code: "invalid_body"},
		{path: "api/events/replay?ids=" + id, body: idsBody(id), status: 400, code: "invalid_parameter", param: "ids"},
		{path: "api/events/replay", body: `{"ids":["` + strings.Repeat("x", outboxadmin.MaxBodyBytes) + `"]}`, status: 413, code: "body_too_large"},
	}
	for _, c := range cases {
		got := e.c.post(t, c.path, c.body).wantError(t, c.status, c.code)
		if got.Param != c.param {
			t.Errorf("POST /%s %.40q: param %q, want %q", c.path, c.body, got.Param, c.param)
		}
	}
	if got := e.c.post(t, "api/events/replay", `{"id":["x"]}`).wantError(t, 400, "invalid_body"); !strings.Contains(got.Message, "accepted: ids") {
		t.Errorf("unknown field: message %q, want the accepted field", got.Message)
	}
	if got := e.c.post(t, "api/dead-events/"+id+"/replay", `{"force":true}`).wantError(t, 400, "invalid_body"); !strings.Contains(got.Message, "must be {}") {
		t.Errorf("unknown field of a single replay: message %q, want that the body is {}", got.Message)
	}
	// 500 IDs are fine.
	var r bulkBody
	e.c.post(t, "api/events/delete", idsBody(tooMany[:outbox.MaxBulkIDs]...)).decode(t, http.StatusOK, &r)
	if r.Count != 0 || r.Requested != outbox.MaxBulkIDs {
		t.Errorf("500 unknown IDs: %+v", r)
	}
	if got := e.fx.Status(t, id); got != outbox.StatusDead {
		t.Fatalf("status after rejected bodies = %s, want DEAD", got)
	}
	entries := e.auditEntries(t)
	if len(entries) != 1 || entries[0].Count != 0 || entries[0].Action != outbox.AuditDelete {
		t.Errorf("audit = %+v, want the accepted delete of none only", entries)
	}
}

// testAuditOfEveryChange: the single-event routes and the replay by filter are audited
// with the actor too, and the trail pages newest first.
func testAuditOfEveryChange(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, actorFromHeader)
	ids := e.fx.SeedDead(t, Seed{}, Seed{}, Seed{}, Seed{Type: TypeOrderShipped}, Seed{Type: TypeOrderShipped})
	e.fx.Fix()
	e.postAs(t, "ann", "api/dead-events/"+ids[0]+"/replay", "{}").decode(t, http.StatusOK, &replayBody{})
	e.postAs(t, "ben", "api/dead-events/"+ids[1]+"/discard", "{}").decode(t, http.StatusOK, &struct{}{})
	e.postAs(t, "cid", "api/dead-events/"+ids[2]+"/delete", "{}").decode(t, http.StatusOK, &struct{}{})
	e.postAs(t, "dee", "api/dead-events/replay", `{"event_type":"`+TypeOrderShipped+`"}`).decode(t, http.StatusOK, &replayBody{})
	e.postAs(t, "", "api/events/replay", idsBody(ids[0])).decode(t, http.StatusOK, &bulkBody{}) // the default actor
	// A refused change (409) is not in the trail.
	e.postAs(t, "eve", "api/dead-events/"+ids[0]+"/replay", "{}").wantError(t, http.StatusConflict, "not_dead")

	var got []string
	for _, en := range e.auditEntries(t) {
		actor := en.Actor
		if strings.HasPrefix(actor, "admin 127.0.0.1:") {
			actor = "admin"
		}
		got = append(got, fmt.Sprintf("%s %s %s %d", actor, en.Action, en.Target, en.Count))
	}
	want := []string{
		"admin replay " + ids[0] + " 0",
		"dee replay-all event_type=" + TypeOrderShipped + " 2",
		"cid delete " + ids[2] + " 1",
		"ben discard " + ids[1] + " 1",
		"ann replay " + ids[0] + " 1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit trail:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if e.logs.find("INFO", "replayed dead event", ids[0], "actor=ann") == "" {
		t.Error("the single replay's log line does not name the actor")
	}
}
