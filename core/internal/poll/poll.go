// Package poll is the outbox's cold path: the poller that reads due rows (claiming them
// in MultiNode mode) into the dispatcher's cold queue, isolates rows it cannot read,
// and runs the ordered keys' sweep.
package poll

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/internal/crash"
	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/internal/order"
	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/storage"
)

// Config configures a [Poller]. Every field holds its final value: package outbox
// translates its Config, defaults included, in one place (core/config.go).
type Config struct {
	// Interval is the time between two poll cycles; the first runs at Start. While the
	// hot path delivers more than hotReadRows events an Interval, cycles come as often
	// as it delivers hotReadRows, at most ten an Interval (hotInterval).
	Interval time.Duration
	// MaxInterval is the longest wait between two cycles: after each cycle that found
	// nothing, while the hot path delivered nothing either, the wait doubles, from
	// Interval up to MaxInterval. At least Interval.
	MaxInterval time.Duration
	// BatchSize bounds the rows read by one query.
	BatchSize int
	// SkipRecent leaves out rows created less than this long ago: the hot path is
	// most likely delivering them. -1 reads every due row.
	SkipRecent time.Duration
	// QueryTimeout bounds each query. -1 means no timeout.
	QueryTimeout time.Duration
	// Logger receives operational logs, with component=poller.
	Logger *slog.Logger
	// Metrics receives measurements.
	Metrics Metrics
	// Now returns the current time. Claims never use it: they
	// follow the database clock.
	Now func() time.Time
	// ClaimTTL, when positive, makes the poller claim the rows it reads (MultiNode):
	// each batch is read with [storage.ClaimStore.Claim] under a fresh token of NodeID, held for
	// ClaimTTL, so that several pollers on one table never take the same row. It must
	// exceed the dispatcher's ListenerTimeout plus StatusTimeout. 0: rows are read
	// with [storage.Store.Pending] and not claimed.
	ClaimTTL time.Duration
	// NodeID owns the claims (see ids.ValidateNodeID); required when ClaimTTL is set.
	NodeID string
}

func (c Config) validate() error {
	if c.NodeID != "" || c.ClaimTTL > 0 {
		if err := ids.ValidateNodeID(c.NodeID); err != nil {
			return err
		}
	}
	switch {
	case c.Logger == nil || c.Metrics == nil || c.Now == nil:
		return &ConfigError{Field: "Poller", Reason: "Logger, Metrics and Now are required"}
	case c.ClaimTTL < 0:
		return &ConfigError{Field: "ClaimTTL", Reason: fmt.Sprintf("must not be negative, got %s", c.ClaimTTL)}
	case c.Interval < 0:
		return &ConfigError{Field: "Interval", Reason: fmt.Sprintf("must be positive, got %s", c.Interval)}
	case c.MaxInterval < c.Interval:
		return &ConfigError{Field: "PollMaxInterval", Reason: fmt.Sprintf("must be at least PollInterval (%s), or -1, got %s", c.Interval, c.MaxInterval)}
	case c.BatchSize < 1:
		return &ConfigError{Field: "BatchSize", Reason: fmt.Sprintf("must be positive, got %d", c.BatchSize)}
	case c.SkipRecent < 0 && c.SkipRecent != -1:
		return &ConfigError{Field: "SkipRecent", Reason: fmt.Sprintf("must be positive or -1, got %s", c.SkipRecent)}
	case c.QueryTimeout < 0 && c.QueryTimeout != -1:
		return &ConfigError{Field: "QueryTimeout", Reason: fmt.Sprintf("must be positive or -1, got %s", c.QueryTimeout)}
	}
	return nil
}

