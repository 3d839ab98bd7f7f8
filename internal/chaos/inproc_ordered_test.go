package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestInprocOrderedStall: the documented exception of ordered delivery, made to happen.
// Two MultiNode nodes deliver ordered events; the first attempt of a few events stalls:
// its listener ignores its context for longer than the claim. The other node (or the
// same one, once the stalled attempt freed its worker) takes the expired claim over,
// delivers the event and moves the key on, while the stalled attempt still runs; its
// late outcome is fenced out. The harness must count exactly these overlaps apart, as
// stalled (the earlier attempt had outlived ListenerTimeout), and find no other: every
// event delivered, each key in order, no overlap of attempts that were both live. On
// SQLite one SingleNode process runs (no claims, nothing to take over): a stalled
// attempt holds its key until it returns, and nothing overlaps at all.
func TestInprocOrderedStall(t *testing.T) {
	seed := Seed(t)
	const (
		listenerTimeout = 200 * time.Millisecond
		claimTTL        = time.Second
		stallFor        = 2500 * time.Millisecond
		keys, perKey    = 4, 12
	)
	forEachBackend(t, allBackends, func(t *testing.T, be backend) {
		s := newScene(t, "ordered/stalled-listener", be, seed, sceneOptions{stall: listenerTimeout})
		var mu sync.Mutex
		stalled := map[string]bool{}
		// The 3rd and 8th event of every key stall on their first attempt.
		stalls := func(e *outbox.Event) bool {
			if e.OrderSeq != 3 && e.OrderSeq != 8 {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			if stalled[e.ID] {
				return false
			}
			stalled[e.ID] = true
			return true
		}
		listen := func(ctx context.Context, e *outbox.Event) error {
			if stalls(e) {
				s.faults.Add(1)
				time.Sleep(stallFor) // ignores ctx: a stalled listener
			}
			return nil
		}
		cfg := outbox.Config{Mode: outbox.MultiNode, ClaimTTL: claimTTL, ListenerTimeout: listenerTimeout,
			StatusTimeout: 300 * time.Millisecond, PollInterval: 100 * time.Millisecond, Retry: fastRetry,
			// An idle poller must not back off past the claim: the take-over comes while
			// the stalled attempt still runs.
			PollMaxInterval: 200 * time.Millisecond}
		single := be.name == "sqlite"
		if single {
			cfg.Mode, cfg.ClaimTTL = outbox.SingleNode, 0
		}
		cfg1, cfg2 := cfg, cfg
		if !single {
			cfg1.NodeID, cfg2.NodeID = "n1", "n2"
		}
		ob := s.start(cfg1, "n1", listen)
		if !single {
			s.start(cfg2, "n2", listen)
		}
		for i := range perKey {
			for k := range keys {
				id := fmt.Sprintf("k%d-%02d", k, i)
				env := envelope(id)
				env.OrderKey = fmt.Sprint("k", k)
				if _, err := s.writeTx(t.Context(), s.db, ob.Writer(), viaOutboxTx, []outbox.Envelope{env}, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.drain(30 * time.Second)
		// The stalled attempts end after the others: wait for their records before checking.
		time.Sleep(stallFor)
		rep := s.check(false)
		switch taken := len(rep.StalledOverlaps) + len(rep.Order.StalledOverlaps); {
		case s.faults.Load() == 0:
			t.Error("no listener stalled: the run proved nothing")
		case single && taken > 0:
			t.Errorf("SingleNode: %d stalled overlaps, want none (nothing takes a stalled attempt over)", taken)
		case !single && len(rep.StalledOverlaps) == 0:
			t.Errorf("no stalled attempt was taken over: the run proved nothing (%s; %s)", rep.Summary(), rep.Order.Summary())
		}
		t.Logf("%d stalled first attempts; %d events overlapped only a stalled attempt; %d key overlaps with one",
			s.faults.Load(), len(rep.StalledOverlaps), len(rep.Order.StalledOverlaps))
		for id, f := range s.finals() {
			if outbox.Status(f.Status) != outbox.StatusDone {
				t.Errorf("%s ended %v, want DONE", id, outbox.Status(f.Status))
			}
		}
	})
}
