package testdb

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// envSummaryRole makes the test binary play a part in TestSummaryReachesTheGoCommand
// instead of running tests: "go" stands in for the go command, "child" for a test
// binary whose tests skipped a database.
const envSummaryRole = "OUTBOX_TESTDB_SUMMARY_ROLE"

// summaryOut is where the "go" role sends its child's output: "buffer" as go test does
// for a list of packages without -v (shown only if the package fails), "stdout" as go
// test does in a package's directory.
const envSummaryOut = "OUTBOX_TESTDB_SUMMARY_OUT"

const testSummary = "outbox tests (internal/x): skipped PostgreSQL in 1 test (no server binaries and OUTBOX_TEST_POSTGRES_DSN unset)"

func TestMain(m *testing.M) {
	switch os.Getenv(envSummaryRole) {
	case "child":
		flag.Parse()
		printSummary(testSummary)
		os.Exit(0)
	case "go":
		os.Exit(actAsGoCommand())
	}
	os.Exit(m.Run())
}

// actAsGoCommand writes "before" to stderr, runs the binary as a child that prints the
// summary, its output going where envSummaryOut says, then writes "after", as the go
// command writes its "ok" line after a package's test binary exited.
func actAsGoCommand() int {
	fmt.Fprintln(os.Stderr, "before")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envSummaryRole+"=child")
	var buf bytes.Buffer
	switch os.Getenv(envSummaryOut) {
	case "stdout":
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	default:
		cmd.Stdout, cmd.Stderr = &buf, &buf // a pipe, discarded
	}
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "child: %v\n%s", err, buf.String())
		return 1
	}
	fmt.Fprintln(os.Stderr, "after")
	return 0
}

// TestSummaryReachesTheGoCommand: the summary line of a package whose tests skipped a
// database reaches the go command's standard error when go test would discard the
// package's output, whether that is a pipe (a terminal, tee, a CI log) or a file the go
// command writes on (the line lands between its writes, overwriting nothing), and is
// printed once when go test shows the package's output itself.
func TestSummaryReachesTheGoCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the go command's stderr is reached through /proc and pidfd_getfd(2), on Linux; elsewhere through /dev/tty")
	}
	t.Parallel()
	want := "before\n" + testSummary + "\nafter\n"
	run := func(t *testing.T, out string, stdout, stderr *os.File) {
		t.Helper()
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), envSummaryRole+"=go", envSummaryOut+"="+out)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("go command stand-in: %v", err)
		}
	}
	t.Run("pipe", func(t *testing.T) {
		t.Parallel()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got bytes.Buffer
		read := make(chan error, 1)
		go func() { _, err := got.ReadFrom(r); read <- err }()
		run(t, "buffer", nil, w)
		_ = w.Close()
		if err := <-read; err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("the go command's stderr (a pipe) =\n%q\nwant\n%q", got.String(), want)
		}
	})
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		if f, err := processFD(os.Getppid(), 2); err != nil {
			t.Skipf("%v: this system does not let a process take its parent's descriptors (Yama ptrace_scope?); "+
				"the summary reaches the go command's stderr only when it is a pipe or a terminal", err)
		} else {
			_ = f.Close()
		}
		path := filepath.Join(t.TempDir(), "stderr")
		f, err := os.Create(path) // no O_APPEND: the go command writes at its own offset
		if err != nil {
			t.Fatal(err)
		}
		run(t, "buffer", nil, f)
		_ = f.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("the go command's stderr (a file) =\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("shown by go test", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		stdout, err := os.Create(filepath.Join(dir, "stdout"))
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := os.Create(filepath.Join(dir, "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		run(t, "stdout", stdout, stderr)
		_ = stdout.Close()
		_ = stderr.Close()
		out, _ := os.ReadFile(stdout.Name())
		errOut, _ := os.ReadFile(stderr.Name())
		if n := strings.Count(string(out), testSummary); n != 1 || string(errOut) != "before\nafter\n" {
			t.Errorf("streamed output holds the summary %d times (want 1):\n%s\nthe go command's stderr:\n%s", n, out, errOut)
		}
	})
}

// TestSummaryLine names the package's directory when it is known.
func TestSummaryLine(t *testing.T) {
	t.Parallel()
	if got, want := summaryLine("core", "skipped MariaDB in 1 test (x)"), "outbox tests (core): skipped MariaDB in 1 test (x)"; got != want {
		t.Errorf("summaryLine = %q, want %q", got, want)
	}
	if got, want := summaryLine("", "skipped MariaDB in 1 test (x)"), "outbox tests: skipped MariaDB in 1 test (x)"; got != want {
		t.Errorf("summaryLine without a directory = %q, want %q", got, want)
	}
	if got := packageDir(); got != "internal/testdb" {
		t.Errorf("packageDir = %q, want internal/testdb", got)
	}
}
