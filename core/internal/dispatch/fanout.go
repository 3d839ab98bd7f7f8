package dispatch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
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

// DeliveryID is the ID of event id's delivery to the named listener when it is split
// (fan-out): the same on every node, at most outboxtype.MaxIDLen bytes.
func DeliveryID(id, listener string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + listener))
	// The last 16 characters of a ULID encoding carry the last 80 bits of its 16 bytes.
	hash := ids.EncodeULID([16]byte(sum[:16]))[10:]
	return check.CutText(id, outboxtype.MaxIDLen-1-len(hash)) + "." + hash
}

// deliveryKey is the order key of an ordered event's delivery to listener: the event's
// key and the listener's name, cut with a hash when longer than outboxtype.MaxOrderKeyLen.
func deliveryKey(key, listener string) string {
	k := key + "/" + listener
	if len(k) <= outboxtype.MaxOrderKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	h := fmt.Sprintf("%x", sum[:8])
	return check.CutText(k, outboxtype.MaxOrderKeyLen-1-len(h)) + "~" + h
}

// maxFanOutBatch bounds the events one split transaction takes.
const maxFanOutBatch = 100

// fanOutItem is an event to split and the subscriptions it goes to.
type fanOutItem struct {
	it  dispatchItem
	fan []*Route
}

// fanOut splits items' events into one delivery per subscription (see above), in one
// transaction, then hands the deliveries that are due to the hot path.
func (d *Dispatcher) fanOut(runCtx context.Context, items []fanOutItem) {
	now := d.cfg.Now()
	if runCtx.Err() != nil { // hard stop: leave the rows pending
		for _, x := range items {
			d.q.release(x.it.ev.ID, now, false, time.Time{})
		}
		return
	}
	fs, ok := d.store.(storage.FanOutStore)
	if !ok {
		for _, x := range items {
			e := x.it.ev
			err := fmt.Errorf("%w: event %s has %d listeners and %T cannot split it (FanOutStore)",
				errors.ErrUnsupported, e.ID, len(x.fan), d.store)
			dec := decision{kind: OutcomeDead, reason: err.Error(), err: err}
			d.finishOutcome(runCtx, &e, dec)
			d.settled(runCtx, &e, x.it.path, dec, 0, 0)
		}
		return
	}
	start := d.cfg.Now()
	p := storage.FanOutParams{DoneAt: start, Delete: d.cfg.DeleteDone, ClaimTTL: d.cfg.ClaimTTL}
	byID := make(map[string]*Event, len(items))
	for _, x := range items {
		e := x.it.ev
		if left, short := d.claimTooShort(e, nil); short && !d.renewClaim(runCtx, &e, left, x.it.path) {
			d.q.release(e.ID, d.cfg.Now(), false, time.Time{})
			continue
		}
		fe := storage.FanOutEvent{ID: e.ID, Token: e.LockedBy, Deliveries: make([]Event, len(x.fan))}
		for i, rt := range x.fan {
			c := e
			c.ID, c.Listener = DeliveryID(e.ID, rt.Name), rt.Name
			c.Status, c.Attempts, c.LastError, c.DoneAt, c.FirstAttemptAt, c.OrderSeq = StatusNew, 0, "", time.Time{}, time.Time{}, 0
			c.LockedUntil = time.Time{}
			if e.OrderKey != "" {
				c.OrderKey = deliveryKey(e.OrderKey, rt.Name)
			}
			if e.LockedBy != "" {
				c.LockedUntil = start.Add(d.cfg.ClaimTTL) // the database starts the claim later: conservative
			}
			fe.Deliveries[i] = c
		}
		byID[e.ID] = &x.it.ev
		p.Events = append(p.Events, fe)
	}
	if len(p.Events) == 0 {
		return
	}
	// Until the deliveries are handed over, a copy a poll reads and a worker finishes
	// first leaves a tombstone that refuses the hot copy (see Queues.BeginRead).
	_, endRead := d.q.BeginRead()
	defer endRead()
	ctx, cancel := d.statusContext(runCtx)
	res, err := fs.FanOut(ctx, p)
	cancel()
	now = d.cfg.Now()
	if err != nil {
		d.log.LogAttrs(runCtx, slog.LevelError, "fan-out failed; events left for the poller",
			slog.Int("events", len(p.Events)), slog.String("error", err.Error()))
		for _, fe := range p.Events {
			d.q.release(fe.ID, now, false, time.Time{})
		}
		return
	}
	split := make(map[string]bool, len(res.Split))
	for _, id := range res.Split {
		split[id] = true
	}
	var keys []string
	var deliveries []Event
	for _, fe := range p.Events {
		e := byID[fe.ID]
		switch {
		case split[fe.ID]:
			d.q.release(fe.ID, now, true, e.AvailableAt)
			if e.OrderKey != "" {
				keys = append(keys, e.OrderKey)
			}
			deliveries = append(deliveries, fe.Deliveries...)
		case fe.Token != "":
			d.log.LogAttrs(runCtx, slog.LevelWarn, "fan-out changed nothing: the claim was lost "+
				"(it expired and another node claimed the event) or the event was already finished",
				slog.String("event_id", fe.ID), slog.String("claim", fe.Token))
			d.cfg.Metrics.Claims(ClaimLost, 1)
			d.q.release(fe.ID, now, false, time.Time{})
		default:
			d.log.LogAttrs(runCtx, slog.LevelWarn, "fan-out changed nothing; the event was already finished",
				slog.String("event_id", fe.ID))
			d.q.release(fe.ID, now, true, e.AvailableAt)
		}
	}
	d.log.LogAttrs(runCtx, slog.LevelDebug, "events split into one delivery per listener",
		slog.Int("events", len(res.Split)), slog.Int("deliveries", len(deliveries)), slog.Int("existing", len(res.Existing)))
	pctx, pcancel := d.statusContext(runCtx)
	defer pcancel()
	if len(keys) > 0 && d.orders != nil {
		d.orders.Promote(pctx, keys) // the events' next ones, now that these are split
	}
	if len(res.Existing) > 0 {
		// Split before: those deliveries may be delivered, or claimed by another node.
		existing := make(map[string]bool, len(res.Existing))
		for _, id := range res.Existing {
			existing[id] = true
		}
		deliveries = slices.DeleteFunc(deliveries, func(c Event) bool { return existing[c.ID] })
	}
	d.handOver(pctx, deliveries)
}

// handOver queues the deliveries a split inserted, as a writer's after-commit hook
// queues the events it wrote: the due ones on the hot path, an ordered one only when it
// is first in its key; keys that were busy are promoted. Without a hot path the poller
// is woken: the deliveries are as old as their event, so its next poll takes them.
func (d *Dispatcher) handOver(ctx context.Context, deliveries []Event) {
	if len(deliveries) == 0 {
		return
	}
	if !d.q.HotEnabled() {
		if keys := EventKeys(deliveries); keys != nil && d.orders != nil {
			d.orders.Promote(ctx, keys)
		}
		d.q.SignalCatchUp()
		return
	}
	if keys := EventKeys(deliveries); keys != nil && d.orders != nil {
		if busy := WaitingKeys(deliveries, keys); busy != nil {
			var bk []string
			for _, k := range keys {
				if busy[k] {
					bk = append(bk, k)
				}
			}
			d.orders.AfterCommit(ctx, slices.DeleteFunc(slices.Clone(deliveries), func(c Event) bool { return !busy[c.OrderKey] }), bk)
		}
	}
	_ = d.hot.AfterCommit(ctx, deliveries) // never fails; WAITING deliveries are left out
}
