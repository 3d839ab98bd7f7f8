package admintest

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
)

// Shapes of the responses of the lists of every status, as a client decodes them.
type (
	eventsBody struct {
		Events    []eventBody `json:"events"`
		Next      *string     `json:"next"` // always present
		Partial   bool        `json:"partial"`
		ScanLimit int         `json:"scan_limit"`
		Limit     int         `json:"limit"`
	}
	detailBody struct {
		eventBody
		TenantID       string     `json:"tenant_id"`
		AvailableAt    time.Time  `json:"available_at"`
		FirstAttemptAt *time.Time `json:"first_attempt_at"`
		LockedBy       *string    `json:"locked_by"`
		LockedUntil    *time.Time `json:"locked_until"`
		OrderKey       string     `json:"order_key"`
		OrderSeq       int64      `json:"order_seq"`
	}
	fullOverviewBody struct {
		Counts      map[string]int64 `json:"counts"`
		BlockedKeys int64            `json:"blocked_keys"`
		ByType      []struct {
			Status    string `json:"status"`
			EventType string `json:"event_type"`
			Count     int64  `json:"count"`
		} `json:"by_type"`
	}
	auditBody struct {
		Entries []auditEntryBody `json:"entries"`
		Next    *string          `json:"next"` // always present
	}
	auditEntryBody struct {
		ID     string    `json:"id"`
		At     time.Time `json:"at"`
		Actor  string    `json:"actor"`
		Action string    `json:"action"`
		Target string    `json:"target"`
		Count  int64     `json:"count"`
	}
)

// ids returns the IDs of the page's events, in order.
func (b eventsBody) ids() []string {
	var out []string
	for _, e := range b.Events {
		out = append(out, e.ID)
	}
	return out
}

// eventsEnv is the fixture the Events subtests share: events of every status but
// FALLBACK, at known creation times a minute apart, on one backend. No subtest
// changes it.
type eventsEnv struct {
	*env
	base     time.Time // the creation time of dead[0]; the others follow a minute apart
	dead     []string  // OrderPlaced order-1, OrderShipped order-2, PaymentTaken pay-1, the head of key k1
	retry    string    // OrderPlaced order-1, RETRY after one attempt
	waiting  string    // behind dead[3] on key k1
	pending  []string  // NEW: OrderPlaced order-1, OrderShipped order-3
	discard  string    // discarded while NEW
	done     []string  // OrderPlaced order-1, then PaymentTaken pay-2, finished in that order
	doneAt   []time.Time
	shipping string // the listener of OrderShipped
}

// Reasons of the events fixture. timeoutReason has upper case for the case-insensitive
// search, cardReason the LIKE wildcards % and _.
const (
	timeoutReason = "carrier TIMEOUT after 30s"
	cardReason    = "card declined: 100%_sure"
	retryReason   = "inventory service: 503"
)

