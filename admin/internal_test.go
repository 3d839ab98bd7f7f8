package outboxadmin

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/fuzztally"
)

func TestParseLimit(t *testing.T) {
	t.Parallel()
	ok := map[string]int{
		"1": 1, "01": 1, "50": 50, "499": 499, "500": 500, "501": 500, "999": 500, "1000": 500,
		"9223372036854775807": 500, "99999999999999999999": 500, strings.Repeat("9", 10000): 500,
		"0000000000000000000000000000007": 7,
	}
	for in, want := range ok {
		if got, err := parseLimit(in); err != nil || got != want {
			t.Errorf("parseLimit(%.30q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "00", "-1", "-0", "+1", "1e9", "1.0", "abc", " 1", "1 ", "0x1", "١", "1\x00"} {
		var pe *paramError
		if got, err := parseLimit(in); !errors.As(err, &pe) || pe.param != "limit" {
			t.Errorf("parseLimit(%q) = %d, %v; want a limit error", in, got, err)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []outbox.Cursor{
		{CreatedAt: time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC), ID: outbox.NewID()},
		{CreatedAt: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), ID: "a|b|c"},
		{CreatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), ID: strings.Repeat("é", outbox.MaxIDLen/2)},
	} {
		got, err := decodeCursor(encodeCursor(c))
		if err != nil || !got.CreatedAt.Equal(c.CreatedAt) || got.ID != c.ID || got.OrderSeq != 0 {
			t.Errorf("round trip of %+v = %+v, %v", c, got, err)
		}
	}
	// A list by order key: the cursor holds OrderSeq and no time.
	for _, c := range []outbox.Cursor{{OrderSeq: 1, ID: "a|b"}, {OrderSeq: math.MaxInt64, ID: outbox.NewID()}} {
		if got, err := decodeCursor(encodeCursor(c)); err != nil || got != c {
			t.Errorf("round trip of %+v = %+v, %v", c, got, err)
		}
	}
	// Only what encodeCursor writes.
	for _, raw := range []string{"#0|x", "#-1|x", "#+1|x", "#01|x", "#|x", "#1", "#9223372036854775808|x", "#1e3|x", "# 1|x"} {
		if got, err := decodeCursor(cursorEncoding().EncodeToString([]byte(raw))); err == nil {
			t.Errorf("decodeCursor(%q) = %+v, want an error", raw, got)
		}
	}
}

func TestParseListQuery(t *testing.T) {
	t.Parallel()
	q, err := parseListQuery("")
	if err != nil || q.Limit != DefaultLimit || !q.After.IsZero() || q.DeadFilter != (outbox.DeadFilter{}) {
		t.Errorf("empty query = %+v, %v", q, err)
	}
	after := outbox.Cursor{CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ID: "01J"}
	q, err = parseListQuery("event_type=A&aggregate_type=B&listener=billing&limit=7&after=" + encodeCursor(after))
	if err != nil || q.EventType != "A" || q.AggregateType != "B" || q.Listener != "billing" || q.Limit != 7 || q.After != after {
		t.Errorf("full query = %+v, %v", q, err)
	}
	q, err = parseListQuery("event_type=&listener=&limit=&after=")
	if err != nil || q.Limit != DefaultLimit || q.EventType != "" || q.Listener != "" {
		t.Errorf("empty values = %+v, %v", q, err)
	}
	q, err = parseListQuery("listener=" + strings.Repeat("é", outbox.MaxListenerLen/2))
	if err != nil || q.Listener != strings.Repeat("é", outbox.MaxListenerLen/2) {
		t.Errorf("listener of %d bytes = %+v, %v", outbox.MaxListenerLen/2*2, q, err)
	}
}

// TestFilterErrors: each filter is checked on its own and its error names it; the
// listener is held to outbox.MaxListenerLen.
func TestFilterErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"event_type=" + strings.Repeat("a", outbox.MaxTypeLen+1):              "event_type",
		"aggregate_type=" + strings.Repeat("a", outbox.MaxAggregateTypeLen+1): "aggregate_type",
		"listener=" + strings.Repeat("a", outbox.MaxListenerLen+1):            "listener",
		"listener=a%00b":          "listener",
		"listener=%ff":            "listener",
		"listener=a&listener=b":   "listener",
		"listener=a&eventType=OK": "eventType",
	}
	for raw, param := range cases {
		for _, parse := range []func(string) error{
			func(raw string) error { _, err := parseListQuery(raw); return err },
			func(raw string) error { _, _, err := parseCountQuery(raw); return err },
		} {
			var pe *paramError
			if err := parse(raw); !errors.As(err, &pe) || pe.param != param {
				t.Errorf("%.40s: %v; want an error naming %s", raw, err, param)
			}
		}
	}
	var pe *paramError
	err := validFilter(outbox.DeadFilter{Listener: strings.Repeat("l", outbox.MaxListenerLen+1)})
	if !errors.As(err, &pe) || pe.param != "listener" || !strings.Contains(pe.msg, strconv.Itoa(outbox.MaxListenerLen)) {
		t.Errorf("long listener: %v; want a listener error that gives the limit", err)
	}
	if _, err := parseListQuery("unknown=1"); err == nil || !strings.Contains(err.Error(), "accepted: event_type, aggregate_type, listener, limit, after") {
		t.Errorf("unknown parameter: %v; want the accepted ones, listener included", err)
	}
}