// Poller is the fallback path: it periodically reads due NEW and RETRY rows, due
// longest first, and feeds them to the dispatcher's cold queue. It delivers what the hot
// path missed: events dropped by a full queue, written while the process was down,
// retries and deferrals, and replays. It never reads more rows than the cold queue can
// take. It keeps no high-water mark; without claims, its cycles start at a low-water
// mark and read from the head every minute, so a row committed late with an early
// timestamp is still found (lowwater.go). Besides every Interval, it runs a cycle when the workers have drained a cold
// queue it filled (a backlog is read as fast as it is delivered), and at once when the
// hot path dropped events because its queue was full: such catch-up cycles ignore
// SkipRecent (the dropped rows are committed, and the in-flight set and tombstones
// refuse a second copy of an event the hot path holds), so a burst larger than the hot
// queue waits for no time floor. Replays and a Notifier's wake-ups start such cycles
// too, and so does a retry or deferral of this process falling due (Queues.NoteDue).
// Each cycle that finds nothing, while the hot path delivers nothing either, doubles
// the wait, up to MaxInterval; while the hot path delivers, cycles come every Interval,
// or more often at a high rate (hotInterval).
type Poller struct {
	store  storage.Store
	claims storage.ClaimStore // the store's claims; nil unless ClaimTTL is set
	q      *dispatch.Queues
	cfg    Config
	log    *slog.Logger
	runner *startstop.Runner
	wake   <-chan struct{} // the cold queue drained; see Poll
	// orders sweeps the keys of ordered events that nobody moved on, at most every
	// order.SweepEvery; nil when the store keeps no order.
	orders *order.Orderer
	// sweepNow makes the next cycle sweep the ordered keys whenever the last sweep ran
	// (set after a replay, whose ordered events are WAITING).
	sweepNow atomic.Bool
	// release gives back the claims of claimed events the dispatcher refused; nil
	// without claims (see refused).
	release *dispatch.Releaser
	// pauses is the table's pause set as this process last read it (pause.go).
	pauses pauses
	// leftOutAt is when the last read that left a full lane's rows out began (UnixNano;
	// see plan).
	leftOutAt atomic.Int64
	// low is where cycles start reading or claiming (lowwater.go).
	low lowWater
}

// New returns a stopped Poller feeding q from store; orders (nil when the store keeps
// no order) sweeps the ordered keys, and release (MultiNode, else nil) gives back the
// claims of events q refuses. It returns a [*ConfigError] when store or q is nil or a
// config value is invalid.
func New(store storage.Store, q *dispatch.Queues, orders *order.Orderer, release *dispatch.Releaser, cfg Config) (*Poller, error) {
	if store == nil {
		return nil, &ConfigError{Field: "Store", Reason: "is nil"}
	}
	if q == nil {
		return nil, &ConfigError{Field: "Dispatcher", Reason: "is nil"}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	claims, err := dispatch.ClaimStoreOf(store, cfg.ClaimTTL)
	if err != nil {
		return nil, err
	}
	p := &Poller{
		claims:  claims,
		orders:  orders,
		release: release,
		store:   store,
		q:       q,
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String("component", "poller")),
		runner:  startstop.New(),
	}
	p.wake = q.ColdDrained(cfg.BatchSize / 2)
	p.pauses.store, _ = store.(storage.PauseStore)
	if cfg.ClaimTTL > 0 {
		q.SetColdWindow(cfg.BatchSize) // claims are made just in time (see Poll)
		p.low.every = min(claimFullReadEvery, cfg.ClaimTTL)
	}
	return p, nil
}

// SweepNow makes the next cycle sweep the ordered keys, whenever the last sweep ran
// (after a replay, whose ordered events are WAITING).
func (p *Poller) SweepNow() { p.sweepNow.Store(true) }

// Start starts the poll loop and returns at once: a first cycle runs immediately, then
// one every Interval until [Poller.Stop]. The loop keeps ctx's values but not its
// deadline or cancellation. Starting a running poller does nothing; a stopped one can be
// started again. Start returns ctx.Err() only when ctx expires while a concurrent Stop
// is in progress.
func (p *Poller) Start(ctx context.Context) error {
	started, err := p.runner.Start(ctx, func(r startstop.Run) {
		r.Go(func() { p.loop(r) })
	})
	if started {
		p.log.LogAttrs(ctx, slog.LevelDebug, "poller started",
			slog.Duration("interval", p.cfg.Interval), slog.Int("batch_size", p.cfg.BatchSize))
	}
	return err
}

