package startstop_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outboxkit/outbox/core/internal/startstop"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errStopped = errors.New("stopped")

// sleeper is a service whose goroutine works in steps of d until told to stop.
func sleeper(d time.Duration, steps *atomic.Int32) func(startstop.Run) {
	return func(r startstop.Run) {
		r.Go(func() {
			for {
				select {
				case <-r.Stopping:
					return
				case <-r.Ctx.Done():
					return
				case <-time.After(d):
					steps.Add(1)
				}
			}
		})
	}
}

func TestRunnerLifecycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startstop.New()
		if stopped, err := r.Stop(t.Context(), errStopped, startstop.StopHooks{}); stopped || err != nil {
			t.Fatalf("Stop before Start = %v, %v; want false, nil", stopped, err)
		}
		var steps atomic.Int32
		launches := 0
		launch := func(run startstop.Run) { launches++; sleeper(time.Second, &steps)(run) }
		ctx, cancel := context.WithCancel(t.Context())
		for i := range 2 {
			started, err := r.Start(ctx, launch)
			if err != nil || started != (i == 0) {
				t.Fatalf("Start #%d = %v, %v", i+1, started, err)
			}
		}
		cancel() // the run does not inherit Start's cancellation
		time.Sleep(3500 * time.Millisecond)
		if !r.Running() || steps.Load() != 3 || launches != 1 {
			t.Fatalf("running %v, steps %d, launches %d; want true, 3, 1", r.Running(), steps.Load(), launches)
		}
		var order []string
		stopped, err := r.Stop(t.Context(), errStopped, startstop.StopHooks{
			CloseIntake: func() { order = append(order, "intake") },
			HardStop:    func() { order = append(order, "hard") },
			Cleanup:     func() { order = append(order, "cleanup") },
		})
		if !stopped || err != nil || r.Running() {
			t.Fatalf("Stop = %v, %v", stopped, err)
		}
		if got := len(order); got != 2 || order[0] != "intake" || order[1] != "cleanup" {
			t.Errorf("hooks ran %v, want intake, cleanup", order)
		}
		// A stopped runner starts again.
		if started, err := r.Start(t.Context(), launch); !started || err != nil {
			t.Fatalf("restart = %v, %v", started, err)
		}
		if _, err := r.Stop(t.Context(), errStopped, startstop.StopHooks{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunnerHardStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startstop.New()
		var cause error
		_, _ = r.Start(t.Context(), func(run startstop.Run) {
			run.Go(func() {
				<-run.Ctx.Done() // ignores Stopping: only a hard stop ends it
				cause = context.Cause(run.Ctx)
			})
		})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		hard := false
		start := time.Now()
		stopped, err := r.Stop(ctx, errStopped, startstop.StopHooks{HardStop: func() { hard = true }})
		if !stopped || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 2*time.Second {
			t.Fatalf("Stop = %v, %v after %s; want true, DeadlineExceeded after 2s", stopped, err, time.Since(start))
		}
		if !hard || !errors.Is(cause, errStopped) {
			t.Errorf("hard hook %v, cause %v", hard, cause)
		}
	})
}

func TestRunnerStopWaitsForLockWithinContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := startstop.New()
		release := make(chan struct{})
		_, _ = r.Start(t.Context(), func(run startstop.Run) {
			run.Go(func() { <-release })
		})
		first := make(chan error)
		go func() {
			_, err := r.Stop(context.Background(), errStopped, startstop.StopHooks{})
			first <- err
		}()
		synctest.Wait() // the first Stop holds the lock and waits for the goroutine
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := r.Stop(ctx, errStopped, startstop.StopHooks{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Stop = %v, want DeadlineExceeded while the first holds the lock", err)
		}
		if _, err := r.Start(ctx, func(startstop.Run) {}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Start = %v, want DeadlineExceeded while Stop holds the lock", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	})
}

func TestRunnerStress(t *testing.T) {
	t.Parallel()
	r := startstop.New()
	var steps atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 200 {
				if (g+i)%2 == 0 {
					_, _ = r.Start(context.Background(), sleeper(time.Microsecond, &steps))
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%2)*time.Millisecond)
					_, _ = r.Stop(ctx, errStopped, startstop.StopHooks{})
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if _, err := r.Stop(context.Background(), errStopped, startstop.StopHooks{}); err != nil {
		t.Fatal(err)
	}
	if r.Running() {
		t.Error("still running after Stop")
	}
}