func TestParseCountQuery(t *testing.T) {
	t.Parallel()
	ok := map[string]countBy{
		"":                      {},
		"by=type":               {types: true},
		"by=listener":           {listeners: true},
		"by=type,listener":      {types: true, listeners: true},
		"by=listener,type":      {types: true, listeners: true},
		"by=listener&listener=": {listeners: true},
	}
	for raw, want := range ok {
		if _, by, err := parseCountQuery(raw); err != nil || by != want {
			t.Errorf("parseCountQuery(%q) = %+v, %v; want %+v", raw, by, err, want)
		}
	}
	f, by, err := parseCountQuery("by=listener&event_type=E&aggregate_type=A&listener=mail")
	if err != nil || !by.listeners || by.types || f != (outbox.DeadFilter{EventType: "E", AggregateType: "A", Listener: "mail"}) {
		t.Errorf("full count query = %+v, %+v, %v", f, by, err)
	}
	for _, raw := range []string{"by=status", "by=type,type", "by=listener,", "by=,type", "by=Type", "by=type,listener,type", "by=type&by=listener"} {
		var pe *paramError
		if _, _, err := parseCountQuery(raw); !errors.As(err, &pe) || pe.param != "by" {
			t.Errorf("parseCountQuery(%q) = %v; want a by error", raw, err)
		}
	}
}

// FuzzParseListQuery checks that any query string either parses into a query the core
// accepts (limit in range, valid filter, a cursor that round-trips) or fails with a
// *paramError (a 400), and never panics. Its seeds are in testdata/fuzz.
func FuzzParseListQuery(f *testing.F) {
	f.Add("limit=50&event_type=OrderPlaced&aggregate_type=Order")
	f.Add("listener=billing&event_type=OrderPlaced")
	f.Add("limit=99999999999999999999")
	f.Add("after=" + encodeCursor(outbox.Cursor{CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ID: "x"}))
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseListQuery(raw)
		fuzztally.Record(err != nil)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) || pe.param == "" || pe.msg == "" {
				t.Fatalf("parseListQuery(%q) = %v, want a *paramError", raw, err)
			}
			if !utf8.ValidString(pe.Error()) {
				t.Fatalf("error message is not UTF-8: %q", pe.Error())
			}
			return
		}
		if q.Limit < 1 || q.Limit > MaxLimit {
			t.Fatalf("parseListQuery(%q): limit %d", raw, q.Limit)
		}
		if err := q.DeadFilter.Validate(); err != nil {
			t.Fatalf("parseListQuery(%q): filter the core rejects: %v", raw, err)
		}
		if err := (storage.ListDeadParams{DeadFilter: q.DeadFilter, After: q.After, Limit: q.Limit}).Validate(); err != nil {
			t.Fatalf("parseListQuery(%q): params the core rejects: %v", raw, err)
		}
		if !q.After.IsZero() {
			if y := q.After.CreatedAt.Year(); y < 1000 || y > 9999 || validID(q.After.ID) != nil || q.After.OrderSeq != 0 {
				t.Fatalf("parseListQuery(%q): cursor %+v reaches the store", raw, q.After)
			}
			back, err := decodeCursor(encodeCursor(q.After))
			if err != nil || !back.CreatedAt.Equal(q.After.CreatedAt) || back.ID != q.After.ID {
				t.Fatalf("cursor %+v does not round-trip: %+v, %v", q.After, back, err)
			}
		}
	})
}

