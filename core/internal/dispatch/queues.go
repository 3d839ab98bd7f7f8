package dispatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/internal/startstop"
)

// Queues is the state that the three parts of one delivery share: the writer's
// after-commit hand-off (the hot path), the poller (the cold path) and the dispatcher's
// workers. It holds the two bounded queues, the set of events in flight, the tombstones
// of recently finished events, and the wake-ups between the parts. No part reads
// another's fields; each calls the few methods here:
//
//	hot path (HotPath.AfterCommit)  Enqueue(PathHot), HotEnabled, SignalCatchUp
//	orderer (package order)         BeginRead, HotEnabled, IsAccepting, NoteDue
//	writer (before pre-claiming)    HotFull
//	poller (package poll)           Enqueue(PathCold), ColdCapacity, Depths,
//	                                InflightCount, MaxInflight, ColdDrained, CatchUp,
//	                                NextDue, DueReached, DueChanged
//	workers                         next, tookCold, release, releaseAll, NoteDue
//	notifier, replays               SignalCatchUp
//	Dispatcher Start/Stop           open, close, discard
//
// An event ID is accepted once from enqueue until release: the poller cannot queue an
// event that is queued, running, or waiting for its outcome to be written.
type Queues struct {
	hot     chan dispatchItem // nil when the hot path is disabled
	cold    chan dispatchItem
	workers int
	metrics Metrics
	now     func() time.Time // the dispatcher's clock: enqueue and release times

	mu        sync.Mutex
	accepting bool                 // guarded by mu
	inflight  map[string]bool      // guarded by mu: ID → ordered (has an order key)
	held      int                  // guarded by mu: the ordered events in inflight
	tombs     tombstones           // guarded by mu
	reads     map[uint64]time.Time // guarded by mu: the open reads, when each began
	readSeq   uint64               // guarded by mu

	// coldWake is signalled (never blocking) when a worker takes a cold event and at
	// most coldLowWater remain queued; -1 disables it. A claiming poller waits on it to
	// claim the next batch just in time.
	coldWake     chan struct{}
	coldLowWater atomic.Int64
	// catchUps is signalled (never blocking) when committed events wait for the poller
	// that it would not read soon: the hot path dropped them, another process notified,
	// or a replay. The poller then reads every due row at once, however young.
	catchUps chan struct{}
	// due holds when the events this process rescheduled (retries, deferrals) fall
	// due, so that the poller reads them then instead of at its next tick.
	due        dueTimes // guarded by mu
	dueChanges chan struct{}

	// depthMu serialises reading the queue lengths with reporting them, so that the
	// last report is never older than the last queue change it follows.
	depthMu sync.Mutex
	heldMu  sync.Mutex // the same for the ordered events held
}

// dispatchItem is one queued event.
type dispatchItem struct {
	ev         Event
	path       Path
	enqueuedAt time.Time
	join       *batchSlot // set by a worker delivering the item in a batch
}

// NewQueues returns closed queues; hotSize <= 0 disables the hot path.
func NewQueues(hotSize, coldSize, workers int, metrics Metrics, now func() time.Time) *Queues {
	q := &Queues{
		cold:     make(chan dispatchItem, coldSize),
		workers:  workers,
		metrics:  metrics,
		now:      now,
		inflight: make(map[string]bool),
		tombs:    newTombstones(),
		reads:    make(map[uint64]time.Time),
		coldWake: make(chan struct{}, 1),
		catchUps: make(chan struct{}, 1),

		dueChanges: make(chan struct{}, 1),
	}
	q.coldLowWater.Store(-1)
	if hotSize > 0 {
		q.hot = make(chan dispatchItem, hotSize)
	}
	return q
}

// open starts accepting events.
func (q *Queues) open() {
	q.mu.Lock()
	q.accepting = true
	q.mu.Unlock()
}

