package chaos

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// TestInprocPoolStarvation: a small connection pool (5) shared by the outbox and the
// business writers, twice as many workers as connections, and slow listeners (they
// sleep, honouring their context) while writers keep committing. No connection may be
// held while a listener runs, so:
//
//   - more listeners run at once than the pool has connections (an attempt that held
//     one would cap them at the pool's size); each samples db.Stats().InUse, logged;
//   - writers commit while every worker sleeps in a listener (counted: commits recorded
//     while all Workers listeners ran), which they could not if attempts held the pool;
//   - in SingleNode, nothing ever waits for a connection (db.Stats().WaitCount stays
//     0): the writers hold at most 2 and the outbox's own statements (a poll, a DONE
//     batch, a renewal of the dispatch lease) are short and few, so a wait means the
//     outbox held connections the writers needed. In MultiNode each claimed event's outcome and claim renewal is a
//     statement of its own, up to Workers at once, and these do wait for the pool (a
//     few ms, logged): that is not gated here (the library's behaviour, reported).
func TestInprocPoolStarvation(t *testing.T) {
	seed := Seed(t)
	const (
		maxConns = 5 // the writers' 2 and the outbox's 3 (see above)
		workers  = 2 * maxConns
		writers  = 2
		sleep    = 200 * time.Millisecond
	)
	for _, mode := range queueModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, overflowBackends(mode.name), func(t *testing.T, be backend) {
				s := newScene(t, "pool-starvation/"+mode.name, be, seed, sceneOptions{})
				db := openDB(t, s.driver, s.dsn)
				db.SetMaxOpenConns(maxConns)
				db.SetMaxIdleConns(maxConns)
				var running, maxRunning atomic.Int64
				var mu sync.Mutex
				maxInUse, samples := 0, 0
				var busy []span // while all workers were in a listener
				var busyFrom time.Time
				cfg := mode.cfg
				cfg.Workers, cfg.PollInterval, cfg.Retry = workers, 100*time.Millisecond, fastRetry
				ob := s.newOutboxOn(db, cfg, "node", func(ctx context.Context, e *outbox.Event) error {
					st := db.Stats()
					mu.Lock()
					n := running.Add(1)
					storeMax(&maxRunning, n)
					if n == workers {
						busyFrom = time.Now()
					}
					maxInUse, samples = max(maxInUse, st.InUse), samples+1
					mu.Unlock()
					defer func() {
						mu.Lock()
						if running.Add(-1) == workers-1 {
							busy = append(busy, span{busyFrom, time.Now()})
						}
						mu.Unlock()
					}()
					sleepCtx(ctx, sleep)
					return ctx.Err()
				})
				if err := ob.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				// commitsDuring counts the commits recorded inside the spans when every
				// worker was in a listener.
				commitsDuring := func(recs []Record) int {
					mu.Lock() // listeners may still run if the drain timed out
					spans := append([]span(nil), busy...)
					mu.Unlock()
					n := 0
					for _, r := range recs {
						if r.Kind == Committed && covered(spans, r.At) {
							n++
						}
					}
					return n
				}
				// The load runs its tier's duration, and on until it has shown what the
				// gates below look for: more listeners at once than connections, and a
				// commit while every worker was in a listener. Both need the writers to
				// keep every worker busy, which they do within the short tier's 1.5 s on
				// an idle machine but not on a loaded one, where each transaction is
				// slow; so the load's length follows the machine, up to a generous cap
				// (300 listener sleeps) after which the gates report a run that proved
				// nothing.
				minLoad := Duration(t, shortLoad)
				loadCtx, endLoad := context.WithCancel(t.Context())
				var watcher sync.WaitGroup
				watcher.Go(func() {
					defer endLoad()
					timer := time.NewTimer(minLoad)
					defer timer.Stop()
					select {
					case <-timer.C:
					case <-loadCtx.Done():
						return
					}
					for loadCtx.Err() == nil {
						if maxRunning.Load() > maxConns {
							if recs, err := ReadLogs(s.logPath); err == nil && commitsDuring(recs) > 0 {
								return
							}
						}
						sleepCtx(loadCtx, 100*time.Millisecond)
					}
				})
				// The listeners deliver at most workers/sleep = 40 events/s. Writers
				// pausing 33 ms write at most about 60/s: enough to keep every worker
				// busy, and a backlog that the drain delivers in time whatever the
				// load's duration (half the load's length at most). Without the bound
				// (10 ms pauses) the long tier's writers committed three times what the
				// listeners can deliver, and the drain could not finish.
				loadStart := time.Now()
				res := s.load(loadCtx, ob.Writer(), loadOptions{writers: writers, duration: minLoad + 300*sleep, pause: 33 * time.Millisecond, db: db})
				endLoad()
				watcher.Wait()
				t.Logf("load ran %s (at least %s)", time.Since(loadStart).Round(time.Millisecond), minLoad)
				res.assertNoTxErrors(t)
				s.drain(90*time.Second + Duration(t, shortLoad)/2)
				s.check(true)
				st := db.Stats()
				t.Logf("pool of %d: at most %d listeners at once (%d samples, InUse at most %d inside a listener); waits %d (%s)",
					maxConns, maxRunning.Load(), samples, maxInUse, st.WaitCount, st.WaitDuration)
				if maxRunning.Load() <= maxConns {
					t.Errorf("at most %d listeners ran at once with %d workers and a pool of %d: an attempt holds a connection?",
						maxRunning.Load(), workers, maxConns)
				}
				commitsWhileBusy := commitsDuring(s.records())
				mu.Lock()
				spans := len(busy)
				mu.Unlock()
				t.Logf("%d commits while all %d workers were in a listener (%d such spans)", commitsWhileBusy, workers, spans)
				if commitsWhileBusy == 0 {
					t.Errorf("no writer committed while every worker was in a listener (%d spans): the listeners held the pool?", spans)
				}
				if mode.cfg.Mode == outbox.SingleNode && st.WaitCount > 0 {
					t.Errorf("POOL STARVATION: %d waits for a connection (%s) in a pool of %d with %d writers: the outbox held connections the writers needed",
						st.WaitCount, st.WaitDuration, maxConns, writers)
				}
				s.assertNoErrorLogs()
			})
		})
	}
}
