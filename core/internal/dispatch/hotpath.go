package dispatch

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
)

// HotPath hands committed events to the dispatcher's hot queue. Package outbox adds it to the
// writer's hooks in SingleNode and MultiNode modes. Its AfterCommit queues each
// committed event, except events that are not due yet (they wait for the poller, woken
// when they fall due; Metrics.DelayedSkipped) and ordered events (WAITING until promoted; the poller
// delivers them). It never blocks and never fails: an event the queue cannot
// take (full, or dispatcher stopped) is counted with Metrics.HotDropped, logged (one
// WARN per burst), and delivered later by the poller, which is woken to catch up. Under claims (MultiNode)
// it queues only events the writer pre-claimed (LockedBy set), and the writer does not
// pre-claim a batch while the hot queue is full, so that other nodes' pollers can take
// it at once; an event pre-claimed before the queue filled up and refused at commit has
// its claim released by the [Releaser].
type HotPath struct {
	q       *Queues
	release *Releaser // MultiNode: only pre-claimed events may take the hot path; else nil
	notify  func()    // nil, or tells other processes about dropped events
	now     func() time.Time
	metrics Metrics
	log     *slog.Logger

	// standby is set while another process holds the table's dispatch lease (package
	// lease): committed events are left in the table for the holder's poller, without
	// a word.
	standby atomic.Bool
	// wakeHolder, when set, tells other processes about events left while standing by
	// (the Notifier).
	wakeHolder func()

	// dropping is set from the first event a burst drops until the hot queue takes one
	// again, and burstDropped counts the burst's drops: a burst logs one WARN when it
	// begins and one INFO with its count when it ends, not a line per transaction.
	dropping     atomic.Bool
	burstDropped atomic.Int64
}

// HotConfig configures a [HotPath].
type HotConfig struct {
	Now     func() time.Time
	Metrics Metrics
	Logger  *slog.Logger
	// Notify, when set, tells other processes about events the hot path dropped
	// (MultiNode with a Notifier: another node may take them).
	Notify func()
	// WakeHolder, when set, tells other processes about events left while standing by.
	WakeHolder func()
}

// NewHotPath returns the hot path into q. With a releaser (MultiNode) it queues only
// events the writer pre-claimed, and gives back the claims of those q refuses.
func NewHotPath(q *Queues, release *Releaser, cfg HotConfig) *HotPath {
	return &HotPath{q: q, release: release, notify: cfg.Notify, now: cfg.Now, metrics: cfg.Metrics,
		log: cfg.Logger.With(slog.String("component", "dispatcher")), wakeHolder: cfg.WakeHolder}
}

// SetStandby makes the hot path leave committed events to the table (another process
// holds the dispatch lease), or take them again.
func (h *HotPath) SetStandby(on bool) { h.standby.Store(on) }

// Queues returns the queues the hot path feeds.
func (h *HotPath) Queues() *Queues { return h.q }

// Releaser returns the releaser of claims, nil unless MultiNode.
func (h *HotPath) Releaser() *Releaser { return h.release }

// AfterCommit queues the due events on the hot path; see [HotPath].
func (h *HotPath) AfterCommit(ctx context.Context, events []Event) error {
	if h.StandingBy() {
		if h.wakeHolder != nil {
			h.wakeHolder()
		}
		return nil
	}
	// A delayed event waits for the poller, which this process wakes when it falls due,
	// as for its own retries: an idle poller would read it at its next tick, up to
	// PollMaxInterval late.
	now := h.now()
	for i := range events {
		if events[i].AvailableAt.After(now) && events[i].Status != StatusWaiting {
			h.q.NoteDue(events[i].AvailableAt)
		}
	}
	if !h.q.HotEnabled() {
		return nil
	}
	waiting := func(e Event) bool { return e.OrderKey != "" && e.Status == StatusWaiting }
	if slices.ContainsFunc(events, waiting) {
		// Ordered events inserted WAITING wait for their key: the writer promotes them
		// after commit, and hands over itself those that are then next
		// (order.Orderer.AfterCommit). The first event of an idle key was inserted NEW.
		events = slices.DeleteFunc(slices.Clone(events), waiting)
	}
	h.Deliver(ctx, events)
	return nil
}