// Stop stops the loop, letting a running cycle finish. If ctx expires first, it cancels
// the cycle's queries, waits for the loop to return and returns ctx.Err(). Stop is
// idempotent, and a no-op before Start.
func (p *Poller) Stop(ctx context.Context) error {
	stopped, err := p.runner.Stop(ctx, ErrStopped, startstop.StopHooks{})
	if stopped {
		p.log.LogAttrs(ctx, slog.LevelDebug, "poller stopped")
	}
	return err
}

func (p *Poller) loop(r startstop.Run) {
	interval := p.cfg.Interval
	hotTaken := p.q.HotTaken() // the hot queue's count at the last back-off decision
	decided := time.Now()      // when hotTaken was read
	tick := time.NewTimer(interval)
	defer tick.Stop()
	dueTimer := time.NewTimer(time.Hour)
	defer dueTimer.Stop()
	// catchUp is set when committed events wait that the next regular cycle would not
	// read: the hot path dropped them, another process notified, a replay, or events
	// this process rescheduled fell due. Cycles then read every due row, however young
	// (the rows are visible: the signal came after their commit), until one finds
	// nothing more to read. A young row that the hot path is still delivering is refused
	// as in flight or just finished, never delivered twice.
	catchUp := false
	var swept time.Time // the last sweep of ordered keys
	pauseTick := time.NewTicker(p.cfg.Interval)
	defer pauseTick.Stop()
	// pauseCtx bounds the reads of the pause set: they are abandoned when a stop is
	// requested (the next start reads the set again), so that a graceful stop waits for
	// no more than the cycle's own queries, on a database that does not answer too.
	pauseCtx, cancelPause := context.WithCancel(r.Ctx)
	defer cancelPause()
	go func() {
		select {
		case <-r.Stopping:
			cancelPause()
		case <-pauseCtx.Done():
		}
	}()
	for {
		// A stop requested during the last cycle or the wait wins over a tick that is
		// ready too (select picks at random among ready cases).
		select {
		case <-r.Stopping:
			return
		default:
		}
		skip := p.cfg.SkipRecent
		if catchUp {
			skip = -1
		}
		var promoted int64
		if now := p.cfg.Now(); p.orders != nil && (p.sweepNow.Swap(false) || swept.IsZero() || now.Sub(swept) >= order.SweepEvery) {
			swept = now
			// A stop abandons the sweep (the next start sweeps again): a graceful stop
			// waits for the cycle, and a dead database would hold it for QueryTimeout.
			sctx, cancel := context.WithCancel(r.Ctx)
			go func() {
				select {
				case <-r.Stopping:
					cancel()
				case <-sctx.Done():
				}
			}()
			var err error
			promoted, err = p.orders.Sweep(sctx)
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				p.log.LogAttrs(r.Ctx, slog.LevelError, "sweep of ordered keys failed", slog.String("error", err.Error()))
			}
			if promoted > 0 {
				skip = -1 // the promoted events are committed, however young
			}
		}
		// A stop requested during the sweep wins over the poll: a graceful stop would
		// otherwise wait for one more query, QueryTimeout on a database that is down.
		select {
		case <-r.Stopping:
			return
		default:
		}
		// A cycle that starts once a remembered due time has passed reads those events,
		// however young, whatever started it (a tick or a drained queue can win the
		// select over the due timer, and the first cycle of a start runs at once): the
		// times are forgotten here, so no later wake-up would come for them.
		if p.q.DueReached(p.cfg.Now()) {
			catchUp, skip = true, -1
		}
		_ = p.refreshPaused(pauseCtx, false) // logged; the last set read holds
		select {
		case <-r.Stopping: // requested during the read: no more queries
			return
		default:
		}
		n, more, err := p.poll(r.Ctx, skip)
		if err != nil && !errors.Is(err, context.Canceled) {
			p.log.LogAttrs(r.Ctx, slog.LevelError, "poll failed", slog.String("error", err.Error()))
		}
		if !more && err == nil {
			catchUp = false // every due row was seen; a later signal starts again
		}
		// Idle back-off: each cycle that found nothing doubles the wait, up to
		// MaxInterval; one that found events (or failed) returns to Interval. One after
		// which the hot path delivered events waits Interval, or less at a high rate
		// (hotInterval). A delivered event leaves a dead entry in the index the reads
		// walk (on PostgreSQL until VACUUM), and the read that first meets it pays a
		// visit to its row: cycles while events flow keep each read to the visits of
		// the events delivered since the last one, where a wait of MaxInterval left
		// them to pile up for the minute's read from the head (docs/BENCHMARKS.md,
		// "The poll statement's dead index entries").
		hot, now := p.q.HotTaken(), time.Now()
		switch {
		case n > 0 || more || err != nil || promoted > 0:
			interval = p.cfg.Interval
		case hot != hotTaken:
			interval = hotInterval(p.cfg.Interval, now.Sub(decided), hot-hotTaken)
		default:
			interval = min(2*max(interval, p.cfg.Interval), p.cfg.MaxInterval)
		}
		hotTaken, decided = hot, now
		tick.Reset(interval)
		var wake <-chan struct{}
		if more {
			wake = p.wake // read on as soon as the queue drains
		}
	wait:
		for {
			var due <-chan time.Time
			if t, ok := p.q.NextDue(); ok {
				dueTimer.Reset(max(t.Sub(p.cfg.Now()), 0))
				due = dueTimer.C
			}
			select {
			case <-r.Stopping:
				return
			case <-r.Ctx.Done():
				return
			case <-tick.C:
				break wait
			case <-wake:
				break wait
			case <-due:
				catchUp = true
				break wait
			case <-p.q.DueChanged(): // an earlier due time: wait for it instead
			case <-pauseTick.C: // an idle poller still follows the pause set
				_ = p.refreshPaused(pauseCtx, false)
			case <-p.q.CatchUp():
				catchUp = true
				interval = p.cfg.Interval
				if wake == nil {
					break wait // at once; with a cycle pending, when the queue drains
				}
			}
		}
	}
}

