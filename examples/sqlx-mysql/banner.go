package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"

	"github.com/go-sql-driver/mysql"

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

// maskDSN returns the DSN the command connects with, its password replaced by xxxxx.
func maskDSN(cfg *mysql.Config) string {
	c := cfg.Clone()
	if c.Passwd != "" {
		c.Passwd = "xxxxx"
	}
	return c.FormatDSN()
}
