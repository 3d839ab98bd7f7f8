package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }

// TestRun runs the program and checks what it prints: the event, delivered once.
func TestRun(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	runErr := run(t.Context())
	os.Stdout = stdout
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	want := regexp.MustCompile(`^delivered OrderPlaced [0-9A-Z]{26}: order o-1, 4200 cents\n$`)
	if !want.Match(out) {
		t.Errorf("printed %q, want one line matching %s", out, want)
	}
}

// TestREADMEShowsThisProgram: the README's first program is this file, verbatim, so the
// snippet cannot drift from what compiles and runs here.
func TestREADMEShowsThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- examples/basic/main.go -->\n```go\n"
	_, block, ok := bytes.Cut(readme, []byte(marker))
	if !ok {
		t.Fatalf("README.md has no %q block", strings.TrimSpace(marker))
	}
	block, _, ok = bytes.Cut(block, []byte("\n```\n"))
	if !ok {
		t.Fatal("the README's examples/basic block is not closed")
	}
	if got := string(block) + "\n"; got != string(src) {
		t.Errorf("the README's copy of examples/basic/main.go differs from the file; paste the file again.\nREADME:\n%s", got)
	}
}
