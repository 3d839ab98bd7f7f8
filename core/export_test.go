package outbox

import (
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/internal/poll"
	"github.com/outboxkit/outbox/core/internal/purge"
	"github.com/outboxkit/outbox/core/storage"
)

// The parts behind [New], for this package's external tests only: they drive a
// dispatcher, a poller, a purger or a writer on their own, built as New builds them,
// their zero config fields filled by the functions New uses (config.go). Tests of other
// packages use the seam in outboxtest.
type (
	DispatcherConfig = dispatch.Config
	Poller           = poll.Poller
	PollerConfig     = poll.Config
	Purger           = purge.Purger
	PurgerConfig     = purge.Config
	WriterConfig     = writerConfig
	Registry         = registry
)

// Dispatcher is a dispatcher with the parts it works with.
type Dispatcher struct {
	*dispatch.Dispatcher
	q   *dispatch.Queues
	hot *dispatch.HotPath
	now func() time.Time
}

var NewRegistry = newRegistry

// NewDispatcher builds a dispatcher of reg's listeners over store as New does, without
// orders (its store's keys are not moved on).
func NewDispatcher(store storage.Store, reg *Registry, cfg DispatcherConfig) (*Dispatcher, error) {
	cfg = withDispatchDefaults(cfg)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var routes dispatch.Routes
	if reg != nil {
		routes = reg
	}
	q := dispatch.NewQueues(cfg.HotQueueSize, cfg.ColdQueueSize, cfg.Workers, cfg.Metrics, cfg.Now, routes)
	var release *dispatch.Releaser
	if cfg.ClaimTTL > 0 {
		claims, err := dispatch.ClaimStoreOf(store, cfg.ClaimTTL)
		if err != nil {
			return nil, err
		}
		release = dispatch.NewReleaser(claims, q, dispatch.ReleaserConfig{StatusTimeout: cfg.StatusTimeout, Now: cfg.Now,
			Metrics: cfg.Metrics, Logger: cfg.Logger})
	}
	hot := dispatch.NewHotPath(q, release, dispatch.HotConfig{Now: cfg.Now, Metrics: cfg.Metrics, Logger: cfg.Logger})
	d, err := dispatch.New(store, routes, dispatch.Parts{Queues: q, Hot: hot, Release: release}, cfg)
	if err != nil {
		return nil, err
	}
	return &Dispatcher{Dispatcher: d, q: q, hot: hot, now: cfg.Now}, nil
}

// NewPurger builds a purger as New does.
func NewPurger(store storage.Store, cfg PurgerConfig) (*Purger, error) {
	return purge.New(store, withPurgeDefaults(cfg))
}

// NewPoller returns a poller feeding d, as New builds it (without orders).
func NewPoller(store storage.Store, d *Dispatcher, cfg PollerConfig) (*Poller, error) {
	var q *dispatch.Queues
	var release *dispatch.Releaser
	if d != nil {
		q, release = d.q, d.hot.Releaser()
	}
	cfg = withPollDefaults(cfg)
	if cfg.ClaimTTL <= 0 {
		release = nil
	}
	return poll.New(store, q, nil, release, cfg)
}

// NewWriter returns a writer; a hot-path hook among cfg.Hooks makes it pre-claim for
// that hook's queue, as New wires it.
func NewWriter(store storage.Store, cfg WriterConfig) (*Writer, error) {
	for _, h := range cfg.Hooks {
		if hp, ok := h.(hotHook); ok {
			cfg.hot = hp.h.Queues()
		}
	}
	return newWriter(store, cfg)
}

// WriterHook returns the hook that feeds d's hot path.
func (d *Dispatcher) WriterHook() WriterHook { return hotHook{h: d.hot} }

// EnqueueHot hands a committed event to the hot queue; false when it refuses it.
func (d *Dispatcher) EnqueueHot(e Event) bool {
	return d.q.Enqueue(e, PathHot, d.now(), time.Time{}) == dispatch.EnqueueOK
}

// BeginRead opens a read (see Queues.BeginRead) and returns the function that closes it:
// tests that hand stale copies to EnqueueCold hold one open from before the delivery,
// as the poller holds one while it enqueues a batch.
func (d *Dispatcher) BeginRead() (end func()) {
	_, end = d.q.BeginRead()
	return end
}

// TombstoneCount returns the number of tombstones the dispatcher keeps.
func (d *Dispatcher) TombstoneCount() int { return d.q.TombstoneCount() }

// EnqueueCold hands a pending event to the cold queue; false when it refuses it.
func (d *Dispatcher) EnqueueCold(e Event) bool {
	return d.q.Enqueue(e, PathCold, d.now(), time.Time{}) == dispatch.EnqueueOK
}

// ColdCapacity returns how many rows the poller's next read may take now.
func (d *Dispatcher) ColdCapacity() int { return d.q.ReadPlan().Budget }

// QueueDepths returns the number of events waiting in the hot and cold queues.
func (d *Dispatcher) QueueDepths() (hot, cold int) { return d.q.Depths() }

// Registry returns o's listener registry.
func (o *Outbox) Registry() *Registry { return o.registry }

// Poller and Purger return o's parts (nil when o runs none).
func (o *Outbox) Poller() *Poller { return o.poller }
func (o *Outbox) Purger() *Purger { return o.purger }

var (
	NewClaimToken  = ids.NewClaimToken
	ClaimOwner     = ids.ClaimOwner
	ValidateNodeID = ids.ValidateNodeID
	DefaultNodeID  = ids.DefaultNodeID
)

const MaxNodeIDLen = ids.MaxNodeIDLen

const DefaultQueryTimeout = defaultQueryTimeout
const SQLiteBusyTimeoutMillis = sqliteBusyTimeoutMillis
