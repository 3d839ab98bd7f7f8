package chaos

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// queueMetrics counts the queue measurements the overflow scenarios assert on.
type queueMetrics struct {
	outbox.NopMetrics
	hotEnqueued, hotDropped, coldEnqueued atomic.Int64
	maxHot, maxCold                       atomic.Int64
	hotPath, coldPath                     atomic.Int64 // attempts per path
}

func (m *queueMetrics) HotEnqueued()  { m.hotEnqueued.Add(1) }
func (m *queueMetrics) HotDropped()   { m.hotDropped.Add(1) }
func (m *queueMetrics) ColdEnqueued() { m.coldEnqueued.Add(1) }

func (m *queueMetrics) QueueDepths(hot, cold int) {
	storeMax(&m.maxHot, int64(hot))
	storeMax(&m.maxCold, int64(cold))
}

func (m *queueMetrics) Dispatched(info outbox.DispatchInfo) {
	if info.Path == outbox.PathHot {
		m.hotPath.Add(1)
	} else {
		m.coldPath.Add(1)
	}
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// slowly is a listener that takes d, or less when its context ends.
func slowly(d time.Duration) behaviour {
	return func(ctx context.Context, _ *outbox.Event) error {
		sleepCtx(ctx, d)
		return ctx.Err()
	}
}

// queueModes are the modes the overflow scenarios run in: the single-node poller reads
// rows that may be queued or in flight already; the multi-node one claims them.
var queueModes = []struct {
	name string
	cfg  outbox.Config
}{
	{"single", outbox.Config{Mode: outbox.SingleNode}},
	{"multi", outbox.Config{Mode: outbox.MultiNode, ClaimTTL: 4 * time.Second, ListenerTimeout: time.Second, StatusTimeout: 2 * time.Second}},
}

// overflowBackends are the databases an overflow scenario runs on in a mode: claims
// matter on the databases several nodes share (SQLite's multi-node mode is covered by
// the other scenarios).
func overflowBackends(mode string) []backend {
	if mode == "multi" {
		return []backend{postgresBackend, mysqlBackend}
	}
	return allBackends
}

// bursts runs loads of 1.5 s separated by rests until total has passed: bursts
// overflow the queues, the rests let the slow listeners catch up, so that a long run
// tests overflow again and again instead of building an ever longer backlog. A rest
// lasts 1.5 s and until the backlog is delivered (at most maxRest): how fast two slow
// workers catch up depends on the database (a claimed event's outcome is one
// statement of its own), and a fixed rest let the backlog grow past any drain
// deadline on a fast database.
func (s *scene) bursts(ctx context.Context, w *outbox.Writer, total time.Duration, opts loadOptions) *loadResult {
	s.t.Helper()
	res := &loadResult{}
	const burst, maxRest = 1500 * time.Millisecond, 30 * time.Second
	for round, deadline := 0, time.Now().Add(total); round == 0 || time.Now().Before(deadline); round++ {
		if round > 0 {
			sleepCtx(ctx, burst)
			for restEnd := time.Now().Add(maxRest); time.Now().Before(restEnd) && ctx.Err() == nil; {
				if n, err := s.pending(ctx); err == nil && n == 0 {
					break
				}
				sleepCtx(ctx, 50*time.Millisecond)
			}
			if !time.Now().Before(deadline) {
				break
			}
		}
		o := opts
		o.duration = min(burst, max(time.Until(deadline), 100*time.Millisecond))
		o.prefix = fmt.Sprintf("%sb%d-", opts.prefix, round)
		res.add(s.load(ctx, w, o))
	}
	return res
}

// TestInprocHotQueueOverflow: a hot queue of 4 events and two slow workers under a
// burst of writers. Events the hot queue cannot take are left in the table for the
// poller: every committed event is delivered exactly once, and writes never block or
// fail.
func TestInprocHotQueueOverflow(t *testing.T) {
	seed := Seed(t)
	for _, mode := range queueModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, overflowBackends(mode.name), func(t *testing.T, be backend) {
				s := newScene(t, "hot-queue-overflow/"+mode.name, be, seed, sceneOptions{})
				m := &queueMetrics{}
				cfg := mode.cfg
				cfg.Workers, cfg.HotQueueSize, cfg.PollInterval, cfg.SkipRecent, cfg.Metrics = 2, 4, 100*time.Millisecond, 200*time.Millisecond, m
				ob := s.start(cfg, "node", slowly(2*time.Millisecond))
				res := s.bursts(t.Context(), ob.Writer(), Duration(t, shortLoad), loadOptions{writers: 8, batch: 3})
				res.assertNoTxErrors(t)
				s.drain(60 * time.Second)
				s.check(true)
				t.Logf("hot enqueued %d, dropped %d (left for the poller); attempts hot %d, cold %d; max hot depth %d",
					m.hotEnqueued.Load(), m.hotDropped.Load(), m.hotPath.Load(), m.coldPath.Load(), m.maxHot.Load())
				if m.hotDropped.Load() == 0 || m.coldPath.Load() == 0 {
					t.Error("the hot queue never overflowed: the run proved nothing")
				}
				s.assertNoErrorLogs()
			})
		})
	}
}

// TestInprocColdQueueOverflow: no hot path, a cold queue of 4 events and poll batches
// of 64, so the poller keeps meeting a full queue and re-reading rows that are queued
// or in flight. Nothing is lost and nothing is delivered twice.
func TestInprocColdQueueOverflow(t *testing.T) {
	seed := Seed(t)
	for _, mode := range queueModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, overflowBackends(mode.name), func(t *testing.T, be backend) {
				s := newScene(t, "cold-queue-overflow/"+mode.name, be, seed, sceneOptions{})
				m := &queueMetrics{}
				cfg := mode.cfg
				cfg.Workers, cfg.HotQueueSize, cfg.ColdQueueSize, cfg.PollBatchSize = 2, -1, 4, 64
				cfg.PollInterval, cfg.SkipRecent, cfg.Metrics = 20*time.Millisecond, -1, m
				ob := s.newOutbox(cfg, "node", slowly(time.Millisecond))
				// A backlog before the start: the first polls alone overflow the queue.
				for i := range 20 {
					envs := make([]outbox.Envelope, 10)
					for j := range envs {
						envs[j] = envelope(fmt.Sprintf("backlog-%02d-%d", i, j))
					}
					if _, err := s.writeTx(t.Context(), s.db, ob.Writer(), viaSQLTx, envs, false); err != nil {
						t.Fatal(err)
					}
				}
				if err := ob.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
				res := s.bursts(t.Context(), ob.Writer(), Duration(t, shortLoad), loadOptions{writers: 4, batch: 4, pause: 2 * time.Millisecond,
					kind: func(n int) txKind { return txKind(n % 2) }})
				res.assertNoTxErrors(t)
				s.drain(60 * time.Second)
				s.check(true)
				t.Logf("cold enqueued %d, max cold depth %d, attempts %d", m.coldEnqueued.Load(), m.maxCold.Load(), m.coldPath.Load())
				if m.maxCold.Load() < 4 || m.hotPath.Load() != 0 {
					t.Errorf("max cold depth %d, hot attempts %d: the cold queue never filled up", m.maxCold.Load(), m.hotPath.Load())
				}
				s.assertNoErrorLogs()
			})
		})
	}
}
