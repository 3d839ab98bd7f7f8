package outbox

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
)

// hotPath hands committed events to the dispatcher's hot queue. [New] appends it to the
// writer's hooks in SingleNode and MultiNode modes. Its AfterCommit queues each
// committed event, except events that are not due yet (they wait for the poller;
// Metrics.DelayedSkipped) and ordered events (WAITING until promoted; the poller
// delivers them). It never blocks and never fails: an event the queue cannot
// take (full, or dispatcher stopped) is counted with Metrics.HotDropped, logged, and
// delivered later by the poller, which is woken to catch up. Under claims ([MultiNode])
// it queues only events the writer pre-claimed (LockedBy set), and the writer does not
// pre-claim a batch while the hot queue is full, so that other nodes' pollers can take
// it at once; an event pre-claimed before the queue filled up and refused at commit has
// its claim released by the dispatcher (dispatcher_returns.go).
type hotPath struct {
	NopWriterHook
	q      *queues
	claims bool   // MultiNode: only pre-claimed events may take the hot path
	notify func() // nil, or tells other processes about dropped events
	// returnClaims takes pre-claimed events the queue refused, to release their claims
	// (MultiNode); nil otherwise.
	returnClaims func(ctx context.Context, events []Event)
	now          func() time.Time
	metrics      Metrics
	log          *slog.Logger

	// standby is set while another process holds the table's dispatch lease (lease.go):
	// committed events are left in the table for the holder's poller, without a word.
	standby atomic.Bool
	// wakeHolder, when set, tells other processes about events left while standing by
	// (the Notifier).
	wakeHolder func()
}

// AfterCommit queues the due events on the hot path; see [hotPath].
func (h *hotPath) AfterCommit(ctx context.Context, events []Event) error {
	if h.standingBy() {
		if h.wakeHolder != nil {
			h.wakeHolder()
		}
		return nil
	}
	if !h.q.hotEnabled() {
		return nil
	}
	waiting := func(e Event) bool { return e.OrderKey != "" && e.Status == StatusWaiting }
	if slices.ContainsFunc(events, waiting) {
		// Ordered events inserted WAITING wait for their key: the writer promotes them
		// after commit, and hands over itself those that are then next
		// (orderer.afterCommit). The first event of an idle key was inserted NEW.
		events = slices.DeleteFunc(slices.Clone(events), waiting)
	}
	h.deliver(ctx, events)
	return nil
}

// deliver queues events on the hot path: committed events a writer inserted, or ordered
// events it promoted (pre-claimed, or claimed by the promote, under claims).
func (h *hotPath) deliver(ctx context.Context, events []Event) {
	h.deliverRead(ctx, events, time.Time{})
}

// standingBy reports whether another process holds the dispatch lease (see standby).
func (h *hotPath) standingBy() bool { return h.standby.Load() }

// deliverRead is deliver for events read from the table by a read that began at readAt
// (see queues.beginRead): ordered events promoted after an outcome.
func (h *hotPath) deliverRead(ctx context.Context, events []Event, readAt time.Time) {
	if h.standingBy() {
		return // the rows are in the table: the lease holder's poller delivers them
	}
	now := h.now()
	if h.claims {
		if n := preClaimed(events); n > 0 {
			h.metrics.Claims(ClaimTaken, n)
		}
	}
	dropped := 0
	var reason enqueueResult
	var refused []Event // pre-claimed, refused: their claims must not wait out ClaimTTL
	for i := range events {
		if events[i].AvailableAt.After(now) {
			h.metrics.DelayedSkipped()
			continue
		}
		if h.claims && events[i].LockedBy == "" {
			// Under claims only an event this node pre-claimed may take the hot path;
			// any node's poller may be claiming the others. The writer claims none while
			// the hot queue is full: count them as dropped.
			h.metrics.HotDropped()
			dropped++
			reason = enqueueFull
			continue
		}
		switch r := h.q.enqueue(events[i], PathHot, now, readAt); r {
		case enqueueOK:
			h.metrics.HotEnqueued()
		case enqueueDuplicate:
			h.log.LogAttrs(ctx, slog.LevelDebug, "committed event already queued or delivered", slog.String("event_id", events[i].ID))
		default:
			h.metrics.HotDropped()
			dropped++
			reason = r
			if events[i].LockedBy != "" && h.returnClaims != nil {
				refused = append(refused, events[i])
			}
		}
	}
	if len(refused) > 0 {
		h.returnClaims(ctx, refused)
	}
	if dropped > 0 {
		h.q.signalCatchUp()
		if h.notify != nil {
			h.notify()
		}
		why := "hot queue full"
		if reason == enqueueStopped {
			why = "dispatcher not running"
		}
		h.log.LogAttrs(ctx, slog.LevelWarn, "committed events left for the poller: "+why, slog.Int("dropped", dropped))
	}
}

// preClaimed counts the events a writer inserted claimed.
func preClaimed(events []Event) int {
	n := 0
	for i := range events {
		if events[i].LockedBy != "" {
			n++
		}
	}
	return n
}

// AfterRollback releases the claims of events pre-claimed for the hot path (MultiNode):
// the callback also runs when COMMIT reported an error, and a commit whose
// acknowledgement was lost may have stored them, claimed by this node for ClaimTTL. On
// a real rollback the release finds no row.
func (h *hotPath) AfterRollback(ctx context.Context, events []Event) error {
	if h.returnClaims == nil {
		return nil
	}
	var claimed []Event
	for i := range events {
		if events[i].LockedBy != "" {
			claimed = append(claimed, events[i])
		}
	}
	if len(claimed) > 0 {
		h.returnClaims(ctx, claimed)
	}
	return nil
}
