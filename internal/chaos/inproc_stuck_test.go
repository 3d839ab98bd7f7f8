package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// stuckGrace is core's grace past ListenerTimeout before an attempt counts as stuck
// (core/internal/dispatch/stuck.go).
const stuckGrace = time.Second

// TestInprocStuckListener: listeners that ignore their context and block, on a few
// events, while writers keep writing healthy events. The library frees a worker whose
// attempt runs past ListenerTimeout + 1 s (Config.OnStuck), keeps the event in flight
// and writes its outcome when the listener returns. Gates, besides Report.Gate:
//
//   - liveness: as many events block as there are workers, so that without the stuck
//     handling every worker would be held for the whole block; the longest gap without a
//     delivery while healthy events wait stays within stuckBound (derived from
//     ListenerTimeout, see below), far below the block;
//   - every stuck attempt is reported once (OnStuck), and each stuck event ends DONE
//     once its listener returns, after that one attempt;
//   - Stop, called with a 500 ms deadline while two listeners block until released (not
//     yet stuck), returns by its deadline (plus a generous 10 s margin: without the hard
//     stop it would not return at all); the events it abandoned stay pending and a new
//     Outbox delivers them.
func TestInprocStuckListener(t *testing.T) {
	seed := Seed(t)
	const (
		workers         = 4
		listenerTimeout = 300 * time.Millisecond
		poll            = 100 * time.Millisecond
		block           = 6 * time.Second // how long the first stuck listeners ignore their context
		stopDeadline    = 500 * time.Millisecond
	)
	// A stuck attempt frees its worker ListenerTimeout + stuckGrace after it began; the
	// next event is then picked at once or by the next poll (1.4 s in all). Doubled, plus
	// 2 s for a loaded 2-core host under -race: 4.8 s, against a 6 s block (without the
	// stuck handling every worker is held for the whole block). In MultiNode the claim
	// (12 s) outlives the block: a stuck attempt that outlives its claim has its DONE
	// fenced off and its event delivered again, which this scenario does not exercise.
	stuckBound := 2*(listenerTimeout+stuckGrace+poll) + 2*time.Second
	modes := []struct {
		name string
		cfg  outbox.Config
	}{
		{"single", outbox.Config{Mode: outbox.SingleNode}},
		{"multi", outbox.Config{Mode: outbox.MultiNode, ClaimTTL: 12 * time.Second, StatusTimeout: 2 * time.Second}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, allBackends, func(t *testing.T, be backend) {
				s := newScene(t, "stuck-listener/"+mode.name, be, seed, sceneOptions{})
				release := make(chan struct{})
				var releaseOnce sync.Once
				releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
				t.Cleanup(releaseAll) // no listener outlives the test (the leak check)
				var attempts attemptCounter
				var stuck atomic.Int64
				var returnedLate sync.WaitGroup
				behave := func(ctx context.Context, e *outbox.Event) error {
					if attempts.next(e.ID) > 1 {
						return nil
					}
					switch {
					case strings.HasPrefix(e.ID, "stuck-stop-"): // blocks until released, then fails
						defer returnedLate.Done()
						<-release
						return errors.New("chaos: released after the stop")
					case strings.HasPrefix(e.ID, "stuck-"): // ignores ctx for block
						select {
						case <-release:
						case <-time.After(block):
						}
					}
					return nil
				}
				cfg := mode.cfg
				cfg.Workers, cfg.ListenerTimeout, cfg.PollInterval, cfg.Retry = workers, listenerTimeout, poll, fastRetry
				cfg.Dialect, cfg.Table, cfg.Logger = be.dialect, s.table, nil
				cfg.OnStuck = func(outbox.Event, time.Duration) { stuck.Add(1) }
				if cfg.Mode == outbox.MultiNode {
					cfg.NodeID = "node1"
					if be.name == "sqlite" { // see scene.newOutboxOn
						cfg.StatusTimeout = outbox.DefaultStatusTimeout
					}
				}
				newOB := func(cfg outbox.Config, node string) *outbox.Outbox {
					if cfg.Logger == nil {
						cfg.Logger = slog.New(s.logs)
					}
					ob, err := outbox.New(s.db, cfg)
					if err != nil {
						t.Fatal(err)
					}
					s.register(ob, chaosEvent, node, behave)
					if err := ob.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
					return ob
				}
				ob := newOB(cfg, "node1")
				ctx := t.Context()
				envs := func(prefix string, n int) []outbox.Envelope {
					out := make([]outbox.Envelope, n)
					for i := range out {
						out[i] = envelope(fmt.Sprintf("%s%d", prefix, i))
					}
					return out
				}
				// Phase 1: as many stuck events as workers, and healthy writers beside them.
				if _, err := s.writeTx(ctx, s.db, ob.Writer(), viaOutboxTx, envs("stuck-", workers), false); err != nil {
					t.Fatal(err)
				}
				s.faults.Add(workers)
				res := s.load(ctx, ob.Writer(), loadOptions{writers: 2, duration: Duration(t, block+time.Second), pause: 20 * time.Millisecond})
				res.assertNoTxErrors(t)
				s.drain(block + 30*time.Second) // the stuck events end when their listeners return
				if got := stuck.Load(); got != workers {
					t.Errorf("OnStuck reported %d stuck attempts, want %d (one per stuck event)", got, workers)
				}
				// Phase 2: Stop while listeners block until released.
				if _, err := s.writeTx(ctx, s.db, ob.Writer(), viaOutboxTx, envs("stuck-stop-", 2), false); err != nil {
					t.Fatal(err)
				}
				returnedLate.Add(2)
				s.faults.Add(2)
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if n := startedCount(s.records(), "stuck-stop-"); n == 2 {
						break
					}
				}
				stopCtx, cancel := context.WithTimeout(context.Background(), stopDeadline)
				began := time.Now()
				err := ob.Stop(stopCtx)
				took := time.Since(began)
				cancel()
				// The listeners block until released: a Stop that waited for them would not
				// return at all. 10 s of margin for a loaded machine.
				if took > stopDeadline+10*time.Second {
					t.Errorf("Stop took %s with listeners stuck, want by its deadline %s (err %v)", took.Round(time.Millisecond), stopDeadline, err)
				}
				t.Logf("Stop with 2 listeners stuck returned after %s: %v", took.Round(time.Millisecond), err)
				// The stopped node's abandoned attempts end here, for the overlap check.
				if err := s.log.Append(Record{Kind: Fault, Node: "node1", Event: "stopped with listeners stuck"}); err != nil {
					t.Fatal(err)
				}
				releaseAll()
				returnedLate.Wait()
				cfg2 := cfg
				if cfg2.Mode == outbox.MultiNode {
					cfg2.NodeID = "node2"
				}
				ob2 := newOB(cfg2, "node2")
				t.Cleanup(func() {
					c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if err := ob2.Stop(c); err != nil {
						t.Errorf("stop node2: %v", err)
					}
				})
				s.drain(60 * time.Second)
				rep := s.check(true)

				// The healthy events kept flowing while the stuck ones blocked.
				var healthy []Record
				for _, r := range s.records() {
					if !strings.HasPrefix(r.Event, "stuck-") {
						healthy = append(healthy, r)
					}
				}
				gap := Check(healthy, nil).LongestGap
				t.Logf("longest gap with healthy events waiting: %s (bound %s); %d delivered", gap.Round(time.Millisecond), stuckBound, rep.Delivered)
				if gap > stuckBound {
					t.Errorf("LIVENESS: healthy events waited %s without a delivery while listeners were stuck, want within %s",
						gap.Round(time.Millisecond), stuckBound)
				}
				for id, f := range s.finals() {
					if strings.HasPrefix(id, "stuck-") && (outbox.Status(f.Status) != outbox.StatusDone || f.Attempts != 0) {
						t.Errorf("%s: %v after %d failed attempts, want DONE after its stuck attempt", id, outbox.Status(f.Status), f.Attempts)
					}
				}
				s.assertNoErrorLogs()
			})
		})
	}
}

// startedCount counts the events with prefix that have a Started record.
func startedCount(recs []Record, prefix string) int {
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Kind == Started && strings.HasPrefix(r.Event, prefix) {
			seen[r.Event] = true
		}
	}
	return len(seen)
}
