package outbox

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/outboxkit/outbox/core/internal/dispatch"
	"github.com/outboxkit/outbox/core/internal/ids"
	"github.com/outboxkit/outbox/core/internal/poll"
	"github.com/outboxkit/outbox/core/internal/purge"
)

// DeadKeyPolicy is what a key's events do while one of them is DEAD.
type DeadKeyPolicy int

const (
	DeadKeyWaits DeadKeyPolicy = iota // the default: they wait until it is replayed or deleted
	DeadKeySkips                      // they move on; a replayed DEAD event goes next in line
)

// defaultQueryTimeout bounds each statement on the outbox's own connection.
const defaultQueryTimeout = 10 * time.Second

// The translation of Config into the configurations of the parts (packages dispatch,
// poll, purge): the one place where a zero field takes its default and -1 its meaning.
// The parts take their configurations as they are and only validate them. The
// with…Defaults functions fill a part's zero fields the same way for the tests that
// build one part alone (export_test.go).

func (c Config) logger() *slog.Logger { return cmp.Or(c.Logger, slog.Default()) }

func (c Config) metrics() Metrics {
	if c.Metrics == nil {
		return NopMetrics{}
	}
	return c.Metrics
}

func (c Config) queryTimeout() time.Duration { return cmp.Or(c.QueryTimeout, defaultQueryTimeout) }

// nodeID is this process's name in claim tokens: Config.NodeID or a fresh one in
// MultiNode mode, "" in the others.
func (c Config) nodeID() string {
	if c.Mode != MultiNode {
		return c.NodeID
	}
	return cmp.Or(c.NodeID, ids.DefaultNodeID())
}

// leaseTTL is the dispatch lease's TTL.
func (c Config) leaseTTL() time.Duration { return cmp.Or(c.LeaseTTL, DefaultLeaseTTL) }

// preClaimTTL is how long the writer pre-claims the events it hands to the hot path:
// ClaimTTL in MultiNode mode with a hot path, else 0 (no pre-claim).
func (c Config) preClaimTTL() time.Duration {
	if c.Mode != MultiNode || c.HotQueueSize == -1 {
		return 0
	}
	return c.ClaimTTL
}

// attemptBound is what a listener's timeout must stay below in MultiNode mode,
// ClaimTTL - StatusTimeout, so that a claim outlives an attempt; 0 in the other modes.
func (c Config) attemptBound() time.Duration {
	if c.Mode != MultiNode {
		return 0
	}
	return c.ClaimTTL - cmp.Or(c.StatusTimeout, DefaultStatusTimeout)
}

// dispatchConfig is the dispatcher's configuration.
func (c Config) dispatchConfig() dispatch.Config {
	dc := dispatch.Config{
		Workers:         c.Workers,
		HotQueueSize:    c.HotQueueSize,
		ColdQueueSize:   c.ColdQueueSize,
		MaxAttempts:     c.MaxAttempts,
		Retry:           c.Retry,
		ListenerTimeout: c.ListenerTimeout,
		StatusTimeout:   c.StatusTimeout,
		DoneBatchWindow: DefaultDoneBatchWindow,
		DeleteDone:      c.DeleteDone,
		Interceptors:    c.Interceptors,
		OnStuck:         c.OnStuck,
		Logger:          c.logger(),
		Metrics:         c.metrics(),
		Now:             c.Now,
	}
	switch c.DoneBatchWindow {
	case 0:
	case -1:
		dc.DoneBatchWindow = 0
	default:
		dc.DoneBatchWindow = c.DoneBatchWindow
	}
	if c.Mode == MultiNode {
		dc.ClaimTTL = c.ClaimTTL
	}
	return withDispatchDefaults(dc)
}

// withDispatchDefaults fills the zero fields of a dispatcher's configuration.
func withDispatchDefaults(c dispatch.Config) dispatch.Config {
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

// pollConfig is the poller's configuration; nodeID owns its claims in MultiNode mode.
func (c Config) pollConfig(nodeID string) poll.Config {
	pc := poll.Config{
		Interval:     c.PollInterval,
		MaxInterval:  c.PollMaxInterval,
		BatchSize:    c.PollBatchSize,
		SkipRecent:   c.SkipRecent,
		QueryTimeout: c.QueryTimeout,
		Logger:       c.logger(),
		Metrics:      c.metrics(),
		Now:          c.Now,
	}
	if c.Mode == MultiNode {
		pc.ClaimTTL, pc.NodeID = c.ClaimTTL, nodeID
	}
	return withPollDefaults(pc)
}

// withPollDefaults fills the zero fields of a poller's configuration.
func withPollDefaults(c poll.Config) poll.Config {
	c.Interval = cmp.Or(c.Interval, DefaultPollInterval)
	switch c.MaxInterval {
	case 0:
		c.MaxInterval = max(DefaultPollMaxInterval, c.Interval)
	case -1:
		c.MaxInterval = c.Interval
	}
	c.BatchSize = cmp.Or(c.BatchSize, DefaultPollBatchSize)
	c.SkipRecent = cmp.Or(c.SkipRecent, DefaultSkipRecent)
	c.QueryTimeout = cmp.Or(c.QueryTimeout, defaultQueryTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = NopMetrics{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ClaimTTL > 0 && c.NodeID == "" {
		c.NodeID = ids.DefaultNodeID()
	}
	return c
}

// purgeConfig is the purger's configuration. The purge follows the wall clock, not
// Config.Now. PurgeUndeliveredAfter passes through as it is: validate allows it in
// WriterOnly mode only, and zero there deletes no undelivered row.
func (c Config) purgeConfig() purge.Config {
	return withPurgeDefaults(purge.Config{
		Interval:             c.PurgeInterval,
		Retention:            c.PurgeRetention,
		DeadRetention:        c.PurgeDeadRetention,
		UndeliveredRetention: c.PurgeUndeliveredAfter,
		BatchSize:            c.PurgeBatchSize,
		QueryTimeout:         c.QueryTimeout,
		Logger:               c.logger(),
	})
}

// withPurgeDefaults fills the zero fields of a purger's configuration.
func withPurgeDefaults(c purge.Config) purge.Config {
	c.Interval = cmp.Or(c.Interval, DefaultPurgeInterval)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultPurgeBatchSize)
	c.QueryTimeout = cmp.Or(c.QueryTimeout, defaultQueryTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
