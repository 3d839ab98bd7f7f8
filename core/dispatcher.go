package outbox

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/core/internal/startstop"
)

// Dispatcher defaults used by the zero [DispatcherConfig].
const (
	// DefaultWorkers is the number of concurrent deliveries.
	DefaultWorkers = 4
	// DefaultHotQueueSize bounds the in-process queue fed after commit.
	DefaultHotQueueSize = 1000
	// DefaultColdQueueSize bounds the queue fed by the poller.
	DefaultColdQueueSize = 1000
	// DefaultListenerTimeout bounds one delivery attempt (interceptors and listener).
	DefaultListenerTimeout = 30 * time.Second
	// DefaultStatusTimeout bounds each status-update statement after a delivery.
	DefaultStatusTimeout = 10 * time.Second
)

// tombstoneTTL is how long EnqueueCold refuses stale copies of a finished event: rows a
// poller read just before the outcome was written.
const tombstoneTTL = time.Minute

// DispatcherConfig configures a [Dispatcher]. The zero value is ready to use.
type DispatcherConfig struct {
	// Workers is the number of concurrent deliveries. Defaults to DefaultWorkers.
	Workers int
	// HotQueueSize bounds the events handed over in-process right after commit. When
	// the queue is full the event is left for the poller; a write never blocks. -1
	// disables the hot path: every event is delivered by the poller. Defaults to
	// DefaultHotQueueSize.
	HotQueueSize int
	// ColdQueueSize bounds the events the poller has queued. The poller never reads
	// more rows than the queue can take. Defaults to DefaultColdQueueSize.
	ColdQueueSize int
	// MaxAttempts is the number of failed attempts after which an event is DEAD. 1 makes
	// the first failure final; -1 retries forever. Defaults to DefaultMaxAttempts.
	MaxAttempts int
	// Retry computes the delay before the next attempt after a failure. Defaults to the
	// zero ExponentialBackoff (DefaultRetryBase, DefaultRetryMax, with jitter).
	Retry RetryPolicy
	// ListenerTimeout bounds one delivery attempt: the context given to the
	// interceptors and the listener is cancelled when it passes, and the attempt then
	// counts as failed if the listener returns an error. -1 means no timeout. Defaults
	// to DefaultListenerTimeout.
	ListenerTimeout time.Duration
	// StatusTimeout bounds each statement that records an outcome (MarkDone,
	// Reschedule, MarkDead). -1 means no timeout. Defaults to DefaultStatusTimeout.
	StatusTimeout time.Duration
	// DoneBatchWindow is how long the dispatcher may wait, once a DONE outcome is ready
	// to be written, for more DONE outcomes to write with the same statement. DONE
	// outcomes are written in batches anyway (every outcome that arrives while the
	// previous batch is written joins the next one); a window makes the batches larger
	// under load, so the database spends less time per event, at the price of DONE rows
	// appearing up to this much later. Listeners are not delayed, and Stop still writes
	// every outcome before it returns. 0 writes a batch as soon as the previous one is
	// written. Defaults to 0.
	DoneBatchWindow time.Duration
	// Interceptors wrap every delivery attempt; see [Interceptor]. Defaults to none.
	Interceptors []Interceptor
	// Logger receives operational logs, with component=dispatcher. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Metrics receives measurements. Defaults to NopMetrics{}.
	Metrics Metrics
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// ClaimTTL is the length of the claims this node makes in [MultiNode] mode (its
	// writer's pre-claims and its poller's claims). A worker about to deliver a claimed
	// event with less than ListenerTimeout + StatusTimeout left renews the claim by
	// ClaimTTL first ([Store.RenewClaim]). 0 never renews: such an event is left for the
	// next claim. Defaults to 0.
	ClaimTTL time.Duration
}

