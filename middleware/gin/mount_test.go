package outboxgin_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	outboxgin "github.com/outboxkit/outbox/middleware/gin"
)

// seenHandler answers with what it saw in the X-Seen header: method, path, raw path and
// the request URI.
var seenHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Seen", r.Method+" "+r.URL.Path+" "+r.URL.RawPath+" "+r.RequestURI)
	w.WriteHeader(http.StatusTeapot)
})

func do(t *testing.T, method, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestMountPassesPathAndMethod(t *testing.T) {
	t.Parallel()
	r := gin.New()
	r.GET("/health", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	admin := r.Group("/outbox/admin", func(c *gin.Context) { c.Header("X-Group", "ran") })
	outboxgin.Mount(admin, seenHandler)
	outboxgin.Mount(r.Group("/tenants/:tenant/outbox"), seenHandler)
	outboxgin.Mount(r.Group("/slash/"), seenHandler)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		method, path string
		seen         string // "" when the handler must not be reached
	}{
		{"GET", "/outbox/admin", "GET   /outbox/admin"},
		{"GET", "/outbox/admin/", "GET /  /outbox/admin/"},
		{"GET", "/outbox/admin/api/dead-events", "GET /api/dead-events  /outbox/admin/api/dead-events"},
		{"GET", "/outbox/admin/api/dead-events/01J9Z?x=1", "GET /api/dead-events/01J9Z  /outbox/admin/api/dead-events/01J9Z?x=1"},
		{"POST", "/outbox/admin/api/dead-events/01J9Z/replay", "POST /api/dead-events/01J9Z/replay  /outbox/admin/api/dead-events/01J9Z/replay"},
		{"POST", "/outbox/admin", "POST   /outbox/admin"},
		{"DELETE", "/outbox/admin/api/dead-events/01J9Z", "DELETE /api/dead-events/01J9Z  /outbox/admin/api/dead-events/01J9Z"},
		{"PUT", "/outbox/admin/api/dead-events/replay", "PUT /api/dead-events/replay  /outbox/admin/api/dead-events/replay"},
		{"GET", "/outbox/admin/api/dead-events/a%2Fb", "GET /api/dead-events/a/b /api/dead-events/a%2Fb /outbox/admin/api/dead-events/a%2Fb"},
		{"GET", "/outbox/admin/api/events?status=done&aggregate_id=a%2Fb&newest=1", "GET /api/events  /outbox/admin/api/events?status=done&aggregate_id=a%2Fb&newest=1"},
		{"GET", "/outbox/admin/api/events/01J9Z", "GET /api/events/01J9Z  /outbox/admin/api/events/01J9Z"},
		{"POST", "/outbox/admin/api/events/replay", "POST /api/events/replay  /outbox/admin/api/events/replay"},
		{"GET", "/outbox/admin/api/audit?limit=5", "GET /api/audit  /outbox/admin/api/audit?limit=5"},
		{"GET", "/tenants/t1/outbox/api/overview", "GET /api/overview  /tenants/t1/outbox/api/overview"},
		{"GET", "/tenants/t1/outbox", "GET   /tenants/t1/outbox"},
		{"GET", "/slash/api/overview", "GET /api/overview  /slash/api/overview"},
		{"GET", "/slash/", "GET /  /slash/"},
		{"GET", "/outbox/administrator", ""},
		{"GET", "/outbox", ""},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			t.Parallel()
			resp := do(t, tc.method, srv.URL+tc.path)
			if tc.seen == "" {
				if resp.StatusCode != http.StatusNotFound || resp.Header.Get("X-Seen") != "" {
					t.Fatalf("got %d, X-Seen %q; want gin's 404", resp.StatusCode, resp.Header.Get("X-Seen"))
				}
				return
			}
			if resp.StatusCode != http.StatusTeapot {
				t.Fatalf("got %d, want the handler's 418", resp.StatusCode)
			}
			if got := resp.Header.Get("X-Seen"); got != tc.seen {
				t.Errorf("handler saw %q, want %q", got, tc.seen)
			}
		})
	}
	if resp := do(t, "HEAD", srv.URL+"/outbox/admin/api/dead-events"); resp.Header.Get("X-Seen") != "HEAD /api/dead-events  /outbox/admin/api/dead-events" {
		t.Errorf("HEAD: handler saw %q", resp.Header.Get("X-Seen"))
	}
	if resp := do(t, "GET", srv.URL+"/outbox/admin/"); resp.Header.Get("X-Group") != "ran" {
		t.Error("the group's middleware did not run")
	}
	if resp := do(t, "GET", srv.URL+"/health"); resp.StatusCode != http.StatusOK {
		t.Errorf("a route outside the group: %d", resp.StatusCode)
	}
}
