package admintest

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
)

// runSecurity covers authentication, cross-origin protection, methods, content types,
// bodies and the security headers.
func runSecurity(t *testing.T, mount Mount) {
	tests := []struct {
		name string
		fn   func(t *testing.T, mount Mount)
	}{
		{"NoAuthorizerRejectsEverything", testNoAuthorizer},
		{"MissingOrWrongCredentials", testWrongCredentials},
		{"AllowAll", testAllowAll},
		{"AuthorizerFunc", testAuthorizerFunc},
		{"CrossSitePOST", testCrossSite},
		{"TrustedOrigin", testTrustedOrigin},
		{"MethodNotAllowed", testMethods},
		{"UnsupportedMediaType", testMediaType},
		{"BadBodies", testBadBodies},
		{"PageHeaders", testPageHeaders},
		{"MountRedirectAndUnknownRoute", testMountRedirect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, mount)
		})
	}
}

// routesFor lists one request per route for the event id: method, path, body.
func routesFor(id string) [][3]string {
	return [][3]string{
		{http.MethodGet, "", ""},
		{http.MethodGet, "app.js", ""},
		{http.MethodGet, "api/overview", ""},
		{http.MethodGet, "api/dead-events", ""},
		{http.MethodGet, "api/dead-events/count?by=type", ""},
		{http.MethodGet, "api/dead-events/" + id, ""},
		{http.MethodPost, "api/dead-events/" + id + "/replay", "{}"},
		{http.MethodPost, "api/dead-events/replay", "{}"},
		{http.MethodPost, "api/dead-events/" + id + "/delete", "{}"},
		{http.MethodPost, "api/dead-events/" + id + "/discard", "{}"},
		{http.MethodGet, "api/events?status=dead", ""},
		{http.MethodGet, "api/events/" + id, ""},
		{http.MethodPost, "api/events/replay", `{"ids":["` + id + `"]}`},
		{http.MethodPost, "api/events/discard", `{"ids":["` + id + `"]}`},
		{http.MethodPost, "api/events/delete", `{"ids":["` + id + `"]}`},
		{http.MethodGet, "api/audit", ""},
		{http.MethodGet, "api/subscriptions", ""},
		{http.MethodPost, "api/subscriptions/pause", `{"listener":"` + RouteListener(AggregateOrder, TypeOrderPlaced) + `"}`},
		{http.MethodPost, "api/subscriptions/resume", `{"listener":"` + RouteListener(AggregateOrder, TypeOrderPlaced) + `"}`},
		{http.MethodGet, "api/no-such-route", ""},
	}
}

func testNoAuthorizer(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, func(o *outboxadmin.Options) { o.Authorize = nil })
	id := e.fx.SeedDead(t, Seed{})[0]
	e.fx.Fix()
	for _, c := range []*client{e.c, e.anon} {
		for _, r := range routesFor(id) {
			res := c.do(t, c.request(t, r[0], r[1], r[2]))
			res.wantError(t, http.StatusUnauthorized, "unauthorized")
			if got := res.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("%s %s: WWW-Authenticate = %q, want Bearer", r[0], r[1], got)
			}
		}
	}
	if got := e.fx.Status(t, id); got != outbox.StatusDead {
		t.Errorf("status after rejected replays = %s, want DEAD", got)
	}
	e.wantNothingPaused(t)
	if e.logs.find("WARN", "no Options.Authorize") == "" {
		t.Error("New logged no warning about the missing authorizer")
	}
}