func (c DispatcherConfig) withDefaults() DispatcherConfig {
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.HotQueueSize = cmp.Or(c.HotQueueSize, DefaultHotQueueSize)
	c.ColdQueueSize = cmp.Or(c.ColdQueueSize, DefaultColdQueueSize)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	if c.Retry == nil {
		c.Retry = ExponentialBackoff{}
	}
	c.ListenerTimeout = cmp.Or(c.ListenerTimeout, DefaultListenerTimeout)
	c.StatusTimeout = cmp.Or(c.StatusTimeout, DefaultStatusTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = NopMetrics{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c DispatcherConfig) validate() error {
	switch {
	case c.Workers < 1:
		return &ConfigError{Field: "Workers", Reason: fmt.Sprintf("must be positive, got %d", c.Workers)}
	case c.HotQueueSize < -1:
		return &ConfigError{Field: "HotQueueSize", Reason: fmt.Sprintf("must be positive or -1, got %d", c.HotQueueSize)}
	case c.ColdQueueSize < 1:
		return &ConfigError{Field: "ColdQueueSize", Reason: fmt.Sprintf("must be positive, got %d", c.ColdQueueSize)}
	case c.MaxAttempts < -1:
		return &ConfigError{Field: "MaxAttempts", Reason: fmt.Sprintf("must be positive or -1, got %d", c.MaxAttempts)}
	case c.ListenerTimeout < 0 && c.ListenerTimeout != -1:
		return &ConfigError{Field: "ListenerTimeout", Reason: fmt.Sprintf("must be positive or -1, got %s", c.ListenerTimeout)}
	case c.StatusTimeout < 0 && c.StatusTimeout != -1:
		return &ConfigError{Field: "StatusTimeout", Reason: fmt.Sprintf("must be positive or -1, got %s", c.StatusTimeout)}
	case c.ClaimTTL < 0:
		return &ConfigError{Field: "ClaimTTL", Reason: fmt.Sprintf("must not be negative, got %s", c.ClaimTTL)}
	case c.DoneBatchWindow < 0:
		return &ConfigError{Field: "DoneBatchWindow", Reason: fmt.Sprintf("must not be negative, got %s", c.DoneBatchWindow)}
	}
	for i, ic := range c.Interceptors {
		if ic == nil {
			return &ConfigError{Field: "Interceptors", Reason: fmt.Sprintf("interceptor %d is nil", i)}
		}
	}
	return nil
}

// Dispatcher delivers events to their listeners. Events reach it two ways: the hot path
// ([Dispatcher.WriterHook], right after commit, no database read) and the cold path
// ([Poller], from the table). Workers take two hot events for every cold one when both
// queues have work, so neither path starves the other.
//
// Each attempt runs the interceptors and the listener under a context that ends after
// ListenerTimeout, then writes the outcome:
//
//	listener returns                          row becomes                      attempt counted
//	nil, or Done()                            DONE                             no
//	RetryAfter(d)                             NEW, due now+d (deferred)        no
//	Dead(reason), or an error wrapping        DEAD, last_error = reason        yes
//	  ErrUnrecoverable
//	*RetryAfterError (errors.As)              RETRY, due now+Delay             yes
//	any other error, or a panic               RETRY, due now+Retry.Delay(n)    yes
//	(no listener for the route)               DEAD, reason wraps ErrUnroutable no
//
// A counted failure whose attempt number reaches MaxAttempts makes the event DEAD
// instead of RETRY. A panic is recovered as a [*PanicError]: its stack is logged, its
// message stored.
//
// An event ID is accepted once from enqueue until its outcome is written, so the poller
// cannot queue an event that is already queued or running. For a minute after the
// outcome is written, the cold path also refuses copies of the row read before it
// (recognised by an AvailableAt that has not moved forward), so a poll that raced with
// the completion does not deliver the event again or with stale attempts; a retry that
// falls due or a replay moves available_at forward and is accepted.
//
// No database connection is held while a listener runs: the outcome is written after
// it returns, with its own statement bounded by StatusTimeout. If that statement fails,
// the error is logged and the row stays pending for the poller. DONE outcomes, the
// common case, are written in batches: the worker hands the event to one recorder and
// takes its next event, and the recorder marks every event handed to it while it wrote
// the previous batch DONE with one statement ([Store.MarkDone] with
// many IDs), so a busy dispatcher sends one UPDATE for many events and an idle one
// sends it at once (claimed events, in [MultiNode] mode, with a statement that fences
// each row by its own claim token). An event counts as in flight, and is reported to
// [Metrics.Dispatched], only once its batch is written; a batch whose statement fails
// is written again event by event, and Stop returns only after every DONE outcome
// handed over was written.
//
// # Claims
//
// In [MultiNode] mode an event arrives claimed: Event.LockedBy holds the claim token
// (from the writer's pre-claim on the hot path, or the poller's [Store.Claim]) and
// Event.LockedUntil this node's estimate of when the claim ends. Every outcome update is
// fenced by the token, so a node whose claim expired and was taken over changes nothing
// (logged at Warn) and the other node's outcome stands. A worker does not start an
// attempt on a claim with less than ListenerTimeout + StatusTimeout left, measured with
// this process's monotonic clock (an event that waited long in a queue): it renews the
// claim by ClaimTTL first ([Store.RenewClaim]), and when the claim is gone (another node
// took the event over) or cannot be renewed, leaves the event to the next claim instead
// of running while another node may take it over. Unclaimed events (LockedBy empty) are
// recorded without a token, as in single-node mode.
type Dispatcher struct {
	store  Store
	reg    *Registry
	cfg    DispatcherConfig
	log    *slog.Logger
	runner *startstop.Runner

	hot  chan dispatchItem // nil when the hot path is disabled
	cold chan dispatchItem

	mu        sync.Mutex
	accepting bool                // guarded by mu
	inflight  map[string]struct{} // guarded by mu
	tombs     tombstones          // guarded by mu

	// coldWake is signalled (never blocking) when a worker takes a cold event and at
	// most coldLowWater remain queued; -1 disables it. A claiming poller waits on it to
	// claim the next batch just in time.
	coldWake     chan struct{}
	coldLowWater atomic.Int64
	// hotDropped is signalled (never blocking) when the hot path leaves committed events
	// to the poller, which then polls as soon as they are older than SkipRecent.
	hotDropped chan struct{}

	// depthMu serialises reading the queue lengths with reporting them, so that the
	// last report is never older than the last queue change it follows.
	depthMu sync.Mutex
}

// dispatchItem is one queued event.
type dispatchItem struct {
	ev         Event
	path       Path
	enqueuedAt time.Time
}

// NewDispatcher returns a stopped Dispatcher that delivers events from store to the
// listeners of reg. It returns a [*ConfigError] when store or reg is nil or a config
// value is invalid.
func NewDispatcher(store Store, reg *Registry, cfg DispatcherConfig) (*Dispatcher, error) {
	if store == nil {
		return nil, &ConfigError{Field: "Store", Reason: "is nil"}
	}
	if reg == nil {
		return nil, &ConfigError{Field: "Registry", Reason: "is nil"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Interceptors = append([]Interceptor(nil), cfg.Interceptors...)
	d := &Dispatcher{
		store:      store,
		reg:        reg,
		cfg:        cfg,
		log:        cfg.Logger.With(slog.String("component", "dispatcher")),
		runner:     startstop.New(),
		cold:       make(chan dispatchItem, cfg.ColdQueueSize),
		inflight:   make(map[string]struct{}),
		tombs:      newTombstones(),
		coldWake:   make(chan struct{}, 1),
		hotDropped: make(chan struct{}, 1),
	}
	d.coldLowWater.Store(-1)
	if cfg.HotQueueSize > 0 {
		d.hot = make(chan dispatchItem, cfg.HotQueueSize)
	}
	return d, nil
}

// Start starts the workers and returns at once. The workers run until [Dispatcher.Stop]
// with a context that keeps ctx's values but not its deadline or cancellation. Starting
// a running dispatcher does nothing; a stopped one can be started again. Start returns
// ctx.Err() only when ctx expires while a concurrent Stop is in progress.
func (d *Dispatcher) Start(ctx context.Context) error {
	started, err := d.runner.Start(ctx, func(r startstop.Run) {
		d.mu.Lock()
		d.accepting = true
		d.mu.Unlock()
		// The workers hand DONE outcomes to one recorder, which writes them in batches;
		// it returns once the last worker has returned and everything is recorded.
		acks := make(chan doneAck, doneQueueSize)
		var workers sync.WaitGroup
		workers.Add(d.cfg.Workers)
		for range d.cfg.Workers {
			r.Go(func() {
				defer workers.Done()
				d.work(r, acks)
			})
		}
		r.Go(func() {
			workers.Wait()
			close(acks)
		})
		r.Go(func() { d.recordDone(r.Ctx, acks) })
	})
	if started {
		d.log.LogAttrs(ctx, slog.LevelInfo, "dispatcher started",
			slog.Int("workers", d.cfg.Workers),
			slog.Int("hot_queue_size", max(d.cfg.HotQueueSize, 0)),
			slog.Int("cold_queue_size", d.cfg.ColdQueueSize))
	}
	return err
}

// Stop stops the dispatcher gracefully: it refuses new events, lets the workers deliver
// every queued event and waits for them. If ctx expires first, Stop cancels the
// contexts of running listeners, waits for the workers to return and returns ctx.Err();
// the outcomes of the interrupted deliveries are not written and queued events are not
// delivered: their rows stay pending for the poller. Stop is idempotent, and a no-op
// before Start.
func (d *Dispatcher) Stop(ctx context.Context) error {
	stopped, err := d.runner.Stop(ctx, ErrStopped, startstop.StopHooks{
		CloseIntake: func() {
			d.mu.Lock()
			d.accepting = false
			d.mu.Unlock()
		},
		HardStop: func() {
			hot, cold := d.QueueDepths()
			d.log.LogAttrs(ctx, slog.LevelWarn, "dispatcher stop deadline passed; cancelling running deliveries, queued events stay pending",
				slog.Int("hot_queued", hot), slog.Int("cold_queued", cold))
		},
		Cleanup: d.discardQueued,
	})
	if stopped {
		d.log.LogAttrs(ctx, slog.LevelInfo, "dispatcher stopped")
	}
	return err
}

// discardQueued empties the queues after a hard stop and forgets every in-flight ID: no
// worker runs any more, and the rows of the discarded events are still pending.
func (d *Dispatcher) discardQueued() {
	d.mu.Lock()
	for len(d.hot) > 0 {
		<-d.hot
	}
	for len(d.cold) > 0 {
		<-d.cold
	}
	clear(d.inflight)
	d.mu.Unlock()
	d.reportDepths()
}

// EnqueueHot hands a committed event to the hot queue. It never blocks: it returns false
// when the queue is full, the hot path is disabled, the dispatcher is not running, the
// event is already queued or being delivered, or its outcome was written moments ago (the
// poller, with a short or no SkipRecent, found the row and delivered it before the writer's
// after-commit hook ran). Normally [Dispatcher.WriterHook] calls it; an event it refuses
// because a queue is full or the dispatcher is stopped is delivered later by the poller.
func (d *Dispatcher) EnqueueHot(e Event) bool {
	return d.enqueue(e, PathHot, d.cfg.Now(), time.Time{}) == enqueueOK
}

// EnqueueCold hands a pending event read from the table to the cold queue. It never
// blocks: it returns false when the queue is full, the dispatcher is not running, the
// event is already queued or being delivered, or e is a stale copy of an event whose
// outcome was written moments ago (its AvailableAt is not after the delivered copy's).
// Normally the [Poller] calls it; the poller also knows when it read each row, and a
// row it read after the outcome was written is never refused as stale. A claimed event (from
// [Store.Claim]) should carry in LockedUntil the claim's end by this process's clock,
// as the poller sets it; see "Claims" on [Dispatcher].
func (d *Dispatcher) EnqueueCold(e Event) bool {
	return d.enqueue(e, PathCold, d.cfg.Now(), time.Time{}) == enqueueOK
}

// ColdCapacity returns how many more events the cold queue can take now: 0 when the
// dispatcher is not running.
func (d *Dispatcher) ColdCapacity() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.accepting {
		return 0
	}
	return cap(d.cold) - len(d.cold)
}

// wakeOnColdDrain makes the workers signal the returned channel whenever they take a
// cold event and at most low remain queued.
func (d *Dispatcher) wakeOnColdDrain(low int) <-chan struct{} {
	d.coldLowWater.Store(int64(low))
	return d.coldWake
}

// tookCold signals coldWake when the cold queue has drained to its low-water mark.
func (d *Dispatcher) tookCold() {
	if low := d.coldLowWater.Load(); low >= 0 && int64(len(d.cold)) <= low {
		select {
		case d.coldWake <- struct{}{}:
		default:
		}
	}
}

// maxInflight bounds the events in flight at once: queued, running, or handed to the
// recorder of DONE outcomes.
func (d *Dispatcher) maxInflight() int {
	return max(d.cfg.HotQueueSize, 0) + d.cfg.ColdQueueSize + d.cfg.Workers + doneQueueSize + maxDoneBatch
}

// inflightCount returns the number of events in flight now.
func (d *Dispatcher) inflightCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inflight)
}

// QueueDepths returns the number of events waiting in the hot and cold queues.
func (d *Dispatcher) QueueDepths() (hot, cold int) { return len(d.hot), len(d.cold) }

// reportDepths reports the current queue lengths to the metrics hook. Every queue change
// is followed by a call; reading and reporting under depthMu makes the final report
// read the lengths after every change before it, so the gauge cannot stay stale.
func (d *Dispatcher) reportDepths() {
	d.depthMu.Lock()
	defer d.depthMu.Unlock()
	d.cfg.Metrics.QueueDepths(d.QueueDepths())
}

type enqueueResult int

const (
	enqueueOK        enqueueResult = iota
	enqueueDuplicate               // queued, running, or finished moments ago
	enqueueFull                    // queue full or hot path disabled
	enqueueStopped                 // dispatcher not running
)

// enqueue queues e on path at now. readAt is when the read that returned e from the
// table began, or the zero time when unknown; see tombstones.blocks.
func (d *Dispatcher) enqueue(e Event, path Path, now, readAt time.Time) enqueueResult {
	q := d.cold
	if path == PathHot {
		q = d.hot
	}
	d.mu.Lock()
	switch {
	case !d.accepting:
		d.mu.Unlock()
		return enqueueStopped
	case q == nil:
		d.mu.Unlock()
		return enqueueFull
	}
	if _, ok := d.inflight[e.ID]; ok || d.tombs.blocks(e.ID, e.AvailableAt, readAt, now) {
		d.mu.Unlock()
		return enqueueDuplicate
	}
	select {
	case q <- dispatchItem{ev: e, path: path, enqueuedAt: now}:
		d.inflight[e.ID] = struct{}{}
	default:
		d.mu.Unlock()
		return enqueueFull
	}
	d.mu.Unlock()
	d.reportDepths()
	return enqueueOK
}

// release forgets an in-flight ID once its outcome is settled. When settled is true the
// outcome was written by a statement that returned at now: stale copies of the event
// (read before now, AvailableAt not after availableAt) are refused for tombstoneTTL.
func (d *Dispatcher) release(id string, now time.Time, settled bool, availableAt time.Time) {
	d.mu.Lock()
	delete(d.inflight, id)
	if settled {
		d.tombs.add(id, now, availableAt)
	} else {
		d.tombs.prune(now)
	}
	d.mu.Unlock()
}

// WriterHook returns the hook that feeds the hot path; give it to the writer. Its
// AfterCommit hands each committed event to the hot queue, except events that are not
// due yet (they wait for the poller; Metrics.DelayedSkipped). It never blocks and never
// fails: an event the queue cannot take (full, or dispatcher stopped) is counted with
// Metrics.HotDropped, logged, and delivered later by the poller. With ClaimTTL set
// ([MultiNode]) it queues only events the writer pre-claimed (LockedBy set; see
// [WriterConfig.ClaimTTL]), and a pre-claiming writer does not claim a batch for the hot
// path while the hot queue is full, so that other nodes' pollers can take it at once.
func (d *Dispatcher) WriterHook() WriterHook { return dispatcherHook{d: d} }

type dispatcherHook struct {
	NopWriterHook
	d *Dispatcher
}

// hotQueueFull reports whether the hot queue cannot take an event now (or the hot path
// is disabled). A pre-claiming writer asks before it claims events for the hot path.
func (h dispatcherHook) hotQueueFull() bool {
	return h.d.hot == nil || len(h.d.hot) >= cap(h.d.hot)
}

// AfterCommit queues the due events on the hot path; see [Dispatcher.WriterHook].
func (h dispatcherHook) AfterCommit(ctx context.Context, events []Event) error {
	d := h.d
	if d.hot == nil {
		return nil
	}
	now := d.cfg.Now()
	dropped := 0
	var reason enqueueResult
	for i := range events {
		if events[i].AvailableAt.After(now) {
			d.cfg.Metrics.DelayedSkipped()
			continue
		}
		if d.cfg.ClaimTTL > 0 && events[i].LockedBy == "" {
			// Under claims only an event this node pre-claimed may take the hot path;
			// any node's poller may be claiming the others. The writer claims none while
			// the hot queue is full: count them as dropped.
			d.cfg.Metrics.HotDropped()
			dropped++
			reason = enqueueFull
			continue
		}
		switch r := d.enqueue(events[i], PathHot, now, time.Time{}); r {
		case enqueueOK:
			d.cfg.Metrics.HotEnqueued()
		case enqueueDuplicate:
			d.log.LogAttrs(ctx, slog.LevelDebug, "committed event already queued or delivered", slog.String("event_id", events[i].ID))
		default:
			d.cfg.Metrics.HotDropped()
			dropped++
			reason = r
		}
	}
	if dropped > 0 {
		select {
		case d.hotDropped <- struct{}{}:
		default:
		}
		why := "hot queue full"
		if reason == enqueueStopped {
			why = "dispatcher not running"
		}
		d.log.LogAttrs(ctx, slog.LevelWarn, "committed events left for the poller: "+why, slog.Int("dropped", dropped))
	}
	return nil
}