// close stops accepting events; queued ones stay for the workers to drain.
func (q *Queues) close() {
	q.mu.Lock()
	q.accepting = false
	q.mu.Unlock()
}

// discard empties the queues after a hard stop and forgets every in-flight ID: no
// worker runs any more, and the rows of the discarded events are still pending. It
// returns the discarded events that are claimed (LockedBy set), whose claims the
// Dispatcher releases.
func (q *Queues) discard() []Event {
	var claimed []Event
	q.mu.Lock()
	for _, ch := range []chan dispatchItem{q.hot, q.cold} {
		for len(ch) > 0 {
			if it := <-ch; it.ev.LockedBy != "" {
				claimed = append(claimed, it.ev)
			}
		}
	}
	clear(q.inflight)
	wasHeld := q.held
	q.held = 0
	q.mu.Unlock()
	q.reportDepths()
	if wasHeld > 0 {
		q.reportHeld()
	}
	return claimed
}

type EnqueueResult int

const (
	EnqueueOK        EnqueueResult = iota
	EnqueueDuplicate               // queued, running, or finished moments ago
	EnqueueFull                    // queue full or hot path disabled
	EnqueueStopped                 // Dispatcher not running
)

// BeginRead opens a read of events that may later be enqueued: a poll query, or a write
// whose events the hot path will take after commit. It returns when the read began and
// the function that closes it (idempotent). While a read is open, the tombstones of
// events settled after it began are kept, so that a stale copy it returns is refused;
// when no read is open none is kept (see tombstones). The reads of the poller end once
// their rows are enqueued, and a write's once its after-commit or after-rollback hook
// has run, so tombstones are bounded by the events settled during one read, not by
// tombstoneTTL's worth of completions. A read open longer than tombstoneTTL (a leaked
// transaction) stops counting.
func (q *Queues) BeginRead() (time.Time, func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	at := q.now()
	q.readSeq++
	seq := q.readSeq
	q.reads[seq] = at
	return at, func() {
		q.mu.Lock()
		delete(q.reads, seq)
		now := q.now()
		oldest, open := q.oldestRead(now)
		q.tombs.prune(now, oldest, open)
		q.mu.Unlock()
	}
}

// oldestRead returns when the oldest open read began, and false when none is open. It
// forgets reads open longer than tombstoneTTL. Called with mu held.
func (q *Queues) oldestRead(now time.Time) (time.Time, bool) {
	var oldest time.Time
	found := false
	for seq, at := range q.reads {
		if now.Sub(at) >= tombstoneTTL {
			delete(q.reads, seq)
			continue
		}
		if !found || at.Before(oldest) {
			oldest, found = at, true
		}
	}
	return oldest, found
}

// Enqueue queues e on path at now. It never blocks. readAt is when the read that
// returned e from the table began (see beginRead), or the zero time when unknown; see
// tombstones.blocks.
func (q *Queues) Enqueue(e Event, path Path, now, readAt time.Time) EnqueueResult {
	ch := q.cold
	if path == PathHot {
		ch = q.hot
	}
	q.mu.Lock()
	switch {
	case !q.accepting:
		q.mu.Unlock()
		return EnqueueStopped
	case ch == nil:
		q.mu.Unlock()
		return EnqueueFull
	}
	if _, ok := q.inflight[e.ID]; ok || q.tombs.blocks(e.ID, e.AvailableAt, readAt, now) {
		q.mu.Unlock()
		return EnqueueDuplicate
	}
	select {
	case ch <- dispatchItem{ev: e, path: path, enqueuedAt: now}:
		q.inflight[e.ID] = e.OrderKey != ""
		if e.OrderKey != "" {
			q.held++
		}
	default:
		q.mu.Unlock()
		return EnqueueFull
	}
	q.mu.Unlock()
	q.reportDepths()
	if e.OrderKey != "" {
		q.reportHeld()
	}
	return EnqueueOK
}

