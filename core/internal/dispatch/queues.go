package dispatch

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/outboxtype"
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
//	poller (package poll)           Enqueue(PathCold), ReadPlan, Depths,
//	                                InflightCount, MaxInflight, ColdDrained, CatchUp,
//	                                NextDue, DueReached, DueChanged
//	workers                         next, more, adopt, done, release, releaseAll, NoteDue
//	notifier, replays               SignalCatchUp
//	Dispatcher Start/Stop           open, close, discard
//
// An event ID is accepted once from enqueue until release: the poller cannot queue an
// event that is queued, running, or waiting for its outcome to be written.
//
// Fair scheduling. The hot and cold queues are bounded counts (HotQueueSize,
// ColdQueueSize); the events they count wait in lanes, one per subscription (the route
// the event resolves to when it is queued; one lane for events to split, one for
// unroutable ones), each with a FIFO per path. A worker takes from the lane served
// longest ago among those that have events, a free slot and a token of their rate limit
// (each take stamps its lane with a serial number), so an event of one subscription
// waits behind at most one event (or batch) of each other subscription that is queued
// before a worker is free, never behind all of them. The stamp, not a position in a
// list, decides: a lane that emptied and filled again (as a hot burst's first events,
// taken one by one while the rest are still being queued, make it) comes back with the
// stamp of its last take, behind a lane that was not served since. A lane's slots are
// its subscription's MaxConcurrency (no bound when 0): a worker that takes an event holds
// one until the attempt (or batch, or split) returns ([Queues.done]). Within a lane,
// two turns of a worker out of three prefer the hot FIFO and the third the cold one, as
// across the whole queue before lanes.
type Queues struct {
	hotCap  int // -1: the hot path is disabled
	coldCap int
	workers int
	metrics Metrics
	now     func() time.Time // the dispatcher's clock: enqueue and release times
	routes  Routes           // resolves an event to its lane

	mu        sync.Mutex
	accepting bool                 // guarded by mu
	inflight  map[string]bool      // guarded by mu: ID → ordered (has an order key)
	held      int                  // guarded by mu: the ordered events in inflight
	tombs     tombstones           // guarded by mu
	reads     map[uint64]time.Time // guarded by mu: the open reads, when each began
	readSeq   uint64               // guarded by mu
	lanes     map[*Route]*lane     // guarded by mu: every lane, by its subscription's route
	paused    map[string]bool      // guarded by mu: the paused subscriptions, by name
	ready     []*lane              // guarded by mu: the lanes with queued events, oldest first
	served    uint64               // guarded by mu: the stamp of the last take from a lane
	queued    [2]int               // guarded by mu: queued events by path (PathHot, PathCold)
	// coldWindow is how many cold events the poller keeps queued (SetColdWindow); 0:
	// coldCap. Guarded by mu.
	coldWindow int
	// depths mirrors queued for the readers that do not take mu (Depths, HotFull,
	// tookCold).
	depths [2]atomic.Int64
	// hotTaken counts the events the hot queue took (HotTaken).
	hotTaken atomic.Uint64
	// wake has a token per worker: Enqueue and done put one (never blocking) so that a
	// waiting worker looks at the lanes again.
	wake chan struct{}

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
	// loads receives each subscription's load when it changes (nil unless metrics
	// implements it); loadMu serialises reading a lane with reporting it, as depthMu.
	loads  outboxtype.SubscriptionMetrics
	loadMu sync.Mutex
	heldMu sync.Mutex // the same for the ordered events held
}

// dispatchItem is one queued event.
type dispatchItem struct {
	ev         Event
	path       Path
	enqueuedAt time.Time
	lane       *lane
	join       *batchSlot // set by a worker delivering the item in a batch
}

