package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/outboxkit/outbox/examples/internal/orderstory"
)

// banner is what the start-up banner shows.
type banner struct {
	title    string // first line: the command and its stack
	database string // the DSN, password masked
	base     string // http://host:port
	token    string // the admin bearer token
}

// printBanner writes the start-up banner: the URLs, the admin token and two orders to try.
func printBanner(w io.Writer, b banner) {
	fmt.Fprintf(w, `%s
database  %s

  orders   POST %[3]s/orders
  admin    %[3]s/outbox/admin/#token=%[4]s
  metrics  %[3]s/metrics

Try it:
  curl -s -X POST %[3]s/orders -d '{"customer":"ada@example.com","item":"book","quantity":1}'
  curl -s -X POST %[3]s/orders -d '{"customer":"bob@bounce.example","item":"lamp","quantity":2}'

The second order's confirmation email fails %[5]d times and ends DEAD: open the admin URL to see it
and replay it. Ctrl-C stops the server and drains the outbox.
`, b.title, b.database, b.base, b.token, orderstory.MaxAttempts)
}

// baseURL returns the URL of the server listening on addr. An unspecified address
// (":8080") is shown as localhost.
func baseURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// adminToken returns the admin bearer token: fromEnv when set, else 128 random bits as 32
// hex characters.
func adminToken(fromEnv string) (string, error) {
	if fromEnv != "" {
		for _, c := range []byte(fromEnv) {
			if c <= ' ' || c >= 0x7f {
				return "", fmt.Errorf("%s must be printable ASCII without spaces", envToken)
			}
		}
		return fromEnv, nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand.Read crashes the program instead
	return hex.EncodeToString(b[:]), nil
}

// Passwords in the two DSN forms: key=value (password=secret, quoted or not) and a URL's
// user information (scheme://user:secret@host), for a URL that net/url cannot parse.
var (
	kvPassword  = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s']\S*)`)
	urlPassword = regexp.MustCompile(`^([a-z]+://[^:/@]*:)[^/]*@`)
)

// maskDSN returns the PostgreSQL DSN with its password replaced by xxxxx, in the URL
// form (postgres://user:password@host/db, or ?password=) and in the key=value form
// (password=secret).
func maskDSN(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return urlPassword.ReplaceAllString(dsn, "${1}xxxxx@")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