// runEvents covers GET /api/events and GET /api/events/{id} on one backend: every
// status, each filter, the order, pages, limits and bad parameters, and the overview
// and audit reads.
func runEvents(t *testing.T, mount Mount, backend string) {
	e := &eventsEnv{env: setup(t, mount, FixtureOptions{Backend: backend}, nil)}
	fx := e.fx
	e.base = time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	at := func(minutes int) time.Time { return e.base.Add(time.Duration(minutes) * time.Minute) }
	later := time.Now().Add(time.Hour)
	e.dead = fx.SeedDead(t,
		Seed{AggregateID: "order-1", OccurredAt: at(0)},
		Seed{Type: TypeOrderShipped, AggregateID: "order-2", Reason: timeoutReason, OccurredAt: at(1)},
		Seed{AggregateType: AggregatePayment, Type: TypePaymentTaken, AggregateID: "pay-1", Reason: cardReason, OccurredAt: at(2)},
	)
	e.retry = fx.SeedRetry(t, Seed{AggregateID: "order-1", Reason: retryReason, OccurredAt: at(3),
		Headers: map[string]string{"trace": "t-1"}, Payload: map[string]int{"qty": 2}})[0]
	ordered := fx.Write(t, Seed{AggregateID: "acct-1", OrderKey: "k1", OccurredAt: at(4)}, Seed{AggregateID: "acct-1", OrderKey: "k1", OccurredAt: at(5)})
	fx.WaitStatus(t, outbox.StatusDead, ordered[0])
	fx.WaitStatus(t, outbox.StatusWaiting, ordered[1])
	e.dead, e.waiting = append(e.dead, ordered[0]), ordered[1]
	e.pending = fx.Write(t,
		Seed{AggregateID: "order-1", OccurredAt: at(6), AvailableAt: later},
		Seed{Type: TypeOrderShipped, AggregateID: "order-3", OccurredAt: at(7), AvailableAt: later},
	)
	e.discard = fx.Write(t, Seed{AggregateID: "order-4", OccurredAt: at(8), AvailableAt: later})[0]
	if err := fx.Outbox.Events().Discard(context.Background(), e.discard); err != nil {
		t.Fatalf("discard: %v", err)
	}
	fx.Fix()
	for _, s := range []Seed{{AggregateID: "order-1", OccurredAt: at(9)}, {AggregateType: AggregatePayment, Type: TypePaymentTaken, AggregateID: "pay-2", OccurredAt: at(10)}} {
		id := fx.Write(t, s)[0]
		fx.WaitStatus(t, outbox.StatusDone, id)
		ev, err := fx.Outbox.Events().Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		e.done, e.doneAt = append(e.done, id), append(e.doneAt, ev.DoneAt)
		time.Sleep(10 * time.Millisecond) // the second finishes strictly later on every clock
	}
	e.shipping = RouteListener(AggregateOrder, TypeOrderShipped)

	tests := []struct {
		name string
		fn   func(t *testing.T, e *eventsEnv)
	}{
		{"EveryStatus", testEventsEveryStatus},
		{"Filters", testEventsFilters},
		{"Pages", testEventsPages},
		{"Limits", testEventsLimits},
		{"BadParameters", testEventsBadParameters},
		{"Detail", testEventDetail},
		{"Overview", testEventsOverview},
		{"AuditEmpty", testAuditEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, e)
		})
	}
}

// list gets GET api/events?<query> and checks the fields every answer has.
func (e *eventsEnv) list(t *testing.T, query string) eventsBody {
	t.Helper()
	var page eventsBody
	res := e.c.get(t, "api/events?"+query)
	res.decode(t, http.StatusOK, &page)
	if page.Next == nil || page.ScanLimit != outbox.MaxScanRows || page.Events == nil {
		t.Fatalf("?%s: %s; want events, next and scan_limit %d", query, res.body, outbox.MaxScanRows)
	}
	return page
}