// hotReadRows is about how many delivered events' dead index entries a poll statement
// is left to meet while the hot path delivers (hotInterval): on PostgreSQL each costs
// the read about one buffer, its row's, so about 1,000 buffers, a few milliseconds.
const hotReadRows = 1000

// hotInterval is the wait after a cycle when the hot path took delivered events in the
// elapsed time since the previous cycle's decision: the time the hot path takes for
// hotReadRows events at that rate, from a tenth of interval to interval. A read's cost
// then stays at about hotReadRows visits whatever the rate (up to ten times hotReadRows
// an interval), in more reads; the visits in all are the same, one per event.
func hotInterval(interval, elapsed time.Duration, delivered uint64) time.Duration {
	if delivered == 0 || elapsed <= 0 {
		return interval
	}
	d := time.Duration(float64(elapsed) * hotReadRows / float64(delivered))
	return min(interval, max(d, interval/10))
}

// Poll runs one cycle and returns the number of events it queued. It reads at most as
// many rows as the cold queue can take, in batches of BatchSize, and stops at the first
// event the queue refuses because it is full; an event that is already queued or
// running is skipped (the next batch reads past it). Rows that cannot be decoded are
// moved to DEAD. It returns the store's error, wrapped, when a query fails; failures to
// move an undecodable row are logged. When a cycle fills the cold queue, or takes as
// many rows as it could with more probably due, the poll loop runs the next cycle as
// soon as the workers have drained the cold queue to half a batch, instead of waiting
// for the next tick, so that a backlog is read as fast as it is delivered.
//
// With ClaimTTL set, Poll claims instead ([storage.ClaimStore.Claim]) one batch, at most BatchSize
// events minus those already waiting in the cold queue, and queues every claimed event
// with the claim's token; undecodable claimed rows go to DEAD under that token. Claims
// are made just in time, so that a claimed event starts long before its claim expires
// and a node that dies holds few claims: when a batch comes back full, the poll loop
// claims the next one as soon as the workers have drained the cold queue to half a
// batch, instead of waiting for the next tick. A claimed event the queue refuses stays
// claimed until its claim expires.
//
// Poll reads or claims from the oldest row, whatever the low-water mark (lowwater.go):
// a test that writes a row with an old timestamp and calls Poll finds it.
func (p *Poller) Poll(ctx context.Context) (int, error) {
	_ = p.refreshPaused(ctx, false) // logged; the last set read holds
	p.low.forget()
	n, _, err := p.poll(ctx, p.cfg.SkipRecent)
	return n, err
}