func TestParseEventsQuery(t *testing.T) {
	t.Parallel()
	q, err := parseEventsQuery("status=retry")
	if err != nil || q.Status != outbox.StatusRetry || q.Limit != DefaultLimit || q.Newest || q.EventFilter != (outbox.EventFilter{}) {
		t.Errorf("status only = %+v, %v", q, err)
	}
	after := outbox.Cursor{CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ID: "01J"}
	q, err = parseEventsQuery("status=done&event_type=E&aggregate_type=A&aggregate_id=a-1&listener=mail&error=Time%25out" +
		"&from=2026-01-01T00:00:00.5%2B01:00&to=2026-01-02T00:00:00Z&newest=true&limit=600&after=" + encodeCursor(after))
	want := outbox.EventQuery{Status: outbox.StatusDone, Newest: true, Limit: MaxLimit, After: after, EventFilter: outbox.EventFilter{
		EventType: "E", AggregateType: "A", AggregateID: "a-1", Listener: "mail", ErrorContains: "Time%out",
		From: time.Date(2025, 12, 31, 23, 0, 0, 5e8, time.UTC), To: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
	}}
	if err != nil || q != want {
		t.Errorf("full query = %+v, %v; want %+v", q, err, want)
	}
	for raw, want := range map[string]bool{"status=dead&blocking=1": true, "status=retry&blocking=true": true, "status=dead&blocking=0": false} {
		if q, err := parseEventsQuery(raw); err != nil || q.Blocking != want {
			t.Errorf("%s = %+v, %v; want Blocking %v", raw, q, err, want)
		}
	}
	byKey := outbox.Cursor{OrderSeq: 12, ID: "01K"}
	q, err = parseEventsQuery("status=waiting&order_key=Account%3A42&event_type=E&after=" + encodeCursor(byKey))
	want = outbox.EventQuery{Status: outbox.StatusWaiting, Limit: DefaultLimit, After: byKey,
		EventFilter: outbox.EventFilter{OrderKey: "Account:42", EventType: "E"}}
	if err != nil || q != want {
		t.Errorf("order key query = %+v, %v; want %+v", q, err, want)
	}
	for name, st := range map[string]outbox.Status{
		"new": outbox.StatusNew, "retry": outbox.StatusRetry, "waiting": outbox.StatusWaiting, "dead": outbox.StatusDead,
		"done": outbox.StatusDone, "fallback": outbox.StatusFallback, "discarded": outbox.StatusDiscarded,
	} {
		if q, err := parseEventsQuery("status=" + name); err != nil || q.Status != st {
			t.Errorf("status=%s = %+v, %v", name, q.Status, err)
		}
	}
	for raw, param := range map[string]string{
		"":                                       "status",
		"status=Dead":                            "status",
		"status=dead&from=x":                     "from",
		"status=dead&to=2026-13-01T00:00:00Z":    "to",
		"status=dead&newest=on":                  "newest",
		"status=dead&error=%00":                  "error",
		"status=dead&aggregate_id=%ff":           "aggregate_id",
		"status=dead&limit=0":                    "limit",
		"status=dead&after=x":                    "after",
		"status=dead&before=x":                   "before",
		"status=done&order_key=k":                "order_key",
		"status=fallback&order_key=k":            "order_key",
		"status=dead&order_key=k&aggregate_id=a": "order_key",
		"status=dead&order_key=k&from=2026-01-01T00:00:00Z":                      "order_key",
		"status=dead&order_key=%ff":                                              "order_key",
		"status=dead&order_key=k&after=" + encodeCursor(after):                   "after",
		"status=dead&after=" + encodeCursor(outbox.Cursor{OrderSeq: 3, ID: "x"}): "after",
		"status=waiting&blocking=1":                                              "blocking",
		"status=dead&blocking=yes":                                               "blocking",
	} {
		var pe *paramError
		if _, err := parseEventsQuery(raw); !errors.As(err, &pe) || pe.param != param {
			t.Errorf("parseEventsQuery(%q) = %v; want an error naming %s", raw, err, param)
		}
	}
}

