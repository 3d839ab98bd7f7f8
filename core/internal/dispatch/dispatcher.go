package dispatch

import (
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

// Config configures a [Dispatcher]. Every field holds its final value: package outbox
// translates its Config, defaults included, in one place (core/config.go), and New only
// validates.
type Config struct {
	// Workers is the number of concurrent deliveries.
	Workers int
	// HotQueueSize bounds the events handed over in-process right after commit. When
	// the queue is full the event is left for the poller; a write never blocks. -1
	// disables the hot path: every event is delivered by the poller.
	HotQueueSize int
	// ColdQueueSize bounds the events the poller has queued. The poller never reads
	// more rows than the queue can take.
	ColdQueueSize int
	// MaxAttempts is the number of failed attempts after which an event is DEAD. 1 makes
	// the first failure final; -1 retries forever.
	MaxAttempts int
	// Retry computes the delay before the next attempt after a failure. Required.
	Retry RetryPolicy
	// ListenerTimeout bounds one delivery attempt: the context given to the
	// interceptors and the listener is cancelled when it passes, and the attempt then
	// counts as failed if the listener returns an error. -1 means no timeout.
	ListenerTimeout time.Duration
	// StatusTimeout bounds each statement that records an outcome (MarkDone,
	// Reschedule, MarkDead). -1 means no timeout.
	StatusTimeout time.Duration
	// DoneBatchWindow is how long the Dispatcher may wait, once a DONE outcome is ready
	// to be written, for more DONE outcomes to write with the same statement. DONE
	// outcomes are written in batches anyway (every outcome that arrives while the
	// previous batch is written joins the next one); a window makes the batches larger
	// under load, so the database spends less time per event, at the price of DONE rows
	// appearing up to this much later. Listeners are not delayed, and Stop still writes
	// every outcome before it returns. 0 writes a batch as soon as the previous one is
	// written.
	DoneBatchWindow time.Duration
	// DeleteDone deletes the rows of delivered events instead of marking them DONE.
	DeleteDone bool
	// OnStuck is called when an attempt is declared stuck; see stuck.go.
	OnStuck func(e Event, running time.Duration)
	// Interceptors wrap every delivery attempt; see [Interceptor].
	Interceptors []Interceptor
	// Logger receives operational logs, with component=dispatcher. Required.
	Logger *slog.Logger
	// Metrics receives measurements. Required.
	Metrics Metrics
	// Now returns the current time. Required.
	Now func() time.Time
	// ClaimTTL is the length of the claims this node makes in MultiNode mode (its
	// writer's pre-claims and its poller's claims). A worker about to deliver a claimed
	// event with less than ListenerTimeout + StatusTimeout left renews the claim by
	// ClaimTTL first ([storage.ClaimStore.RenewClaim]). 0 (not MultiNode) never renews.
	ClaimTTL time.Duration
}

// Validate reports the first invalid field of c as a [*ConfigError].
func (c Config) Validate() error {
	switch {
	case c.Retry == nil || c.Logger == nil || c.Metrics == nil || c.Now == nil:
		return &ConfigError{Field: "Dispatcher", Reason: "Retry, Logger, Metrics and Now are required"}
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
// ([HotPath], right after commit, no database read) and the cold path
// (package poll, from the table). Workers take two hot events for every cold one when both
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
// while such a read is open, and never past tombstoneTTL (see Queues.BeginRead).
//
// No database connection is held while a listener runs: the outcome is written after
// it returns, with its own statement bounded by StatusTimeout. If that statement fails,
// the error is logged and the row stays pending for the poller. DONE outcomes, the
// common case, are written in batches: the worker hands the event to one recorder and
// takes its next event, and the recorder marks every event handed to it while it wrote
// the previous batch DONE with one statement ([storage.Store.MarkDone] with
// many IDs), so a busy Dispatcher sends one UPDATE for many events and an idle one
// sends it at once (claimed events, in MultiNode mode, with a statement that fences
// each row by its own claim token). An event counts as in flight, and is reported to
// [Metrics.Dispatched], only once its batch is written; a batch whose statement fails
// is written again event by event, and Stop returns only after every DONE outcome
// handed over was written.
//
// # Claims
//
// In MultiNode mode an event arrives claimed: Event.LockedBy holds the claim token
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
type Dispatcher struct {
	store  storage.Store
	claims storage.ClaimStore // the store's claims; nil unless ClaimTTL is set
	routes Routes
	cfg    Config
	log    *slog.Logger
	runner *startstop.Runner

	q   *Queues
	hot *HotPath // the hot path, which fan-out deliveries take too
	// release gives back the claims of events this node will not deliver (MultiNode);
	// nil otherwise.
	release *Releaser
	// orders moves a key on once one of its ordered events is finished; nil when the
	// store keeps no order.
	orders Orders
	// stuck counts the attempts declared stuck whose listener has not returned; see
	// stuck.go.
	stuck atomic.Int64
}

// Parts are what a Dispatcher works with, built before it: the queues it shares with
// the hot path and the poller, the hot path, the releaser of claims (MultiNode, else
// nil), and the orders (nil when the store keeps no order).
type Parts struct {
	Queues  *Queues
	Hot     *HotPath
	Release *Releaser
	Orders  Orders
}

// New returns a stopped Dispatcher that delivers the events of q from store to the
// routes. It returns a [*ConfigError] when store, routes or a part is missing or a
// config value is invalid.
func New(store storage.Store, routes Routes, parts Parts, cfg Config) (*Dispatcher, error) {
	switch {
	case store == nil:
		return nil, &ConfigError{Field: "Store", Reason: "is nil"}
	case routes == nil:
		return nil, &ConfigError{Field: "Registry", Reason: "is nil"}
	case parts.Queues == nil || parts.Hot == nil:
		return nil, &ConfigError{Field: "Dispatcher", Reason: "the queues and the hot path are required"}
	case (parts.Release != nil) != (cfg.ClaimTTL > 0):
		return nil, &ConfigError{Field: "Dispatcher", Reason: "a releaser of claims goes with a ClaimTTL"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	claims, err := ClaimStoreOf(store, cfg.ClaimTTL)
	if err != nil {
		return nil, err
	}
	cfg.Interceptors = append([]Interceptor(nil), cfg.Interceptors...)
	return &Dispatcher{
		store:   store,
		claims:  claims,
		routes:  routes,
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String("component", "dispatcher")),
		runner:  startstop.New(),
		q:       parts.Queues,
		hot:     parts.Hot,
		release: parts.Release,
		orders:  parts.Orders,
	}, nil
}

// Start starts the workers and returns at once. The workers run until [Dispatcher.Stop]
// with a context that keeps ctx's values but not its deadline or cancellation. Starting
// a running Dispatcher does nothing; a stopped one can be started again. Start returns
// ctx.Err() only when ctx expires while a concurrent Stop is in progress.
func (d *Dispatcher) Start(ctx context.Context) error {
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
		if d.release != nil {
			r.Go(func() { d.release.runReturns(r) })
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

// Stop stops the Dispatcher gracefully: it refuses new events, lets the workers deliver
// every queued event and waits for them. If ctx expires first, Stop cancels the
// contexts of running listeners, waits for the workers to return and returns ctx.Err();
// the outcomes of the interrupted deliveries are not written and queued events are not
// delivered: their rows stay pending for the poller. Stop is idempotent, and a no-op
// before Start.
func (d *Dispatcher) Stop(ctx context.Context) error {
	stopped, err := d.runner.Stop(ctx, ErrStopped, startstop.StopHooks{
		CloseIntake: d.q.close,
		HardStop: func() {
			hot, cold := d.q.Depths()
			d.log.LogAttrs(ctx, slog.LevelWarn, "dispatcher stop deadline passed; cancelling running deliveries, queued events stay pending",
				slog.Int("hot_queued", hot), slog.Int("cold_queued", cold))
		},
		Cleanup: func() {
			if d.release != nil {
				d.release.hardStop(ctx, d.q.discard())
			} else {
				d.q.discard()
			}
		},
	})
	if stopped {
		d.log.LogAttrs(ctx, slog.LevelDebug, "dispatcher stopped")
	}
	return err
}

// ClaimStoreOf returns store's claims when claimTTL asks for them, or a [*ConfigError]
// when the store cannot claim.
func ClaimStoreOf(store storage.Store, claimTTL time.Duration) (storage.ClaimStore, error) {
	if claimTTL <= 0 {
		return nil, nil
	}
	cs, ok := store.(storage.ClaimStore)
	if !ok {
		return nil, &ConfigError{Field: "Store", Reason: fmt.Sprintf("%T does not implement ClaimStore, which MultiNode mode needs", store)}
	}
	return cs, nil
}