// poll is Poll with the given SkipRecent, also reporting whether more rows are probably
// due: the cycle filled the cold queue or used its whole budget on full batches (claim
// mode: the batch came back full).
func (p *Poller) poll(ctx context.Context, skipRecent time.Duration) (int, bool, error) {
	skip := max(skipRecent, 0)
	if plan := p.q.ReadPlan(); plan.Budget <= 0 || plan.Full && !plan.Others {
		_, queued := p.q.Depths()
		return 0, queued > 0, nil // full: wait for the workers to drain the queue
	}
	if p.cfg.ClaimTTL > 0 {
		return p.pollClaims(ctx, skip)
	}
	return p.pollPending(ctx, skip)
}

// plan returns the next read's plan, or false when the cycle reads no more: no room, or
// only subscriptions whose lanes are full have rows to read, or a read that leaves full
// lanes out (a walk over their rows, see dispatch.ReadPlan) ran less than an Interval
// ago and this cycle has not made it. laneFull reports that a lane is full: the loop
// reads on when the workers drain the queue.
func (p *Poller) plan(leftOutRead *bool) (plan dispatch.ReadPlan, ok, laneFull bool) {
	plan = p.q.ReadPlan()
	if plan.Budget <= 0 {
		return plan, false, plan.Full
	}
	if !plan.Full {
		return plan, true, false
	}
	if !plan.Others {
		return plan, false, true
	}
	if !*leftOutRead {
		now := time.Now()
		last := p.leftOutAt.Load()
		if last != 0 && now.Sub(time.Unix(0, last)) < p.cfg.Interval {
			return plan, false, true
		}
		p.leftOutAt.Store(now.UnixNano())
		*leftOutRead = true
	}
	return plan, true, true
}

// pollPending is Poll without claims. It reports whether more rows are probably due.
func (p *Poller) pollPending(ctx context.Context, skip time.Duration) (int, bool, error) {
	now := p.cfg.Now()
	total := 0
	var oldestDue time.Time
	// Each batch reads on after the last row of the one before (a keyset cursor), so the
	// events in flight at the head of the table (queued, running, or waiting for their
	// outcome to be written) are read once per cycle, not once per batch. The cycle
	// starts at the low-water mark, or from the head (lowwater.go).
	after, _ := p.low.start(now)
	first := true
	// Rows in flight come first and are skipped; at most that many, plus the cold
	// window, are worth reading in one cycle.
	maxRead := p.q.MaxInflight() + p.q.ReadPlan().Budget
	read := 0
	more, laneFull, leftOutRead := false, false, false
	for {
		plan, ok, lf := p.plan(&leftOutRead)
		laneFull = laneFull || lf
		if !ok {
			break
		}
		want := min(p.cfg.BatchSize, plan.Budget)
		// A row finished before readAt is read in its later state; one finished after it,
		// until the batch is enqueued, is refused as a stale copy.
		readAt, endRead := p.q.BeginRead()
		batch, err := p.pending(ctx, storage.PendingParams{Now: now, SkipRecent: skip, Limit: want, After: after, Skip: plan.Skip})
		if err != nil {
			endRead()
			return total, false, err
		}
		if first {
			first = false
			p.low.update(now, p.cfg.SkipRecent, plan.Skip, batch)
		}
		for _, re := range batch.Undecodable {
			p.markUndecodable(ctx, re, "")
		}
		added, full := 0, false
		var paused []dispatch.PausedEvent
		for _, ev := range batch.Events {
			if due := dispatch.EventDueAt(ev); oldestDue.IsZero() || due.Before(oldestDue) {
				oldestDue = due
			}
			switch p.q.Enqueue(ev, PathCold, p.q.Now(), readAt) {
			case dispatch.EnqueueOK:
				added++
				p.cfg.Metrics.ColdEnqueued()
			case dispatch.EnqueueDuplicate: // queued, running or just finished: skip
			case dispatch.EnqueueLaneFull: // read once its lane drains; the next batch leaves it out
				laneFull = true
			case dispatch.EnqueuePaused:
				paused = append(paused, p.pausedEvent(ev))
			default:
				full = true
			}
			if full {
				break
			}
			after = Cursor{AvailableAt: ev.AvailableAt, CreatedAt: ev.CreatedAt, ID: ev.ID}
		}
		endRead()
		p.settlePaused(ctx, paused)
		total += added
		n := len(batch.Events) + len(batch.Undecodable)
		read += n
		exhausted := n < want // a short batch holds every pending row after the cursor
		more = full || !exhausted
		// A batch of undecodable rows only moves no cursor: they are DEAD now, or, if
		// that failed, read again by the next cycle.
		if full || exhausted || len(batch.Events) == 0 || read >= maxRead {
			break
		}
	}
	lag := time.Duration(0)
	if !oldestDue.IsZero() {
		lag = max(now.Sub(oldestDue), 0)
	}
	p.cfg.Metrics.OldestPendingLag(lag)
	if total > 0 {
		p.log.LogAttrs(ctx, slog.LevelDebug, "poll queued events", slog.Int("queued", total))
	}
	return total, more || laneFull, nil
}

