package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/internal/lease"
	"github.com/outboxkit/outbox/core/internal/notify"
	"github.com/outboxkit/outbox/core/internal/order"
	"github.com/outboxkit/outbox/core/internal/poll"
	"github.com/outboxkit/outbox/core/internal/purge"
	"github.com/outboxkit/outbox/core/internal/sqlstore"
	"github.com/outboxkit/outbox/core/internal/startstop"
	"github.com/outboxkit/outbox/core/storage"
)

// Mode selects which parts of the outbox run (docs/modes.md).
type Mode int

// The modes of an [Outbox]. Never run two dispatching modes, or two SingleNode processes,
// on one table: the dispatch lease ([Outbox.Start]) makes such a process stand by.
const (
	// SingleNode runs the hot path and a poller that does not claim rows: one process
	// dispatches from the table. It is the default.
	SingleNode Mode = iota
	// MultiNode runs the hot path and a claiming poller, so that several processes share
	// one table (docs/multinode.md). It requires [Config.ClaimTTL].
	MultiNode
	// WriterOnly writes events and runs nothing else but the purge: change data capture
	// reads the table, or another process dispatches.
	WriterOnly Mode = 3
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case SingleNode:
		return "SingleNode"
	case MultiNode:
		return "MultiNode"
	case WriterOnly:
		return "WriterOnly"
	default:
		return fmt.Sprintf("Mode(%d)", int(m))
	}
}

// Config configures an [Outbox] (docs/configuration.md). Only Dialect is required; a
// zero field takes its default.
type Config struct {
	// Mode selects what runs. Defaults to SingleNode.
	Mode Mode
	// Dialect is db's SQL dialect: Postgres, MySQL or SQLite. Required unless Store is set.
	Dialect Dialect
	// Table is the outbox table, optionally schema-qualified. Defaults to DefaultTable.
	Table string
	// Store replaces the SQL store. Defaults to NewSQLStore(db, Dialect, …).
	Store storage.Store
	// Workers is the number of concurrent deliveries. Defaults to DefaultWorkers.
	Workers int
	// HotQueueSize bounds the events handed over after commit (-1: no hot path); DefaultHotQueueSize.
	HotQueueSize int
	// ColdQueueSize bounds the events the poller hands over. Defaults to DefaultColdQueueSize.
	ColdQueueSize int
	// MaxAttempts is the failed attempts that make an event DEAD (-1: never); DefaultMaxAttempts.
	MaxAttempts int
	// Retry computes the delay before a retry. Defaults to ExponentialBackoff's defaults.
	Retry RetryPolicy
	// ListenerTimeout bounds one attempt (-1: none, not in MultiNode). Defaults to DefaultListenerTimeout.
	ListenerTimeout time.Duration
	// StatusTimeout bounds each outcome statement (-1: none, not in MultiNode); DefaultStatusTimeout.
	StatusTimeout time.Duration
	// DoneBatchWindow is how long DONE outcomes wait to share a statement (-1: no wait); DefaultDoneBatchWindow.
	DoneBatchWindow time.Duration
	// Interceptors run around every delivery: Before in order, After in reverse.
	Interceptors []Interceptor
	// OnStuck runs on the worker (do not block) when an attempt outlives ListenerTimeout by 1 s.
	OnStuck func(e Event, running time.Duration)
	// PollInterval is the time between poller cycles (less at a high hot-path rate). Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// PollMaxInterval caps an idle poller's wait (-1: PollInterval); DefaultPollMaxInterval or more.
	PollMaxInterval time.Duration
	// Notifier wakes pollers across processes. Defaults to none.
	Notifier Notifier
	// PollBatchSize bounds the rows one poll query reads. Defaults to DefaultPollBatchSize.
	PollBatchSize int
	// SkipRecent leaves younger events to the hot path (-1: none). Defaults to DefaultSkipRecent.
	SkipRecent time.Duration
	// QueryTimeout bounds each statement on the outbox's own connection (-1: none); default 10 s.
	QueryTimeout time.Duration
	// ClaimTTL is how long a claim holds by the database clock, more than ListenerTimeout +
	// StatusTimeout: required in MultiNode mode, rejected in the others.
	ClaimTTL time.Duration
	// NodeID names this process in claim tokens (MultiNode only): 1 to 96 bytes of printable
	// ASCII but space and '/'. Defaults to "<host>-<pid>-<random>".
	NodeID string
	// LeaseTTL is the dispatch lease's life unrenewed (database clock, ≥ 1 s, -1: none); DefaultLeaseTTL.
	LeaseTTL time.Duration
	// OrderByAggregate orders every event with an AggregateID by AggregateType + ":" + AggregateID.
	OrderByAggregate bool
	// DeadKeyPolicy is what a key does while one of its events is DEAD. Defaults to DeadKeyWaits.
	DeadKeyPolicy DeadKeyPolicy
	// Now is the application clock, for tests; claims never use it. Defaults to time.Now.
	Now func() time.Time
	// PurgeInterval is the time between purges (-1: never). Defaults to DefaultPurgeInterval.
	PurgeInterval time.Duration
	// PurgeRetention is how long rows are kept once finished. Defaults to DefaultRetention.
	PurgeRetention time.Duration
	// DeleteDone deletes a row when its delivery succeeds (its ID is then free), keeping no DONE.
	DeleteDone bool
	// PurgeDeadRetention, when set, is how long DEAD, FALLBACK and DISCARDED rows are kept instead.
	PurgeDeadRetention time.Duration
	// PurgeUndeliveredAfter (WriterOnly mode only) makes the purge also delete the NEW, RETRY and
	// WAITING rows created longer ago (docs/modes.md#change-data-capture). Defaults to never.
	PurgeUndeliveredAfter time.Duration
	// PurgeBatchSize bounds the rows of one purge statement. Defaults to DefaultPurgeBatchSize.
	PurgeBatchSize int
	// Codec encodes payloads that are not JSON text already. Defaults to JSONCodec.
	Codec Codec
	// MaxPayloadBytes bounds an encoded payload. Defaults to DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// WriterHooks run around every write, before the dispatcher's own hook.
	WriterHooks []WriterHook
	// Logger receives operational logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Metrics receives measurements. Defaults to NopMetrics.
	Metrics Metrics
}

