package outboxprom

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

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

// histSum returns the sample sum of the histogram series name{labels}.
func histSum(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	m, ok := series(t, g, name, labels...)
	if !ok || m.Histogram == nil {
		t.Fatalf("no histogram %s%v", name, labels)
	}
	return m.GetHistogram().GetSampleSum()
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

// waitValue waits until the series name{labels} has the value want.
func waitValue(t *testing.T, g prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s%v = %v", name, labels, want), func() bool {
		m, ok := series(t, g, name, labels...)
		if !ok {
			return false
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue() == want
		case m.Gauge != nil:
			return m.GetGauge().GetValue() == want
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()) == want
		}
		return false
	})
}