// pollClaims is Poll with claims: batches are claimed until budget rows are claimed, a
// batch comes back short, or the queue refuses an event. It reports whether the last batch
// came back full.
func (p *Poller) pollClaims(ctx context.Context, skip time.Duration) (int, bool, error) {
	total, claimed := 0, 0 // queued; claimed, also undecodable and refused rows
	_, queued := p.q.Depths()
	room := p.cfg.BatchSize - queued // claims are made just in time: one batch at most
	more, laneFull, leftOutRead := false, false, false
	var oldestDue time.Time
	now := p.cfg.Now()
	from, _ := p.low.start(now) // the mark, or the head (lowwater.go)
	first := true
	for claimed < room {
		plan, ok, lf := p.plan(&leftOutRead)
		laneFull = laneFull || lf
		if !ok {
			more = more || laneFull
			break
		}
		want := min(plan.Budget, room-claimed)
		token := ids.NewClaimToken(p.cfg.NodeID)
		// The database starts the claim after this moment, so start+ClaimTTL is a
		// conservative estimate of its end by this process's monotonic clock.
		start := time.Now()
		readAt, endRead := p.q.BeginRead()
		batch, err := p.claim(ctx, storage.ClaimParams{Token: token, TTL: p.cfg.ClaimTTL, SkipRecent: skip, Limit: want, Skip: plan.Skip, DueFrom: from.AvailableAt})
		if err != nil {
			endRead()
			return total, false, err
		}
		if first {
			first = false
			p.low.update(now, p.cfg.SkipRecent, plan.Skip, batch)
		}
		for _, re := range batch.Undecodable {
			p.markUndecodable(ctx, re, token)
		}
		added := 0
		var refused []Event
		var paused []dispatch.PausedEvent
		full := false
		for _, ev := range batch.Events {
			if due := dispatch.EventDueAt(ev); oldestDue.IsZero() || due.Before(oldestDue) {
				oldestDue = due
			}
			ev.LockedUntil = start.Add(p.cfg.ClaimTTL)
			if full {
				refused = append(refused, ev)
				continue
			}
			switch p.q.Enqueue(ev, PathCold, p.q.Now(), readAt) {
			case dispatch.EnqueueOK:
				added++
				p.cfg.Metrics.ColdEnqueued()
			case dispatch.EnqueueDuplicate:
				refused = append(refused, ev)
			case dispatch.EnqueueLaneFull: // claimed again once its lane drains
				refused = append(refused, ev)
				laneFull = true
			case dispatch.EnqueuePaused:
				paused = append(paused, p.pausedEvent(ev))
			default:
				refused = append(refused, ev)
				full = true
			}
		}
		endRead()
		if batch.TakenOver > 0 { // before ClaimTaken: whoever sees the claims taken sees these
			p.cfg.Metrics.Claims(ClaimTakenOver, batch.TakenOver)
		}
		if n := len(batch.Events) + len(batch.Undecodable); n > 0 {
			p.cfg.Metrics.Claims(ClaimTaken, n)
		}
		if len(refused) > 0 {
			p.refused(ctx, refused, token)
		}
		p.settlePaused(ctx, paused)
		total += added
		claimed += len(batch.Events) + len(batch.Undecodable)
		more = !full && len(batch.Events)+len(batch.Undecodable) == want
		if !more {
			// A full lane's rows are claimed once it drains: the loop waits for that.
			more = laneFull && !full
			break
		}
	}
	lag := time.Duration(0)
	if !oldestDue.IsZero() {
		lag = max(p.cfg.Now().Sub(oldestDue), 0)
	}
	p.cfg.Metrics.OldestPendingLag(lag)
	if total > 0 {
		p.log.LogAttrs(ctx, slog.LevelDebug, "poll claimed events", slog.Int("queued", total))
	}
	return total, more, nil
}

