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

// TestSmoke builds the command, runs it against a MySQL/MariaDB database of its own and
// checks the whole story over HTTP, up to a clean exit on SIGTERM. The DSN is given
// without parseTime, which the command adds.
func TestSmoke(t *testing.T) {
	t.Parallel()
	cfg, err := parseDSN(exampledb.MySQLDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime = false
	dsn := cfg.FormatDSN()
	if strings.Contains(dsn, "parseTime") {
		t.Fatalf("DSN %q still sets parseTime", dsn)
	}
	res := exampletest.Run(t, exampletest.Options{
		Pkg: "./examples/sqlx-mysql",
		Env: []string{envDSN + "=" + dsn},
	})
	if !strings.Contains(res.Database, "parseTime=true") || !strings.Contains(res.Database, "/"+cfg.DBName+"?") {
		t.Errorf("banner database line %q: want the DSN of %s with parseTime=true", res.Database, cfg.DBName)
	}
}

// TestExitStatus checks the exits that happen before any database is opened.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	const dsn = "app:hunter2@tcp(127.0.0.1:1)/app"
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
			wantText: []string{envDSN + " is not set", "@tcp(", "parseTime=true", "scripts/testdb.sh start mysql",
				envDSN + "=$OUTBOX_TEST_MYSQL_DSN go run ./examples/sqlx-mysql"},
		},
		{
			name: "malformed DSN", env: map[string]string{envDSN: "postgres://app:hunter2@db/app"},
			want: 2, wantText: []string{envDSN + ": "},
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
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("stderr shows the password:\n%s", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q, want nothing", stdout.String())
			}
		})
	}
}

func TestParseAndMaskDSN(t *testing.T) {
	t.Parallel()
	tests := []struct{ dsn, want string }{
		{"app:s3cret@tcp(db:3306)/orders", "app:xxxxx@tcp(db:3306)/orders?parseTime=true"},
		{"app:p@ss@tcp(db)/orders?parseTime=false&loc=UTC", "app:xxxxx@tcp(db:3306)/orders?parseTime=true"},
		{"app@unix(/run/mysqld.sock)/orders", "app@unix(/run/mysqld.sock)/orders?parseTime=true"},
	}
	for _, tt := range tests {
		cfg, err := parseDSN(tt.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tt.dsn, err)
			continue
		}
		if got := maskDSN(cfg); got != tt.want {
			t.Errorf("maskDSN(parseDSN(%q)) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}