// Deliver queues events on the hot path: committed events a writer inserted, or ordered
// events it promoted (pre-claimed, or claimed by the promote, under claims).
func (h *HotPath) Deliver(ctx context.Context, events []Event) {
	h.DeliverRead(ctx, events, time.Time{})
}

// StandingBy reports whether another process holds the dispatch lease (see standby).
func (h *HotPath) StandingBy() bool { return h.standby.Load() }

// DeliverRead is deliver for events read from the table by a read that began at readAt
// (see Queues.BeginRead): ordered events promoted after an outcome.
func (h *HotPath) DeliverRead(ctx context.Context, events []Event, readAt time.Time) {
	if h.StandingBy() {
		return // the rows are in the table: the lease holder's poller delivers them
	}
	now := h.now()
	if h.release != nil {
		if n := preClaimed(events); n > 0 {
			h.metrics.Claims(ClaimTaken, n)
		}
	}
	dropped := 0
	var reason EnqueueResult
	var refused []Event // pre-claimed, refused: their claims must not wait out ClaimTTL
	for i := range events {
		if events[i].AvailableAt.After(now) {
			h.metrics.DelayedSkipped()
			continue
		}
		if h.release != nil && events[i].LockedBy == "" {
			// Under claims only an event this node pre-claimed may take the hot path;
			// any node's poller may be claiming the others. The writer claims none while
			// the hot queue is full: count them as dropped.
			h.metrics.HotDropped()
			dropped++
			reason = EnqueueFull
			continue
		}
		switch r := h.q.Enqueue(events[i], PathHot, now, readAt); r {
		case EnqueueOK:
			h.metrics.HotEnqueued()
			if h.dropping.Load() && h.dropping.CompareAndSwap(true, false) {
				h.log.LogAttrs(ctx, slog.LevelInfo, "hot queue takes committed events again; those it dropped are left for the poller",
					slog.Int64("dropped", h.burstDropped.Swap(0)))
			}
		case EnqueueDuplicate:
			h.log.LogAttrs(ctx, slog.LevelDebug, "committed event already queued or delivered", slog.String("event_id", events[i].ID))
		case EnqueuePaused: // its row waits for Resume; the poller pins it if needed
			if events[i].LockedBy != "" && h.release != nil {
				refused = append(refused, events[i])
			}
		default:
			h.metrics.HotDropped()
			dropped++
			reason = r
			if events[i].LockedBy != "" && h.release != nil {
				refused = append(refused, events[i])
			}
		}
	}
	if len(refused) > 0 {
		h.release.Return(ctx, refused)
	}
	if dropped > 0 {
		h.q.SignalCatchUp()
		if h.notify != nil {
			h.notify()
		}
		why := "hot queue full"
		if reason == EnqueueStopped {
			why = "dispatcher not running"
		}
		h.burstDropped.Add(int64(dropped))
		level := slog.LevelDebug // the burst's WARN was logged
		if h.dropping.CompareAndSwap(false, true) {
			level = slog.LevelWarn
		}
		h.log.LogAttrs(ctx, level, "committed events left for the poller: "+why+
			" (until the queue takes events again, further drops are logged at DEBUG)", slog.Int("dropped", dropped))
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
func (h *HotPath) AfterRollback(ctx context.Context, events []Event) error {
	if h.release == nil {
		return nil
	}
	var claimed []Event
	for i := range events {
		if events[i].LockedBy != "" {
			claimed = append(claimed, events[i])
		}
	}
	if len(claimed) > 0 {
		h.release.Return(ctx, claimed)
	}
	return nil
}
