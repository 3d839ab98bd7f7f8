package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// Batching of DONE outcomes. A worker whose attempt ends DONE hands the event to the
// dispatcher's one recorder goroutine and takes its next event at once; the recorder
// writes every DONE outcome that has arrived while it wrote the previous batch with one
// MarkDone (one UPDATE … WHERE event_id IN (…)), so that under load the
// database sees one statement for many events, and with a single event in flight one
// statement right away. Only with a DoneBatchWindow does the recorder wait, at most that
// long, for a batch to fill.
//
// Claimed events (MultiNode mode) are batched too, in a statement of their own that
// fences each row by its own claim token (MarkDoneParams.Tokens): hot-path events carry
// one token per writer transaction, so one statement per token would make a batch many
// statements, written one after the other, while the claims run out. A claimed event's
// claim had at least ListenerTimeout + StatusTimeout left when its attempt began (see
// claimTooShort); its outcome waits at most for the batch being written, itself bounded
// by StatusTimeout. Should a claim still run out and another node take the event over,
// the fence leaves that node's claim alone and the event is delivered again (at least
// once). On SQLite, whose writes are serialised, one statement per event would halve what
// the business transactions can write.
//
// An event stays in flight (refused by EnqueueHot and EnqueueCold) until its batch is
// written; only then is it settled: released with a tombstone, reported to the metrics
// and logged, exactly as a per-event write would. A batch whose statement fails is
// written again event by event, so one bad row or a transient error does not leave the
// others pending; an event whose own statement fails too is left for the poller. A
// claimed batch that changed fewer rows than it holds lost some claims; it leaves no
// tombstone, as a fenced-out per-event write would not. The workers close the
// recorder's intake when they return, so a graceful Stop records every DONE outcome
// before it returns; after a hard stop the recorder still writes what it was handed,
// each statement bounded by StatusTimeout, as a worker writing its own outcome would.

// doneQueueSize bounds the DONE outcomes waiting for the recorder; a worker that finds
// it full waits (the recorder is writing a batch).
const doneQueueSize = 1024

// maxDoneBatch bounds the events of one batch.
const maxDoneBatch = 1024

// doneAck is one attempt that ended DONE, waiting for its outcome to be written.
type doneAck struct {
	ev       Event
	path     Path
	listener string
	duration time.Duration
	latency  time.Duration
}

// recordDone is the recorder: it writes the DONE outcomes from acks in batches until
// acks is closed and drained.
func (d *Dispatcher) recordDone(runCtx context.Context, acks <-chan doneAck) {
	batch := make([]doneAck, 0, maxDoneBatch)
	for {
		a, ok := <-acks
		if !ok {
			return
		}
		batch = d.collectDone(append(batch[:0], a), acks)
		d.writeDone(runCtx, batch)
		clear(batch) // drop the events' payloads
	}
}

// collectDone adds to batch the outcomes waiting in acks, and with a DoneBatchWindow
// those arriving within the window, up to maxDoneBatch or until acks is closed.
func (d *Dispatcher) collectDone(batch []doneAck, acks <-chan doneAck) []doneAck {
	var window <-chan time.Time
	if d.cfg.DoneBatchWindow > 0 {
		t := time.NewTimer(d.cfg.DoneBatchWindow)
		defer t.Stop()
		window = t.C
	}
	for len(batch) < maxDoneBatch {
		if window == nil {
			select {
			case a, ok := <-acks:
				if !ok {
					return batch // write this batch; the next receive reports the close
				}
				batch = append(batch, a)
			default:
				return batch
			}
			continue
		}
		select {
		case a, ok := <-acks:
			if !ok {
				return batch
			}
			batch = append(batch, a)
		case <-window:
			return batch
		}
	}
	return batch
}

// writeDone writes one batch of DONE outcomes: the unclaimed events (single-node mode)
// with one statement, the claimed ones (MultiNode mode) with another, fenced row by row.
func (d *Dispatcher) writeDone(runCtx context.Context, batch []doneAck) {
	unclaimed, claimed := batch, []doneAck(nil)
	if slices.ContainsFunc(batch, func(a doneAck) bool { return a.ev.LockedBy != "" }) {
		unclaimed, claimed = nil, nil
		for _, a := range batch {
			if a.ev.LockedBy == "" {
				unclaimed = append(unclaimed, a)
			} else {
				claimed = append(claimed, a)
			}
		}
	}
	if len(unclaimed) > 0 {
		d.writeDoneGroup(runCtx, unclaimed, false)
	}
	if len(claimed) > 0 {
		d.writeDoneGroup(runCtx, claimed, true)
	}
}

