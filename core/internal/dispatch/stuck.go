package dispatch

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// stuckGrace is how long past ListenerTimeout an attempt may run before it counts as
// stuck: its context ended ListenerTimeout after it started, and a listener that
// honours its context returns well within this.
const stuckGrace = time.Second

// An attempt runs on a goroutine of its own while its worker watches it, so that a
// listener that ignores its context cannot hold a worker, or Stop, forever:
//
//   - an attempt still running ListenerTimeout + stuckGrace after it started is stuck:
//     it is logged at Warn, counted ([Metrics.StuckAttempts]) and reported to
//     [Config.OnStuck], and its worker is freed to take the next event, while at most
//     Workers attempts are stuck at once (beyond that a worker waits for its own, so a
//     Dispatcher never runs more than 2 × Workers listener goroutines). The event stays
//     in flight (never queued twice); when the listener finally returns, its outcome is
//     written as usual if the Dispatcher still runs, or the row is left pending;
//   - a hard stop (Stop's deadline passed) abandons running attempts at once: Stop
//     returns without waiting for listeners, and their rows stay pending for a later
//     delivery. No listener starts after the run is cancelled: an attempt checks the
//     run context immediately before it calls its listener.
//
// Without a ListenerTimeout (-1) no attempt is ever stuck; a hard stop still abandons.

// attemptOutcome is what the attempt's goroutine hands back.
type attemptOutcome struct {
	err error
}

// watchAttempt runs the attempt on its own goroutine and waits for it. It reports false
// when the worker abandoned the attempt (stuck, or a hard stop); the attempt's goroutine
// then settles the event itself (see settleAbandoned).
func (d *Dispatcher) watchAttempt(runCtx context.Context, it dispatchItem, rt *Route, le *Event, start time.Time,
	latency time.Duration) (error, bool) {
	done := make(chan attemptOutcome, 1)
	// taken decides who settles the event: the worker (it received the outcome), or the
	// attempt's goroutine (the worker abandoned it). stuck is set before an abandonment
	// that counted the attempt as stuck.
	var taken, stuck atomic.Bool
	began := time.Now()
	go func() {
		err := d.attempt(runCtx, rt, le, it.join)
		done <- attemptOutcome{err: err}
		if !taken.CompareAndSwap(false, true) {
			d.settleAbandoned(runCtx, it, rt, *le, err, start, latency, stuck.Load())
		}
	}()
	var stuckAt <-chan time.Time
	if timeout := d.timeout(rt); timeout > 0 {
		t := time.NewTimer(timeout + stuckGrace)
		defer t.Stop()
		stuckAt = t.C
	}
	for {
		select {
		case o := <-done:
			return o.err, true
		case <-runCtx.Done():
			if taken.CompareAndSwap(false, true) {
				return nil, false // the goroutine leaves the row pending
			}
			o := <-done
			return o.err, true
		case <-stuckAt:
			stuckAt = nil
			running := time.Since(began)
			if d.stuck.Add(1) > int64(d.cfg.Workers) {
				d.stuck.Add(-1)
				d.log.LogAttrs(runCtx, slog.LevelWarn, "listener attempt stuck past ListenerTimeout; "+
					"the bound on stuck attempts (Workers) is reached, so this worker waits for it",
					d.stuckAttrs(rt, le, running)...)
				continue
			}
			stuck.Store(true)
			if !taken.CompareAndSwap(false, true) {
				stuck.Store(false)
				d.stuck.Add(-1)
				continue // it returned just now: take its outcome
			}
			d.reportStuck(runCtx, rt, le, running)
			return nil, false
		}
	}
}

// reportStuck logs, counts and reports an attempt that was just declared stuck.
func (d *Dispatcher) reportStuck(ctx context.Context, rt *Route, e *Event, running time.Duration) {
	d.cfg.Metrics.StuckAttempts(int(d.stuck.Load()))
	d.log.LogAttrs(ctx, slog.LevelWarn, "listener attempt stuck past ListenerTimeout; its worker takes the next "+
		"event, and the event is settled when the listener returns", d.stuckAttrs(rt, e, running)...)
	if d.cfg.OnStuck != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					d.log.LogAttrs(ctx, slog.LevelError, "OnStuck panicked", slog.Any("panic", r))
				}
			}()
			d.cfg.OnStuck(*e, running)
		}()
	}
}

func (d *Dispatcher) stuckAttrs(rt *Route, e *Event, running time.Duration) []slog.Attr {
	return []slog.Attr{slog.String("event_id", e.ID), slog.String("event_type", e.Type),
		slog.String("aggregate_type", e.AggregateType), slog.Duration("running", running.Round(time.Millisecond)),
		slog.String("listener", rt.Name), slog.Duration("listener_timeout", d.timeout(rt)), slog.Int64("stuck_attempts", d.stuck.Load())}
}

// settleAbandoned settles an event whose worker abandoned its attempt, once the listener
// has returned: after a hard stop the row stays pending; otherwise the outcome is
// written with a statement of its own, as for any attempt.
func (d *Dispatcher) settleAbandoned(runCtx context.Context, it dispatchItem, rt *Route, le Event, err error,
	start time.Time, latency time.Duration, wasStuck bool) {
	e := it.ev
	if wasStuck {
		defer func() {
			d.cfg.Metrics.StuckAttempts(int(d.stuck.Add(-1)))
			d.log.LogAttrs(runCtx, slog.LevelInfo, "stuck listener attempt returned", slog.String("event_id", e.ID),
				slog.Duration("running", max(d.cfg.Now().Sub(start), 0)), slog.Bool("outcome_written", runCtx.Err() == nil))
		}()
	}
	if runCtx.Err() != nil {
		d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
		return
	}
	dec := d.decide(rt, &e, err, d.cfg.Now())
	dec.listener = rt.Name
	dec, ok := d.runFallback(runCtx, rt, &e, dec, it.path)
	if !ok {
		d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
		return
	}
	duration := max(d.cfg.Now().Sub(start), 0)
	d.finishOutcome(runCtx, &e, dec)
	d.settled(runCtx, &e, it.path, dec, duration, latency)
}
