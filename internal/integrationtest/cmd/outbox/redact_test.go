package outboxcmd_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runEnv runs the command with args and the environment env (the test's, with its
// OUTBOX_* variables cleared) and returns its output and exit status.
func runEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(os.Environ(), "OUTBOX_DB=", "OUTBOX_DSN=", "OUTBOX_ACTOR="), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// TestNoPasswordPrinted runs the command with a DSN that holds a password, in each form
// the command takes, given in $OUTBOX_DSN or -dsn, on every path that prints usage or a
// message about the DSN: -h, an unknown flag, no command, the DSN where a command, a
// kind or a duration goes, a database that cannot be reached and a DSN that does not
// parse. The password never appears; where the DSN is shown, it is redacted.
func TestNoPasswordPrinted(t *testing.T) {
	t.Parallel()
	// Every password holds "S3cr" (in every form it is written in), and nothing else the
	// command prints does.
	const mark = "S3cr"
	for _, c := range []struct {
		name, kind, dsn string
		decoded         string // the password as the driver reads it, when it differs
	}{
		{"postgres URL", "postgres", "postgres://app:Pw-S3cret@127.0.0.1:1/app?sslmode=disable&connect_timeout=2", ""},
		{"postgres URL escaped", "postgres", "postgres://app:Pw%2FS3cr%40et@127.0.0.1:1/app?sslmode=disable&connect_timeout=2", "Pw/S3cr@et"},
		{"postgres URL parameter", "postgres", "postgres://app@127.0.0.1:1/app?sslmode=disable&password=PwS3cret&connect_timeout=2", ""},
		{"postgres key=value", "postgres", `host=127.0.0.1 port=1 user=app password='Pw S3cr\'et' dbname=app sslmode=disable connect_timeout=2`, "Pw S3cr'et"},
		{"postgres key=value plain", "postgres", "host=127.0.0.1 port=1 user=app password=PwS3cret dbname=app sslmode=disable connect_timeout=2", ""},
		{"mysql", "mysql", "app:Pw-S3cret@tcp(127.0.0.1:1)/app?timeout=2s", ""},
		{"mysql with @ and /", "mysql", "app:Pw/S3cr@et@tcp(127.0.0.1:1)/app?timeout=2s", ""},
		{"mysql bad DSN", "mysql", "app:Pw-S3cret@tcp(127.0.0.1:1/app", ""},
		{"postgres bad DSN", "postgres", "postgres://app:Pw-S3cret@127.0.0.1:notaport/app", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := []string{"OUTBOX_DB=" + c.kind, "OUTBOX_DSN=" + c.dsn}
			for _, p := range []struct {
				name  string
				env   []string
				args  []string
				code  int
				shown bool // the redacted DSN is in the message
			}{
				{"-h", env, []string{"-h"}, 0, false},
				{"-help", env, []string{"-help"}, 0, false},
				{"unknown flag", env, []string{"-verbose", "stats"}, 2, false},
				{"no command", env, nil, 2, false},
				{"unknown command", env, []string{"frobnicate"}, 2, false},
				{"DSN as the command", env, []string{c.dsn}, 2, false},
				{"DSN as -db", []string{"OUTBOX_DSN=" + c.dsn}, []string{"-db", c.dsn, "stats"}, 2, false},
				{"DSN as -timeout", env, []string{"-timeout", c.dsn, "stats"}, 2, false},
				{"DSN in OUTBOX_DB", []string{"OUTBOX_DB=" + c.dsn, "OUTBOX_DSN=" + c.dsn}, []string{"stats"}, 2, false},
				{"stats", env, []string{"stats"}, -1, true},
				{"-dsn", []string{"OUTBOX_DB=" + c.kind}, []string{"-dsn", c.dsn, "audit"}, -1, true},
				{"events show", env, []string{"events", "show", "e1"}, -1, true},
			} {
				out, errOut, code := runEnv(t, p.env, p.args...)
				all := out + errOut
				if strings.Contains(all, mark) || c.decoded != "" && strings.Contains(all, c.decoded) {
					t.Errorf("%s: the password is printed:\n%s", p.name, all)
				}
				switch {
				case p.code >= 0 && code != p.code, p.code < 0 && code == 0:
					t.Errorf("%s: exit %d\n%s", p.name, code, all)
				case p.code != 1 && code != 1 && !strings.Contains(errOut, "usage: outbox") && p.code >= 0:
					t.Errorf("%s: no usage\n%s", p.name, all)
				case p.shown && !strings.Contains(errOut, "xxxxx"):
					t.Errorf("%s: no redacted DSN in the message\n%s", p.name, all)
				}
				if strings.Contains(all, "usage: outbox") && !strings.Contains(errOut, "(default $OUTBOX_DSN)") {
					t.Errorf("%s: the usage does not say where the DSN comes from\n%s", p.name, all)
				}
			}
		})
	}

	// SQLite has no password: its path is shown as it is.
	path := filepath.Join(t.TempDir(), "missing", "outbox.db")
	_, errOut, code := runEnv(t, []string{"OUTBOX_DB=sqlite", "OUTBOX_DSN=" + path}, "stats")
	if code != 1 || !strings.Contains(errOut, "cannot reach the sqlite database at "+path+":") {
		t.Errorf("sqlite: exit %d\n%s", code, errOut)
	}
}