func reversed(ids []string) []string {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

func testEventsEveryStatus(t *testing.T, e *eventsEnv) {
	cases := []struct {
		query  string
		want   []string
		status string
	}{
		{"status=dead", e.dead, "DEAD"},
		{"status=dead&newest=1", reversed(e.dead), "DEAD"},
		{"status=new", e.pending, "NEW"},
		{"status=new&newest=true", reversed(e.pending), "NEW"},
		{"status=retry", []string{e.retry}, "RETRY"},
		{"status=waiting", []string{e.waiting}, "WAITING"},
		{"status=done", e.done, "DONE"},
		{"status=done&newest=1", reversed(e.done), "DONE"},
		{"status=done&newest=0", e.done, "DONE"},
		{"status=discarded", []string{e.discard}, "DISCARDED"},
		{"status=fallback", nil, ""},
	}
	for _, c := range cases {
		page := e.list(t, c.query)
		if got := page.ids(); !slices.Equal(got, c.want) || *page.Next != "" || page.Partial {
			t.Errorf("?%s: %v (next %q, partial %v), want %v", c.query, got, *page.Next, page.Partial, c.want)
		}
		for _, ev := range page.Events {
			if ev.Status != c.status {
				t.Errorf("?%s: event %s is %s", c.query, ev.ID, ev.Status)
			}
		}
	}
	page := e.list(t, "status=retry")
	if ev := page.Events[0]; ev.Attempts != 1 || !strings.HasSuffix(ev.LastError, retryReason) || ev.DoneAt != nil {
		t.Errorf("the RETRY event in its list = %+v, want one attempt, its reason, no done_at", ev)
	}
	page = e.list(t, "status=done")
	if ev := page.Events[0]; ev.DoneAt == nil || !ev.DoneAt.Equal(e.doneAt[0]) {
		t.Errorf("the DONE event in its list = %+v, want done_at %s", ev, e.doneAt[0])
	}
	// An empty list is [], and a list leaves out headers and payloads.
	res := e.c.get(t, "api/events?status=fallback")
	if !strings.Contains(string(res.body), `"events":[]`) || !strings.Contains(string(res.body), `"next":""`) {
		t.Errorf("empty list: %s", res.body)
	}
	if res := e.c.get(t, "api/events?status=retry"); strings.Contains(string(res.body), `"payload"`) || strings.Contains(string(res.body), `"headers"`) {
		t.Errorf("list items carry payload or headers: %s", res.body)
	}
}

func testEventsFilters(t *testing.T, e *eventsEnv) {
	at := func(minutes int) string {
		return url.QueryEscape(e.base.Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339))
	}
	q := url.QueryEscape
	cases := []struct {
		query string
		want  []string
	}{
		{"status=dead&event_type=" + TypeOrderShipped, e.dead[1:2]},
		{"status=dead&event_type=NoSuchType", nil},
		{"status=dead&aggregate_type=" + AggregatePayment, e.dead[2:3]},
		{"status=dead&aggregate_type=" + AggregateOrder + "&event_type=" + TypeOrderPlaced, []string{e.dead[0], e.dead[3]}},
		{"status=dead&aggregate_id=order-1", e.dead[:1]},
		{"status=dead&aggregate_id=order-1&newest=1", e.dead[:1]},
		{"status=dead&aggregate_id=no-such", nil},
		{"status=new&aggregate_id=order-1", e.pending[:1]},
		{"status=retry&aggregate_id=order-1", []string{e.retry}},
		{"status=done&aggregate_id=order-1", e.done[:1]},
		{"status=waiting&aggregate_id=acct-1", []string{e.waiting}},
		{"status=discarded&aggregate_id=order-4", []string{e.discard}},
		{"status=dead&listener=" + q(e.shipping), e.dead[1:2]},
		{"status=new&listener=" + q(e.shipping), nil}, // a pending event names no listener yet
		{"status=dead&error=timeout", e.dead[1:2]},    // any case
		{"status=dead&error=" + q("TimeOut after"), e.dead[1:2]},
		{"status=dead&error=" + q("%"), e.dead[2:3]}, // LIKE wildcards are matched literally
		{"status=dead&error=" + q("0%_s"), e.dead[2:3]},
		{"status=dead&error=" + q("_"), e.dead[2:3]},
		{"status=dead&error=c_rd", nil},
		{"status=retry&error=503", []string{e.retry}},
		{"status=dead&error=" + q(DefaultReason) + "&aggregate_id=acct-1", e.dead[3:4]},
		{"status=dead&from=" + at(1), e.dead[1:]},
		{"status=dead&to=" + at(1), e.dead[:1]},
		{"status=dead&from=" + at(1) + "&to=" + at(2), e.dead[1:2]},
		{"status=dead&from=" + at(1) + "&to=" + at(3) + "&newest=1", reversed(e.dead[1:3])},
		{"status=dead&from=" + at(60), nil},
		{"status=new&from=" + at(7), e.pending[1:]},
		// DONE is listed by finish time: from and to bound that.
		{"status=done&from=" + q(e.doneAt[1].Format(time.RFC3339Nano)), e.done[1:]},
		{"status=done&to=" + q(e.doneAt[1].Format(time.RFC3339Nano)), e.done[:1]},
		{"status=done&to=" + at(60), nil}, // both finished now, three hours after base
		// With aggregate_id every list is by creation time.
		{"status=done&aggregate_id=order-1&to=" + at(60), e.done[:1]},
		{"status=dead&event_type=&aggregate_id=&listener=&error=&from=&to=&newest=&limit=&after=", e.dead},
	}
	for _, c := range cases {
		page := e.list(t, c.query)
		if got := page.ids(); !slices.Equal(got, c.want) || *page.Next != "" || page.Partial {
			t.Errorf("?%s: %v (next %q, partial %v), want %v", c.query, got, *page.Next, page.Partial, c.want)
		}
	}
}