func TestCheckIDs(t *testing.T) {
	t.Parallel()
	if got, err := checkIDs([]string{"b", "a", "b", "c", "a"}); err != nil || strings.Join(got, ",") != "b,a,c" {
		t.Errorf("checkIDs = %v, %v; want b,a,c", got, err)
	}
	many := make([]string, outbox.MaxBulkIDs+1)
	for i := range many {
		many[i] = "x"
	}
	if got, err := checkIDs(many[:outbox.MaxBulkIDs]); err != nil || len(got) != 1 {
		t.Errorf("500 repeats of one ID = %v, %v", got, err)
	}
	for _, ids := range [][]string{nil, {}, many, {"a", ""}, {"a\x00"}, {strings.Repeat("i", outbox.MaxIDLen+1)}, {"\xff"}} {
		var pe *paramError
		if _, err := checkIDs(ids); !errors.As(err, &pe) || pe.param != "ids" {
			t.Errorf("checkIDs(%.3q) = %v; want an ids error", ids, err)
		}
	}
}

// FuzzParseEventsQuery checks that any query string either parses into a query the
// core accepts or fails with a *paramError (a 400), and never panics.
func FuzzParseEventsQuery(f *testing.F) {
	f.Add("status=dead&limit=50&event_type=OrderPlaced&aggregate_type=Order")
	f.Add("status=done&newest=1&from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z")
	f.Add("status=new&aggregate_id=order-1&error=timeout&listener=mail")
	f.Add("status=retry&from=2026-01-01T00:00:00%2B14:00&to=2025-12-31T11:00:00-12:00")
	f.Add("status=waiting&order_key=Account:42&after=" + encodeCursor(outbox.Cursor{OrderSeq: 7, ID: "x"}))
	f.Add("status=done&order_key=k")
	f.Add("status=dead&blocking=1&event_type=T")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseEventsQuery(raw)
		fuzztally.Record(err != nil)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) || pe.param == "" || pe.msg == "" || !utf8.ValidString(pe.Error()) {
				t.Fatalf("parseEventsQuery(%q) = %v, want a *paramError", raw, err)
			}
			return
		}
		p := storage.ListEventsParams{Status: q.Status, EventFilter: q.EventFilter, Newest: q.Newest, After: q.After,
			Limit: q.Limit, ScanLimit: outbox.MaxScanRows}
		if err := p.Validate(); err != nil || q.Limit < 1 || q.Limit > MaxLimit {
			t.Fatalf("parseEventsQuery(%q) = %+v, which the core rejects: %v", raw, q, err)
		}
	})
}

// TestPaths covers what a mount cannot send through a real client: a path that is not
// canonical (ServeMux would redirect to it without the mount prefix) and the empty
// path StripPrefix leaves for the bare prefix.
func TestPaths(t *testing.T) {
	t.Parallel()
	h, err := New(eventsOver(t, outboxtest.NewMemoryStore()), Options{Authorize: BearerToken("tok")})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"//api/overview", "/api/../api/overview", "/api/./overview", "/api//dead-events"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.Path, r.URL.RawPath = p, ""
		r.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound || w.Header().Get("Location") != "" {
			t.Errorf("GET %s: %d, Location %q; want 404 and no redirect", p, w.Code, w.Header().Get("Location"))
		}
	}
	for requestURI, want := range map[string]string{
		"/outbox/admin":         "./admin/",
		"/outbox/admin?a=1":     "./admin/?a=1",
		"/x/a:b":                "./a:b/",
		"http://h/outbox/admin": "./admin/",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RequestURI = requestURI
		r.URL.Path, r.URL.RawQuery = "", ""
		if _, q, ok := strings.Cut(requestURI, "?"); ok {
			r.URL.RawQuery = q
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusTemporaryRedirect || w.Header().Get("Location") != want {
			t.Errorf("GET %s as the empty path: %d, Location %q; want 307 to %s", requestURI, w.Code, w.Header().Get("Location"), want)
		}
	}
}

// eventsOver returns the events of a writer-only outbox over store.
func eventsOver(t testing.TB, store storage.Store) *outbox.Events {
	t.Helper()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ob.Events()
}