// NewQueues returns closed queues; hotSize <= 0 disables the hot path. routes resolves
// an event to its subscription's lane when it is queued (see Queues); with nil routes
// every event is in one lane.
func NewQueues(hotSize, coldSize, workers int, metrics Metrics, now func() time.Time, routes Routes) *Queues {
	q := &Queues{
		hotCap:   -1,
		coldCap:  coldSize,
		workers:  workers,
		metrics:  metrics,
		now:      now,
		routes:   routes,
		inflight: make(map[string]bool),
		tombs:    newTombstones(),
		reads:    make(map[uint64]time.Time),
		lanes:    make(map[*Route]*lane),
		wake:     make(chan struct{}, max(workers, 1)),
		coldWake: make(chan struct{}, 1),
		catchUps: make(chan struct{}, 1),

		dueChanges: make(chan struct{}, 1),
	}
	q.coldLowWater.Store(-1)
	q.loads, _ = metrics.(outboxtype.SubscriptionMetrics)
	if hotSize > 0 {
		q.hotCap = hotSize
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
	for _, l := range q.lanes {
		for p := range l.fifo {
			for l.fifo[p].len() > 0 {
				if it := l.fifo[p].pop(); it.ev.LockedBy != "" {
					claimed = append(claimed, it.ev)
				}
			}
		}
		l.running, l.isReady = 0, false
	}
	q.ready = q.ready[:0]
	q.setQueued(PathHot, 0)
	q.setQueued(PathCold, 0)
	clear(q.inflight)
	wasHeld := q.held
	q.held = 0
	lanes := make([]*lane, 0, len(q.lanes))
	for _, l := range q.lanes {
		lanes = append(lanes, l)
	}
	q.mu.Unlock()
	q.reportDepths()
	for _, l := range lanes {
		q.reportLoad(l)
	}
	if wasHeld > 0 {
		q.reportHeld()
	}
	return claimed
}

// setQueued sets the count of path's queued events. The caller holds mu.
func (q *Queues) setQueued(path Path, n int) {
	q.queued[path] = n
	q.depths[path].Store(int64(n))
}

type EnqueueResult int

const (
	EnqueueOK        EnqueueResult = iota
	EnqueueDuplicate               // queued, running, or finished moments ago
	EnqueueFull                    // queue full or hot path disabled
	EnqueueStopped                 // Dispatcher not running
	EnqueuePaused                  // its subscription is paused (Queues.SetPaused)
	EnqueueLaneFull                // its subscription holds its share of the cold queue (Queues.Skip)
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
	capacity := q.coldCap
	if path == PathHot {
		capacity = q.hotCap
	}
	var (
		key *Route
		fan []*Route
	)
	if q.routes != nil {
		key, fan = q.routes.Resolve(e.Listener, e.AggregateType, e.Type)
	}
	switch {
	case fan != nil:
		key = fanOutLane
	case key == nil:
		key = unroutableLane
	}
	q.mu.Lock()
	l := q.laneOf(key)
	switch {
	case !q.accepting:
		q.mu.Unlock()
		return EnqueueStopped
	case l.paused:
		q.mu.Unlock()
		return EnqueuePaused
	case capacity < 0 || q.queued[path] >= capacity:
		q.mu.Unlock()
		return EnqueueFull
	case path == PathCold && l.fifo[PathCold].len() >= q.laneColdCap():
		q.mu.Unlock()
		return EnqueueLaneFull
	}
	if _, ok := q.inflight[e.ID]; ok || q.tombs.blocks(e.ID, e.AvailableAt, readAt, now) {
		q.mu.Unlock()
		return EnqueueDuplicate
	}
	l.fifo[path].push(dispatchItem{ev: e, path: path, enqueuedAt: now, lane: l})
	q.setQueued(path, q.queued[path]+1)
	if !l.isReady {
		l.isReady = true
		q.ready = append(q.ready, l)
	}
	q.inflight[e.ID] = e.OrderKey != ""
	if e.OrderKey != "" {
		q.held++
	}
	q.mu.Unlock()
	if path == PathHot {
		q.hotTaken.Add(1)
	}
	q.signal()
	q.reportDepths()
	q.reportLoad(l)
	if e.OrderKey != "" {
		q.reportHeld()
	}
	return EnqueueOK
}

// reportLoad reports l's load to the metrics that take it (SubscriptionMetrics).
func (q *Queues) reportLoad(l *lane) {
	if q.loads == nil || l == nil || !l.isSubscription() {
		return
	}
	q.loadMu.Lock()
	defer q.loadMu.Unlock()
	q.mu.Lock()
	ld := l.load(q.now())
	q.mu.Unlock()
	q.loads.SubscriptionLoad(ld)
}

// Loads returns the load of every subscription that has had events in this process,
// by name.
func (q *Queues) Loads() []SubscriptionLoad {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var out []SubscriptionLoad
	for _, l := range q.lanes {
		if l.isSubscription() {
			out = append(out, l.load(now))
		}
	}
	slices.SortFunc(out, func(a, b SubscriptionLoad) int { return strings.Compare(a.Listener, b.Listener) })
	return out
}

// signal wakes a waiting worker, if any, to look at the lanes again.
func (q *Queues) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next returns the next event for a worker, from the lane served longest ago that has
// one, a free slot and a token (see pick), and takes a slot of that lane, which the
// worker gives back with done once the attempt returned. Two turns out of three prefer the lane's hot
// events, the third its cold ones. It waits while no lane has an event it may take; it
// returns false after a hard stop, or after a graceful stop once every lane is empty. A
// cold event taken may wake the poller (see coldDrained), and the new depths are
// reported.
func (q *Queues) next(r startstop.Run, turn uint) (dispatchItem, bool) {
	stopping := r.Stopping
	for {
		if r.Ctx.Err() != nil {
			return dispatchItem{}, false
		}
		q.mu.Lock()
		it, ok, wait := q.pick(turn)
		empty := q.queued[PathHot]+q.queued[PathCold] == 0
		q.mu.Unlock()
		if ok {
			if it.path == PathCold {
				q.tookCold()
			}
			q.reportDepths()
			q.reportLoad(it.lane)
			return it, true
		}
		if empty && stopping == nil {
			// Intake closed before Stopping: the lanes are empty for good. Another
			// worker may wait on wake alone (it saw Stopping while a bounded lane
			// still held events): pass the wake-up on.
			q.signal()
			return dispatchItem{}, false
		}
		var token *time.Timer // a rate-limited lane's next token
		var tokens <-chan time.Time
		if wait > 0 {
			token = time.NewTimer(wait)
			tokens = token.C
		}
		select {
		case <-q.wake:
		case <-tokens:
		case <-r.Ctx.Done():
			return dispatchItem{}, false
		case <-stopping:
			stopping = nil // closed: look again, and return once every lane is empty
		}
		if token != nil {
			token.Stop()
		}
	}
}

// more returns, without waiting, the next queued event of it's lane (of it's path when
// samePath), for a worker that delivers several in one call (a batch, a split): it
// runs under it's slot. It returns false when there is none.
func (q *Queues) more(it dispatchItem, samePath bool) (dispatchItem, bool) {
	l := it.lane
	q.mu.Lock()
	if l == nil || l.fifo[it.path].len() == 0 && (samePath || l.fifo[1-it.path].len() == 0) {
		q.mu.Unlock()
		return dispatchItem{}, false
	}
	if l.rate > 0 && l.spend(q.now()) > 0 {
		q.mu.Unlock()
		return dispatchItem{}, false
	}
	p := it.path
	if l.fifo[p].len() == 0 {
		p = 1 - p
	}
	q.take(l) // an event of a batch or split is a take of its own
	next := q.popLane(l, p == PathCold)
	q.mu.Unlock()
	if next.path == PathCold {
		q.tookCold()
	}
	q.reportDepths()
	q.reportLoad(l)
	return next, true
}

// adopt takes a slot of it's lane again for an event a worker took with another one
// (more) and runs after it gave that one's slot back (the registry changed between
// queueing and delivery: see Dispatcher.run).
func (q *Queues) adopt(it dispatchItem) {
	if it.lane == nil {
		return
	}
	q.mu.Lock()
	it.lane.running++
	q.mu.Unlock()
	q.reportLoad(it.lane)
}

// done gives back the slot of it's lane that next (or adopt) took.
func (q *Queues) done(it dispatchItem) {
	l := it.lane
	if l == nil {
		return
	}
	q.mu.Lock()
	l.running = max(l.running-1, 0)
	wake := l.limit > 0 && l.isReady
	q.mu.Unlock()
	if wake {
		q.signal() // a worker waiting on this lane's bound may take its next event
	}
	q.reportLoad(l)
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

// HotTaken is how many events the hot queue has taken since q was made. The poller
// keeps its base interval while it moves: each delivered event leaves a dead entry in
// the index the poller reads, which the next read walks (poll.Poller).
func (q *Queues) HotTaken() uint64 { return q.hotTaken.Load() }

// HotEnabled reports whether the hot path is enabled (HotQueueSize is not -1).
func (q *Queues) HotEnabled() bool { return q.hotCap >= 0 }

// HotFull reports whether the hot queue cannot take an event now: it is full, the hot
// path is disabled or the Dispatcher is not running. A pre-claiming writer asks before
// it claims events for the hot path.
func (q *Queues) HotFull() bool {
	if q.hotCap < 0 || q.depths[PathHot].Load() >= int64(q.hotCap) {
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

// ColdDrained makes the workers signal the returned channel whenever they take a cold
// event and at most low remain queued.
func (q *Queues) ColdDrained(low int) <-chan struct{} {
	q.coldLowWater.Store(int64(low))
	return q.coldWake
}

// tookCold signals coldWake when the cold queue has drained to its low-water mark.
func (q *Queues) tookCold() {
	if low := q.coldLowWater.Load(); low >= 0 && q.depths[PathCold].Load() <= low {
		select {
		case q.coldWake <- struct{}{}:
		default:
		}
	}
}

// MaxInflight bounds the events in flight at once: queued, running, or handed to the
// recorder of DONE outcomes.
func (q *Queues) MaxInflight() int {
	return max(q.hotCap, 0) + q.coldCap + q.workers + doneQueueSize + maxDoneBatch
}

// InflightCount returns the number of events in flight now.
func (q *Queues) InflightCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}

// Depths returns the number of events waiting in the hot and cold queues.
func (q *Queues) Depths() (hot, cold int) {
	return int(q.depths[PathHot].Load()), int(q.depths[PathCold].Load())
}

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
