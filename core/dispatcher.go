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
	"github.com/outboxkit/outbox/core/storage"
)

// tombstoneTTL is how long EnqueueCold refuses stale copies of a finished event: rows a
// poller read just before the outcome was written.
const tombstoneTTL = time.Minute

// DispatcherConfig configures a [Dispatcher]. The zero value is ready to use.
type dispatcherConfig struct {
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
	// DeleteDone deletes the rows of delivered events instead of marking them DONE.
	DeleteDone bool
	// OnStuck is called when an attempt is declared stuck; see stuck.go.
	OnStuck func(e Event, running time.Duration)
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
	// ClaimTTL first ([storage.ClaimStore.RenewClaim]). 0 never renews: such an event is left for the
	// next claim. Defaults to 0.
	ClaimTTL time.Duration
}

func (c dispatcherConfig) withDefaults() dispatcherConfig {
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

func (c dispatcherConfig) validate() error {
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
//	listener returns                        outcome   row becomes                      attempt counted
//	nil                                     done      DONE                             no
//	Defer(d) (a *DeferError)                deferred  NEW, due now+d                   no
//	RetryAfter(err, d) (a *RetryAfterError) retry     RETRY, due now+d                 yes
//	any other error, or a panic             retry     RETRY, due now+Retry.Delay(n)    yes
//	Dead(err), or an error matching         dead      DEAD, last_error = err           yes
//	  ErrUnrecoverable
//	(no listener for the route)             dead      DEAD, reason wraps ErrUnroutable no
//
// A counted failure whose attempt number reaches MaxAttempts makes the event DEAD
// instead of RETRY. A panic is recovered as a [*PanicError]: its stack is logged, its
// message stored.
//
// An event ID is accepted once from enqueue until its outcome is written, so the poller
// cannot queue an event that is already queued or running. After the outcome is
// written, copies read before it by a read still open (a poll enqueueing its batch, a
// write whose after-commit hand-off has not run) are refused too (recognised by an
// AvailableAt that has not moved forward), so a race with the completion does not
// deliver the event again or with stale attempts; a retry that falls due or a replay
// moves available_at forward and is accepted. The tombstones this takes are kept only
// while such a read is open, and never past tombstoneTTL (see queues.beginRead).
//
// No database connection is held while a listener runs: the outcome is written after
// it returns, with its own statement bounded by StatusTimeout. If that statement fails,
// the error is logged and the row stays pending for the poller. DONE outcomes, the
// common case, are written in batches: the worker hands the event to one recorder and
// takes its next event, and the recorder marks every event handed to it while it wrote
// the previous batch DONE with one statement ([storage.Store.MarkDone] with
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
// (from the writer's pre-claim on the hot path, or the poller's [storage.ClaimStore.Claim]) and
// Event.LockedUntil this node's estimate of when the claim ends. Every outcome update is
// fenced by the token, so a node whose claim expired and was taken over changes nothing
// (logged at Warn) and the other node's outcome stands. A worker does not start an
// attempt on a claim with less than ListenerTimeout + StatusTimeout left, measured with
// this process's monotonic clock (an event that waited long in a queue): it renews the
// claim by ClaimTTL first ([storage.ClaimStore.RenewClaim]), and when the claim is gone
// (another node took the event over) or cannot be renewed, leaves the event to the next
// claim instead of running while another node may take it over. Unclaimed events (LockedBy empty) are
// recorded without a token, as in single-node mode.
type dispatcher struct {
	store  storage.Store
	claims storage.ClaimStore // the store's claims; nil unless ClaimTTL is set
	reg    *registry
	cfg    dispatcherConfig
	log    *slog.Logger
	runner *startstop.Runner

	q *queues
	// stuck counts the attempts declared stuck whose listener has not returned; see
	// stuck.go.
	stuck atomic.Int64
	// returns are pre-claimed events the hot path refused (MultiNode); see
	// dispatcher_returns.go. notifyOthers, when set, tells other nodes about them.
	returns      claimReturns
	notifyOthers func()
	// orders moves a key on once one of its ordered events is finished; nil when the
	// store keeps no order.
	orders *orderer
	// hot is the hot path's writer hook (see hotPath), which fan-out deliveries take too.
	hot *hotPath
}

// NewDispatcher returns a stopped Dispatcher that delivers events from store to the
// listeners of reg. It returns a [*ConfigError] when store or reg is nil or a config
// value is invalid.
func newDispatcher(store storage.Store, reg *registry, cfg dispatcherConfig) (*dispatcher, error) {
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
	claims, err := claimStoreOf(store, cfg.ClaimTTL)
	if err != nil {
		return nil, err
	}
	cfg.Interceptors = append([]Interceptor(nil), cfg.Interceptors...)
	d := &dispatcher{
		store:  store,
		claims: claims,
		reg:    reg,
		cfg:    cfg,
		log:    cfg.Logger.With(slog.String("component", "dispatcher")),
		runner: startstop.New(),
		q:      newQueues(cfg.HotQueueSize, cfg.ColdQueueSize, cfg.Workers, cfg.Metrics, cfg.Now),
	}
	d.returns.wake = make(chan struct{}, 1)
	d.hot = &hotPath{q: d.q, claims: cfg.ClaimTTL > 0, now: cfg.Now, metrics: cfg.Metrics, log: d.log}
	if claims != nil {
		d.hot.returnClaims = d.returnClaims
	}
	return d, nil
}

// Start starts the workers and returns at once. The workers run until [Dispatcher.Stop]
// with a context that keeps ctx's values but not its deadline or cancellation. Starting
// a running dispatcher does nothing; a stopped one can be started again. Start returns
// ctx.Err() only when ctx expires while a concurrent Stop is in progress.
func (d *dispatcher) Start(ctx context.Context) error {
	started, err := d.runner.Start(ctx, func(r startstop.Run) {
		d.q.open()
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
		if d.claims != nil {
			r.Go(func() { d.runReturns(r) })
		}
	})
	if started {
		d.log.LogAttrs(ctx, slog.LevelDebug, "dispatcher started",
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
func (d *dispatcher) Stop(ctx context.Context) error {
	stopped, err := d.runner.Stop(ctx, ErrStopped, startstop.StopHooks{
		CloseIntake: d.q.close,
		HardStop: func() {
			hot, cold := d.q.depths()
			d.log.LogAttrs(ctx, slog.LevelWarn, "dispatcher stop deadline passed; cancelling running deliveries, queued events stay pending",
				slog.Int("hot_queued", hot), slog.Int("cold_queued", cold))
		},
		Cleanup: func() {
			d.releaseClaims(ctx, d.q.discard(), whyHardStop)
			d.releaseClaims(ctx, d.returns.take(), whyNotTaken)
		},
	})
	if stopped {
		d.log.LogAttrs(ctx, slog.LevelDebug, "dispatcher stopped")
	}
	return err
}

// releaseClaims releases the claims of events this node holds but will not deliver
// (discarded by a hard stop, refused by the full hot queue, or claimed by a poll and
// refused by the queues; why says which), so that
// pollers take them at once instead of after ClaimTTL. The SQL store does it with one
// statement per chunk (each row fenced by its own token); other claim stores get each
// claim renewed to expire a microsecond later. It is bounded by StatusTimeout (or a
// second), and a failure only delays those events until their claims expire.
// It returns how many claims it released.
func (d *dispatcher) releaseClaims(ctx context.Context, events []Event, why string) int64 {
	if len(events) == 0 || d.claims == nil {
		return 0
	}
	budget := d.cfg.StatusTimeout
	if budget <= 0 {
		budget = time.Second
	}
	// Survive a stop, except for a poll's refusals: the poller's stop must not wait
	// for a release that a dead database would make last the whole budget.
	base := context.WithoutCancel(ctx)
	if why == whyRefused {
		base = ctx
	}
	ctx, cancel := context.WithTimeout(base, budget)
	defer cancel()
	var released int64
	var err error
	if r, ok := d.claims.(claimReleaser); ok {
		ids, tokens := make([]string, len(events)), make([]string, len(events))
		for i, e := range events {
			ids[i], tokens[i] = e.ID, e.LockedBy
		}
		released, err = r.releaseClaims(ctx, ids, tokens)
	} else {
		for _, e := range events {
			var n int64
			n, err = d.claims.RenewClaim(ctx, storage.RenewClaimParams{ID: e.ID, Token: e.LockedBy, TTL: time.Microsecond})
			if err != nil {
				break
			}
			released += n
		}
		if released > 0 && why != whyRefused {
			// Poll once those claims have expired; not for events this node's poller
			// refused (it would claim and refuse them again).
			d.q.noteDue(d.cfg.Now().Add(time.Microsecond))
		}
	}
	if released > 0 {
		d.cfg.Metrics.Claims(ClaimReleased, int(released))
	}
	attrs := []slog.Attr{slog.String("events", why), slog.Int("claimed", len(events)), slog.Int64("released", released)}
	if err != nil {
		d.log.LogAttrs(ctx, slog.LevelWarn, "releasing claims failed; the events wait for their claims to expire",
			append(attrs, slog.String("error", err.Error()))...)
		return released
	}
	level := slog.LevelDebug // routine under bursts
	if why == whyHardStop {
		level = slog.LevelInfo
	}
	d.log.LogAttrs(ctx, level, "released the claims of events this node will not deliver", attrs...)
	return released
}

// Why releaseClaims runs, for its log line.
const (
	whyHardStop = "discarded by a hard stop"
	whyNotTaken = "pre-claimed, not taken by the hot path (queue full, dispatcher stopping, or COMMIT failed)"
	whyRefused  = "claimed by a poll, refused by the dispatcher (queue full, or the event in flight or just finished here)"
)

// claimReleaser is implemented by the SQL store: it clears the claims of the NEW and
// RETRY rows ids[i] still held by tokens[i], with one statement per chunk.
type claimReleaser interface {
	releaseClaims(ctx context.Context, ids, tokens []string) (int64, error)
}

// hotPath returns the writer hook that feeds this dispatcher's hot queue.
func (d *dispatcher) hotPath() *hotPath { return d.hot }

// claimStoreOf returns store's claims when claimTTL asks for them, or a [*ConfigError]
// when the store cannot claim.
func claimStoreOf(store storage.Store, claimTTL time.Duration) (storage.ClaimStore, error) {
	if claimTTL <= 0 {
		return nil, nil
	}
	cs, ok := store.(storage.ClaimStore)
	if !ok {
		return nil, &ConfigError{Field: "Store", Reason: fmt.Sprintf("%T does not implement ClaimStore, which MultiNode mode needs", store)}
	}
	return cs, nil
}
