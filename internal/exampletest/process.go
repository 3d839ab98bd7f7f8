package exampletest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildMu serialises the builds of a test process: parallel tests that build the same
// example then compile it once (the next build finds it in Go's build cache), instead of
// compiling a cgo driver twice at the same time on a cold cache.
var buildMu sync.Mutex

// build compiles pkg (relative to the module root) into the test's temp dir and returns
// the binary's path.
func build(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = root
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(append(args, pkg), " "), root, err, out)
	}
	t.Logf("built %s in %s", pkg, time.Since(began).Round(100*time.Millisecond))
	return bin
}

// moduleRoot returns the repository root, where example packages are named from
// (./examples/quickstart): the first directory above the working directory that holds
// go.work (the workspace of the repository's modules), or without one, go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	mod := ""
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && mod == "" {
			mod = dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if mod == "" {
		return "", errors.New("no go.work or go.mod above the working directory")
	}
	return mod, nil
}

// process is a running example.
type process struct {
	cmd  *exec.Cmd
	out  *output
	done chan struct{} // closed when the process has exited and its output is read
	err  error         // cmd.Wait's result, set before done is closed
}

// start runs bin with -addr 127.0.0.1:0 and opts' flags and environment. When the test
// ends, the process is killed if it still runs, and its output is logged if the test
// failed.
func start(t *testing.T, bin string, opts Options) *process {
	t.Helper()
	out := &output{}
	p := &process{out: out, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, opts.Args...)...)
	// TMPDIR: what the example puts in the temp dir goes with the test's, even when the
	// process is killed before it can clean up.
	p.cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	p.cmd.Env = append(p.cmd.Env, opts.Env...)
	p.cmd.Stdout = out.writer(true)
	p.cmd.Stderr = out.writer(false)
	p.cmd.WaitDelay = 5 * time.Second
	// Cleanups run last in, first out: the process is killed before its output is logged.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of %s:\n%s", filepath.Base(bin), out.all())
		}
	})
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill kills the process unless it has exited, and waits for it.
func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// output returns everything the process wrote so far.
func (p *process) output() string { return p.out.all() }

// stop sends SIGTERM and requires exit status 0 within exitTimeout.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if p.exited() {
		t.Fatalf("the process exited before SIGTERM: %v", p.err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("send SIGTERM: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		t.Fatalf("the process did not exit within %s of SIGTERM", exitTimeout)
	}
	if p.err != nil {
		t.Fatalf("after SIGTERM: %v, want exit status 0", p.err)
	}
}

// eventually calls cond every 100 ms until it returns true, and fails the test when
// timeout passes first, with what cond last said, or when the process exits.
func (p *process) eventually(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last: %s", timeout, what, last)
		}
		select {
		case <-p.done:
			t.Fatalf("the process exited (%v) while waiting for %s; last: %s", p.err, what, last)
		case <-tick.C:
		}
	}
}

// output collects what a process writes to stdout and stderr; it is safe for the two
// copying goroutines of exec.Cmd and the test to use at once.
type output struct {
	mu       sync.Mutex
	combined bytes.Buffer // stdout and stderr, interleaved
	stdout   bytes.Buffer
}

// writer returns the writer of stdout (true) or stderr (false).
func (o *output) writer(stdout bool) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if stdout {
			o.stdout.Write(b)
		}
		return o.combined.Write(b)
	})
}

func (o *output) all() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.combined.String()
}

func (o *output) stdoutText() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stdout.String()
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// countLines counts the lines of text that contain every one of subs.
func countLines(text string, subs ...string) int {
	n := 0
	for line := range strings.Lines(text) {
		if containsAll(line, subs) {
			n++
		}
	}
	return n
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// describe shortens a response body for a failure message.
func describe(status int, body []byte) string {
	const limit = 500
	s := string(body)
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return fmt.Sprintf("%d %s", status, strings.TrimSpace(s))
}
