package outboxprom

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// Defaults of [StatsOptions].
const (
	// DefaultStatsTimeout bounds one read of the table statistics.
	DefaultStatsTimeout = 5 * time.Second
	// DefaultStatsCacheTTL is how long a read serves later scrapes.
	DefaultStatsCacheTTL = 5 * time.Second
)

// StatsSource reports the outbox table's statistics. [*outbox.Events] (what
// [outbox.Outbox.Events] returns) and every storage.StatsStore satisfy it.
type StatsSource interface {
	Stats(ctx context.Context) (outbox.Stats, error)
}

var (
	_ StatsSource = (*outbox.Events)(nil)
	_ StatsSource = storage.StatsStore(nil)
)

// StatsOptions configures [NewStatsCollector]. The zero value is ready to use.
type StatsOptions struct {
	// Namespace is the first part of every metric name; use the same as
	// [Options.Namespace]. It must match [a-zA-Z_][a-zA-Z0-9_]*.
	// Defaults to DefaultNamespace.
	Namespace string
	// Instance adds the constant label outbox="<Instance>" to every metric; use the same
	// as [Options.Instance]. Defaults to "" (no label).
	Instance string
	// Timeout bounds one read of the statistics: a scrape never waits longer for the
	// database, and reports the read as failed when it expires. It must not be negative.
	// Defaults to DefaultStatsTimeout.
	Timeout time.Duration
	// CacheTTL is how long the result of a read (success or failure) serves later
	// scrapes, so that frequent or concurrent scrapes do not query the table each time;
	// -1 reads on every scrape (concurrent scrapes still share one read).
	// Defaults to DefaultStatsCacheTTL.
	CacheTTL time.Duration
	// Logger receives a warning for each failed read. Defaults to slog.Default().
	Logger *slog.Logger
}

// withDefaults fills in the defaults and validates o.
func (o StatsOptions) withDefaults() (StatsOptions, error) {
	o.Namespace = cmp.Or(o.Namespace, DefaultNamespace)
	if err := validateNames(o.Namespace, o.Instance); err != nil {
		return o, err
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("%w: Timeout %s is negative; a scrape must not wait forever", ErrInvalidOptions, o.Timeout)
	}
	if o.CacheTTL < -1 {
		return o, fmt.Errorf("%w: CacheTTL %s must be positive, 0 for the default or -1 to disable", ErrInvalidOptions, o.CacheTTL)
	}
	o.Timeout = cmp.Or(o.Timeout, DefaultStatsTimeout)
	o.CacheTTL = cmp.Or(o.CacheTTL, DefaultStatsCacheTTL)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o, nil
}

// statuses are the statuses exported by outbox_events, in label order.
var statuses = [...]struct {
	status outbox.Status
	label  string
}{
	{outbox.StatusNew, "new"},
	{outbox.StatusRetry, "retry"},
	{outbox.StatusDone, "done"},
	{outbox.StatusDead, "dead"},
	{outbox.StatusWaiting, "waiting"},
	{outbox.StatusFallback, "fallback"},
	{outbox.StatusDiscarded, "discarded"},
}

// StatsCollector is a prometheus.Collector that reads the outbox table's statistics when
// it is scraped: the events per status, the age of the oldest pending event, the DEAD
// count and the blocked order keys (docs/ordering.md), plus whether the read succeeded. Create it with [NewStatsCollector] and
// register it on your registry.
//
// A read runs in its own goroutine under [StatsOptions.Timeout]; a scrape waits for it
// at most until that timeout and never panics. Concurrent scrapes share one read, and a
// result serves scrapes for [StatsOptions.CacheTTL]. When a read fails or times out, the
// table series are left out of the scrape (rather than repeating stale values),
// outbox_stats_up is 0 and outbox_stats_errors_total grows by one. A source that ignores
// its context's deadline keeps its read in flight: no second read starts until it
// returns, so a hung database costs one goroutine, not one per scrape.
type StatsCollector struct {
	src    StatsSource
	opts   StatsOptions
	events *prometheus.Desc
	age    *prometheus.Desc
	dead   *prometheus.Desc
	keys   *prometheus.Desc
	held   *prometheus.Desc
	up     *prometheus.Desc
	errs   *prometheus.Desc

	mu       sync.Mutex
	flight   *statsRead // the read in progress, or nil
	result   statsResult
	resultAt time.Time // when result was settled; zero before the first read
	errCount uint64
}

var _ prometheus.Collector = (*StatsCollector)(nil)

// statsResult is the outcome of one read.
type statsResult struct {
	stats outbox.Stats
	err   error
}

// statsRead is one read of the source, shared by the scrapes that wait for it.
type statsRead struct {
	done     chan struct{} // closed when the source returned; res is set before
	deadline time.Time
	res      statsResult
	timedOut bool // guarded by StatsCollector.mu: a scrape gave up and counted the failure
}

