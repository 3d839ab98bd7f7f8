package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxkit/outbox/core/internal/crash"
	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/storage"
)

// work is one worker: it takes events until the queues are drained after a graceful
// stop, or at once after a hard stop. Each event it takes holds a slot of its lane
// until the attempt, batch or split returns (Queues.done).
func (d *Dispatcher) work(r startstop.Run, acks chan<- doneAck) {
	var (
		carry   dispatchItem
		carried bool
	)
	for turn := uint(0); ; turn++ {
		it, ok := carry, carried
		if !carried {
			it, ok = d.q.next(r, turn)
		}
		carried = false
		if !ok {
			return
		}
		carry, carried = d.run(r, it, acks)
		d.q.done(it)
		if carried {
			d.q.adopt(carry)
		}
	}
}

// run delivers it, and those queued behind it in its lane that one call takes too (a
// batch, a split). It returns an event it took from the lane that another
// subscription takes now (the registry changed since it was queued), to run next.
func (d *Dispatcher) run(r startstop.Run, it dispatchItem, acks chan<- doneAck) (carry dispatchItem, carried bool) {
	rt, fan := d.routes.Resolve(it.ev.Listener, it.ev.AggregateType, it.ev.Type) // both nil: unroutable
	if fan != nil {
		// Events to split: those queued behind this one in its lane and path too,
		// taken without waiting, split in one transaction.
		items := []fanOutItem{{it, fan}}
		for len(items) < maxFanOutBatch && r.Ctx.Err() == nil {
			next, ok := d.q.more(it, true)
			if !ok {
				break
			}
			if _, nfan := d.routes.Resolve(next.ev.Listener, next.ev.AggregateType, next.ev.Type); nfan == nil {
				carry, carried = next, true
				break
			} else {
				items = append(items, fanOutItem{next, nfan})
			}
		}
		d.fanOut(r.Ctx, items)
		return carry, carried
	}
	if rt == nil || rt.HandleBatch == nil || r.Ctx.Err() != nil {
		d.deliver(r.Ctx, it, rt, acks)
		return carry, carried
	}
	// A batch: the events of the same subscription queued behind this one in its
	// lane, taken without waiting.
	items := []dispatchItem{it}
	for len(items) < rt.BatchSize {
		next, ok := d.q.more(it, false)
		if !ok {
			break
		}
		if nrt, _ := d.routes.Resolve(next.ev.Listener, next.ev.AggregateType, next.ev.Type); nrt != rt {
			carry, carried = next, true
			break
		}
		items = append(items, next)
	}
	d.deliverBatch(r.Ctx, rt, items, acks)
	return carry, carried
}

// deliverBatch delivers items, all of rt's BatchListener, with one HandleBatch call:
// each is delivered as on its own, in a goroutine of its own, and its attempt joins the
// call instead of running the listener (see batchCall).
func (d *Dispatcher) deliverBatch(runCtx context.Context, rt *Route, items []dispatchItem, acks chan<- doneAck) {
	call := newBatchCall(runCtx, rt, d.timeout(rt), len(items))
	var wg sync.WaitGroup
	for i := range items {
		it := items[i]
		it.join = &batchSlot{call: call, i: i}
		wg.Go(func() {
			defer it.join.leave() // unless it joined: then a no-op
			d.deliver(runCtx, it, rt, acks)
		})
	}
	wg.Wait()
}

// decision is the outcome of one attempt, ready to be written.
type decision struct {
	kind         Outcome
	at           time.Time // new available_at for deferred and retry
	reason       string    // last_error for retry and dead
	countAttempt bool
	err          error  // the attempt's error, for logs
	listener     string // the listener's name; "" when unroutable
}

