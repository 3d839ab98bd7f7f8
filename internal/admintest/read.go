package admintest

import (
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

// Shapes of the API's responses, as a client decodes them.
type (
	listBody struct {
		Events []eventBody `json:"events"`
		Next   string      `json:"next"`
		Limit  int         `json:"limit"`
	}
	eventBody struct {
		ID            string            `json:"id"`
		EventType     string            `json:"event_type"`
		AggregateType string            `json:"aggregate_type"`
		AggregateID   string            `json:"aggregate_id"`
		Listener      *string           `json:"listener"` // nil when absent
		Status        string            `json:"status"`
		Attempts      int               `json:"attempts"`
		LastError     string            `json:"last_error"`
		CreatedAt     time.Time         `json:"created_at"`
		DoneAt        *time.Time        `json:"done_at"`
		Headers       map[string]string `json:"headers"`
		Payload       any               `json:"payload"`
	}
	countBody struct {
		Count  int64 `json:"count"`
		ByType []struct {
			AggregateType string `json:"aggregate_type"`
			EventType     string `json:"event_type"`
			Count         int64  `json:"count"`
		} `json:"by_type"`
		ByListener []listenerCount `json:"by_listener"`
		Partial    bool            `json:"partial"`
	}
	listenerCount struct {
		Listener string `json:"listener"`
		Count    int64  `json:"count"`
	}
	overviewBody struct {
		Counts                  map[string]int64 `json:"counts"`
		OldestPendingAt         *time.Time       `json:"oldest_pending_at"`
		OldestPendingAgeSeconds *float64         `json:"oldest_pending_age_seconds"`
	}
)

// The read fixture: more DEAD events than MaxLimit, in three types, one hostile.
const (
	nPlaced  = outboxadmin.MaxLimit - 6
	nShipped = 5
	nPayment = 3
	nDead    = nPlaced + nShipped + nPayment // MaxLimit + 2
	// hostile is stored text that must reach a browser as text, never as markup.
	hostile = `<script>alert("x")</script> & <img src=x onerror=alert(1)>`
)

// readEnv is the read-only fixture the Read subtests share.
type readEnv struct {
	*env
	dead    []string // every DEAD event, in list order
	shipped []string
	payment []string
	pending string
}

// runRead covers the read routes, their parameters and limits, over one fixture that
// no subtest changes.
func runRead(t *testing.T, mount Mount) {
	e := &readEnv{env: setup(t, mount, FixtureOptions{}, nil)}
	placed := make([]Seed, nPlaced)
	shipped := make([]Seed, nShipped)
	for i := range shipped {
		shipped[i] = Seed{Type: TypeOrderShipped, AggregateID: fmt.Sprintf("order-%d", i), Reason: "address invalid"}
	}
	payment := make([]Seed, nPayment)
	for i := range payment {
		payment[i] = Seed{
			AggregateType: AggregatePayment, Type: TypePaymentTaken, AggregateID: "pay-" + hostile, Reason: hostile,
			Headers: map[string]string{"trace": "<b>" + hostile + "</b>"}, Payload: map[string]string{"note": hostile},
		}
	}
	e.dead = append(e.dead, e.fx.SeedDead(t, placed...)...)
	e.shipped = e.fx.SeedDead(t, shipped...)
	e.payment = e.fx.SeedDead(t, payment...)
	e.dead = append(append(e.dead, e.shipped...), e.payment...)
	e.pending = e.fx.Write(t, Seed{OccurredAt: time.Now().Add(-2 * time.Hour), AvailableAt: time.Now().Add(time.Hour)})[0]

	tests := []struct {
		name string
		fn   func(t *testing.T, e *readEnv)
	}{
		{"ListDefaultPage", testListDefault},
		{"ListPagination", testListPagination},
		{"ListFilters", testListFilters},
		{"Limits", testLimits},
		{"BadParameters", testBadParameters},
		{"Count", testCount},
		{"Get", testGet},
		{"GetUnknownOrInvalidID", testGetUnknown},
		{"StoredTextIsEscaped", testEscaping},
		{"Overview", testOverview},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, e)
		})
	}
}

