package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/outboxkit/outbox/internal/exampletest"
	"github.com/outboxkit/outbox/internal/exampletest/exampledb"
	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }

// TestSmoke builds the command, runs it against a PostgreSQL database of its own and
// checks the whole story over HTTP, up to a clean exit on SIGTERM.
func TestSmoke(t *testing.T) {
	t.Parallel()
	dsn := exampledb.PostgresDatabase(t)
	res := exampletest.Run(t, exampletest.Options{
		Pkg: "./examples/echo-bun-postgres",
		Env: []string{envDSN + "=" + dsn},
	})
	if want := maskDSN(dsn); res.Database != want {
		t.Errorf("banner database line %q, want %q", res.Database, want)
	}
}

// TestExitStatus checks the exits that happen before any database is opened.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://postgres@127.0.0.1:1/app"
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		want     int
		wantText []string // in stderr
	}{
		{
			name: "missing DSN",
			want: 2,
			wantText: []string{envDSN + " is not set", "postgres://", "scripts/testdb.sh start postgres",
				envDSN + "=$OUTBOX_TEST_POSTGRES_DSN go run ./examples/echo-bun-postgres"},
		},
		{name: "help", args: []string{"-h"}, env: map[string]string{envDSN: dsn}, want: 0, wantText: []string{"-addr"}},
		{name: "unknown flag", args: []string{"-db", "x"}, env: map[string]string{envDSN: dsn}, want: 2, wantText: []string{"-db"}},
		{name: "argument", args: []string{"serve"}, env: map[string]string{envDSN: dsn}, want: 2, wantText: []string{`unexpected arguments ["serve"]`}},
		{
			name: "token with a space", env: map[string]string{envDSN: dsn, envToken: "a b"},
			want: 2, wantText: []string{envToken + " must be printable ASCII"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			got := realMain(tt.args, func(k string) string { return tt.env[k] }, &stdout, &stderr)
			if got != tt.want {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got, tt.want, stderr.String())
			}
			for _, want := range tt.wantText {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q, want nothing", stdout.String())
			}
		})
	}
}

func TestMaskDSN(t *testing.T) {
	t.Parallel()
	tests := []struct{ dsn, want string }{
		{"postgres://app:s3cret@db:5432/orders?sslmode=disable", "postgres://app:xxxxx@db:5432/orders?sslmode=disable"},
		{"postgresql://app@db/orders", "postgresql://app@db/orders"},
		{"postgres://db/orders?password=s3cret&user=app", "postgres://db/orders?password=xxxxx&user=app"},
		{"postgres://app:50%-off@db/orders", "postgres://app:xxxxx@db/orders"}, // not a valid URL escape
		{"host=db user=app password=s3cret dbname=orders", "host=db user=app password=xxxxx dbname=orders"},
		{"host=db password = 's3 cr\\'et' dbname=orders", "host=db password = xxxxx dbname=orders"},
		{"host=db dbname=orders", "host=db dbname=orders"},
	}
	for _, tt := range tests {
		if got := maskDSN(tt.dsn); got != tt.want {
			t.Errorf("maskDSN(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}
