package exampletest

import (
	"net/url"
	"strings"
	"testing"
)

// expectedError is the one ERROR line the story causes on purpose: the outbox logs it
// when the bounced confirmation email's event moves to dead.
const expectedError = `msg="event moved to dead"`

// checkOutput checks the whole output of a run that ended: lines saying the app stopped,
// no panic, no data race, no ERROR line but the expected one, and no password of a DSN
// in env.
func checkOutput(t *testing.T, out string, env []string) {
	t.Helper()
	if !strings.Contains(out, "stopped") {
		t.Errorf("no log line says %q after SIGTERM", "stopped")
	}
	for _, line := range badLines(out) {
		t.Errorf("unexpected output line: %s", line)
	}
	for _, kv := range env {
		_, dsn, _ := strings.Cut(kv, "=")
		if pw := dsnPassword(dsn); pw != "" && strings.Contains(out, ":"+pw+"@") {
			t.Errorf("the output shows the password of %s; mask it", strings.SplitN(kv, "=", 2)[0])
		}
	}
}

// badLines returns the lines of out that report a panic, a data race or an unexpected
// error.
func badLines(out string) []string {
	var bad []string
	for line := range strings.Lines(out) {
		switch {
		case strings.Contains(line, "panic"), strings.Contains(line, "DATA RACE"),
			strings.Contains(line, "level=ERROR") && !strings.Contains(line, expectedError):
			bad = append(bad, strings.TrimRight(line, "\n"))
		}
	}
	return bad
}

// dsnPassword returns the password of a DSN in URL form (postgres://user:pw@host/db) or
// in the go-sql-driver/mysql form (user:pw@tcp(host)/db), or "".
func dsnPassword(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil || u.User == nil {
			return ""
		}
		pw, _ := u.User.Password()
		return pw
	}
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(dsn[:at], ":")
	return pw
}