func testListDefault(t *testing.T, e *readEnv) {
	var page listBody
	res := e.c.get(t, "api/dead-events")
	res.decode(t, http.StatusOK, &page)
	if page.Limit != outboxadmin.DefaultLimit || len(page.Events) != outboxadmin.DefaultLimit || page.Next == "" {
		t.Fatalf("default page: limit %d, %d events, next %q; want %d, %d and a cursor",
			page.Limit, len(page.Events), page.Next, outboxadmin.DefaultLimit, outboxadmin.DefaultLimit)
	}
	for i, ev := range page.Events {
		if ev.ID != e.dead[i] {
			t.Fatalf("event %d is %s, want %s (oldest first)", i, ev.ID, e.dead[i])
		}
		if ev.Status != "DEAD" || ev.LastError != DefaultReason || ev.EventType != TypeOrderPlaced ||
			ev.AggregateType != AggregateOrder || ev.CreatedAt.IsZero() || ev.DoneAt == nil {
			t.Fatalf("event %d = %+v", i, ev)
		}
		// The listener that failed for good: the route's only one, under its default name.
		if want := RouteListener(AggregateOrder, TypeOrderPlaced); ev.Listener == nil || *ev.Listener != want {
			t.Fatalf("event %d: listener %v, want %q", i, ev.Listener, want)
		}
	}
	// A list leaves out headers and payloads, which can be large.
	if strings.Contains(string(res.body), `"payload"`) || strings.Contains(string(res.body), `"headers"`) {
		t.Error("list items carry payload or headers")
	}
}

func testListPagination(t *testing.T, e *readEnv) {
	for _, limit := range []int{1, 97, outboxadmin.MaxLimit} {
		if limit == 1 && testing.Short() {
			continue
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > nDead+1 {
				t.Fatalf("limit %d: more pages than events", limit)
			}
			var page listBody
			e.c.get(t, fmt.Sprintf("api/dead-events?limit=%d&after=%s", limit, url.QueryEscape(after))).decode(t, http.StatusOK, &page)
			if len(page.Events) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page.Events))
			}
			for _, ev := range page.Events {
				got = append(got, ev.ID)
			}
			if page.Next == "" {
				break
			}
			if len(page.Events) != limit {
				t.Fatalf("limit %d: short page of %d with a next cursor", limit, len(page.Events))
			}
			after = page.Next
		}
		if !slices.Equal(got, e.dead) {
			t.Fatalf("limit %d: walked %d events, want the %d DEAD ones in order", limit, len(got), len(e.dead))
		}
	}
}

func testListFilters(t *testing.T, e *readEnv) {
	cases := []struct {
		query string
		want  []string
	}{
		{"event_type=" + TypeOrderShipped, e.shipped},
		{"aggregate_type=" + AggregatePayment, e.payment},
		{"event_type=" + TypePaymentTaken + "&aggregate_type=" + AggregatePayment, e.payment},
		{"event_type=" + TypeOrderShipped + "&aggregate_type=" + AggregatePayment, nil},
		{"event_type=NoSuchType", nil},
		{"event_type=&aggregate_type=" + AggregatePayment, e.payment},
		{"listener=" + url.QueryEscape(RouteListener(AggregateOrder, TypeOrderShipped)), e.shipped},
		{"listener=" + url.QueryEscape(RouteListener(AggregatePayment, TypePaymentTaken)) + "&aggregate_type=" + AggregatePayment, e.payment},
		{"listener=" + url.QueryEscape(RouteListener(AggregatePayment, TypePaymentTaken)) + "&aggregate_type=" + AggregateOrder, nil},
		{"listener=" + ListenerBilling, nil},
		{"listener=&event_type=" + TypeOrderShipped, e.shipped},
	}
	for _, c := range cases {
		var page listBody
		res := e.c.get(t, "api/dead-events?"+c.query)
		res.decode(t, http.StatusOK, &page)
		var got []string
		for _, ev := range page.Events {
			got = append(got, ev.ID)
		}
		if !slices.Equal(got, c.want) || page.Next != "" {
			t.Errorf("?%s: got %v (next %q), want %v", c.query, got, page.Next, c.want)
		}
		if c.want == nil && !strings.Contains(string(res.body), `"events":[]`) {
			t.Errorf("?%s: empty list is not [] in %s", c.query, res.body)
		}
	}
}

