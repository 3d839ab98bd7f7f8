package chaos

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestInprocCommitUnknown: business transactions whose COMMIT reports an error, either
// after committing (the acknowledgement was lost) or after rolling back. The writer
// cannot tell which, and records the outcome as unknown. An event whose transaction
// did commit must be delivered (by the poller: the hot path drops events whose commit
// failed) and one whose transaction rolled back must never be: lost = 0 and
// phantom = 0, in single-node mode and with the writer's pre-claims of multi-node mode.
func TestInprocCommitUnknown(t *testing.T) {
	seed := Seed(t)
	modes := []struct {
		name string
		cfg  outbox.Config
	}{
		{"single", outbox.Config{Mode: outbox.SingleNode}},
		{"multi", outbox.Config{Mode: outbox.MultiNode, ClaimTTL: 5 * time.Second, ListenerTimeout: time.Second, StatusTimeout: 2 * time.Second}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, allBackends, func(t *testing.T, be backend) {
				s := newScene(t, "commit-unknown/"+mode.name, be, seed, sceneOptions{})
				var commits atomic.Int64
				faultDB, fc := openFaultDB(t, s.driver, s.dsn, func() commitFault {
					n := commits.Add(1)
					// The first two commits fail one way each, so that a short run on a
					// slow machine proves both (at 10 % each, 28 commits missed one kind
					// 5 % of the time); the rest are drawn from the seed.
					switch c := chance(seed, strconv.FormatInt(n, 10), "commit"); {
					case n == 1:
						s.faults.Add(1)
						return commitThenFail
					case n == 2:
						s.faults.Add(1)
						return rollbackThenFail
					case c < 0.1:
						s.faults.Add(1)
						return commitThenFail
					case c < 0.2:
						s.faults.Add(1)
						return rollbackThenFail
					}
					return commitOK
				})
				cfg := mode.cfg
				cfg.PollInterval, cfg.SkipRecent = 50*time.Millisecond, 200*time.Millisecond
				ob := s.start(cfg, "node", succeed)
				const batch = 2
				res := s.load(t.Context(), ob.Writer(), loadOptions{writers: 4, duration: Duration(t, shortLoad), batch: batch,
					pause: 5 * time.Millisecond, db: faultDB, unknownOK: true, kind: func(n int) txKind { return txKind(n % 2) }})
				res.assertNoTxErrors(t)
				s.drain(30 * time.Second)
				rep := s.check(false)

				ctf, rbf := fc.committedThenFailed.Load(), fc.rolledBackThenFailed.Load()
				t.Logf("%d commits: %d committed then failed, %d rolled back then failed; %d events unknown", commits.Load(), ctf, rbf, rep.Unknown)
				if ctf == 0 || rbf == 0 {
					t.Error("no commit failed both ways: the run proved nothing")
				}
				if int64(rep.Unknown) != (ctf+rbf)*batch || res.unknown.Load() != int64(rep.Unknown) {
					t.Errorf("%d events recorded unknown, %d counted by the load; want %d", rep.Unknown, res.unknown.Load(), (ctf+rbf)*batch)
				}
				// The unknown events that have a row are exactly those committed.
				finals := s.finals()
				withRow := 0
				for _, r := range s.records() {
					if _, ok := finals[r.Event]; ok && r.Kind == Unknown {
						withRow++
					}
				}
				if int64(withRow) != ctf*batch {
					t.Errorf("%d unknown events have a row, want %d (committed then failed)", withRow, ctf*batch)
				}
				s.assertNoErrorLogs()
			})
		})
	}
}
