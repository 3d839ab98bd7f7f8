package outboxcmd_test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	outbox "github.com/outboxkit/outbox/core"
)

// openTerminal opens a pseudo-terminal and returns its two ends: what is written to
// input, a process reading from term reads as typed at a terminal.
func openTerminal(t *testing.T) (input, term *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var n uint32
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Skipf("no pseudo-terminal number: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("cannot unlock the pseudo-terminal: %v", e)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// TestReplayAllAsksAtTerminal: at a terminal, replay -all without -yes asks, and replays
// on "y" only.
func TestReplayAllAsksAtTerminal(t *testing.T) {
	t.Parallel()
	tg := sqliteTarget(t)
	store := seed(t, tg, time.Now().Add(-time.Hour).UTC(), deadEvents("d0", "d1"))
	for _, c := range []struct {
		answer string
		code   int
		out    string
		want   outbox.Status
	}{
		{"n\n", 1, "", outbox.StatusDead},
		{"\n", 1, "", outbox.StatusDead},
		{"y\n", 0, "replayed 2 of 2 DEAD events\n", outbox.StatusNew},
	} {
		input, term := openTerminal(t)
		if _, err := input.WriteString(c.answer); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := tg.command(t, runOpts{stdin: term}, "replay", "-all")
		if code != c.code || out != c.out || !strings.HasPrefix(errOut, "replay 2 DEAD events (all dead events)? [y/N] ") ||
			(c.code == 1) != strings.Contains(errOut, "not confirmed; nothing replayed") {
			t.Errorf("answer %q: exit %d\n%s%s", c.answer, code, out, errOut)
		}
		for _, id := range []string{"d0", "d1"} {
			if got := status(t, store, id); got != c.want {
				t.Errorf("answer %q: %s is %v, want %v", c.answer, id, got, c.want)
			}
		}
	}
}
