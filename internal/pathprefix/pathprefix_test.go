package pathprefix

import (
	"net/http/httptest"
	"testing"
)

func TestSegments(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]int{"/": 0, "": 0, "/outbox": 1, "/outbox/admin": 2, "/outbox/admin/": 2, "/t/:tenant/outbox": 3} {
		if got := Segments(p); got != want {
			t.Errorf("Segments(%q) = %d, want %d", p, got, want)
		}
	}
}

func TestStrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		target   string
		n        int
		wantPath string
		wantRaw  string
		ok       bool
	}{
		{"/outbox/admin", 2, "", "", true},
		{"/outbox/admin/", 2, "/", "", true},
		{"/outbox/admin/api/dead-events/42", 2, "/api/dead-events/42", "", true},
		{"/t/acme/outbox/api/overview", 3, "/api/overview", "", true},
		{"/outbox/admin/api/dead-events/a%2Fb", 2, "/api/dead-events/a/b", "/api/dead-events/a%2Fb", true},
		{"/outbox", 2, "", "", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.target, nil)
		got, ok := Strip(r, tt.n)
		if ok != tt.ok {
			t.Errorf("Strip(%q, %d) ok = %v, want %v", tt.target, tt.n, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		if got.URL.Path != tt.wantPath || got.URL.RawPath != tt.wantRaw {
			t.Errorf("Strip(%q, %d) = %q (raw %q), want %q (raw %q)", tt.target, tt.n, got.URL.Path, got.URL.RawPath, tt.wantPath, tt.wantRaw)
		}
		if got.RequestURI != r.RequestURI || r.URL.Path != "" && r.URL == got.URL {
			t.Errorf("Strip(%q) must keep RequestURI and copy the URL", tt.target)
		}
	}
}