// next returns the next event for a worker. Two turns out of three prefer the hot
// queue, the third prefers the cold one; a worker never idles while either queue has
// work. It returns false after a hard stop, or after a graceful stop once both Queues
// are empty. A cold event taken may wake the poller (see coldDrained), and the new
// depths are reported.
func (q *Queues) next(r startstop.Run, turn uint) (dispatchItem, bool) {
	it, ok := q.take(r, turn)
	if ok {
		if it.path == PathCold {
			q.tookCold()
		}
		q.reportDepths()
	}
	return it, ok
}

// tryNext returns the next queued event without waiting, hot queue first (cold first
// on the turns next favours it), or false when both queues are empty.
func (q *Queues) tryNext(turn uint) (dispatchItem, bool) {
	first, second := PathHot, PathCold
	if turn%3 == 2 {
		first, second = second, first
	}
	if it, ok := q.tryNextFrom(first); ok {
		return it, true
	}
	return q.tryNextFrom(second)
}

// tryNextFrom returns the next event of path's queue without waiting, or false when it
// is empty.
func (q *Queues) tryNextFrom(path Path) (dispatchItem, bool) {
	ch := q.hot
	if path == PathCold {
		ch = q.cold
	}
	select {
	case it := <-ch:
		if it.path == PathCold {
			q.tookCold()
		}
		q.reportDepths()
		return it, true
	default:
		return dispatchItem{}, false
	}
}

func (q *Queues) take(r startstop.Run, turn uint) (dispatchItem, bool) {
	first, second := q.hot, q.cold
	if turn%3 == 2 {
		first, second = second, first
	}
	for {
		if r.Ctx.Err() != nil {
			return dispatchItem{}, false
		}
		select {
		case it := <-first:
			return it, true
		default:
		}
		select {
		case it := <-second:
			return it, true
		default:
		}
		select {
		case <-r.Stopping:
			// Intake closed before Stopping: the queues are empty for good.
			return dispatchItem{}, false
		default:
		}
		select {
		case it := <-q.hot:
			return it, true
		case it := <-q.cold:
			return it, true
		case <-r.Ctx.Done():
			return dispatchItem{}, false
		case <-r.Stopping:
			// Loop: drain what is left, then return.
		}
	}
}

// release forgets an in-flight ID once its outcome is settled. When settled is true the
// outcome was written by a statement that returned at now: stale copies of the event
// (read before now, AvailableAt not after availableAt) are refused for tombstoneTTL.
func (q *Queues) release(id string, now time.Time, settled bool, availableAt time.Time) {
	q.mu.Lock()
	ordered := q.forget(id)
	oldest, open := q.oldestRead(now)
	if settled && open {
		q.tombs.add(id, now, availableAt)
	}
	q.tombs.prune(now, oldest, open)
	q.mu.Unlock()
	if ordered {
		q.reportHeld()
	}
}

// forget removes id from the in-flight set and reports whether it was ordered. The
// caller holds mu.
func (q *Queues) forget(id string) bool {
	ordered, ok := q.inflight[id]
	if ok {
		delete(q.inflight, id)
		if ordered {
			q.held--
		}
	}
	return ordered
}

// releaseAll is release for a batch whose outcome was written by a statement that
// returned at now, under one lock.
func (q *Queues) releaseAll(group []doneAck, now time.Time) {
	q.mu.Lock()
	oldest, open := q.oldestRead(now)
	ordered := false
	for i := range group {
		if q.forget(group[i].ev.ID) {
			ordered = true
		}
		if open {
			q.tombs.add(group[i].ev.ID, now, group[i].ev.AvailableAt)
		}
	}
	q.tombs.prune(now, oldest, open)
	q.mu.Unlock()
	if ordered {
		q.reportHeld()
	}
}

// TombstoneCount returns the number of tombstones kept.
func (q *Queues) TombstoneCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.tombs.byID)
}