// deliver runs one attempt with rt's listener (nil: the event is unroutable) and writes
// its outcome; a DONE outcome goes to acks, whose recorder writes it in a batch and
// settles the event (see recordDone).
func (d *Dispatcher) deliver(runCtx context.Context, it dispatchItem, rt *Route, acks chan<- doneAck) {
	e := it.ev
	if runCtx.Err() != nil { // hard stop: leave the row pending
		d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
		return
	}
	routed := rt != nil
	if left, short := d.claimTooShort(e, rt); short && !d.renewClaim(runCtx, &e, left, it.path) {
		// The claim could expire while the listener runs, and another node deliver the
		// event too: leave it to whoever claims it next (possibly this node).
		d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
		return
	}
	start := d.cfg.Now()
	latency := start.Sub(it.enqueuedAt)
	if it.path == PathCold {
		latency = start.Sub(EventDueAt(e))
	}
	latency = max(latency, 0)

	var dec decision
	if !routed {
		err := fmt.Errorf("%w: aggregate type %q, event type %q", ErrUnroutable, e.AggregateType, e.Type)
		if e.Listener != "" {
			err = fmt.Errorf("%w: no listener named %q (aggregate type %q, event type %q)", ErrUnroutable, e.Listener, e.AggregateType, e.Type)
		}
		dec = decision{kind: OutcomeDead, reason: err.Error(), err: err}
	} else {
		le := e // the listener's copy; e keeps the queued state
		err, ok := d.watchAttempt(runCtx, it, rt, &le, start, latency)
		if !ok {
			return // abandoned: the attempt's goroutine settles the event when it returns
		}
		if runCtx.Err() != nil {
			// Interrupted by a hard stop: the outcome is unknown, the row stays pending.
			d.log.LogAttrs(runCtx, slog.LevelDebug, "delivery interrupted by stop; event left pending",
				slog.String("event_id", e.ID))
			d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
			return
		}
		dec = d.decide(rt, &e, err, d.cfg.Now())
		dec.listener = rt.Name
		if dec, ok = d.runFallback(runCtx, rt, &e, dec, it.path); !ok {
			d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
			return
		}
	}
	duration := max(d.cfg.Now().Sub(start), 0)

	if dec.kind == OutcomeDone {
		crash.Point("after-listener") // chaos builds only: the listener returned, DONE not yet written
	}
	if dec.kind == OutcomeDone {
		// The event stays in flight until the recorder has written its batch.
		acks <- doneAck{ev: e, path: it.path, listener: dec.listener, duration: duration, latency: latency}
		return
	}
	d.finishOutcome(runCtx, &e, dec)
	d.settled(runCtx, &e, it.path, dec, duration, latency)
}

// settled reports a finished attempt whose outcome is settled (written, or left for the
// poller) to the metrics and the log.
func (d *Dispatcher) settled(ctx context.Context, e *Event, path Path, dec decision, duration, latency time.Duration) {
	d.cfg.Metrics.Dispatched(DispatchInfo{
		Path:          path,
		Outcome:       dec.kind,
		EventType:     e.Type,
		AggregateType: e.AggregateType,
		Listener:      dec.listener,
		Duration:      duration,
		Latency:       latency,
	})
	d.logOutcome(ctx, e, path, dec, duration)
}

// claimTooShort reports whether e is claimed (MultiNode) with less time left than one
// attempt of its listener rt (nil when unroutable) may take (its timeout plus
// StatusTimeout), and how much is left. The time left is measured by this process's
// monotonic clock from the node's own estimate of the claim's end (Event.LockedUntil
// as the writer or the poller set it), never against another clock.
func (d *Dispatcher) claimTooShort(e Event, rt *Route) (time.Duration, bool) {
	if e.LockedBy == "" || e.LockedUntil.IsZero() {
		return 0, false
	}
	left := time.Until(e.LockedUntil)
	return left, left < max(d.timeout(rt), 0)+max(d.cfg.StatusTimeout, 0)
}

// timeout is the bound of one attempt of rt's listener: its own, or ListenerTimeout
// (also for a nil rt); -1 means none.
func (d *Dispatcher) timeout(rt *Route) time.Duration {
	if rt != nil && rt.Timeout != 0 {
		return rt.Timeout
	}
	return d.cfg.ListenerTimeout
}

