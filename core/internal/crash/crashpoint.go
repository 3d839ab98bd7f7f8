//go:build !outboxchaos

package crash

import "github.com/outboxkit/outbox/core/outboxtype"

// Point marks a place where the fault tests kill the process: a build with the
// outboxchaos tag (crashpoint_chaos.go, used only by internal/chaos) sends SIGKILL to
// itself there when OUTBOX_CRASH_POINT names the point. In every other build it is an
// empty function that the compiler inlines away.
//
// The points:
//   - "after-claim": the poller's claim committed, its events not yet handed to workers;
//   - "after-listener": a listener returned nil, DONE not yet written;
//   - "after-insert": Writer inserted events into the caller's transaction, not yet
//     committed.
func Point(string) {}

// PointEvents is Point for a point that holds events (the claim of
// "after-claim"): the chaos build also writes their IDs where the harness reads which
// events the killed node held (OUTBOX_CRASH_EVENTS names the file).
func PointEvents(string, []outboxtype.Event) {}
