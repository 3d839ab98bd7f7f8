// Package startstop runs a service's goroutines between Start and Stop with the
// semantics every outbox service shares: Start does not block and detaches the run
// context from its argument; Stop is graceful within its context and cancels the run
// context when that context expires; both are idempotent and safe for concurrent use;
// Stop before Start does nothing; a stopped service can be started again.
package startstop

import (
	"context"
	"sync"
)

// Runner tracks one service's run. Create it with New.
type Runner struct {
	// sem serialises Start and Stop. It is a channel so that a caller waiting for it
	// gives up when its context expires.
	sem chan struct{}
	cur *run // guarded by sem
}

type run struct {
	cancel   context.CancelCauseFunc
	stopping chan struct{}
	done     chan struct{}
}

// Run is what a service's goroutines receive.
type Run struct {
	// Ctx is the run context: it keeps the values of Start's context but not its
	// deadline, and is cancelled (with the cause given to New) only by a hard stop.
	Ctx context.Context
	// Stopping is closed when a graceful stop begins. Goroutines finish their current
	// work (draining queues if they have any) and return.
	Stopping <-chan struct{}
	wg       *sync.WaitGroup
}

// Go starts f as a goroutine of the run. Stop waits for it.
func (r Run) Go(f func()) { r.wg.Go(f) }

// New returns a Runner.
func New() *Runner { return &Runner{sem: make(chan struct{}, 1)} }

func (r *Runner) lock(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runner) unlock() { <-r.sem }

// Start calls launch, which starts the service's goroutines with [Run.Go], unless the
// service is already running. It reports whether it started a run. It returns ctx.Err()
// only when ctx expires while another Start or Stop is in progress.
func (r *Runner) Start(ctx context.Context, launch func(Run)) (bool, error) {
	if err := r.lock(ctx); err != nil {
		return false, err
	}
	defer r.unlock()
	if r.cur != nil {
		return false, nil
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	cur := &run{cancel: cancel, stopping: make(chan struct{}), done: make(chan struct{})}
	wg := new(sync.WaitGroup)
	launch(Run{Ctx: runCtx, Stopping: cur.stopping, wg: wg})
	go func() {
		wg.Wait()
		close(cur.done)
	}()
	r.cur = cur
	return true, nil
}

// StopHooks customise a Stop. Nil functions are skipped.
type StopHooks struct {
	// CloseIntake runs first, before Stopping is closed: the service refuses new work.
	CloseIntake func()
	// HardStop runs when ctx expires before the goroutines finished, right after the
	// run context is cancelled.
	HardStop func()
	// Cleanup runs after every goroutine has returned.
	Cleanup func()
}

// Stop stops the running service: it closes the intake, closes Stopping and waits for
// the goroutines. If ctx expires first, it cancels the run context with cause, waits for
// the goroutines anyway and returns ctx.Err(). It reports whether a run was stopped; it
// returns (false, nil) when the service was not running.
func (r *Runner) Stop(ctx context.Context, cause error, h StopHooks) (bool, error) {
	if err := r.lock(ctx); err != nil {
		return false, err
	}
	defer r.unlock()
	cur := r.cur
	if cur == nil {
		return false, nil
	}
	r.cur = nil
	if h.CloseIntake != nil {
		h.CloseIntake()
	}
	close(cur.stopping)
	var err error
	select {
	case <-cur.done:
	default:
		select {
		case <-cur.done:
		case <-ctx.Done():
			err = ctx.Err()
			cur.cancel(cause)
			if h.HardStop != nil {
				h.HardStop()
			}
			<-cur.done
		}
	}
	cur.cancel(cause)
	if h.Cleanup != nil {
		h.Cleanup()
	}
	return true, err
}

// Running reports whether the service is between Start and Stop. It waits for a
// concurrent Start or Stop to finish.
func (r *Runner) Running() bool {
	r.sem <- struct{}{}
	defer r.unlock()
	return r.cur != nil
}

// Service is a part that starts and stops: the dispatcher, the poller, the purger, the
// notifier, the lease.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// StopAll stops services in reverse start order and returns the first error.
func StopAll(ctx context.Context, started []Service) error {
	var first error
	for i := len(started) - 1; i >= 0; i-- {
		if err := started[i].Stop(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