func testWrongCredentials(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	id := e.fx.SeedDead(t, Seed{Reason: "secret reason"})[0]
	e.fx.Fix()
	wrong := []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer " + e.token + "x", "Bearer " + e.token[1:],
		"Basic " + e.token, e.token, "Bearer  " + strings.ToUpper(e.token)}
	for _, auth := range wrong {
		for _, r := range routesFor(id) {
			if r[1] == "" || r[1] == "app.js" {
				continue // the page is public once an authorizer is set
			}
			req := e.anon.request(t, r[0], r[1], r[2])
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			e.anon.do(t, req).wantError(t, http.StatusUnauthorized, "unauthorized")
		}
	}
	// The scheme is case-insensitive (RFC 9110).
	req := e.anon.request(t, http.MethodGet, "api/dead-events", "")
	req.Header.Set("Authorization", "bearer "+e.token)
	if res := e.anon.do(t, req); res.status != http.StatusOK {
		t.Errorf("lower-case scheme: status %d, want 200", res.status)
	}
	// The page and its assets are served to anyone and hold no data.
	for _, p := range []string{"", "app.js", "app.css"} {
		res := e.anon.get(t, p)
		if res.status != http.StatusOK {
			t.Fatalf("GET /%s without credentials: status %d, want 200", p, res.status)
		}
		if strings.Contains(string(res.body), id) || strings.Contains(string(res.body), "secret reason") {
			t.Errorf("GET /%s without credentials shows stored data", p)
		}
	}
	if got := e.fx.Status(t, id); got != outbox.StatusDead {
		t.Errorf("status after rejected replays = %s, want DEAD", got)
	}
	e.wantNothingPaused(t)
}

func testAllowAll(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, func(o *outboxadmin.Options) { o.Authorize = outboxadmin.AllowAll() })
	e.fx.SeedDead(t, Seed{})
	var page struct{ Events []map[string]any }
	e.anon.get(t, "api/dead-events").decode(t, http.StatusOK, &page)
	if len(page.Events) != 1 {
		t.Errorf("got %d events, want 1", len(page.Events))
	}
	if e.logs.find("WARN", "AllowAll") == "" {
		t.Error("New logged no warning for AllowAll")
	}
}

func testAuthorizerFunc(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, func(o *outboxadmin.Options) {
		o.Authorize = outboxadmin.AuthorizerFunc(func(r *http.Request) bool { return r.Header.Get("X-Admin") == "yes" })
	})
	e.anon.get(t, "api/overview").wantError(t, http.StatusUnauthorized, "unauthorized")
	req := e.anon.request(t, http.MethodGet, "api/overview", "")
	req.Header.Set("X-Admin", "yes")
	if res := e.anon.do(t, req); res.status != http.StatusOK {
		t.Errorf("authorized by the func: status %d, want 200: %s", res.status, res.body)
	}
}

func testCrossSite(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	id := e.fx.SeedDead(t, Seed{})[0]
	e.fx.Fix()
	origin := originOf(t, e.base)
	attacks := []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"},
		{"Origin": "http://evil.example"},
		{"Origin": "null"},
		{"Sec-Fetch-Site": "cross-site", "Origin": origin}, // the browser's word wins
	}
	for _, hdr := range attacks {
		for _, r := range [][2]string{
			{"api/dead-events/" + id + "/replay", "{}"}, {"api/dead-events/replay", "{}"},
			{"api/events/replay", `{"ids":["` + id + `"]}`}, {"api/events/discard", `{"ids":["` + id + `"]}`},
			{"api/events/delete", `{"ids":["` + id + `"]}`},
			{"api/subscriptions/pause", `{"listener":"` + RouteListener(AggregateOrder, TypeOrderPlaced) + `"}`},
		} {
			req := e.c.request(t, http.MethodPost, r[0], r[1])
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			e.c.do(t, req).wantError(t, http.StatusForbidden, "cross_origin")
		}
	}
	e.fx.Poll(t)
	if got := e.fx.Status(t, id); got != outbox.StatusDead {
		t.Fatalf("status after cross-site replays = %s, want DEAD", got)
	}
	if n := e.fx.Deliveries(id); n != 0 {
		t.Fatalf("%d deliveries after cross-site replays, want 0", n)
	}
	e.wantNothingPaused(t)
	// The same request from the page's own origin goes through.
	req := e.c.request(t, http.MethodPost, "api/dead-events/"+id+"/replay", "{}")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", origin)
	if res := e.c.do(t, req); res.status != http.StatusOK {
		t.Fatalf("same-origin replay: status %d, want 200: %s", res.status, res.body)
	}
}