func testLimits(t *testing.T, e *readEnv) {
	ok := map[string]int{
		"1": 1, "007": 7, "50": 50, "500": 500, "0500": 500,
		"501": 500, "1000": 500, "99999999999999999999": 500, strings.Repeat("9", 400): 500,
	}
	for in, want := range ok {
		var page listBody
		e.c.get(t, "api/dead-events?limit="+in).decode(t, http.StatusOK, &page)
		if page.Limit != want || len(page.Events) != want {
			t.Errorf("limit=%.25s: limit %d with %d events, want %d", in, page.Limit, len(page.Events), want)
		}
	}
	bad := []string{"-1", "0", "000", "abc", "1e9", "1.5", "+5", "-0", " 5", "5 ", "0x10", "５", "1_000", "%00", "%ff", "Infinity", "NaN"}
	for _, in := range bad {
		got := e.c.get(t, "api/dead-events?limit="+url.QueryEscape(in)).wantError(t, http.StatusBadRequest, "invalid_parameter")
		if got.Param != "limit" {
			t.Errorf("limit=%q: param %q, want limit", in, got.Param)
		}
	}
}

func testBadParameters(t *testing.T, e *readEnv) {
	long := strings.Repeat("a", outbox.MaxTypeLen+1)
	cursor := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	cases := []struct{ path, param string }{
		{"api/dead-events?eventType=OrderPlaced", "eventType"},
		{"api/dead-events?event_type=a&event_type=b", "event_type"},
		{"api/dead-events?limit=1&limit=2", "limit"},
		{"api/dead-events?event_type=%00", "event_type"},
		{"api/dead-events?event_type=%ff%fe", "event_type"},
		{"api/dead-events?event_type=" + long, "event_type"},
		{"api/dead-events?aggregate_type=" + strings.Repeat("b", outbox.MaxAggregateTypeLen+1), "aggregate_type"},
		{"api/dead-events?listener=" + strings.Repeat("l", outbox.MaxListenerLen+1), "listener"},
		{"api/dead-events?listener=a%00b", "listener"},
		{"api/dead-events?listener=a&listener=b", "listener"},
		{"api/dead-events?after=garbage!", "after"},
		{"api/dead-events?after=" + cursor("2026-01-01T00:00:00Z"), "after"},
		{"api/dead-events?after=" + cursor("10000-01-01T00:00:00Z|x"), "after"},
		{"api/dead-events?after=" + cursor("0999-12-31T23:59:59Z|x"), "after"},
		{"api/dead-events?after=" + cursor("2026-01-01T00:00:00Z|"), "after"},
		{"api/dead-events?after=" + cursor("2026-01-01T00:00:00Z|a\x00b"), "after"},
		{"api/dead-events?after=" + cursor("2026-01-01T00:00:00Z|"+strings.Repeat("i", outbox.MaxIDLen+1)), "after"},
		{"api/dead-events?after=" + strings.Repeat("A", 1000), "after"},
		{"api/dead-events?%zz", "query"},
		{"api/dead-events?a=%zz", "query"},
		{"api/dead-events/count?by=status", "by"},
		{"api/dead-events/count?limit=5", "limit"},
		{"api/dead-events/count?event_type=%00", "event_type"},
		{"api/dead-events/count?listener=%ff", "listener"},
		{"api/dead-events/count?listener=" + strings.Repeat("l", outbox.MaxListenerLen+1), "listener"},
		{"api/dead-events/count?by=listeners", "by"},
		{"api/dead-events/count?by=type,type", "by"},
		{"api/overview?verbose=1", "verbose"},
		{"api/dead-events/" + e.dead[0] + "?expand=1", "expand"},
	}
	for _, c := range cases {
		got := e.c.get(t, c.path).wantError(t, http.StatusBadRequest, "invalid_parameter")
		if got.Param != c.param {
			t.Errorf("%s: param %q, want %q", c.path, got.Param, c.param)
		}
	}
}

