package chaos

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestInprocSQLiteWritersNeverLocked: on SQLite, which has one writer at a time, eight
// writers (sixteen in the long tier) run business transactions with events as fast as
// they can while the dispatcher records outcomes, the poller polls (and, in multi-node
// mode, claims) every 10 ms, the purger deletes finished rows every 20 ms and a reader
// lists dead events. No business transaction may fail ("database is locked" or any
// other error), no outcome update may fail, and every event is delivered once.
func TestInprocSQLiteWritersNeverLocked(t *testing.T) {
	seed := Seed(t)
	writers := 8
	if Long() {
		writers = 16
	}
	// Outcome updates wait for the write lock like everyone else: the default status
	// timeout (10 s, the busy timeout of SQLiteDSN) applies, and a claim TTL above it.
	modes := []struct {
		name string
		cfg  outbox.Config
	}{
		{"single", outbox.Config{Mode: outbox.SingleNode}},
		{"multi", outbox.Config{Mode: outbox.MultiNode, ClaimTTL: 30 * time.Second, ListenerTimeout: 5 * time.Second}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			// Several connections: the point is that they never see "database is locked".
			s := newScene(t, "sqlite-writers-never-locked/"+mode.name, sqliteBackend, seed, sceneOptions{sqliteSeveralConns: true})
			cfg := mode.cfg
			cfg.PollInterval, cfg.SkipRecent = 10*time.Millisecond, 100*time.Millisecond
			cfg.PurgeInterval, cfg.PurgeRetention, cfg.PurgeBatchSize = 20*time.Millisecond, 50*time.Millisecond, 50
			ob := s.start(cfg, "node", succeed)

			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			var reads, readErrs atomic.Int64
			wg.Go(func() { // an admin page open on the dead events
				for ctx.Err() == nil {
					if _, err := ob.Events().ListDead(ctx, outbox.DeadQuery{}); err != nil && ctx.Err() == nil {
						readErrs.Add(1)
						t.Errorf("list dead: %v", err)
					}
					if _, err := ob.Events().Stats(ctx); err != nil && ctx.Err() == nil {
						readErrs.Add(1)
						t.Errorf("stats: %v", err)
					}
					reads.Add(1)
					sleepCtx(ctx, 5*time.Millisecond)
				}
			})
			start := time.Now()
			res := s.load(ctx, ob.Writer(), loadOptions{writers: writers, duration: Duration(t, 2*time.Second), batch: 2,
				kind: func(n int) txKind { return txKind(n % 2) }})
			elapsed := time.Since(start)
			cancel()
			wg.Wait()
			res.assertNoTxErrors(t)
			if err := res.first; err != nil && strings.Contains(err.Error(), "locked") {
				t.Errorf("a business transaction saw SQLITE_BUSY: %v", err)
			}
			s.drain(60 * time.Second)
			s.check(true)
			t.Logf("%d writers: %d events committed in %s (%.0f/s), longest transaction %s; %d reads", writers, res.committed.Load(),
				elapsed.Round(time.Millisecond), float64(res.committed.Load())/elapsed.Seconds(), time.Duration(res.maxTx.Load()), reads.Load())
			s.assertNoErrorLogs()
			if n := s.logs.count("status update failed; event left for the poller"); n > 0 {
				t.Errorf("%d outcome updates failed", n)
			}
		})
	}
}