// NewStatsCollector returns a collector of the statistics of src, typically
// [outbox.Outbox.Events]. Register it on your registry (reg.Register); registering two
// with the same Namespace and Instance on one registry fails with a
// prometheus.AlreadyRegisteredError.
//
// It returns [ErrNilSource] when src is nil and an error wrapping [ErrInvalidOptions]
// for a bad option.
func NewStatsCollector(src StatsSource, opts StatsOptions) (*StatsCollector, error) {
	if src == nil {
		return nil, ErrNilSource
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var constLabels prometheus.Labels
	if opts.Instance != "" {
		constLabels = prometheus.Labels{InstanceLabel: opts.Instance}
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(opts.Namespace, "", name), help, labels, constLabels)
	}
	return &StatsCollector{
		src:  src,
		opts: opts,
		events: desc("events",
			"Rows in the outbox table by status (new, retry, done, dead, waiting, fallback, discarded), read at scrape time.", labelStatus),
		age: desc("oldest_pending_age_seconds",
			"Age of the oldest NEW or RETRY event (now minus its created_at, delayed and deferred events included), read at scrape time; 0 when none is pending."),
		dead: desc("dead_events",
			"DEAD events in the outbox table, read at scrape time; they wait for a replay."),
		keys: desc("blocked_keys",
			"Order keys whose WAITING events wait behind a RETRY or DEAD event of the key, read at scrape time."),
		held: desc("oldest_blocked_age_seconds",
			"Age of the oldest RETRY or DEAD event that holds an order key's WAITING events (now minus its created_at); 0 when no key is blocked."),
		up: desc("stats_up",
			"1 if the last read of the outbox table statistics succeeded, 0 if it failed or timed out."),
		errs: desc("stats_errors_total",
			"Reads of the outbox table statistics that failed or timed out."),
	}, nil
}

// Describe implements prometheus.Collector.
func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.events
	ch <- c.age
	ch <- c.dead
	ch <- c.keys
	ch <- c.held
	ch <- c.up
	ch <- c.errs
}

// Collect implements prometheus.Collector. It reads the statistics, or takes them from
// the cache; see [StatsCollector].
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	res := c.read()
	c.mu.Lock()
	errCount := c.errCount
	c.mu.Unlock()
	up := 0.0
	if res.err == nil {
		up = 1
		st := res.stats
		for _, s := range statuses {
			ch <- prometheus.MustNewConstMetric(c.events, prometheus.GaugeValue, float64(st.Counts[s.status]), s.label)
		}
		age := 0.0
		if !st.OldestPending.IsZero() {
			// created_at was stamped by the writing process's clock; compare it with
			// this process's clock (the stats carry no database time).
			age = max(time.Since(st.OldestPending).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age)
		ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(st.Counts[outbox.StatusDead]))
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(st.BlockedKeys))
		held := 0.0
		if !st.OldestBlocked.IsZero() {
			held = max(time.Since(st.OldestBlocked).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, held)
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(errCount))
}

// read returns the cached result while it is fresh; otherwise it joins the read in
// flight, or starts one, and waits for it until the read's deadline.
func (c *StatsCollector) read() statsResult {
	now := time.Now()
	c.mu.Lock()
	if c.opts.CacheTTL > 0 && !c.resultAt.IsZero() && now.Sub(c.resultAt) < c.opts.CacheTTL {
		res := c.result
		c.mu.Unlock()
		return res
	}
	r := c.flight
	if r == nil {
		r = &statsRead{done: make(chan struct{}), deadline: now.Add(c.opts.Timeout)}
		c.flight = r
		go c.query(r)
	}
	c.mu.Unlock()

	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	select {
	case <-r.done:
		return r.res
	case <-timer.C:
	}
	c.mu.Lock()
	if c.flight != r { // the source returned just now
		c.mu.Unlock()
		<-r.done
		return r.res
	}
	res := statsResult{err: fmt.Errorf("outboxprom: stats read timed out after %s", c.opts.Timeout)}
	first := !r.timedOut
	if first {
		r.timedOut = true
		c.errCount++
		c.result, c.resultAt = res, time.Now()
	}
	c.mu.Unlock()
	if first {
		c.opts.Logger.LogAttrs(context.Background(), slog.LevelWarn, "outbox stats read failed",
			slog.String("component", "outboxprom"), slog.String("error", res.err.Error()))
	}
	return res
}

// query runs one read of the source and settles it.
func (c *StatsCollector) query(r *statsRead) {
	res := c.call()
	c.mu.Lock()
	c.flight = nil
	r.res = res
	logErr := false
	switch {
	case !r.timedOut:
		if res.err != nil {
			c.errCount++
			logErr = true
		}
		c.result, c.resultAt = res, time.Now()
	case res.err == nil:
		// A late success is still the freshest truth; a late failure was counted when
		// the scrapes gave up.
		c.result, c.resultAt = res, time.Now()
	}
	c.mu.Unlock()
	if logErr {
		c.opts.Logger.LogAttrs(context.Background(), slog.LevelWarn, "outbox stats read failed",
			slog.String("component", "outboxprom"), slog.String("error", res.err.Error()))
	}
	close(r.done)
}

// call asks the source under the timeout and turns a panic into an error: it runs in a
// goroutine of its own, where a panic would end the process.
func (c *StatsCollector) call() (res statsResult) {
	defer func() {
		if p := recover(); p != nil {
			res = statsResult{err: fmt.Errorf("outboxprom: stats source panicked: %v", p)}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	st, err := c.src.Stats(ctx)
	if err != nil {
		return statsResult{err: fmt.Errorf("outboxprom: read stats: %w", err)}
	}
	return statsResult{stats: st}
}
