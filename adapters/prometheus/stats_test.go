package outboxprom

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	outbox "github.com/outboxkit/outbox/core"
)

// sourceFunc adapts a function to StatsSource.
type sourceFunc func(ctx context.Context) (outbox.Stats, error)

func (f sourceFunc) Stats(ctx context.Context) (outbox.Stats, error) { return f(ctx) }

// healthySource returns one NEW event.
func healthySource() StatsSource {
	return sourceFunc(func(context.Context) (outbox.Stats, error) {
		return outbox.Stats{Counts: map[outbox.Status]int64{outbox.StatusNew: 1}}, nil
	})
}

// countingSource counts the calls of fn.
type countingSource struct {
	calls atomic.Int64
	fn    func(ctx context.Context, call int64) (outbox.Stats, error)
}

func (s *countingSource) Stats(ctx context.Context) (outbox.Stats, error) {
	return s.fn(ctx, s.calls.Add(1))
}

// logRecorder is a slog.Handler that keeps every record's level and message.
type logRecorder struct {
	mu   sync.Mutex
	logs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.mu.Lock()
	h.logs = append(h.logs, line)
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.logs...)
}

// newStats creates a stats collector over src, registered on a fresh registry, logging
// into a recorder.
func newStats(t *testing.T, src StatsSource, opts StatsOptions) (*StatsCollector, *prometheus.Registry, *logRecorder) {
	t.Helper()
	logs := &logRecorder{}
	if opts.Logger == nil {
		opts.Logger = slog.New(logs)
	}
	sc, err := NewStatsCollector(src, opts)
	if err != nil {
		t.Fatalf("NewStatsCollector: %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(sc); err != nil {
		t.Fatalf("register: %v", err)
	}
	return sc, reg, logs
}

// scrape gathers g once (one Collect of every collector) and returns the result as a
// Gatherer, so that several values can be read from the same scrape.
func scrape(t *testing.T, g prometheus.Gatherer) prometheus.Gatherer {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
}

// hasTableSeries reports whether a scrape holds the series read from the table.
func hasTableSeries(t *testing.T, g prometheus.Gatherer) bool {
	t.Helper()
	_, events := series(t, g, "outbox_events", "status", "new")
	_, age := series(t, g, "outbox_oldest_pending_age_seconds")
	_, dead := series(t, g, "outbox_dead_events")
	if events != age || age != dead {
		t.Fatalf("table series partly present: events %v, age %v, dead %v", events, age, dead)
	}
	return events
}

func TestNewStatsCollectorValidates(t *testing.T) {
	t.Parallel()
	if sc, err := NewStatsCollector(nil, StatsOptions{}); !errors.Is(err, ErrNilSource) || sc != nil {
		t.Fatalf("nil source: %v, %v", sc, err)
	}
	for name, opts := range map[string]StatsOptions{
		"negative timeout":    {Timeout: -1},
		"cache TTL below -1":  {CacheTTL: -2 * time.Second},
		"bad namespace":       {Namespace: "out box"},
		"instance not UTF-8":  {Instance: "\xff"},
		"namespace only dots": {Namespace: "."},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if sc, err := NewStatsCollector(healthySource(), opts); !errors.Is(err, ErrInvalidOptions) || sc != nil {
				t.Fatalf("NewStatsCollector = %v, %v; want ErrInvalidOptions", sc, err)
			}
		})
	}
	sc, err := NewStatsCollector(healthySource(), StatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.opts.Timeout != DefaultStatsTimeout || sc.opts.CacheTTL != DefaultStatsCacheTTL ||
		sc.opts.Namespace != DefaultNamespace || sc.opts.Logger == nil {
		t.Fatalf("defaults: %+v", sc.opts)
	}
}