// writeDoneGroup writes the DONE outcomes of a group of events that are all unclaimed,
// or all claimed (each update then fenced by the event's own claim token).
func (d *Dispatcher) writeDoneGroup(runCtx context.Context, group []doneAck, claimed bool) {
	if len(group) == 1 {
		d.writeDoneOne(runCtx, &group[0])
		return
	}
	ids := make([]string, len(group))
	var tokens []string
	if claimed {
		tokens = make([]string, len(group))
	}
	for i := range group {
		ids[i] = group[i].ev.ID
		if claimed {
			tokens[i] = group[i].ev.LockedBy
		}
	}
	ctx, cancel := d.statusContext(runCtx)
	now := d.cfg.Now()
	n, err := d.store.MarkDone(ctx, storage.MarkDoneParams{IDs: ids, Tokens: tokens, DoneAt: now, Delete: d.cfg.DeleteDone})
	unresponsive := errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
	cancel()
	if err != nil {
		// Write them one by one: a transient error may have passed, and one event's
		// failure must not leave the others pending.
		d.log.LogAttrs(runCtx, slog.LevelWarn, "batched status update failed; recording the events one by one",
			slog.Int("events", len(group)), slog.String("error", fmt.Errorf("mark done: %w", err).Error()))
		for i := range group {
			if !d.writeDoneOne(runCtx, &group[i]) && unresponsive && i+1 < len(group) {
				// The database did not answer within StatusTimeout, twice: do not make
				// every other event wait as long. The poller delivers them again.
				d.leavePending(runCtx, group[i+1:], err)
				return
			}
		}
		return
	}
	returned := d.cfg.Now()
	// The keys of the ordered events move on after the commit of their DONE rows, and
	// after their release: the promote hands the keys' next events to the hot queue.
	promote := func() {
		if d.orders == nil {
			return
		}
		if keys := DistinctKeys(len(group), func(i int) string { return group[i].ev.OrderKey }); keys != nil {
			ctx, cancel := d.statusContext(runCtx)
			d.orders.Finished(ctx, keys)
			cancel()
		}
	}
	if unchanged := int64(len(group)) - n; unchanged > 0 {
		if claimed {
			// Which rows the fences kept is unknown: none is settled (no tombstone), as a
			// fenced-out per-event update is not (see writeOutcome).
			d.log.LogAttrs(runCtx, slog.LevelWarn, "status update changed no row for some claimed events: their claims "+
				"were lost (expired and taken over by another node) or they were already finished; those outcomes are not recorded",
				slog.String("op", "mark done"), slog.Int64("unchanged", unchanged), slog.Int("events", len(group)),
				slog.Any("event_ids", ids))
			d.cfg.Metrics.Claims(ClaimLost, int(unchanged))
			for i := range group {
				d.q.release(group[i].ev.ID, returned, false, time.Time{})
			}
			promote()
			d.settledAll(runCtx, group)
			return
		}
		d.log.LogAttrs(runCtx, slog.LevelWarn, "status update changed no row for some events; they were already finished",
			slog.String("op", "mark done"), slog.Int64("unchanged", unchanged), slog.Int("events", len(group)),
			slog.Any("event_ids", ids))
	}
	d.q.releaseAll(group, returned)
	promote()
	d.settledAll(runCtx, group)
}

// settledAll reports a group of DONE outcomes as settled.
func (d *Dispatcher) settledAll(runCtx context.Context, group []doneAck) {
	for i := range group {
		a := &group[i]
		d.settled(runCtx, &a.ev, a.path, decision{kind: OutcomeDone, listener: a.listener}, a.duration, a.latency)
	}
}

// writeDoneOne writes one event's DONE outcome with its own statement, settles the
// event and reports whether the statement succeeded.
func (d *Dispatcher) writeDoneOne(runCtx context.Context, a *doneAck) bool {
	written := d.finishOutcome(runCtx, &a.ev, decision{kind: OutcomeDone})
	d.settled(runCtx, &a.ev, a.path, decision{kind: OutcomeDone, listener: a.listener}, a.duration, a.latency)
	return written
}

// leavePending settles events whose DONE outcome is not written: their rows stay
// pending for the poller.
func (d *Dispatcher) leavePending(runCtx context.Context, group []doneAck, err error) {
	ids := make([]string, len(group))
	for i := range group {
		ids[i] = group[i].ev.ID
	}
	d.log.LogAttrs(runCtx, slog.LevelError, "status update failed; events left for the poller",
		slog.String("op", "mark done"), slog.Any("event_ids", ids), slog.String("error", fmt.Errorf("mark done: %w", err).Error()))
	now := d.cfg.Now()
	for i := range group {
		a := &group[i]
		d.q.release(a.ev.ID, now, false, time.Time{})
		d.settled(runCtx, &a.ev, a.path, decision{kind: OutcomeDone, listener: a.listener}, a.duration, a.latency)
	}
}

// statusContext is the context of one outcome statement: it survives a hard stop
// (the attempt is over; its outcome should be recorded) but not StatusTimeout.
func (d *Dispatcher) statusContext(runCtx context.Context) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(runCtx)
	if d.cfg.StatusTimeout > 0 {
		return context.WithTimeout(ctx, d.cfg.StatusTimeout)
	}
	return ctx, func() {}
}
