package outbox

import (
	"time"

	"github.com/outboxkit/outbox/core/storage"
)

// The components behind [New], under their former exported names, for this package's
// external tests only: they drive a dispatcher, a poller, a purger or a writer on their
// own. Tests of other packages use the seam in outboxtest.
type (
	Dispatcher       = dispatcher
	DispatcherConfig = dispatcherConfig
	Poller           = poller
	PollerConfig     = pollerConfig
	Purger           = purger
	PurgerConfig     = purgerConfig
	WriterConfig     = writerConfig
	Registry         = registry
)

var (
	NewDispatcher = newDispatcher
	NewPurger     = newPurger
	NewRegistry   = newRegistry
)

// NewPoller returns a poller feeding d.
func NewPoller(store storage.Store, d *Dispatcher, cfg PollerConfig) (*Poller, error) {
	var q *queues
	if d != nil {
		q = d.q
	}
	return newPoller(store, q, cfg)
}

// NewWriter returns a writer; a hot-path hook among cfg.Hooks makes it pre-claim for
// that hook's queue, as New wires it.
func NewWriter(store storage.Store, cfg WriterConfig) (*Writer, error) {
	for _, h := range cfg.Hooks {
		if hp, ok := h.(*hotPath); ok {
			cfg.hot = hp.q
		}
	}
	return newWriter(store, cfg)
}

// WriterHook returns the hook that feeds d's hot path.
func (d *dispatcher) WriterHook() WriterHook { return d.hotPath() }

// EnqueueHot hands a committed event to the hot queue; false when it refuses it.
func (d *dispatcher) EnqueueHot(e Event) bool {
	return d.q.enqueue(e, PathHot, d.cfg.Now(), time.Time{}) == enqueueOK
}

// BeginRead opens a read (see queues.beginRead) and returns the function that closes it:
// tests that hand stale copies to EnqueueCold hold one open from before the delivery,
// as the poller holds one while it enqueues a batch.
func (d *dispatcher) BeginRead() (end func()) {
	_, end = d.q.beginRead()
	return end
}

// TombstoneCount returns the number of tombstones the dispatcher keeps.
func (d *dispatcher) TombstoneCount() int { return d.q.tombstoneCount() }

// EnqueueCold hands a pending event to the cold queue; false when it refuses it.
func (d *dispatcher) EnqueueCold(e Event) bool {
	return d.q.enqueue(e, PathCold, d.cfg.Now(), time.Time{}) == enqueueOK
}

// ColdCapacity returns how many more events the cold queue can take now.
func (d *dispatcher) ColdCapacity() int { return d.q.coldCapacity() }

// QueueDepths returns the number of events waiting in the hot and cold queues.
func (d *dispatcher) QueueDepths() (hot, cold int) { return d.q.depths() }

// Registry returns o's listener registry.
func (o *Outbox) Registry() *Registry { return o.registry }

// Dispatcher, Poller and Purger return o's components (nil when o runs none).
func (o *Outbox) Dispatcher() *Dispatcher { return o.dispatcher }
func (o *Outbox) Poller() *Poller         { return o.poller }
func (o *Outbox) Purger() *Purger         { return o.purger }

var (
	NewClaimToken  = newClaimToken
	ClaimOwner     = claimOwner
	ValidateNodeID = validateNodeID
	DefaultNodeID  = defaultNodeID
)

const MaxNodeIDLen = maxNodeIDLen

const DefaultQueryTimeout = defaultQueryTimeout
const SQLiteBusyTimeoutMillis = sqliteBusyTimeoutMillis