func TestStatsCollectorDuplicateRegistrationFails(t *testing.T) {
	t.Parallel()
	first, reg, _ := newStats(t, healthySource(), StatsOptions{Instance: "orders"})
	second, err := NewStatsCollector(healthySource(), StatsOptions{Instance: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	err = reg.Register(second)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) || are.ExistingCollector != first {
		t.Fatalf("second Register = %v; want AlreadyRegisteredError", err)
	}
}

func TestStatsCollectorReportsTheTable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := sourceFunc(func(context.Context) (outbox.Stats, error) {
			return outbox.Stats{
				Counts: map[outbox.Status]int64{
					outbox.StatusNew: 3, outbox.StatusRetry: 1, outbox.StatusDone: 5, outbox.StatusDead: 2, outbox.StatusWaiting: 4,
				},
				OldestPending: time.Now().Add(-90 * time.Second).UTC(),
				BlockedKeys:   2,
				OldestBlocked: time.Now().Add(-60 * time.Second).UTC(),
			}, nil
		})
		_, reg, logs := newStats(t, src, StatsOptions{Instance: "orders"})
		err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP outbox_blocked_keys Order keys whose WAITING events wait behind a RETRY or DEAD event of the key, read at scrape time.
# TYPE outbox_blocked_keys gauge
outbox_blocked_keys{outbox="orders"} 2
# HELP outbox_dead_events DEAD events in the outbox table, read at scrape time; they wait for a replay.
# TYPE outbox_dead_events gauge
outbox_dead_events{outbox="orders"} 2
# HELP outbox_events Rows in the outbox table by status (new, retry, done, dead, waiting, fallback, discarded), read at scrape time.
# TYPE outbox_events gauge
outbox_events{outbox="orders",status="dead"} 2
outbox_events{outbox="orders",status="discarded"} 0
outbox_events{outbox="orders",status="done"} 5
outbox_events{outbox="orders",status="fallback"} 0
outbox_events{outbox="orders",status="new"} 3
outbox_events{outbox="orders",status="retry"} 1
outbox_events{outbox="orders",status="waiting"} 4
# HELP outbox_oldest_blocked_age_seconds Age of the oldest RETRY or DEAD event that holds an order key's WAITING events (now minus its created_at); 0 when no key is blocked.
# TYPE outbox_oldest_blocked_age_seconds gauge
outbox_oldest_blocked_age_seconds{outbox="orders"} 60
# HELP outbox_oldest_pending_age_seconds Age of the oldest NEW or RETRY event (now minus its created_at, delayed and deferred events included), read at scrape time; 0 when none is pending.
# TYPE outbox_oldest_pending_age_seconds gauge
outbox_oldest_pending_age_seconds{outbox="orders"} 90
# HELP outbox_stats_errors_total Reads of the outbox table statistics that failed or timed out.
# TYPE outbox_stats_errors_total counter
outbox_stats_errors_total{outbox="orders"} 0
# HELP outbox_stats_up 1 if the last read of the outbox table statistics succeeded, 0 if it failed or timed out.
# TYPE outbox_stats_up gauge
outbox_stats_up{outbox="orders"} 1
`))
		if err != nil {
			t.Fatal(err)
		}
		if l := logs.lines(); len(l) != 0 {
			t.Fatalf("logs: %q", l)
		}
	})
}

func TestStatsCollectorEmptyTable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := sourceFunc(func(context.Context) (outbox.Stats, error) { return outbox.Stats{}, nil })
		sc, _, _ := newStats(t, src, StatsOptions{})
		err := testutil.CollectAndCompare(sc, strings.NewReader(`
# HELP outbox_events Rows in the outbox table by status (new, retry, done, dead, waiting, fallback, discarded), read at scrape time.
# TYPE outbox_events gauge
outbox_events{status="dead"} 0
outbox_events{status="discarded"} 0
outbox_events{status="done"} 0
outbox_events{status="fallback"} 0
outbox_events{status="new"} 0
outbox_events{status="retry"} 0
outbox_events{status="waiting"} 0
# HELP outbox_oldest_pending_age_seconds Age of the oldest NEW or RETRY event (now minus its created_at, delayed and deferred events included), read at scrape time; 0 when none is pending.
# TYPE outbox_oldest_pending_age_seconds gauge
outbox_oldest_pending_age_seconds 0
`), "outbox_events", "outbox_oldest_pending_age_seconds")
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestStatsCollectorCachesReads(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{fn: func(_ context.Context, call int64) (outbox.Stats, error) {
			return outbox.Stats{Counts: map[outbox.Status]int64{outbox.StatusNew: call}}, nil
		}}
		_, reg, _ := newStats(t, src, StatsOptions{CacheTTL: 10 * time.Second})
		newEvents := func() float64 { return value(t, scrape(t, reg), "outbox_events", "status", "new") }
		if got := newEvents(); got != 1 {
			t.Fatalf("first scrape: %v", got)
		}
		time.Sleep(9 * time.Second)
		if got := newEvents(); got != 1 || src.calls.Load() != 1 {
			t.Fatalf("scrape within the TTL: new %v after %d reads; want the cached 1", got, src.calls.Load())
		}
		time.Sleep(time.Second)
		if got := newEvents(); got != 2 || src.calls.Load() != 2 {
			t.Fatalf("scrape after the TTL: new %v after %d reads", got, src.calls.Load())
		}
	})
}

func TestStatsCollectorWithoutCacheReadsEveryScrape(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{fn: func(_ context.Context, call int64) (outbox.Stats, error) {
			return outbox.Stats{Counts: map[outbox.Status]int64{outbox.StatusDead: call}}, nil
		}}
		_, reg, _ := newStats(t, src, StatsOptions{CacheTTL: -1})
		for want := 1.0; want <= 3; want++ {
			if got := value(t, scrape(t, reg), "outbox_dead_events"); got != want {
				t.Fatalf("dead = %v, want %v", got, want)
			}
		}
	})
}

// TestStatsCollectorConcurrentScrapesShareARead: scrapes arriving while a read runs wait
// for it instead of querying the table again.
func TestStatsCollectorConcurrentScrapesShareARead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		src := &countingSource{fn: func(context.Context, int64) (outbox.Stats, error) {
			<-release
			return outbox.Stats{Counts: map[outbox.Status]int64{outbox.StatusRetry: 4}}, nil
		}}
		_, reg, _ := newStats(t, src, StatsOptions{CacheTTL: -1})
		const scrapers = 8
		var wg sync.WaitGroup
		results := make([]prometheus.Gatherer, scrapers)
		errs := make([]error, scrapers)
		for i := range scrapers {
			wg.Go(func() {
				mfs, err := reg.Gather()
				results[i] = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
				errs[i] = err
			})
		}
		synctest.Wait() // every scraper is waiting for the read
		if n := src.calls.Load(); n != 1 {
			t.Fatalf("%d concurrent scrapes started %d reads; want 1", scrapers, n)
		}
		close(release)
		wg.Wait()
		for i := range scrapers {
			if errs[i] != nil {
				t.Fatalf("scrape %d: %v", i, errs[i])
			}
			if got := value(t, results[i], "outbox_events", "status", "retry"); got != 4 {
				t.Fatalf("scrape %d: retry = %v", i, got)
			}
		}
	})
}

// TestStatsCollectorTimesOutAHungSource: a source that ignores its context never holds a
// scrape beyond the timeout, and no second read piles up behind it.
func TestStatsCollectorTimesOutAHungSource(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		src := &countingSource{fn: func(context.Context, int64) (outbox.Stats, error) {
			<-release // ignores ctx
			return outbox.Stats{Counts: map[outbox.Status]int64{outbox.StatusDead: 1}}, nil
		}}
		_, reg, logs := newStats(t, src, StatsOptions{Timeout: 2 * time.Second, CacheTTL: 5 * time.Second})
		start := time.Now()
		g := scrape(t, reg)
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("scrape waited %s; want the 2s timeout", waited)
		}
		if up, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_stats_errors_total"); up != 0 || errs != 1 {
			t.Fatalf("after a timeout: up %v, errors %v", up, errs)
		}
		if hasTableSeries(t, g) {
			t.Fatal("a timed-out read reported table series")
		}
		if l := logs.lines(); len(l) != 1 || !strings.Contains(l[0], "timed out") {
			t.Fatalf("logs: %q", l)
		}

		// Within the cache TTL, and after it while the read still hangs, scrapes answer at
		// once and start no read.
		for _, wait := range []time.Duration{0, 10 * time.Second, time.Minute} {
			time.Sleep(wait)
			start := time.Now()
			g := scrape(t, reg)
			if waited := time.Since(start); waited != 0 {
				t.Fatalf("scrape %s later waited %s", wait, waited)
			}
			if up, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_stats_errors_total"); up != 0 || errs != 1 {
				t.Fatalf("scrape %s later: up %v, errors %v", wait, up, errs)
			}
		}
		if n := src.calls.Load(); n != 1 {
			t.Fatalf("%d reads started while one hung; want 1", n)
		}

		// When the source finally answers, its result serves the next scrape.
		close(release)
		synctest.Wait()
		g = scrape(t, reg)
		if up, dead, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_dead_events"), value(t, g, "outbox_stats_errors_total"); up != 1 || dead != 1 || errs != 1 {
			t.Fatalf("after the late answer: up %v, dead %v, errors %v", up, dead, errs)
		}
		if n := src.calls.Load(); n != 1 {
			t.Fatalf("%d reads", n)
		}
	})
}

// TestStatsCollectorTimeoutCountsOnce: a source that honours its context's deadline
// fails at the same moment the scrape gives up; the failure is counted once.
func TestStatsCollectorTimeoutCountsOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{fn: func(ctx context.Context, _ int64) (outbox.Stats, error) {
			<-ctx.Done()
			return outbox.Stats{}, ctx.Err()
		}}
		_, reg, logs := newStats(t, src, StatsOptions{Timeout: 3 * time.Second, CacheTTL: -1})
		for round := 1; round <= 3; round++ {
			start := time.Now()
			g := scrape(t, reg)
			if waited := time.Since(start); waited != 3*time.Second {
				t.Fatalf("round %d: scrape waited %s", round, waited)
			}
			if up, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_stats_errors_total"); up != 0 || errs != float64(round) || hasTableSeries(t, g) {
				t.Fatalf("round %d: up %v, errors %v", round, up, errs)
			}
			synctest.Wait() // the read has settled: its own failure must not count again
		}
		g := scrape(t, reg)
		if errs := value(t, g, "outbox_stats_errors_total"); errs != 4 {
			t.Fatalf("errors %v after 4 failed reads", errs)
		}
		synctest.Wait()
		if n, l := src.calls.Load(), len(logs.lines()); n != 4 || l != 4 {
			t.Fatalf("%d reads, %d warnings; want 4 each", n, l)
		}
	})
}

func TestStatsCollectorReportsErrorsAndRecovers(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]func() (outbox.Stats, error){
		"error": func() (outbox.Stats, error) { return outbox.Stats{}, errors.New("connection refused") },
		"panic": func() (outbox.Stats, error) { panic("driver bug") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				src := &countingSource{fn: func(_ context.Context, call int64) (outbox.Stats, error) {
					if call == 1 {
						return fail()
					}
					return outbox.Stats{Counts: map[outbox.Status]int64{outbox.StatusNew: 2}}, nil
				}}
				_, reg, logs := newStats(t, src, StatsOptions{CacheTTL: time.Second})
				err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP outbox_stats_errors_total Reads of the outbox table statistics that failed or timed out.
# TYPE outbox_stats_errors_total counter
outbox_stats_errors_total 1
# HELP outbox_stats_up 1 if the last read of the outbox table statistics succeeded, 0 if it failed or timed out.
# TYPE outbox_stats_up gauge
outbox_stats_up 0
`))
				if err != nil {
					t.Fatalf("failed read: %v", err)
				}
				want := map[string]string{"error": "connection refused", "panic": "panicked: driver bug"}[name]
				if l := logs.lines(); len(l) != 1 || !strings.HasPrefix(l[0], "WARN") || !strings.Contains(l[0], want) {
					t.Fatalf("logs: %q; want one warning with %q", l, want)
				}
				time.Sleep(time.Second)
				g := scrape(t, reg)
				if up, n, errs := value(t, g, "outbox_stats_up"), value(t, g, "outbox_events", "status", "new"), value(t, g, "outbox_stats_errors_total"); up != 1 || n != 2 || errs != 1 {
					t.Fatalf("after recovery: up %v, new %v, errors %v", up, n, errs)
				}
			})
		})
	}
}
