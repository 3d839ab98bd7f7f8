package admintest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// client sends requests to an admin mounted at base and checks the headers every
// response must carry.
type client struct {
	base  string // ends with "/"
	token string // sent as "Authorization: Bearer <token>" when not empty
	http  *http.Client
}

// newClient returns a client with its own transport, whose idle connections are
// closed when the test ends (goleak would see them otherwise). It never follows
// redirects.
func newClient(t *testing.T, base, token string) *client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{base: base, token: token, http: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// response is a read response.
type response struct {
	status int
	header http.Header
	body   []byte
}

// request builds a request for path (relative to base). A non-empty body is sent as
// application/json, the client's token as a bearer token.
func (c *client) request(t *testing.T, method, path, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, r)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req
}

// do sends req and checks that the response carries nosniff and no-store and, unless
// it is the page, a redirect or a HEAD, is JSON.
func (c *client) do(t *testing.T, req *http.Request) response {
	t.Helper()
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s %s: %v", req.Method, req.URL, err)
	}
	r := response{status: res.StatusCode, header: res.Header, body: body}
	if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s %s: X-Content-Type-Options = %q, want nosniff", req.Method, req.URL.Path, got)
	}
	if got := res.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("%s %s: Cache-Control = %q, want no-store", req.Method, req.URL.Path, got)
	}
	ct := res.Header.Get("Content-Type")
	page := strings.HasPrefix(ct, "text/html") || strings.HasPrefix(ct, "text/javascript") || strings.HasPrefix(ct, "text/css")
	if res.StatusCode/100 != 3 && req.Method != http.MethodHead && !(page && res.StatusCode == http.StatusOK) &&
		ct != "application/json; charset=utf-8" {
		t.Errorf("%s %s: status %d, Content-Type = %q, want application/json; charset=utf-8\n%s",
			req.Method, req.URL.Path, res.StatusCode, ct, body)
	}
	return r
}

func (c *client) get(t *testing.T, path string) response {
	t.Helper()
	return c.do(t, c.request(t, http.MethodGet, path, ""))
}

func (c *client) post(t *testing.T, path, body string) response {
	t.Helper()
	return c.do(t, c.request(t, http.MethodPost, path, body))
}

// decode unmarshals the body into v after checking the status.
func (r response) decode(t *testing.T, wantStatus int, v any) {
	t.Helper()
	if r.status != wantStatus {
		t.Fatalf("status %d, want %d; body: %s", r.status, wantStatus, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError is the error object of an error response.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param"`
}

// wantError checks that r is an error response with the status and code, and returns
// its error object.
func (r response) wantError(t *testing.T, status int, code string) apiError {
	t.Helper()
	var body struct {
		Error apiError `json:"error"`
	}
	r.decode(t, status, &body)
	if body.Error.Code != code || body.Error.Message == "" {
		t.Fatalf("error = %+v, want code %q and a message", body.Error, code)
	}
	return body.Error
}

// logRecorder is a slog.Handler that keeps every record, to check what the handler
// logs (and that a 500's details go to the log, not the response).
type logRecorder struct {
	mu      sync.Mutex
	records []string // level, message and attributes, one string per record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, b.String())
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// find returns the first record containing every substring, or "".
func (h *logRecorder) find(substrs ...string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		all := true
		for _, s := range substrs {
			all = all && strings.Contains(r, s)
		}
		if all {
			return r
		}
	}
	return ""
}

func newLogger(h *logRecorder) *slog.Logger { return slog.New(h) }