func testCount(t *testing.T, e *readEnv) {
	cases := map[string]int64{
		"":                                    nDead,
		"?event_type=" + TypeOrderShipped:     nShipped,
		"?aggregate_type=" + AggregateOrder:   nPlaced + nShipped,
		"?aggregate_type=" + AggregatePayment: nPayment,
		"?event_type=NoSuchType":              0,
	}
	for q, want := range cases {
		var c countBody
		e.c.get(t, "api/dead-events/count"+q).decode(t, http.StatusOK, &c)
		if c.Count != want || c.ByType != nil {
			t.Errorf("count%s = %+v, want %d", q, c, want)
		}
	}
	var c countBody
	e.c.get(t, "api/dead-events/count?by=type").decode(t, http.StatusOK, &c)
	want := fmt.Sprintf("%d [{%s %s %d} {%s %s %d} {%s %s %d}] false", nDead,
		AggregateOrder, TypeOrderPlaced, nPlaced, AggregateOrder, TypeOrderShipped, nShipped,
		AggregatePayment, TypePaymentTaken, nPayment)
	if got := fmt.Sprintf("%d %v %v", c.Count, c.ByType, c.Partial); got != want {
		t.Errorf("count?by=type = %s, want %s", got, want)
	}
	e.c.get(t, "api/dead-events/count?by=type&aggregate_type="+AggregatePayment).decode(t, http.StatusOK, &c)
	if c.Count != nPayment || len(c.ByType) != 1 || c.ByType[0].Count != nPayment || c.ByListener != nil {
		t.Errorf("count?by=type&aggregate_type=Payment = %+v", c)
	}

	// Per listener: each route's only listener, under its default name.
	byListener := fmt.Sprint([]listenerCount{
		{RouteListener(AggregateOrder, TypeOrderPlaced), nPlaced},
		{RouteListener(AggregateOrder, TypeOrderShipped), nShipped},
		{RouteListener(AggregatePayment, TypePaymentTaken), nPayment},
	})
	c = countBody{}
	e.c.get(t, "api/dead-events/count?by=listener").decode(t, http.StatusOK, &c)
	if c.Count != nDead || c.ByType != nil || fmt.Sprint(c.ByListener) != byListener || c.Partial {
		t.Errorf("count?by=listener = %+v, want by_listener %s", c, byListener)
	}
	c = countBody{}
	e.c.get(t, "api/dead-events/count?by=type,listener").decode(t, http.StatusOK, &c)
	if c.Count != nDead || len(c.ByType) != 3 || fmt.Sprint(c.ByListener) != byListener {
		t.Errorf("count?by=type,listener = %+v", c)
	}
	shipped := RouteListener(AggregateOrder, TypeOrderShipped)
	c = countBody{}
	e.c.get(t, "api/dead-events/count?by=listener&listener="+url.QueryEscape(shipped)).decode(t, http.StatusOK, &c)
	if c.Count != nShipped || len(c.ByListener) != 1 || c.ByListener[0] != (listenerCount{shipped, nShipped}) {
		t.Errorf("count?by=listener&listener=%s = %+v", shipped, c)
	}
	for q, want := range map[string]int64{
		"?listener=" + url.QueryEscape(shipped):                                        nShipped,
		"?listener=" + url.QueryEscape(shipped) + "&event_type=" + TypeOrderPlaced:     0,
		"?listener=" + ListenerMail:                                                    0,
		"?listener=" + url.QueryEscape(RouteListener(AggregateOrder, TypeOrderPlaced)): nPlaced,
	} {
		c = countBody{}
		e.c.get(t, "api/dead-events/count"+q).decode(t, http.StatusOK, &c)
		if c.Count != want {
			t.Errorf("count%s = %d, want %d", q, c.Count, want)
		}
	}
}

