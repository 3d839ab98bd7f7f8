package main

import (
	"io"
	"os"
	"regexp"
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }

// TestRun runs the program and checks what it prints: the message in the stream, with
// the request's trace continued through the outbox's delivery span.
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
	want := regexp.MustCompile(`^request trace ([0-9a-f]{32}) wrote order o-1
consumer got OrderPlaced on outbox\.Order\.OrderPlaced: order o-1, 4200 cents, Nats-Msg-Id [0-9A-Z]{26}, trace ([0-9a-f]{32})
its parent span: "outbox deliver OrderPlaced", child of "POST /orders"
$`)
	m := want.FindSubmatch(out)
	if m == nil {
		t.Fatalf("printed:\n%s\nwant lines matching\n%s", out, want)
	}
	if string(m[1]) != string(m[2]) {
		t.Fatalf("the consumer's trace %s is not the request's %s", m[2], m[1])
	}
}