// Outbox is the outbox over one table. Create it with New, then Start it.
type Outbox struct {
	mode       Mode
	store      storage.Store
	registry   *registry
	writer     *Writer
	events     *Events
	queues     *dispatch.Queues     // nil in WriterOnly mode
	dispatcher *dispatch.Dispatcher // nil in WriterOnly mode
	poller     *poll.Poller         // nil in WriterOnly mode
	purger     *purge.Purger        // nil when purging is disabled
	lease      *lease.Leased        // runs the dispatcher and the poller; nil in WriterOnly mode
	notifier   *notify.Notifier     // nil without Config.Notifier
	logger     *slog.Logger
	// workers, pollInterval and purgeUndelivered are the dispatcher's, the poller's and
	// the purger's, for Start's log.
	workers          int
	pollInterval     time.Duration
	purgeUndelivered time.Duration
	// attemptBound, in MultiNode mode, is what a listener's timeout must stay below:
	// ClaimTTL - StatusTimeout, so that a claim outlives an attempt. 0 otherwise.
	attemptBound time.Duration

	// sem serialises Start and Stop; a channel, so that a caller waiting for it gives
	// up when its context ends (a Stop never waits past its deadline for another).
	sem     chan struct{}
	started []startstop.Service // what Start started, in order; guarded by sem
}