// renewClaim extends e's claim before an attempt that could outlive it, and reports
// whether the attempt may go ahead; e.LockedUntil becomes the renewed claim's end.
func (d *Dispatcher) renewClaim(runCtx context.Context, e *Event, left time.Duration, path Path) bool {
	attrs := []slog.Attr{slog.String("event_id", e.ID), slog.String("claim", e.LockedBy),
		slog.Duration("claim_left", left), slog.String("path", path.String())}
	if d.cfg.ClaimTTL <= 0 {
		d.log.LogAttrs(runCtx, slog.LevelWarn, "claim too close to expiry to deliver; event left for the next claim", attrs...)
		d.cfg.Metrics.Claims(ClaimExpired, 1)
		return false
	}
	ctx := runCtx
	if d.cfg.StatusTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(runCtx, d.cfg.StatusTimeout)
		defer cancel()
	}
	start := time.Now() // the database renews after this moment
	n, err := d.claims.RenewClaim(ctx, storage.RenewClaimParams{ID: e.ID, Token: e.LockedBy, TTL: d.cfg.ClaimTTL})
	switch {
	case err != nil:
		if runCtx.Err() == nil {
			d.log.LogAttrs(runCtx, slog.LevelWarn, "claim close to expiry could not be renewed; event left for the next claim",
				append(attrs, slog.String("error", err.Error()))...)
		}
		d.cfg.Metrics.Claims(ClaimExpired, 1)
		return false
	case n == 0:
		d.log.LogAttrs(runCtx, slog.LevelWarn, "claim lost before delivery (another node took the event over); event skipped", attrs...)
		d.cfg.Metrics.Claims(ClaimLost, 1)
		return false
	}
	d.cfg.Metrics.Claims(ClaimRenewed, 1)
	e.LockedUntil = start.Add(d.cfg.ClaimTTL)
	d.log.LogAttrs(runCtx, slog.LevelDebug, "claim renewed before delivery", attrs...)
	return true
}

// attempt runs the interceptors and rt's listener under the per-event context; with a
// batch slot, the attempt joins its batch's HandleBatch call instead.
func (d *Dispatcher) attempt(runCtx context.Context, rt *Route, e *Event, join *batchSlot) error {
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if t := d.timeout(rt); t > 0 {
		ctx, cancel = context.WithTimeout(runCtx, t)
	} else {
		ctx, cancel = context.WithCancel(runCtx)
	}
	defer cancel()
	call := func(ctx context.Context, e *Event) error {
		// The last check before the listener runs: once a hard stop has cancelled the
		// run, no listener starts (interceptors may have run; their After sees the error).
		if err := runCtx.Err(); err != nil {
			return err
		}
		if join != nil {
			return join.join(ctx, e)
		}
		return rt.Handle(ctx, e)
	}
	return invokeDelivery(ctx, d.log, d.cfg.Interceptors, e, call)
}

// decide maps an attempt's error to an outcome, per the table of [Dispatcher] and the
// policy of the event's listener rt.
func (d *Dispatcher) decide(rt *Route, e *Event, err error, now time.Time) decision {
	if err == nil {
		return decision{kind: OutcomeDone}
	}
	if de := (*DeferError)(nil); errors.As(err, &de) {
		return decision{kind: OutcomeDeferred, at: now.Add(max(de.Delay, 0))}
	}
	if errors.Is(err, ErrUnrecoverable) || rt.Retryable != nil && !d.retryable(rt, err) {
		return decision{kind: OutcomeDead, reason: err.Error(), countAttempt: true, err: err}
	}
	attempt, maxAttempts, retry := e.Attempts+1, cmp.Or(rt.MaxAttempts, d.cfg.MaxAttempts), cmp.Or(rt.Retry, d.cfg.Retry)
	if maxAttempts > 0 && attempt >= maxAttempts {
		return decision{kind: OutcomeDead, reason: err.Error(), countAttempt: true, err: err}
	}
	var delay time.Duration
	if ra := (*RetryAfterError)(nil); errors.As(err, &ra) {
		delay = ra.Delay
	} else {
		delay = retry.Delay(attempt)
	}
	return decision{kind: OutcomeRetry, at: now.Add(max(delay, 0)), reason: err.Error(), countAttempt: true, err: err}
}

