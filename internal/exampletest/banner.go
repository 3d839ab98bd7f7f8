package exampletest

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// banner is what an example's banner says.
type banner struct {
	orders   string // URL of POST /orders
	admin    string // URL of the admin page, without the fragment; ends with "/"
	token    string // the admin's bearer token
	metrics  string // URL of /metrics
	database string // the database line's value
}

// waitBanner waits at most bannerTimeout for the banner's admin line on stdout, then
// parses the banner.
func (p *process) waitBanner(t *testing.T) banner {
	t.Helper()
	var (
		b   banner
		err error
	)
	p.eventually(t, "the banner's admin line on stdout", bannerTimeout, func() (bool, string) {
		text := p.out.stdoutText()
		if !adminLine.MatchString(text) {
			return false, fmt.Sprintf("stdout so far: %q", text)
		}
		b, err = parseBanner(text)
		return true, ""
	})
	if err != nil {
		t.Fatalf("banner: %v\n%s", err, p.out.stdoutText())
	}
	return b
}

// The lines of the banner, with their two-space indent and padded labels.
var (
	ordersLine   = regexp.MustCompile(`(?m)^  orders   POST (http://\S+)$`)
	adminLine    = regexp.MustCompile(`(?m)^  admin    (http://\S+)$`)
	metricsLine  = regexp.MustCompile(`(?m)^  metrics  (http://\S+)$`)
	databaseLine = regexp.MustCompile(`(?m)^database  (.+)$`)
)

// parseBanner parses the banner in stdout. It returns an error naming the first line
// that is missing or malformed.
func parseBanner(stdout string) (banner, error) {
	var b banner
	for _, l := range []struct {
		name string
		re   *regexp.Regexp
		dst  *string
	}{
		{"orders", ordersLine, &b.orders},
		{"admin", adminLine, &b.admin},
		{"metrics", metricsLine, &b.metrics},
		{"database", databaseLine, &b.database},
	} {
		m := l.re.FindStringSubmatch(stdout)
		if m == nil {
			return banner{}, fmt.Errorf("no %s line matching %s", l.name, l.re)
		}
		*l.dst = strings.TrimSpace(m[1])
	}
	admin, fragment, ok := strings.Cut(b.admin, "#")
	if !ok {
		return banner{}, fmt.Errorf("admin URL %q has no #token= fragment", b.admin)
	}
	token, ok := strings.CutPrefix(fragment, "token=")
	if !ok || !validToken(token) {
		return banner{}, fmt.Errorf("admin URL %q: the fragment must be token=<32 hex characters>", b.admin)
	}
	b.admin, b.token = admin, token
	if !strings.HasSuffix(b.admin, "/") {
		return banner{}, fmt.Errorf("admin URL %q must end with a slash", b.admin)
	}
	for _, u := range []string{b.orders, b.admin, b.metrics} {
		if err := loopbackURL(u); err != nil {
			return banner{}, err
		}
	}
	return b, nil
}

// validToken reports whether s can be sent as a bearer token: printable ASCII without
// spaces. (A generated token is 32 hex characters; OUTBOX_ADMIN_TOKEN may set another.)
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// loopbackURL checks that u is an http URL on 127.0.0.1 with a real (non-zero) port.
func loopbackURL(u string) error {
	parsed, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("banner URL %q: %w", u, err)
	}
	if parsed.Hostname() != "127.0.0.1" || parsed.Port() == "" || parsed.Port() == "0" {
		return fmt.Errorf("banner URL %q: want http://127.0.0.1:<bound port>/…", u)
	}
	return nil
}