func testTrustedOrigin(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, func(o *outboxadmin.Options) {
		o.TrustedOrigins = []string{"https://ops.example"}
	})
	id := e.fx.SeedDead(t, Seed{})[0]
	req := e.c.request(t, http.MethodPost, "api/dead-events/"+id+"/replay", "{}")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://ops.example")
	if res := e.c.do(t, req); res.status != http.StatusOK {
		t.Fatalf("replay from a trusted origin: status %d, want 200: %s", res.status, res.body)
	}
}

func testMethods(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	id := e.fx.SeedDead(t, Seed{})[0]
	e.fx.Fix()
	cases := []struct{ method, path, allow string }{
		{http.MethodGet, "api/dead-events/" + id + "/replay", "POST"},
		{http.MethodHead, "api/dead-events/" + id + "/replay", "POST"},
		{http.MethodGet, "api/dead-events/replay", "POST"},
		{http.MethodPut, "api/dead-events/replay", "POST"},
		{http.MethodDelete, "api/dead-events/" + id + "/replay", "POST"},
		{http.MethodPatch, "api/dead-events/" + id + "/replay", "POST"},
		{http.MethodPost, "api/dead-events/" + id, "GET, HEAD"},
		{http.MethodDelete, "api/dead-events/" + id, "GET, HEAD"},
		{http.MethodPost, "api/dead-events", "GET, HEAD"},
		{http.MethodPost, "api/dead-events/count", "GET, HEAD"},
		{http.MethodPost, "api/overview", "GET, HEAD"},
		{http.MethodOptions, "api/overview", "GET, HEAD"},
		{http.MethodPost, "", "GET, HEAD"},
		{http.MethodGet, "api/events/replay", "POST"},
		{http.MethodHead, "api/events/discard", "POST"},
		{http.MethodGet, "api/events/delete", "POST"},
		{http.MethodPut, "api/events/replay", "POST"},
		{http.MethodDelete, "api/events/delete", "POST"},
		{http.MethodPost, "api/events", "GET, HEAD"},
		{http.MethodPost, "api/events/" + id, "GET, HEAD"},
		{http.MethodDelete, "api/events/" + id, "GET, HEAD"},
		{http.MethodPost, "api/audit", "GET, HEAD"},
		{http.MethodPost, "api/subscriptions", "GET, HEAD"},
		{http.MethodGet, "api/subscriptions/pause", "POST"},
		{http.MethodHead, "api/subscriptions/resume", "POST"},
	}
	for _, c := range cases {
		body := ""
		if c.method != http.MethodGet && c.method != http.MethodHead && c.method != http.MethodOptions {
			body = "{}"
		}
		res := e.c.do(t, e.c.request(t, c.method, c.path, body))
		if res.status != http.StatusMethodNotAllowed {
			t.Errorf("%s /%s: status %d, want 405: %s", c.method, c.path, res.status, res.body)
			continue
		}
		if got := res.header.Get("Allow"); got != c.allow {
			t.Errorf("%s /%s: Allow = %q, want %q", c.method, c.path, got, c.allow)
		}
		if c.method != http.MethodHead {
			res.wantError(t, http.StatusMethodNotAllowed, "method_not_allowed")
		}
	}
	e.fx.Poll(t)
	if got := e.fx.Status(t, id); got != outbox.StatusDead {
		t.Errorf("status = %s, want DEAD", got)
	}
}