// New builds an Outbox over db, or returns a [*ConfigError] naming the first bad field of
// cfg. Nothing runs until [Outbox.Start]. It builds each part once (docs/ARCHITECTURE.md).
func New(db *sql.DB, cfg Config) (*Outbox, error) {
	if err := cfg.validate(db); err != nil {
		return nil, err
	}
	logger := cfg.logger()
	store := cfg.Store
	if store == nil {
		s, err := NewSQLStore(db, cfg.Dialect, SQLStoreConfig{Table: cfg.Table, QueryTimeout: cfg.QueryTimeout})
		if err != nil {
			return nil, err
		}
		store = s
	}
	o := &Outbox{
		mode:     cfg.Mode,
		store:    store,
		registry: newRegistry(),
		sem:      make(chan struct{}, 1),
		logger:   logger.With(slog.String("component", "outbox")),
	}
	dispatching, multi := cfg.Mode != WriterOnly, cfg.Mode == MultiNode
	nodeID := cfg.nodeID()
	o.attemptBound = cfg.attemptBound()
	var dc dispatch.Config
	if dispatching {
		dc = cfg.dispatchConfig()
		if err := dc.Validate(); err != nil {
			return nil, err
		}
		o.queues = dispatch.NewQueues(dc.HotQueueSize, dc.ColdQueueSize, dc.Workers, dc.Metrics, dc.Now, o.registry)
		o.workers = dc.Workers
	}
	var signal func() // tells other processes (the Notifier); nil without one
	if cfg.Notifier != nil {
		var wake func() // nothing listens in WriterOnly mode
		if o.queues != nil {
			wake = o.queues.SignalCatchUp
		}
		o.notifier = notify.New(cfg.Notifier, wake, cfg.queryTimeout(), logger)
		signal = o.notifier.Signal
	}

	var (
		hot     *dispatch.HotPath
		release *dispatch.Releaser
	)
	if dispatching {
		hc := dispatch.HotConfig{Now: dc.Now, Metrics: dc.Metrics, Logger: logger,
			WakeHolder: signal} // standing by: the lease holder delivers
		if multi {
			claims, err := dispatch.ClaimStoreOf(store, cfg.ClaimTTL)
			if err != nil {
				return nil, err
			}
			release = dispatch.NewReleaser(claims, o.queues, dispatch.ReleaserConfig{StatusTimeout: dc.StatusTimeout,
				Now: dc.Now, Metrics: dc.Metrics, Logger: logger, NotifyOthers: signal})
			hc.Notify = signal // other nodes may take what this one dropped
		}
		hot = dispatch.NewHotPath(o.queues, release, hc)
	}

	oc := order.Config{DeadBlocks: cfg.DeadKeyPolicy == DeadKeyWaits, Timeout: cfg.queryTimeout(), Logger: o.logger,
		Wake: func() {
			if o.queues != nil {
				o.queues.SignalCatchUp()
			}
			if signal != nil && cfg.Mode != SingleNode {
				signal() // another process may deliver it
			}
		}}
	if hot != nil {
		oc.Hot, oc.Now = hot, dc.Now
		if multi {
			oc.ClaimTTL, oc.NodeID = cfg.ClaimTTL, nodeID
		}
	}
	orders := order.New(store, oc) // nil when the store keeps no order

	hooks := append([]WriterHook(nil), cfg.WriterHooks...)
	if dispatching {
		var ordersOf dispatch.Orders // a nil *order.Orderer must stay a nil interface
		if orders != nil {
			ordersOf = orders
		}
		d, err := dispatch.New(store, o.registry, dispatch.Parts{Queues: o.queues, Hot: hot, Release: release, Orders: ordersOf}, dc)
		if err != nil {
			return nil, err
		}
		pc := cfg.pollConfig(nodeID)
		p, err := poll.New(store, o.queues, orders, release, pc)
		if err != nil {
			return nil, err
		}
		o.dispatcher, o.poller, o.pollInterval = d, p, pc.Interval
		// The pause set is read before the dispatcher takes any event (poll.PauseReader).
		lc := lease.Config{Parts: []startstop.Service{p.PauseReader(), d, p}, Hot: hot, Shared: multi,
			TTL: cfg.leaseTTL(), NodeID: nodeID, Logger: logger}
		if ls, ok := store.(storage.LeaseStore); ok && cfg.LeaseTTL != -1 {
			lc.Store = ls
		}
		o.lease = lease.New(lc)
		hooks = append(hooks, hotHook{h: hot})
	} else if o.notifier != nil {
		now := cfg.Now
		if now == nil {
			now = time.Now
		}
		hooks = append(hooks, notifyHook{n: o.notifier, now: now})
	}

	o.events = newEvents(store, func() { // a replay: wake the pollers
		// Replayed ordered events are WAITING: the woken poller's cycle sweeps first; a
		// process without one (WriterOnly) sweeps here.
		if o.poller != nil {
			o.poller.SweepNow()
		} else if _, err := orders.Sweep(context.Background()); err != nil {
			o.logger.LogAttrs(context.Background(), slog.LevelWarn, "promote after replay failed; a dispatcher's sweep moves the keys on",
				slog.String("error", err.Error()))
		}
		if o.queues != nil {
			o.queues.SignalCatchUp()
		}
		if signal != nil {
			signal()
		}
	})
	o.events.loads = o.subscriptionLoads
	o.events.afterPause = func(ctx context.Context) {
		if o.poller != nil {
			_ = o.poller.RefreshPaused(ctx) // logged; the poll cycles read it again
		}
		if o.queues != nil {
			o.queues.SignalCatchUp() // a resume: its events are read at once
		}
		if signal != nil {
			signal()
		}
	}
	if cfg.PurgeInterval != -1 {
		pg, err := purge.New(store, cfg.purgeConfig())
		if err != nil {
			return nil, err
		}
		o.purger, o.purgeUndelivered = pg, cfg.PurgeUndeliveredAfter
	}
	w, err := newWriter(store, writerConfig{
		MaxPayloadBytes:  cfg.MaxPayloadBytes,
		Codec:            cfg.Codec,
		Hooks:            hooks,
		Logger:           logger,
		Now:              cfg.Now,
		ClaimTTL:         cfg.preClaimTTL(),
		NodeID:           nodeID,
		hot:              o.queues,
		OrderByAggregate: cfg.OrderByAggregate,
		orders:           orders,
	})
	if err != nil {
		return nil, err
	}
	o.writer = w
	return o, nil
}