func testGet(t *testing.T, e *readEnv) {
	var ev eventBody
	e.c.get(t, "api/dead-events/"+e.payment[0]).decode(t, http.StatusOK, &ev)
	if ev.ID != e.payment[0] || ev.Status != "DEAD" || ev.LastError != hostile || ev.EventType != TypePaymentTaken ||
		ev.AggregateType != AggregatePayment || ev.AggregateID != "pay-"+hostile || ev.DoneAt == nil {
		t.Errorf("get = %+v", ev)
	}
	if want := RouteListener(AggregatePayment, TypePaymentTaken); ev.Listener == nil || *ev.Listener != want {
		t.Errorf("get: listener %v, want %q", ev.Listener, want)
	}
	if ev.Headers["trace"] != "<b>"+hostile+"</b>" {
		t.Errorf("headers = %v", ev.Headers)
	}
	if p, ok := ev.Payload.(map[string]any); !ok || p["note"] != hostile {
		t.Errorf("payload = %v", ev.Payload)
	}
	// Attempts is reported (0 here: the listener returned Dead at once); an event of
	// any status can be read, so a replayed one can be followed.
	ev = eventBody{}
	e.c.get(t, "api/dead-events/"+e.pending).decode(t, http.StatusOK, &ev)
	if ev.Status != "NEW" || ev.DoneAt != nil || ev.Headers == nil || ev.Listener == nil || *ev.Listener != "" {
		t.Errorf("get pending = %+v, want NEW, no listener (\"\")", ev)
	}
}

func testGetUnknown(t *testing.T, e *readEnv) {
	for _, id := range []string{outbox.NewID(), "no-such-event", "a%2Fb", "%E2%9C%93", strings.Repeat("z", outbox.MaxIDLen)} {
		e.c.get(t, "api/dead-events/"+id).wantError(t, http.StatusNotFound, "not_found")
	}
	for _, id := range []string{strings.Repeat("z", outbox.MaxIDLen+1), "a%00b", "%ff"} {
		got := e.c.get(t, "api/dead-events/"+id).wantError(t, http.StatusBadRequest, "invalid_parameter")
		if got.Param != "id" {
			t.Errorf("id %q: param %q, want id", id, got.Param)
		}
	}
}

func testEscaping(t *testing.T, e *readEnv) {
	for _, path := range []string{
		"api/dead-events/" + e.payment[0],
		"api/dead-events?aggregate_type=" + AggregatePayment,
	} {
		res := e.c.get(t, path)
		if res.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.status)
		}
		body := string(res.body)
		for _, raw := range []string{"<", ">", "&"} {
			if strings.Contains(body, raw) {
				t.Errorf("GET %s: body has a raw %q: %s", path, raw, body)
			}
		}
		if !strings.Contains(body, `\u003cscript\u003e`) {
			t.Errorf("GET %s: <script> is not escaped as \\u003cscript\\u003e: %s", path, body)
		}
	}
}

func testOverview(t *testing.T, e *readEnv) {
	var o overviewBody
	e.c.get(t, "api/overview").decode(t, http.StatusOK, &o)
	want := map[string]int64{"NEW": 1, "RETRY": 0, "DEAD": nDead, "DONE": 0, "WAITING": 0, "FALLBACK": 0, "DISCARDED": 0}
	if fmt.Sprint(o.Counts) != fmt.Sprint(want) {
		t.Errorf("counts = %v, want %v", o.Counts, want)
	}
	if o.OldestPendingAgeSeconds == nil || o.OldestPendingAt == nil {
		t.Fatalf("oldest pending missing: %+v", o)
	}
	if age := *o.OldestPendingAgeSeconds; age < 7200-60 || age > 7200+600 {
		t.Errorf("oldest pending age = %.0fs, want about 7200s", age)
	}
}