// runFallback runs rt's fallback when dec sends the event to DEAD, and returns the
// decision to write: FALLBACK when the fallback succeeded, DEAD with the fallback's error
// added when it failed or panicked. It reports false when the event must stay pending
// instead: a hard stop interrupted the fallback, or (MultiNode) the claim could not
// cover it.
func (d *Dispatcher) runFallback(runCtx context.Context, rt *Route, e *Event, dec decision, path Path) (decision, bool) {
	if rt == nil || rt.Fallback == nil || dec.kind != OutcomeDead {
		return dec, true
	}
	if left, short := d.claimTooShort(*e, rt); short && !d.renewClaim(runCtx, e, left, path) {
		return dec, false
	}
	now := d.cfg.Now()
	ev := *e
	f := Failure{Event: &ev, Listener: rt.Name, Attempts: e.Attempts, Err: dec.err,
		FirstAttemptAt: e.FirstAttemptAt, LastAttemptAt: now}
	if dec.countAttempt {
		f.Attempts++
	}
	if f.FirstAttemptAt.IsZero() {
		f.FirstAttemptAt = now
	}
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if t := d.timeout(rt); t > 0 {
		ctx, cancel = context.WithTimeout(runCtx, t)
	} else {
		ctx, cancel = context.WithCancel(runCtx)
	}
	defer cancel()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = newPanicError(r)
			}
		}()
		return rt.Fallback(ctx, f)
	}()
	if runCtx.Err() != nil {
		return dec, false
	}
	if err == nil {
		dec.kind = OutcomeFallback
		return dec, true
	}
	dec.reason += "; fallback failed: " + err.Error()
	dec.err = fmt.Errorf("%w; fallback failed: %w", dec.err, err)
	return dec, true
}

// retryable calls rt's classifier; a panic in it counts as "retry" and is logged.
func (d *Dispatcher) retryable(rt *Route, err error) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			d.log.LogAttrs(context.Background(), slog.LevelError, "Subscription.Retryable panicked; the error is retried",
				slog.String("listener", rt.Name), slog.Any("panic", r))
			ok = true
		}
	}()
	return rt.Retryable(err)
}

// finishOutcome records dec (writeOutcome), releases the event and, when the outcome
// finished an ordered event, moves its key on, in that order: the promote hands the
// key's next event to the hot queue, and this one is no longer in flight by then. It
// reports whether the row is known to be settled.
func (d *Dispatcher) finishOutcome(runCtx context.Context, e *Event, dec decision) bool {
	now, written := d.writeOutcome(runCtx, e, dec)
	d.q.release(e.ID, now, written, e.AvailableAt)
	if written && (dec.kind == OutcomeRetry || dec.kind == OutcomeDeferred) {
		// The poller reads it when it falls due, not at its next tick; told after the
		// release, or a poll at a due time very near would find it still in flight and
		// skip it.
		d.q.NoteDue(dec.at)
	}
	if written && d.orders != nil && e.OrderKey != "" &&
		(dec.kind == OutcomeDone || dec.kind == OutcomeFallback || dec.kind == OutcomeDead && !d.orders.DeadBlocks()) {
		pctx, pcancel := d.statusContext(runCtx) // the key's next event, now that this one is finished
		d.orders.Finished(pctx, []string{e.OrderKey})
		pcancel()
	}
	return written
}