func (c Config) validate(db *sql.DB) error {
	switch c.Mode {
	case SingleNode, WriterOnly:
		if c.Mode == WriterOnly && c.LeaseTTL != 0 {
			return &ConfigError{Field: "LeaseTTL", Reason: "WriterOnly mode delivers nothing and holds no lease; leave it zero"}
		}
		if c.ClaimTTL != 0 {
			return &ConfigError{Field: "ClaimTTL", Reason: "only MultiNode mode claims rows; leave it zero in " + c.Mode.String() + " mode"}
		}
		if c.NodeID != "" {
			return &ConfigError{Field: "NodeID", Reason: "only MultiNode mode claims rows; leave it empty in " + c.Mode.String() + " mode"}
		}
	case MultiNode:
		if err := c.validateMultiNode(); err != nil {
			return err
		}
	default:
		return &ConfigError{Field: "Mode", Reason: fmt.Sprintf("unknown mode %d", int(c.Mode))}
	}
	if c.Store == nil {
		if db == nil {
			return &ConfigError{Field: "DB", Reason: "*sql.DB is nil"}
		}
		if c.Dialect == nil {
			return &ConfigError{Field: "Dialect", Reason: "is required (outbox.Postgres, outbox.MySQL or outbox.SQLite)"}
		}
	}
	if c.LeaseTTL != 0 && c.LeaseTTL != -1 && c.LeaseTTL < lease.MinTTL {
		return &ConfigError{Field: "LeaseTTL", Reason: fmt.Sprintf("must be at least %s, 0 for the default or -1 for no lease, got %s", lease.MinTTL, c.LeaseTTL)}
	}
	if c.DeadKeyPolicy != DeadKeyWaits && c.DeadKeyPolicy != DeadKeySkips {
		return &ConfigError{Field: "DeadKeyPolicy", Reason: fmt.Sprintf("unknown policy %d", int(c.DeadKeyPolicy))}
	}
	if c.QueryTimeout < 0 && c.QueryTimeout != -1 {
		return &ConfigError{Field: "QueryTimeout", Reason: fmt.Sprintf("must be positive, 0 for the default or -1 for none, got %s", c.QueryTimeout)}
	}
	if c.PurgeInterval < -1 {
		return &ConfigError{Field: "PurgeInterval", Reason: "must be positive, 0 for the default or -1 to disable"}
	}
	if err := c.validatePurgeUndelivered(); err != nil {
		return err
	}
	if c.DoneBatchWindow < -1 {
		return &ConfigError{Field: "DoneBatchWindow", Reason: fmt.Sprintf("must be positive, 0 for the default or -1 for none, got %s", c.DoneBatchWindow)}
	}
	return nil
}

