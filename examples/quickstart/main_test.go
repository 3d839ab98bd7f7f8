package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is written by several listener goroutines at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestQuickstartRuns runs the README's main job and checks the story it tells.
func TestQuickstartRuns(t *testing.T) {
	var out lockedBuffer
	if err := run(&out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"rolled back order-bad: card declined (nothing is published)",
		"delivered  OrderPlaced    id=",
		"order=order-1",
		"order=order-2",
		"delivered  ReminderDue",
		"failed     PaymentRequested",
		"attempt=3",
		`dead       PaymentRequested`,
		`last_error="payment service unavailable"`,
		"replayed 1 dead event(s)",
		"after replay",
		"orders: 2, outbox rows: DONE=4 DEAD=0 NEW=0 RETRY=0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "delivered  OrderPlaced") != 2 || strings.Count(text, "failed ") != 3 {
		t.Errorf("want 2 OrderPlaced deliveries and 3 failures:\n%s", text)
	}
}