// HotEnabled reports whether the hot path is enabled (HotQueueSize is not -1).
func (q *Queues) HotEnabled() bool { return q.hot != nil }

// HotFull reports whether the hot queue cannot take an event now: it is full, the hot
// path is disabled or the Dispatcher is not running. A pre-claiming writer asks before
// it claims events for the hot path.
func (q *Queues) HotFull() bool {
	if q.hot == nil || len(q.hot) >= cap(q.hot) {
		return true
	}
	return !q.IsAccepting()
}

// IsAccepting reports whether the Dispatcher is running and takes events.
func (q *Queues) IsAccepting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.accepting
}

// SignalCatchUp tells the poller that committed events wait for it; see catchUps.
func (q *Queues) SignalCatchUp() {
	select {
	case q.catchUps <- struct{}{}:
	default:
	}
}

// CatchUp is signalled when committed events wait for the poller; see catchUps.
func (q *Queues) CatchUp() <-chan struct{} { return q.catchUps }

// NoteDue remembers that an event this process rescheduled falls due at t.
func (q *Queues) NoteDue(t time.Time) {
	q.mu.Lock()
	first := q.due.add(t)
	q.mu.Unlock()
	if first {
		select {
		case q.dueChanges <- struct{}{}:
		default:
		}
	}
}

// NextDue returns the earliest remembered due time.
func (q *Queues) NextDue() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.due.min()
}

// DueReached forgets the due times up to now and reports whether there were any: a
// poll cycle that starts now must read those events.
func (q *Queues) DueReached(now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.due.popUntil(now)
}

// DueChanged is signalled when a due time earlier than every other is remembered.
func (q *Queues) DueChanged() <-chan struct{} { return q.dueChanges }

// ColdCapacity returns how many more events the cold queue can take now: 0 when the
// Dispatcher is not running.
func (q *Queues) ColdCapacity() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.accepting {
		return 0
	}
	return cap(q.cold) - len(q.cold)
}

// ColdDrained makes the workers signal the returned channel whenever they take a cold
// event and at most low remain queued.
func (q *Queues) ColdDrained(low int) <-chan struct{} {
	q.coldLowWater.Store(int64(low))
	return q.coldWake
}

// tookCold signals coldWake when the cold queue has drained to its low-water mark.
func (q *Queues) tookCold() {
	if low := q.coldLowWater.Load(); low >= 0 && int64(len(q.cold)) <= low {
		select {
		case q.coldWake <- struct{}{}:
		default:
		}
	}
}

// MaxInflight bounds the events in flight at once: queued, running, or handed to the
// recorder of DONE outcomes.
func (q *Queues) MaxInflight() int {
	return cap(q.hot) + cap(q.cold) + q.workers + doneQueueSize + maxDoneBatch
}

// InflightCount returns the number of events in flight now.
func (q *Queues) InflightCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}

// Depths returns the number of events waiting in the hot and cold queues.
func (q *Queues) Depths() (hot, cold int) { return len(q.hot), len(q.cold) }

// reportDepths reports the current queue lengths to the metrics hook. Every queue change
// is followed by a call; reading and reporting under depthMu makes the final report
// read the lengths after every change before it, so the gauge cannot stay stale.
func (q *Queues) reportDepths() {
	q.depthMu.Lock()
	defer q.depthMu.Unlock()
	q.metrics.QueueDepths(q.Depths())
}

// reportHeld reports the ordered events in flight ([Metrics.KeysHeld]). Like
// reportDepths it reads and reports under heldMu, so that the last report is never
// older than the last change it follows.
func (q *Queues) reportHeld() {
	q.heldMu.Lock()
	defer q.heldMu.Unlock()
	q.mu.Lock()
	n := q.held
	q.mu.Unlock()
	q.metrics.KeysHeld(n)
}

// Now returns the time by the dispatcher's clock, which enqueue times follow.
func (q *Queues) Now() time.Time { return q.now() }