// validatePurgeUndelivered checks PurgeUndeliveredAfter: a process that dispatches must
// never delete what it has to deliver, and a retention without a purge does nothing.
func (c Config) validatePurgeUndelivered() error {
	switch d := c.PurgeUndeliveredAfter; {
	case d == 0:
		return nil
	case d < 0:
		return &ConfigError{Field: "PurgeUndeliveredAfter", Reason: fmt.Sprintf("must be positive, or 0 to keep undelivered rows, got %s", d)}
	case c.Mode != WriterOnly:
		return &ConfigError{Field: "PurgeUndeliveredAfter", Reason: "only WriterOnly mode deletes undelivered rows: a " +
			c.Mode.String() + " process must deliver them; leave it zero"}
	case c.PurgeInterval == -1:
		return &ConfigError{Field: "PurgeUndeliveredAfter", Reason: "PurgeInterval is -1 (no purge), so nothing would delete them; leave it zero or enable the purge"}
	}
	return nil
}

// validateMultiNode checks the claim settings of MultiNode mode.
func (c Config) validateMultiNode() error {
	if c.ClaimTTL <= 0 {
		return &ConfigError{Field: "ClaimTTL", Reason: fmt.Sprintf(
			"MultiNode mode requires a positive claim TTL (a few times ListenerTimeout + StatusTimeout), got %s", c.ClaimTTL)}
	}
	if c.ListenerTimeout == -1 {
		return &ConfigError{Field: "ListenerTimeout", Reason: "MultiNode mode needs a listener timeout below ClaimTTL; -1 (none) is not allowed"}
	}
	if c.StatusTimeout == -1 {
		return &ConfigError{Field: "StatusTimeout", Reason: "MultiNode mode needs a status timeout below ClaimTTL; -1 (none) is not allowed"}
	}
	lt := cmp.Or(c.ListenerTimeout, DefaultListenerTimeout)
	st := cmp.Or(c.StatusTimeout, DefaultStatusTimeout)
	if lt > 0 && st > 0 && c.ClaimTTL <= lt+st {
		return &ConfigError{Field: "ClaimTTL", Reason: fmt.Sprintf(
			"%s must exceed ListenerTimeout + StatusTimeout (%s + %s): a claim must outlive an attempt", c.ClaimTTL, lt, st)}
	}
	if c.NodeID != "" {
		return ids.ValidateNodeID(c.NodeID)
	}
	return nil
}

// Register is [Outbox.Subscribe] of l on a route, named "aggregateType/eventType".
func (o *Outbox) Register(aggregateType, eventType string, l Listener) error {
	return o.Subscribe(Subscription{AggregateType: aggregateType, EventType: eventType, Listener: l})
}

// Subscribe adds a listener with its route and policy. Its error wraps
// ErrDuplicateListener when the name is taken, or is a *[ConfigError].
func (o *Outbox) Subscribe(s Subscription) error {
	if o.attemptBound > 0 && (s.Timeout == -1 || s.Timeout >= o.attemptBound) {
		return &ConfigError{Field: "Subscription.Timeout", Reason: fmt.Sprintf(
			"listener %s: %s in MultiNode mode: a timeout must stay below ClaimTTL - StatusTimeout (%s)", cmp.Or(s.Name, s.EventType), s.Timeout, o.attemptBound)}
	}
	return o.registry.Subscribe(s)
}

// Writer returns the writer business code uses inside its transactions.
func (o *Outbox) Writer() *Writer { return o.writer }

// subscriptionLoads returns the load of every registered subscription, by name: the
// queues' for those that had events here, zero for the others.
func (o *Outbox) subscriptionLoads() []SubscriptionLoad {
	var queued []SubscriptionLoad
	if o.queues != nil {
		queued = o.queues.Loads()
	}
	out := o.registry.loads()
	var paused []string
	if o.queues != nil {
		paused = o.queues.Paused()
	}
	for i := range out {
		_, out[i].Paused = slices.BinarySearch(paused, out[i].Listener)
		if j, ok := slices.BinarySearchFunc(queued, out[i].Listener, func(l SubscriptionLoad, name string) int {
			return strings.Compare(l.Listener, name)
		}); ok {
			out[i] = queued[j]
		}
	}
	return out
}

// Events returns the inspection of the table's events.
func (o *Outbox) Events() *Events { return o.events }

// Store returns the store.
func (o *Outbox) Store() storage.Store { return o.store }