func testEventsPages(t *testing.T, e *eventsEnv) {
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"status=dead", e.dead},
		{"status=dead&newest=1", reversed(e.dead)},
		{"status=done&newest=1", reversed(e.done)},
		{"status=dead&aggregate_type=" + AggregateOrder, []string{e.dead[0], e.dead[1], e.dead[3]}},
	} {
		for _, limit := range []int{1, 2, 3} {
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > len(c.want)+1 {
					t.Fatalf("?%s limit %d: more pages than events", c.query, limit)
				}
				page := e.list(t, fmt.Sprintf("%s&limit=%d&after=%s", c.query, limit, url.QueryEscape(after)))
				if page.Limit != limit || len(page.Events) > limit {
					t.Fatalf("?%s limit %d: page of %d with limit %d", c.query, limit, len(page.Events), page.Limit)
				}
				got = append(got, page.ids()...)
				if *page.Next == "" {
					break
				}
				after = *page.Next
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("?%s limit %d: walked %v, want %v", c.query, limit, got, c.want)
			}
		}
	}
}

func testEventsLimits(t *testing.T, e *eventsEnv) {
	for in, want := range map[string]int{"1": 1, "07": 7, "500": 500, "501": 500, "99999999999999999999": 500} {
		if page := e.list(t, "status=dead&limit="+in); page.Limit != want {
			t.Errorf("limit=%s: limit %d, want %d", in, page.Limit, want)
		}
	}
	if page := e.list(t, "status=dead"); page.Limit != outboxadmin.DefaultLimit {
		t.Errorf("no limit: limit %d, want %d", page.Limit, outboxadmin.DefaultLimit)
	}
	for _, in := range []string{"0", "-1", "1.5", "abc", "1e3"} {
		if got := e.c.get(t, "api/events?status=dead&limit="+url.QueryEscape(in)).wantError(t, http.StatusBadRequest, "invalid_parameter"); got.Param != "limit" {
			t.Errorf("limit=%s: param %q", in, got.Param)
		}
	}
	var a auditBody
	e.c.get(t, "api/audit?limit=1000").decode(t, http.StatusOK, &a) // clamped
	for _, in := range []string{"0", "x", "-1"} {
		if got := e.c.get(t, "api/audit?limit="+in).wantError(t, http.StatusBadRequest, "invalid_parameter"); got.Param != "limit" {
			t.Errorf("audit limit=%s: param %q", in, got.Param)
		}
	}
}

