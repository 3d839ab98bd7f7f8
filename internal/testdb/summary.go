package testdb

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The summary of skipped databases, and how it reaches the person running go test.
//
// go test runs each package's test binary with its standard output and error going to
// a buffer, and prints that buffer only when the package fails, with -v (or -json), or
// when it runs in the package's directory without package arguments; otherwise a
// passing package shows as one "ok" line. A skipped database must not hide behind that
// "ok", so printSummary writes the line to this process's stderr (where -v and the
// package directory mode show it) and also to the go command's own standard error,
// which is wherever the person running go test looks: a terminal, a pipe to tee or a
// CI log, a file. On Linux the go command's file descriptor is duplicated with
// pidfd_getfd(2), so that the line lands in order even in a file the go command writes
// at its own offset; where that is refused (Yama's ptrace_scope 1 and up) the
// descriptor is reopened through /proc when it is a pipe or a terminal, and the
// controlling terminal (/dev/tty) is the last resort. Under CI or
// OUTBOX_TEST_REQUIRE_DBS a missing database fails the run instead, so the summary is
// for contributors' machines.

// skipSummary returns the servers' part of the summary line, naming those whose tests
// were skipped, or "" when none was.
func skipSummary(servers ...*server) string {
	var parts []string
	for _, s := range servers {
		s.mu.Lock()
		if s.skipped > 0 && s.err != nil {
			tests := "tests"
			if s.skipped == 1 {
				tests = "test"
			}
			parts = append(parts, fmt.Sprintf("skipped %s in %d %s (%s)", s.what, s.skipped, tests, s.skipReason(s.err)))
		}
		s.mu.Unlock()
	}
	return strings.Join(parts, "; ")
}

// summaryLine is the line StopAll prints: skips (from skipSummary) in the package at
// dir ("" when unknown).
func summaryLine(dir, skips string) string {
	if dir == "" {
		return "outbox tests: " + skips
	}
	return "outbox tests (" + dir + "): " + skips
}

// packageDir returns the working directory (go test runs a package's tests in its
// directory) relative to the repository's root, or "" when it cannot tell.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	script, err := scriptPath()
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(filepath.Dir(filepath.Dir(script)), wd)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	return filepath.ToSlash(rel)
}

// printSummary writes line to stderr and, unless go test shows this process's output
// anyway, to the go command's standard error, or else to the controlling terminal.
func printSummary(line string) {
	fmt.Fprintln(os.Stderr, line)
	if flag.Parsed() && testing.Verbose() {
		return // go test -v and -json show this process's output
	}
	if w, shown := parentStderr(); shown {
		return
	} else if w != nil {
		fmt.Fprintln(w, line)
		_ = w.Close()
		return
	}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return // stderr is a terminal
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return // no terminal either
	}
	fmt.Fprintln(tty, line)
	_ = tty.Close()
}

// parentStderr returns the standard error of the process that started this one (the go
// command under go test) for writing, or shown = true when this process's stderr is
// already the parent's standard output or error (go test in a package directory, or a
// test binary run by hand), or nil when it cannot be had.
func parentStderr() (w *os.File, shown bool) {
	mine, err := os.Stderr.Stat()
	if err != nil {
		return nil, false
	}
	ppid := os.Getppid()
	parentFD := func(fd int) string { return fmt.Sprintf("/proc/%d/fd/%d", ppid, fd) }
	for _, fd := range []int{1, 2} {
		if fi, err := os.Stat(parentFD(fd)); err == nil && os.SameFile(fi, mine) {
			return nil, true
		}
	}
	if f, err := processFD(ppid, 2); err == nil {
		return f, false
	}
	// A reopened regular file would have an offset of its own, and the go command's
	// next write would overwrite the line: only pipes and terminals are reopened.
	if fi, err := os.Stat(parentFD(2)); err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != 0 {
		if f, err := os.OpenFile(parentFD(2), os.O_WRONLY, 0); err == nil {
			return f, false
		}
	}
	return nil, false
}

// skipStamp is the file noteSkip opens: in the package's directory (go test only
// tracks files inside the package's module), ignored by git.
const skipStamp = ".outbox-testdb-skipped"

var noteSkipOnce sync.Once

// noteSkip keeps go test from caching the package's result as passed: go test caches a
// passing package's result together with the files its tests opened, and replays
// "ok (cached)" without running the tests, so the summary would not be printed, and
// tests skipped for want of server binaries would stay skipped after they are
// installed. go test does not cache a run that opened a file modified less than two
// seconds before the run ended; the stamp's modification time is set a day ahead, so
// that it counts as new however long the package's tests run.
func noteSkip() {
	noteSkipOnce.Do(func() {
		msg := []byte("Written by internal/testdb when tests skip a database, so that go test does not cache their result.\n")
		if err := os.WriteFile(skipStamp, msg, 0o644); err != nil {
			return
		}
		ahead := time.Now().Add(24 * time.Hour)
		_ = os.Chtimes(skipStamp, ahead, ahead)
		if f, err := os.Open(skipStamp); err == nil { // recorded in go test's log of opened files
			_ = f.Close()
		}
	})
}