// Mode returns the configured mode.
func (o *Outbox) Mode() Mode { return o.mode }

// Dispatching reports whether this process delivers events now ([Outbox.Start]).
func (o *Outbox) Dispatching() bool { return o.lease != nil && o.lease.Dispatching() }

// Start checks the connection and the table, then starts the dispatcher, the poller and
// the purger. It does not block; ctx bounds only the start-up. If a part fails, the parts
// started are stopped and the error returned; a second Start does nothing. When another
// process holds the table's dispatch lease, this one stands by until it is free
// ([Outbox.Dispatching], docs/modes.md).
func (o *Outbox) Start(ctx context.Context) error {
	if err := o.lock(ctx); err != nil {
		return fmt.Errorf("outbox: start: %w", err)
	}
	defer o.unlock()
	if o.started != nil {
		return nil
	}
	if s, ok := o.store.(*sqlstore.Store); ok {
		if err := s.CheckConnectionFor(ctx, o.writer.maxPayload); err != nil {
			return fmt.Errorf("outbox: start: connection check: %w", err)
		}
		if n := s.DB().Stats().MaxOpenConnections; s.Dialect() == sqlstore.SQLite && n != 1 {
			o.logger.WarnContext(ctx, "SQLite through a pool of more than one connection: connections wait for SQLite's "+
				"single write lock in its busy handler, which is not fair, so the outbox's status updates can starve behind "+
				"busy writers and delivery falls behind; call db.SetMaxOpenConns(1) so that writers queue in Go",
				slog.Int("max_open_conns", n))
		}
	} else if c, ok := o.store.(storage.ConnectionChecker); ok {
		if err := c.CheckConnection(ctx); err != nil {
			return fmt.Errorf("outbox: start: connection check: %w", err)
		}
	}
	if _, err := o.store.Get(ctx, "outbox-start-probe"); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("outbox: start: table check: %w", err)
	}
	var parts []startstop.Service
	if o.notifier != nil {
		parts = append(parts, o.notifier) // stopped last: it sends the last writes' notification
	}
	if o.lease != nil {
		parts = append(parts, o.lease) // the dispatcher and the poller, while this process holds the lease
	}
	if o.purger != nil {
		parts = append(parts, o.purger)
	}
	started := make([]startstop.Service, 0, len(parts))
	for _, s := range parts {
		if err := s.Start(ctx); err != nil {
			startstop.StopAll(context.WithoutCancel(ctx), started)
			return fmt.Errorf("outbox: start: %w", err)
		}
		started = append(started, s)
	}
	o.started = started
	// One INFO line for the start and one for the stop; the parts log theirs at DEBUG.
	attrs := []slog.Attr{slog.String("mode", o.mode.String())}
	if o.dispatcher != nil {
		attrs = append(attrs, slog.Int("workers", o.workers),
			slog.Duration("poll_interval", o.pollInterval), slog.Bool("delivering", o.lease.Dispatching()))
	}
	attrs = append(attrs, slog.Bool("purge", o.purger != nil))
	if o.purgeUndelivered > 0 {
		attrs = append(attrs, slog.Duration("purge_undelivered_after", o.purgeUndelivered))
	}
	o.logger.LogAttrs(ctx, slog.LevelInfo, "outbox started", attrs...)
	return nil
}

// Stop stops the purger and the poller, then drains the dispatcher within ctx; the rest
// stay in the table, and stuck attempts are not waited for. If ctx ends first, it abandons
// running attempts (rows stay pending), returns ctx.Err() and leaves the dispatch lease to
// expire; else it returns nil and releases it. Stop before Start, or twice, does nothing.
func (o *Outbox) Stop(ctx context.Context) error {
	if err := o.lock(ctx); err != nil {
		return err
	}
	defer o.unlock()
	if o.started == nil {
		return nil
	}
	err := startstop.StopAll(ctx, o.started)
	o.started = nil
	o.logger.InfoContext(ctx, "outbox stopped", slog.String("mode", o.mode.String()))
	return err
}

// lock takes sem, or returns ctx's error when ctx ends first.
func (o *Outbox) lock(ctx context.Context) error {
	select {
	case o.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case o.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *Outbox) unlock() { <-o.sem }