func testEventsBadParameters(t *testing.T, e *eventsEnv) {
	cursor := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	cases := []struct{ query, param string }{
		{"", "status"},
		{"status=", "status"},
		{"status=DEAD", "status"},
		{"status=zombie", "status"},
		{"status=3", "status"},
		{"status=dead&status=new", "status"},
		{"status=dead&Status=new", "Status"},
		{"status=dead&aggregateId=x", "aggregateId"},
		{"status=dead&event_type=%00", "event_type"},
		{"status=dead&aggregate_type=" + strings.Repeat("a", outbox.MaxAggregateTypeLen+1), "aggregate_type"},
		{"status=dead&aggregate_id=" + strings.Repeat("a", outbox.MaxAggregateIDLen+1), "aggregate_id"},
		{"status=dead&aggregate_id=%ff", "aggregate_id"},
		{"status=dead&listener=a%00", "listener"},
		{"status=dead&error=" + strings.Repeat("e", outbox.MaxErrorSearchLen+1), "error"},
		{"status=dead&error=%00", "error"},
		{"status=dead&from=yesterday", "from"},
		{"status=dead&from=2026-01-02", "from"},
		{"status=dead&from=2026-01-02T03:04:05", "from"},
		{"status=dead&from=1716000000", "from"},
		{"status=dead&to=0999-12-31T23:59:59Z", "to"},
		{"status=dead&to=10000-01-01T00:00:00Z", "to"},
		{"status=dead&from=2026-01-02T00:00:00Z&to=2026-01-02T00:00:00Z", "to"},
		{"status=dead&from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "to"},
		{"status=dead&from=2026-01-02T01:00:00%2B02:00&to=2026-01-01T23:00:00Z", "to"},
		{"status=dead&newest=yes", "newest"},
		{"status=dead&newest=2", "newest"},
		{"status=dead&after=garbage!", "after"},
		{"status=dead&after=" + cursor("2026-01-01T00:00:00Z"), "after"},
		{"status=dead&after=" + cursor("0999-12-31T23:59:59Z|x"), "after"},
		{"status=dead&%zz", "query"},
	}
	for _, c := range cases {
		if got := e.c.get(t, "api/events?"+c.query).wantError(t, http.StatusBadRequest, "invalid_parameter"); got.Param != c.param {
			t.Errorf("?%s: param %q, want %q (%s)", c.query, got.Param, c.param, got.Message)
		}
	}
	// An offset is allowed, and read as the instant it names.
	if page := e.list(t, "status=dead&to="+url.QueryEscape(e.base.Add(time.Minute).In(time.FixedZone("", 5*3600)).Format(time.RFC3339))); !slices.Equal(page.ids(), e.dead[:1]) {
		t.Errorf("to with an offset: %v, want %v", page.ids(), e.dead[:1])
	}
	for _, c := range []struct{ path, param string }{
		{"api/audit?before=%00", "before"},
		{"api/audit?before=" + strings.Repeat("x", outbox.MaxIDLen+1), "before"},
		{"api/audit?after=x", "after"},
		{"api/audit?limit=1&limit=2", "limit"},
		{"api/events/" + e.retry + "?status=dead", "status"},
		{"api/events/a%00b", "id"},
	} {
		if got := e.c.get(t, c.path).wantError(t, http.StatusBadRequest, "invalid_parameter"); got.Param != c.param {
			t.Errorf("%s: param %q, want %q", c.path, got.Param, c.param)
		}
	}
}

func testEventDetail(t *testing.T, e *eventsEnv) {
	var d detailBody
	e.c.get(t, "api/events/"+e.retry).decode(t, http.StatusOK, &d)
	if d.ID != e.retry || d.Status != "RETRY" || d.Attempts != 1 || !strings.HasSuffix(d.LastError, retryReason) || d.AggregateID != "order-1" ||
		d.EventType != TypeOrderPlaced || d.DoneAt != nil || d.FirstAttemptAt == nil || d.Headers["trace"] != "t-1" ||
		d.LockedBy == nil || *d.LockedBy != "" || d.LockedUntil != nil || !d.AvailableAt.After(time.Now().Add(30*time.Minute)) ||
		!d.CreatedAt.Equal(e.base.Add(3*time.Minute)) {
		t.Errorf("RETRY detail = %+v (first attempt %v, locked by %v until %v)", d, d.FirstAttemptAt, d.LockedBy, d.LockedUntil)
	}
	if p, ok := d.Payload.(map[string]any); !ok || p["qty"] != float64(2) {
		t.Errorf("RETRY payload = %v", d.Payload)
	}
	d = detailBody{}
	e.c.get(t, "api/events/"+e.waiting).decode(t, http.StatusOK, &d)
	if d.Status != "WAITING" || d.OrderKey != "k1" || d.OrderSeq < 2 {
		t.Errorf("WAITING detail = %+v", d)
	}
	d = detailBody{}
	e.c.get(t, "api/events/"+e.done[1]).decode(t, http.StatusOK, &d)
	if d.Status != "DONE" || d.DoneAt == nil || !d.DoneAt.Equal(e.doneAt[1]) || d.AggregateType != AggregatePayment {
		t.Errorf("DONE detail = %+v", d)
	}
	// The dead-events route shows the same detail.
	var old detailBody
	e.c.get(t, "api/dead-events/"+e.retry).decode(t, http.StatusOK, &old)
	if old.FirstAttemptAt == nil || old.LockedBy == nil || old.Status != "RETRY" {
		t.Errorf("api/dead-events/{id} of the RETRY event = %+v", old)
	}
	for _, id := range []string{outbox.NewID(), "no-such-event"} {
		e.c.get(t, "api/events/"+id).wantError(t, http.StatusNotFound, "not_found")
	}
	e.c.get(t, "api/events/"+strings.Repeat("z", outbox.MaxIDLen+1)).wantError(t, http.StatusBadRequest, "invalid_parameter")
	e.c.get(t, "api/events/x/y").wantError(t, http.StatusNotFound, "not_found")
}

func testEventsOverview(t *testing.T, e *eventsEnv) {
	var o fullOverviewBody
	e.c.get(t, "api/overview").decode(t, http.StatusOK, &o)
	want := map[string]int64{"NEW": 2, "RETRY": 1, "WAITING": 1, "DEAD": 4, "DONE": 2, "FALLBACK": 0, "DISCARDED": 1}
	if fmt.Sprint(o.Counts) != fmt.Sprint(want) || o.BlockedKeys != 1 {
		t.Errorf("overview counts %v, blocked keys %d; want %v and 1", o.Counts, o.BlockedKeys, want)
	}
	var got []string
	for _, c := range o.ByType {
		got = append(got, fmt.Sprintf("%s/%s=%d", c.EventType, c.Status, c.Count))
	}
	// By event type, then status (NEW, DONE, RETRY, DEAD, WAITING, ..., in the order of
	// their stored values).
	wantTypes := []string{
		TypeOrderPlaced + "/NEW=1", TypeOrderPlaced + "/DONE=1", TypeOrderPlaced + "/RETRY=1", TypeOrderPlaced + "/DEAD=2",
		TypeOrderPlaced + "/WAITING=1", TypeOrderPlaced + "/DISCARDED=1",
		TypeOrderShipped + "/NEW=1", TypeOrderShipped + "/DEAD=1",
		TypePaymentTaken + "/DONE=1", TypePaymentTaken + "/DEAD=1",
	}
	if !slices.Equal(got, wantTypes) {
		t.Errorf("overview by_type = %v, want %v", got, wantTypes)
	}
}

func testAuditEmpty(t *testing.T, e *eventsEnv) {
	// The fixture's discard went through ob.Events() without an actor.
	var a auditBody
	e.c.get(t, "api/audit").decode(t, http.StatusOK, &a)
	if a.Next == nil || *a.Next != "" || len(a.Entries) != 1 || a.Entries[0].Actor != "unknown" ||
		a.Entries[0].Action != outbox.AuditDiscard || a.Entries[0].Target != e.discard || a.Entries[0].Count != 1 {
		t.Errorf("audit = %+v, want the fixture's discard by unknown", a)
	}
}

// runPartial covers a partial page: 10,001 pending events and a filter that matches
// none. The first page stops after outbox.MaxScanRows rows of the index with no event,
// partial, and its next continues to the end.
func runPartial(t *testing.T, mount Mount, backend string) {
	e := setup(t, mount, FixtureOptions{Backend: backend}, nil)
	const n = outbox.MaxScanRows + 1
	writePending(t, e.fx, n)
	var page eventsBody
	e.c.get(t, "api/events?status=new&event_type=NoSuchType").decode(t, http.StatusOK, &page)
	if len(page.Events) != 0 || !page.Partial || page.Next == nil || *page.Next == "" || page.ScanLimit != outbox.MaxScanRows {
		t.Fatalf("first page = %d events, partial %v, next %v, scan_limit %d; want none, partial, a cursor, %d",
			len(page.Events), page.Partial, page.Next, page.ScanLimit, outbox.MaxScanRows)
	}
	var rest eventsBody
	e.c.get(t, "api/events?status=new&event_type=NoSuchType&after="+url.QueryEscape(*page.Next)).decode(t, http.StatusOK, &rest)
	if len(rest.Events) != 0 || rest.Partial || rest.Next == nil || *rest.Next != "" {
		t.Fatalf("second page = %d events, partial %v, next %v; want the end", len(rest.Events), rest.Partial, rest.Next)
	}
	// Without a filter the index gives a full page at once.
	var full eventsBody
	e.c.get(t, "api/events?status=new&limit=500").decode(t, http.StatusOK, &full)
	if len(full.Events) != 500 || full.Partial || *full.Next == "" {
		t.Fatalf("unfiltered page = %d events, partial %v; want 500, not partial", len(full.Events), full.Partial)
	}
}

// writePending writes n OrderPlaced events due in an hour through a plain *sql.Tx (so
// that no hot path hands them over), in chunks.
func writePending(t *testing.T, fx *Fixture, n int) {
	t.Helper()
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	for start := 0; start < n; start += 1000 {
		envs := make([]outbox.Envelope, min(1000, n-start))
		for i := range envs {
			envs[i] = outbox.Envelope{Type: TypeOrderPlaced, AggregateType: AggregateOrder, Payload: map[string]int{"n": start + i},
				AvailableAt: later}
		}
		tx, err := fx.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fx.Outbox.Writer().WriteAll(ctx, tx, envs); err != nil {
			_ = tx.Rollback()
			t.Fatalf("write %d pending events: %v", len(envs), err)
		}
		if err := tx.Commit(); err != nil && err != sql.ErrTxDone {
			t.Fatal(err)
		}
	}
}
