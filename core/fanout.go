package outbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"
)

// Fan-out. An event whose route matches several subscriptions is split, when a worker
// takes it, into one delivery row per subscription: a copy of the event (type,
// aggregate, payload, headers, times) with an ID of its own (DeliveryID) and the
// subscription's name in its listener column. The split is one transaction
// (FanOutStore.FanOut) that marks the event DONE, fenced as a DONE outcome is, and
// inserts the deliveries, skipping those that exist: a split interrupted before its
// outcome was known (a crash, a lost commit acknowledgement) is done again by whoever
// takes the event next and creates nothing twice. From then on each delivery is an
// ordinary event that goes to its listener alone: its attempts, retries, DEAD state,
// fallback and replay are its own, so a failing listener never re-runs one that
// succeeded. The deliveries of a due event are handed to this node's hot path at once
// (claimed by the event's claim in MultiNode mode), so fan-out costs one more
// transaction, not a poll. An ordered event's deliveries are ordered too, each in a key
// of its own (deliveryKey): one listener's failure holds back that listener's later
// deliveries only. The listeners are the subscriptions registered on the node that
// splits the event, when it does: one registered later never sees events split before.

// DeliveryID is the ID of the delivery of event id to the listener named listener when
// the event is split (fan-out): the event's ID, cut to 47 bytes, a dot and 16 characters
// of a SHA-256 of both, so that it is the same on every node and every attempt, and at
// most MaxIDLen bytes.
func DeliveryID(id, listener string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + listener))
	var b [16]byte
	// 80 bits of the hash in Crockford base32, as IDs are.
	var acc uint64
	bits, n := 0, 0
	for _, c := range sum[:10] {
		acc = acc<<8 | uint64(c)
		bits += 8
		for bits >= 5 {
			bits -= 5
			b[n] = crockford[(acc>>bits)&31]
			n++
		}
	}
	return cutText(id, MaxIDLen-1-len(b)) + "." + string(b[:])
}

// deliveryKey is the order key of an ordered event's delivery to listener: the event's
// key and the listener's name, cut with a hash when longer than MaxOrderKeyLen.
func deliveryKey(key, listener string) string {
	k := key + "/" + listener
	if len(k) <= MaxOrderKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	h := fmt.Sprintf("%x", sum[:8])
	return cutText(k, MaxOrderKeyLen-1-len(h)) + "~" + h
}

