//go:build outboxchaos

package crash

import (
	"github.com/outboxkit/outbox/core/outboxtype"

	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// The chaos build's crash point (see crashpoint.go): when the environment variable
// OUTBOX_CRASH_POINT names the point, the process kills itself with SIGKILL on the
// point's OUTBOX_CRASH_AFTER-th hit (default the first). This build is for the fault
// tests only; the variables are read once, at start-up. At a point that holds events
// (PointEvents), their IDs are written first, one per line, to the file that
// OUTBOX_CRASH_EVENTS names, so that the harness knows which claims died with the node.
var (
	crashName  = os.Getenv("OUTBOX_CRASH_POINT")
	crashAfter = crashAfterEnv()
	crashHits  atomic.Int64
)

func crashAfterEnv() int64 {
	n, err := strconv.ParseInt(os.Getenv("OUTBOX_CRASH_AFTER"), 10, 64)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func Point(name string) {
	if name != crashName || crashHits.Add(1) < crashAfter {
		return
	}
	die()
}

func PointEvents(name string, events []outboxtype.Event) {
	if name != crashName || crashHits.Add(1) < crashAfter {
		return
	}
	if path := os.Getenv("OUTBOX_CRASH_EVENTS"); path != "" {
		var b strings.Builder
		for _, e := range events {
			b.WriteString(e.ID)
			b.WriteByte('\n')
		}
		_ = os.WriteFile(path, []byte(b.String()), 0o644) // the page cache outlives SIGKILL
	}
	die()
}

func die() {
	self, err := os.FindProcess(os.Getpid())
	if err == nil {
		_ = self.Kill() // SIGKILL on Unix
	}
	select {} // the signal is on its way; run nothing after the point
}