// refused gives back the claims of claimed events the dispatcher refused: its queue is
// full, or it holds the event already, or it finished the event after this poll's read
// began (a retry it just scheduled that this poll claimed again). Nobody here delivers
// them, so they must not wait out ClaimTTL, which would hold an ordered event's key as
// long: their claims are released for any node's next poll. This poller is not woken
// for them (a copy in flight here would be refused again); other nodes are notified.
func (p *Poller) refused(ctx context.Context, events []Event, token string) {
	if p.release == nil {
		p.log.LogAttrs(ctx, slog.LevelDebug, "claimed events the dispatcher refused stay claimed until the claim expires",
			slog.Int("refused", len(events)), slog.String("claim", token))
		p.cfg.Metrics.Claims(ClaimExpired, len(events))
		return
	}
	if released := p.release.Released(ctx, events); released < int64(len(events)) {
		p.cfg.Metrics.Claims(ClaimExpired, len(events)-int(released))
	}
}

func (p *Poller) claim(ctx context.Context, params storage.ClaimParams) (storage.PendingBatch, error) {
	if p.cfg.QueryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.QueryTimeout)
		defer cancel()
	}
	b, err := p.claims.Claim(ctx, params)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("claim pending events: %w", err)
	}
	if len(b.Events) > 0 {
		crash.PointEvents("after-claim", b.Events)
	}
	return b, nil
}

func (p *Poller) pending(ctx context.Context, params storage.PendingParams) (storage.PendingBatch, error) {
	if p.cfg.QueryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.QueryTimeout)
		defer cancel()
	}
	b, err := p.store.Pending(ctx, params)
	if err != nil {
		return storage.PendingBatch{}, fmt.Errorf("read pending events: %w", err)
	}
	return b, nil
}

// markUndecodable moves a row that cannot be read or decoded to DEAD, fenced by token
// when the row was claimed, so that it stops no other row: the ERROR log names it.
func (p *Poller) markUndecodable(ctx context.Context, re RowError, token string) {
	if p.cfg.QueryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.QueryTimeout)
		defer cancel()
	}
	reason := re.Error()
	_, err := p.store.MarkDead(ctx, storage.MarkDeadParams{ID: re.EventID, DeadAt: p.cfg.Now(), Reason: reason, Token: token})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			p.log.LogAttrs(ctx, slog.LevelError, "event that cannot be read or decoded could not be moved to dead",
				slog.String("event_id", re.EventID), slog.String("error", fmt.Errorf("mark dead: %w", err).Error()))
		}
		return
	}
	p.log.LogAttrs(ctx, slog.LevelError, "event that cannot be read or decoded moved to dead",
		slog.String("event_id", re.EventID), slog.String("reason", reason))
	p.cfg.Metrics.Dispatched(DispatchInfo{Path: PathCold, Outcome: OutcomeDead})
}
