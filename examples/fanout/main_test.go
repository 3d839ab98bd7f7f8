package main

import (
	"io"
	"os"
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }

// TestRun runs the program and checks what it prints: each listener once, the mailer's
// delivery DEAD, then sent after the replay of the mailer's deliveries alone.
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
		t.Fatalf("run: %v\n%s", runErr, out)
	}
	want := "relay got OrderPlaced\n" +
		"read model got order o-1\n" +
		"mailer: DEAD after 2 attempts: smtp: connection refused\n" +
		"mailer sent to ada@example.com after the replay\n"
	if string(out) != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out, want)
	}
}
