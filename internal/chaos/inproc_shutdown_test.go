package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// backlog commits n events in transactions of 10 through w (hot path) as fast as it can.
func (s *scene) backlog(w *outbox.Writer, prefix string, n int) {
	s.t.Helper()
	for i := 0; i < n; i += 10 {
		envs := make([]outbox.Envelope, min(10, n-i))
		for j := range envs {
			envs[j] = envelope(fmt.Sprintf("%s-%05d", prefix, i+j))
		}
		if _, err := s.writeTx(context.Background(), s.db, w, viaOutboxTx, envs, false); err != nil {
			s.t.Fatal(err)
		}
	}
}

// slowThenHeld is a behaviour whose first n attempts take d (or until their context
// ends) and whose later ones run until their context ends. held is closed when the
// first of those starts.
func slowThenHeld(d time.Duration, n int64) (b behaviour, held <-chan struct{}) {
	var attempts atomic.Int64
	heldc := make(chan struct{})
	return func(ctx context.Context, _ *outbox.Event) error {
		switch k := attempts.Add(1); {
		case k <= n:
			sleepCtx(ctx, d)
		default:
			if k == n+1 {
				close(heldc)
			}
			<-ctx.Done()
		}
		return ctx.Err()
	}, heldc
}

// lastStart returns the time of the last Started record of node.
func lastStart(recs []Record, node string) time.Time {
	var last time.Time
	for _, r := range recs {
		if r.Kind == Started && r.Node == node && r.At.After(last) {
			last = r.At
		}
	}
	return last
}

// TestInprocShutdown stops an Outbox while events are queued and in flight.
//
// graceful: Stop with a generous deadline delivers everything queued before it returns
// (no row pending, nothing started afterwards), and a second Outbox started afterwards
// on the table finds nothing to deliver twice: duplicates = 0.
//
// hard: Stop's context ends while the backlog is being delivered. Stop returns the
// context's error, the interrupted listeners see their context cancelled, nothing
// runs after Stop returns, and a new Outbox on the same table delivers every event
// left behind: none lost (duplicates of interrupted deliveries are reported).
func TestInprocShutdown(t *testing.T) {
	seed := Seed(t)
	rounds := 1
	if Long() {
		rounds = max(1, int(Duration(t, 0)/(5*time.Second)))
	}
	t.Run("graceful", func(t *testing.T) {
		forEachBackend(t, allBackends, func(t *testing.T, be backend) {
			s := newScene(t, "shutdown-graceful", be, seed, sceneOptions{})
			for round := range rounds {
				m := &queueMetrics{}
				node := fmt.Sprintf("node%d", round)
				ob := s.start(outbox.Config{Workers: 2, PollInterval: time.Hour, Metrics: m}, node, slowly(3*time.Millisecond))
				s.backlog(ob.Writer(), fmt.Sprintf("g%d", round), 150)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				err := ob.Stop(ctx)
				cancel()
				stopped := time.Now()
				if err != nil {
					t.Fatalf("graceful Stop: %v", err)
				}
				n, err := s.pending(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if n != 0 || m.hotDropped.Load() != 0 {
					t.Errorf("round %d: %d row(s) pending after a graceful Stop (hot queue dropped %d)", round, n, m.hotDropped.Load())
				}
				time.Sleep(50 * time.Millisecond)
				if last := lastStart(s.records(), node); last.After(stopped) {
					t.Errorf("round %d: an attempt started %s after Stop returned", round, last.Sub(stopped))
				}
			}
			// A new Outbox on the same table has nothing left to deliver.
			s.start(outbox.Config{PollInterval: 50 * time.Millisecond, SkipRecent: -1}, "after", succeed)
			time.Sleep(300 * time.Millisecond)
			s.drain(30 * time.Second)
			s.check(true)
		})
	})
	t.Run("hard", func(t *testing.T) {
		forEachBackend(t, allBackends, func(t *testing.T, be backend) {
			s := newScene(t, "shutdown-hard", be, seed, sceneOptions{})
			rng := Rand(seed)
			for round := range rounds {
				node := fmt.Sprintf("node%d", round)
				// The first attempts take 5ms each, the later ones run until Stop cancels
				// them: once one of those has started (on a loaded machine the workers
				// can lag far behind the writer), deliveries are under way when the
				// deadline passes, whatever the database's speed.
				behave, held := slowThenHeld(5*time.Millisecond, 20)
				ob := s.start(outbox.Config{Workers: 2, PollInterval: time.Hour}, node, behave)
				s.backlog(ob.Writer(), fmt.Sprintf("h%d", round), 150)
				select {
				case <-held:
				case <-time.After(time.Minute):
					t.Fatalf("round %d: no held attempt started within a minute of the backlog", round)
				}
				// Stop with a deadline that ends mid-backlog, or already ended.
				var ctx context.Context
				var cancel context.CancelFunc
				if round%2 == 1 {
					ctx, cancel = context.WithCancel(context.Background())
					cancel()
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), time.Duration(20+rng.IntN(80))*time.Millisecond)
				}
				err := ob.Stop(ctx)
				cancel()
				stopped := time.Now()
				s.faults.Add(1)
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Errorf("round %d: hard Stop = %v, want the context's error", round, err)
				}
				n, _ := s.pending(context.Background())
				t.Logf("round %d: %d row(s) left pending by the hard stop", round, n)
				time.Sleep(50 * time.Millisecond)
				if last := lastStart(s.records(), node); last.After(stopped) {
					t.Errorf("round %d: an attempt started %s after Stop returned", round, last.Sub(stopped))
				}
			}
			s.start(outbox.Config{PollInterval: 50 * time.Millisecond, SkipRecent: -1}, "after", succeed)
			s.drain(60 * time.Second)
			s.check(false)
		})
	})
}