// cutText returns s cut to at most n bytes on a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// fanOut splits it's event into one delivery per subscription of fan (see above), then
// hands the deliveries that are due to the hot path.
func (d *dispatcher) fanOut(runCtx context.Context, it dispatchItem, fan []*route) {
	e := it.ev
	if runCtx.Err() != nil { // hard stop: leave the row pending
		d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
		return
	}
	fs, ok := d.store.(FanOutStore)
	if !ok {
		err := fmt.Errorf("%w: event %s has %d listeners and %T cannot split it (FanOutStore)",
			errors.ErrUnsupported, e.ID, len(fan), d.store)
		dec := decision{kind: outcomeDead, reason: err.Error(), err: err}
		d.finishOutcome(runCtx, &e, dec)
		d.settled(runCtx, &e, it.path, dec, 0, 0)
		return
	}
	if left, short := d.claimTooShort(e, nil); short && !d.renewClaim(runCtx, &e, left, it.path) {
		d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
		return
	}
	start := d.cfg.Now()
	deliveries := make([]Event, len(fan))
	for i, rt := range fan {
		c := e
		c.ID, c.Listener = DeliveryID(e.ID, rt.name), rt.name
		c.Status, c.Attempts, c.LastError, c.DoneAt, c.FirstAttemptAt, c.OrderSeq = StatusNew, 0, "", time.Time{}, time.Time{}, 0
		c.LockedUntil = time.Time{}
		if e.OrderKey != "" {
			c.OrderKey = deliveryKey(e.OrderKey, rt.name)
		}
		if e.LockedBy != "" {
			c.LockedUntil = start.Add(d.cfg.ClaimTTL) // the database starts the claim later: conservative
		}
		deliveries[i] = c
	}
	// Until the deliveries are handed over, a copy a poll reads and a worker finishes
	// first leaves a tombstone that refuses the hot copy (see queues.beginRead).
	_, endRead := d.q.beginRead()
	defer endRead()
	ctx, cancel := d.statusContext(runCtx)
	res, err := fs.FanOut(ctx, FanOutParams{
		ID: e.ID, Token: e.LockedBy, DoneAt: start, Delete: d.cfg.DeleteDone,
		Deliveries: deliveries, ClaimTTL: d.cfg.ClaimTTL,
	})
	cancel()
	now := d.cfg.Now()
	switch {
	case err != nil:
		d.log.LogAttrs(runCtx, slog.LevelError, "fan-out failed; event left for the poller",
			slog.String("event_id", e.ID), slog.Int("listeners", len(fan)), slog.String("error", err.Error()))
		d.q.release(e.ID, now, false, time.Time{})
		return
	case !res.Done && e.LockedBy != "":
		d.log.LogAttrs(runCtx, slog.LevelWarn, "fan-out changed nothing: the claim was lost "+
			"(it expired and another node claimed the event) or the event was already finished",
			slog.String("event_id", e.ID), slog.String("claim", e.LockedBy))
		d.cfg.Metrics.Claims(ClaimLost, 1)
		d.q.release(e.ID, now, false, time.Time{})
		return
	case !res.Done:
		d.log.LogAttrs(runCtx, slog.LevelWarn, "fan-out changed nothing; the event was already finished",
			slog.String("event_id", e.ID))
		d.q.release(e.ID, now, true, e.AvailableAt)
		return
	}
	d.q.release(e.ID, now, true, e.AvailableAt)
	d.log.LogAttrs(runCtx, slog.LevelDebug, "event split into one delivery per listener",
		slog.String("event_id", e.ID), slog.Int("listeners", len(fan)), slog.Int("existing", len(res.Existing)))
	pctx, pcancel := d.statusContext(runCtx)
	defer pcancel()
	if e.OrderKey != "" && d.orders != nil {
		d.orders.promote(pctx, []string{e.OrderKey}) // the event's next one, now that it is split
	}
	if len(res.Existing) > 0 {
		// Split before: those deliveries may be delivered, or claimed by another node.
		deliveries = slices.DeleteFunc(deliveries, func(c Event) bool { return slices.Contains(res.Existing, c.ID) })
	}
	d.handOver(pctx, deliveries)
}

// handOver queues the deliveries a split inserted, as a writer's after-commit hook
// queues the events it wrote: the due ones on the hot path, an ordered one only when it
// is first in its key; keys that were busy are promoted. Without a hot path the poller
// is woken: the deliveries are as old as their event, so its next poll takes them.
func (d *dispatcher) handOver(ctx context.Context, deliveries []Event) {
	if len(deliveries) == 0 {
		return
	}
	if d.hot == nil || !d.q.hotEnabled() {
		if keys := eventKeys(deliveries); keys != nil && d.orders != nil {
			d.orders.promote(ctx, keys)
		}
		d.q.signalCatchUp()
		return
	}
	if keys := eventKeys(deliveries); keys != nil && d.orders != nil {
		if busy := waitingKeys(deliveries, keys); busy != nil {
			var bk []string
			for _, k := range keys {
				if busy[k] {
					bk = append(bk, k)
				}
			}
			d.orders.afterCommit(ctx, slices.DeleteFunc(slices.Clone(deliveries), func(c Event) bool { return !busy[c.OrderKey] }), bk)
		}
	}
	_ = d.hot.AfterCommit(ctx, deliveries) // never fails; WAITING deliveries are left out
}