func testMediaType(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	ids := e.fx.SeedDead(t, Seed{}, Seed{})
	e.fx.Fix()
	cases := []struct{ contentType, body string }{
		{"application/x-www-form-urlencoded", "event_type=OrderPlaced"},
		{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--x--\r\n"},
		{"text/plain", "{}"},
		{"", "{}"},
		{"application/json; charset=latin1", "{}"},
		{"application/jsonx", "{}"},
		{"application/json, text/plain", "{}"},
	}
	for _, c := range cases {
		for _, path := range []string{"api/dead-events/" + ids[0] + "/replay", "api/dead-events/replay", "api/events/replay", "api/events/delete"} {
			req := e.c.request(t, http.MethodPost, path, c.body)
			req.Header.Del("Content-Type")
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			e.c.do(t, req).wantError(t, http.StatusUnsupportedMediaType, "unsupported_media_type")
		}
	}
	e.fx.Poll(t)
	for _, id := range ids {
		if got := e.fx.Status(t, id); got != outbox.StatusDead {
			t.Fatalf("status after rejected bodies = %s, want DEAD", got)
		}
	}
	// A charset parameter of UTF-8 is fine.
	req := e.c.request(t, http.MethodPost, "api/dead-events/"+ids[1]+"/replay", "{}")
	req.Header.Set("Content-Type", "Application/JSON; charset=UTF-8")
	if res := e.c.do(t, req); res.status != http.StatusOK {
		t.Errorf("charset=UTF-8: status %d, want 200: %s", res.status, res.body)
	}
}

func testBadBodies(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	id := e.fx.SeedDead(t, Seed{Type: TypeOrderShipped})[0]
	e.fx.Fix()
	long := strings.Repeat("a", outbox.MaxTypeLen+1)
	cases := []struct {
		path, body    string
		status        int
		code, param   string
		forceJSONType bool
	}{
		{path: "api/dead-events/replay", body: "", status: 400, code: "invalid_body", forceJSONType: true},
		{path: "api/dead-events/replay", body: "null", status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: "[]", status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: `"x"`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: `{"event_type":`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: `{"eventType":"OrderPlaced"}`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: `{"event_type":5}`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: `{} {}`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: `{}x`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay", body: `{"event_type":"a\u0000"}`, status: 400, code: "invalid_parameter", param: "event_type"},
		{path: "api/dead-events/replay", body: `{"event_type":"` + long + `"}`, status: 400, code: "invalid_parameter", param: "event_type"},
		{path: "api/dead-events/replay", body: `{"aggregate_type":"` + long + `"}`, status: 400, code: "invalid_parameter", param: "aggregate_type"},
		{path: "api/dead-events/replay", body: `{"listener":"` + strings.Repeat("l", outbox.MaxListenerLen+1) + `"}`, status: 400, code: "invalid_parameter", param: "listener"},
		{path: "api/dead-events/replay", body: `{"listener":"a\u0000"}`, status: 400, code: "invalid_parameter", param: "listener"},
		{path: "api/dead-events/replay", body: `{"listener":1}`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/replay?listener=mail", body: `{}`, status: 400, code: "invalid_parameter", param: "listener"},
		{path: "api/dead-events/replay?event_type=OrderPlaced", body: `{}`, status: 400, code: "invalid_parameter", param: "event_type"},
		{path: "api/dead-events/replay", body: `{"event_type":"` + strings.Repeat("x", outboxadmin.MaxBodyBytes) + `"}`, status: 413, code: "body_too_large"},
		{path: "api/dead-events/" + id + "/replay", body: `{"force":true}`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/" + id + "/replay", body: `null`, status: 400, code: "invalid_body"},
		{path: "api/dead-events/" + id + "/replay?x=1", body: `{}`, status: 400, code: "invalid_parameter", param: "x"},
	}
	for _, c := range cases {
		req := e.c.request(t, http.MethodPost, c.path, c.body)
		if c.forceJSONType {
			req.Header.Set("Content-Type", "application/json")
		}
		got := e.c.do(t, req).wantError(t, c.status, c.code)
		if got.Param != c.param {
			t.Errorf("POST /%s %.40q: param = %q, want %q", c.path, c.body, got.Param, c.param)
		}
	}
	// An unknown field is named, with the accepted ones.
	if got := e.c.post(t, "api/dead-events/replay", `{"listeners":"mail"}`).wantError(t, 400, "invalid_body"); !strings.Contains(got.Message, "listeners") ||
		!strings.Contains(got.Message, "accepted: event_type, aggregate_type, listener") {
		t.Errorf("unknown body field: message %q, want the field and the accepted ones", got.Message)
	}
	e.fx.Poll(t)
	if got := e.fx.Status(t, id); got != outbox.StatusDead {
		t.Fatalf("status after rejected bodies = %s, want DEAD", got)
	}
}

// inlineScript matches a script element without a src attribute.
var inlineScript = regexp.MustCompile(`(?i)<script\b[^>]*>`)

func testPageHeaders(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	res := e.anon.get(t, "")
	if res.status != http.StatusOK || !strings.HasPrefix(res.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: status %d, Content-Type %q", res.status, res.header.Get("Content-Type"))
	}
	csp := res.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("page CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("page CSP %q allows inline code", csp)
	}
	for k, v := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
		if got := res.header.Get(k); got != v {
			t.Errorf("page %s = %q, want %q", k, got, v)
		}
	}
	for _, tag := range inlineScript.FindAllString(string(res.body), -1) {
		if !strings.Contains(tag, "src=") {
			t.Errorf("page has an inline script: %s", tag)
		}
	}
	for _, ref := range []string{`src="app.js"`, `href="app.css"`} {
		if !strings.Contains(string(res.body), ref) {
			t.Errorf("page does not load %s relative to itself", ref)
		}
	}
	js := e.anon.get(t, "app.js")
	if !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js Content-Type = %q", js.header.Get("Content-Type"))
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(string(js.body), sink) {
			t.Errorf("app.js uses %s: stored strings must be inserted as text", sink)
		}
	}
	if strings.Contains(string(js.body), "fetch('/") || strings.Contains(string(js.body), `fetch("/`) {
		t.Error("app.js fetches an absolute path: it must work under any prefix")
	}
	api := e.c.get(t, "api/overview")
	if got := api.header.Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'none'") {
		t.Errorf("API CSP = %q, want default-src 'none'", got)
	}
}

func testMountRedirect(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	if res := e.anon.get(t, ""); res.status != http.StatusOK {
		t.Fatalf("GET base: status %d", res.status)
	}
	base := mustParse(t, e.base)
	req := e.anon.request(t, http.MethodGet, "", "")
	req.URL, _ = url.Parse(strings.TrimSuffix(e.base, "/") + "?x=1")
	res := e.anon.do(t, req)
	if base.Path == "/" {
		// Mounted at the root: the bare URL is the base URL.
		if res.status != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", req.URL, res.status)
		}
	} else {
		if res.status/100 != 3 {
			t.Fatalf("GET %s: status %d, want a redirect to %s", req.URL, res.status, e.base)
		}
		loc, err := req.URL.Parse(res.header.Get("Location"))
		if err != nil {
			t.Fatalf("bad Location %q: %v", res.header.Get("Location"), err)
		}
		if loc.Path != base.Path || loc.RawQuery != "x=1" {
			t.Errorf("GET %s redirects to %s, want %s?x=1", req.URL, loc, e.base)
		}
	}
	e.c.get(t, "api/nope").wantError(t, http.StatusNotFound, "not_found")
	e.c.get(t, "api/dead-events/x/y").wantError(t, http.StatusNotFound, "not_found")
	e.anon.get(t, "api/nope").wantError(t, http.StatusUnauthorized, "unauthorized")
}

func originOf(t *testing.T, base string) string {
	u := mustParse(t, base)
	return u.Scheme + "://" + u.Host
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return u
}