// writeOutcome records dec with its own short statement. It reports the time the
// statement returned and whether the row is known to be settled: the statement
// succeeded and, under a claim, its fence let it change the row (without a claim, a row
// it did not change was finished already).
func (d *Dispatcher) writeOutcome(runCtx context.Context, e *Event, dec decision) (time.Time, bool) {
	ctx, cancel := d.statusContext(runCtx)
	defer cancel()
	now := d.cfg.Now()
	var (
		n   int64
		err error
		op  string
	)
	token := e.LockedBy // fences the update under claims; "" in single-node mode
	switch dec.kind {
	case OutcomeDone:
		op = "mark done"
		n, err = d.store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{e.ID}, DoneAt: now, Token: token, Delete: d.cfg.DeleteDone})
	case OutcomeDeferred:
		op = "defer"
		n, err = d.store.Reschedule(ctx, storage.RescheduleParams{ID: e.ID, Status: StatusNew, AvailableAt: dec.at, Token: token})
	case OutcomeRetry:
		op = "schedule retry"
		n, err = d.store.Reschedule(ctx, storage.RescheduleParams{
			ID: e.ID, Status: StatusRetry, AvailableAt: dec.at, CountAttempt: true, LastError: dec.reason, Token: token,
		})
	case OutcomeDead, OutcomeFallback:
		op = "mark dead"
		if dec.kind == OutcomeFallback {
			op = "mark fallback"
		}
		n, err = d.store.MarkDead(ctx, storage.MarkDeadParams{
			ID: e.ID, DeadAt: now, Reason: dec.reason, CountAttempt: dec.countAttempt, Token: token,
			Fallback: dec.kind == OutcomeFallback, Listener: dec.listener,
		})
	}
	returned := d.cfg.Now()
	if err != nil {
		d.log.LogAttrs(runCtx, slog.LevelError, "status update failed; event left for the poller",
			slog.String("event_id", e.ID), slog.String("op", op), slog.String("error", fmt.Errorf("%s: %w", op, err).Error()))
		return returned, false
	}
	switch {
	case n == 0 && token != "":
		d.log.LogAttrs(runCtx, slog.LevelWarn, "status update changed no row: the claim was lost "+
			"(it expired and another node claimed the event) or the event was already finished; outcome not recorded",
			slog.String("event_id", e.ID), slog.String("op", op), slog.String("claim", token))
		d.cfg.Metrics.Claims(ClaimLost, 1)
		// Not settled: the row may still be pending under an expired or another node's
		// claim, and a later claim of it by this node must not be refused as stale.
		return returned, false
	case n == 0:
		d.log.LogAttrs(runCtx, slog.LevelWarn, "status update changed no row; the event was already finished",
			slog.String("event_id", e.ID), slog.String("op", op))
	}
	return returned, n > 0 || token == ""
}

// logOutcome logs an attempt's outcome: a failed attempt that will be retried at WARN
// (once per attempt, with its number and when the next is due), DEAD at ERROR with the
// reason, a panic at ERROR with its stack, and the rest at DEBUG.
func (d *Dispatcher) logOutcome(ctx context.Context, e *Event, path Path, dec decision, duration time.Duration) {
	if dec.err == nil && (dec.kind == OutcomeDone || dec.kind == OutcomeDeferred) && !d.log.Enabled(ctx, slog.LevelDebug) {
		return // the common case: nothing to log, and no attributes built for nothing
	}
	attempts := e.Attempts
	if dec.countAttempt {
		attempts++
	}
	attrs := []slog.Attr{
		slog.String("event_id", e.ID),
		slog.String("event_type", e.Type),
		slog.String("aggregate_type", e.AggregateType),
		slog.String("listener", dec.listener),
		slog.String("path", path.String()),
		slog.String("outcome", dec.kind.String()),
		slog.Duration("duration", duration),
	}
	if pe := (*PanicError)(nil); dec.err != nil && errors.As(dec.err, &pe) {
		d.log.LogAttrs(ctx, slog.LevelError, "listener panicked",
			append(attrs, slog.Int("attempt", attempts), slog.Any("panic", pe.Value), slog.String("stack", string(pe.Stack)))...)
	}
	switch dec.kind {
	case OutcomeDead:
		d.log.LogAttrs(ctx, slog.LevelError, "event moved to dead",
			append(attrs, slog.Int("attempts", attempts), slog.String("reason", dec.reason))...)
	case OutcomeFallback:
		d.log.LogAttrs(ctx, slog.LevelWarn, "delivery failed for good; the fallback handled the event",
			append(attrs, slog.Int("attempts", attempts), slog.String("reason", dec.reason))...)
	case OutcomeRetry:
		d.log.LogAttrs(ctx, slog.LevelWarn, "delivery failed; will retry",
			append(attrs, slog.Int("attempt", attempts), slog.Time("next_attempt_at", dec.at), slog.String("error", dec.reason))...)
	case OutcomeDeferred:
		d.log.LogAttrs(ctx, slog.LevelDebug, "delivery deferred",
			append(attrs, slog.Int("attempts", attempts), slog.Time("available_at", dec.at))...)
	default:
		d.log.LogAttrs(ctx, slog.LevelDebug, "event delivered", append(attrs, slog.Int("attempts", attempts))...)
	}
}

// EventDueAt is when an event became deliverable: the later of its creation and its
// available_at.
func EventDueAt(e Event) time.Time {
	if e.CreatedAt.After(e.AvailableAt) {
		return e.CreatedAt
	}
	return e.AvailableAt
}
