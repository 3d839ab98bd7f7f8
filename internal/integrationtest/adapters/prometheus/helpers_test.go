package outboxprom_test

// Helpers of the stats collector's database tests. They are those of the package's own
// tests (adapters/prometheus: helpers_test.go and stats_test.go), written here against the
// exported API, since these tests are a package of their own.

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	outboxprom "github.com/outboxkit/outbox/adapters/prometheus"
)

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
func newStats(t *testing.T, src outboxprom.StatsSource, opts outboxprom.StatsOptions) (*outboxprom.StatsCollector, *prometheus.Registry, *logRecorder) {
	t.Helper()
	logs := &logRecorder{}
	if opts.Logger == nil {
		opts.Logger = slog.New(logs)
	}
	sc, err := outboxprom.NewStatsCollector(src, opts)
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

// series finds the series name{labels} in what g gathers; labels are name, value
// pairs and must match the series' labels exactly (constant labels included).
func series(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (*dto.Metric, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var want []string
	for i := 0; i+1 < len(labels); i += 2 {
		want = append(want, labels[i]+"="+labels[i+1])
	}
	slices.Sort(want)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName()+"="+lp.GetValue())
			}
			slices.Sort(got)
			if slices.Equal(got, want) {
				return m, true
			}
		}
	}
	return nil, false
}

// value returns a counter's or a gauge's value, or a histogram's sample count, of the
// series name{labels}; the series must exist.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	m, ok := series(t, g, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Fatalf("series %s%v has an unexpected type", name, labels)
	return 0
}

// waitFor polls cond until it holds, failing the test after a generous deadline. It
// waits for work on a real database; it is not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
