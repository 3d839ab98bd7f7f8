package main

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// seriesSlope is the least-squares slope of one series over the second half of a run.
type seriesSlope struct {
	Series string  `json:"series"`
	Unit   string  `json:"unit"`
	First  float64 `json:"first"` // the first sample's value
	Last   float64 `json:"last"`
	Max    float64 `json:"max"`
	// LastMax is the largest value in the last latency window (the last 5 minutes).
	LastMax float64 `json:"last_window_max"`
	PerMin  float64 `json:"slope_per_min"`
}

// soakRun is one soak round as reported.
type soakRun struct {
	DB             string  `json:"db"`
	TargetRate     int     `json:"target_rate_per_s"`
	Duration       string  `json:"duration"`
	Retention      string  `json:"purge_retention"`
	PurgeInterval  string  `json:"purge_interval"`
	SampleInterval string  `json:"sample_interval"`
	Written        int64   `json:"events_written"`
	AchievedRate   float64 `json:"achieved_rate_per_s"`
	DrainSeconds   float64 `json:"drain_seconds"`
	// Purge is what the purge runs deleted and took over the run; PurgeMicrosPerRow
	// their time per row deleted.
	Purge             purgeTotals `json:"purge"`
	PurgeMicrosPerRow float64     `json:"purge_us_per_row"`
	BaseRSSMiB        float64     `json:"rss_before_start_mib"`
	PeakRSSMiB        float64     `json:"peak_rss_mib"`
	Latency           latency     `json:"latency_ms"`
	HotDropped        int64       `json:"hot_dropped"`
	ColdEnqueued      int64       `json:"cold_enqueued"`
	Failures          int64       `json:"failures"`
	LatencyWindowMin  float64     `json:"latency_window_min"`
	// WindowScaled tells that the run was shorter than twice soakLatencyWindow, so that
	// its first and last halves were compared instead.
	WindowScaled      bool          `json:"latency_window_scaled"`
	First             latencyWindow `json:"first_window"`
	Last              latencyWindow `json:"last_window"`
	CommitP99Ratio    float64       `json:"commit_p99_last_to_first"`
	ListenerP99Ratio  float64       `json:"listener_p99_last_to_first"`
	Slopes            []seriesSlope `json:"slopes_second_half"`
	Samples           []soakSample  `json:"samples"`
	SVG               string        `json:"svg,omitempty"`
	SamplerErrorCount int           `json:"sampler_errors,omitempty"`
}

// soakWindow is the length of the first and last stretches whose p99 are compared: 5
// minutes, or half the run when the run is shorter than 10 minutes (scaled is then true).
func soakWindow(d time.Duration) (w time.Duration, scaled bool) {
	if d >= 2*soakLatencyWindow {
		return soakLatencyWindow, false
	}
	return d / 2, true
}

// p99Ratio is last/first, 0 when the first window measured nothing.
func p99Ratio(first, last float64) float64 {
	if first <= 0 {
		return 0
	}
	return last / first
}

// seriesPoint is one value of a named series in one sample.
type seriesPoint struct {
	name, unit string
	value      float64
}

// series flattens a sample into its named values, in a stable order: the latencies,
// the rows per status, the sizes, PostgreSQL's counters, the poll, RSS and goroutines.
func (s soakSample) series() []seriesPoint {
	ps := []seriesPoint{
		{"commit p50", "ms", s.CommitP50}, {"commit p99", "ms", s.CommitP99},
		{"listener p50", "ms", s.ListenerP50}, {"listener p99", "ms", s.ListenerP99},
	}
	statuses := make([]string, 0, len(s.Rows))
	for st := range s.Rows {
		statuses = append(statuses, st)
	}
	slices.Sort(statuses)
	for _, st := range statuses {
		ps = append(ps, seriesPoint{"rows " + st, "rows", float64(s.Rows[st])})
	}
	for _, r := range s.Sizes {
		ps = append(ps, seriesPoint{r.Kind + " " + r.Name, "MiB", float64(r.Bytes) / (1 << 20)})
	}
	if s.PG != nil {
		ps = append(ps, seriesPoint{"dead tuples", "rows", float64(s.PG.DeadTuples)},
			seriesPoint{"autovacuum count", "runs", float64(s.PG.Autovacuums)},
			seriesPoint{"autoanalyze count", "runs", float64(s.PG.Autoanalyzes)})
	}
	ps = append(ps, seriesPoint{"poll statement", "ms", s.PollMS}, seriesPoint{"poll from the low-water mark", "ms", s.PollLowMS})
	for _, st := range s.PollServer {
		ps = append(ps, seriesPoint{"poll " + st.Kind + ", server max", "ms", st.MaxMS}, seriesPoint{"poll " + st.Kind + ", server mean", "ms", st.MeanMS})
	}
	return append(ps, seriesPoint{"RSS", "MiB", float64(s.RSSKiB) / 1024}, seriesPoint{"goroutines", "", float64(s.Goroutines)},
		seriesPoint{"machine CPU busy", "%", s.CPUBusyPct})
}

// soakSlopes returns, for every series of the samples, its first, last and largest
// value, its largest at or after lastFrom seconds and its least-squares slope per
// minute over the samples at or after from seconds. A series missing from a sample (a status with no rows yet) counts as 0
// there, as it is.
func soakSlopes(samples []soakSample, from, lastFrom float64) []seriesSlope {
	var order []string
	units := make(map[string]string)
	for _, s := range samples {
		for _, p := range s.series() {
			if _, ok := units[p.name]; !ok {
				units[p.name] = p.unit
				order = append(order, p.name)
			}
		}
	}
	out := make([]seriesSlope, 0, len(order))
	for _, name := range order {
		sl := seriesSlope{Series: name, Unit: units[name], Max: math.Inf(-1), LastMax: math.Inf(-1)}
		var xs, ys []float64
		for i, s := range samples {
			v := 0.0
			for _, p := range s.series() {
				if p.name == name {
					v = p.value
					break
				}
			}
			if i == 0 {
				sl.First = v
			}
			sl.Last, sl.Max = v, max(sl.Max, v)
			if s.T >= from {
				xs, ys = append(xs, s.T/60), append(ys, v)
			}
			if s.T >= lastFrom {
				sl.LastMax = max(sl.LastMax, v)
			}
		}
		if math.IsInf(sl.LastMax, -1) {
			sl.LastMax = 0
		}
		sl.PerMin = slope(xs, ys)
		out = append(out, sl)
	}
	return out
}

// histCounts is a copy of a histogram's buckets at one instant; the difference of two
// is the histogram of what was recorded between them.
type histCounts [histBuckets]int64

// snapshot copies h's buckets into c.
func (h *histogram) snapshot(c *histCounts) {
	for i := range h.counts {
		c[i] = h.counts[i].Load()
	}
}

// windowQuantile returns the q-quantile (nearest rank, a bucket's upper bound, as
// histogram.quantile) of what was recorded between the snapshots from and to; 0 when
// nothing was.
func windowQuantile(from, to *histCounts, q float64) time.Duration {
	var n int64
	for i := range to {
		n += to[i] - from[i]
	}
	if n <= 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for i := range to {
		seen += to[i] - from[i]
		if seen >= rank {
			return time.Duration(math.Pow(1.01, float64(i)) * float64(time.Microsecond))
		}
	}
	return 0
}

// analyzeSoak derives the reported figures from the child's result: the achieved rate,
// the slopes over the second half and the p99 ratios of the last window to the first.
func analyzeSoak(res childSoakResult, p childSoakParams) soakRun {
	w, scaled := soakWindow(p.Duration)
	run := soakRun{
		TargetRate: p.Rate, Duration: p.Duration.String(), Retention: p.Retention.String(),
		PurgeInterval: soakPurgeIntervalFor(p.Retention).String(), SampleInterval: p.Sample.String(),
		Written: res.Written, DrainSeconds: res.DrainSeconds, Purge: res.Purge, PurgeMicrosPerRow: res.Purge.MicrosPerRow(),
		BaseRSSMiB: float64(res.BaseRSSKiB) / 1024, PeakRSSMiB: float64(res.PeakRSSKiB) / 1024,
		Latency: res.Latency, HotDropped: res.HotDropped, ColdEnqueued: res.ColdEnqueued, Failures: res.Failures,
		LatencyWindowMin: w.Minutes(), WindowScaled: scaled, First: res.First, Last: res.Last,
		CommitP99Ratio:   p99Ratio(res.First.CommitP99, res.Last.CommitP99),
		ListenerP99Ratio: p99Ratio(res.First.ListenerP99, res.Last.ListenerP99),
		Slopes:           soakSlopes(res.Samples, p.Duration.Seconds()/2, res.Last.From),
		Samples:          res.Samples,
	}
	if res.WriteSeconds > 0 {
		run.AchievedRate = float64(res.Written) / res.WriteSeconds
	}
	for _, s := range res.Samples {
		run.SamplerErrorCount += len(s.Errors)
	}
	return run
}

// soakPurgeIntervalFor is the purge interval for a retention: soakPurgeInterval, or the
// retention itself when it is shorter.
func soakPurgeIntervalFor(retention time.Duration) time.Duration {
	return min(soakPurgeInterval, retention)
}

// String is the run's summary line.
func (s soakRun) String() string {
	scaled := ""
	if s.WindowScaled {
		scaled = " (run shorter than 10 min: the windows are its halves)"
	}
	return fmt.Sprintf("target %d events/s for %s (purge retention %s, every %s), achieved %.0f events/s (%d events), "+
		"handled %.1fs after the last write; p99 last %.3g min / first %.3g min%s: commit %.2f × (%.3f → %.3f ms), "+
		"commit-to-listener %.2f × (%.3f → %.3f ms); purge %d runs, %d rows, %.1f µs per row",
		s.TargetRate, s.Duration, s.Retention, s.PurgeInterval, s.AchievedRate, s.Written, s.DrainSeconds,
		s.LatencyWindowMin, s.LatencyWindowMin, scaled, s.CommitP99Ratio, s.First.CommitP99, s.Last.CommitP99,
		s.ListenerP99Ratio, s.First.ListenerP99, s.Last.ListenerP99, s.Purge.Runs, s.Purge.Rows, s.PurgeMicrosPerRow) + s.dropped()
}

// dropped is what a partitioned table's purger dropped, "" when it dropped nothing.
func (s soakRun) dropped() string {
	if s.Purge.PartitionsDropped == 0 {
		return ""
	}
	return fmt.Sprintf("; %d partitions dropped (maintenance runs that created or dropped one: %.0f ms in all)", s.Purge.PartitionsDropped, s.Purge.DropMillis)
}

// markdownTable is the run's summary table: every series' first, last and largest value,
// its largest in the last latency window and its slope over the second half.
func (s soakRun) markdownTable() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "| series | unit | first sample | last sample | max | max, last %.3g min | slope, second half (per min) |\n|---|---|---:|---:|---:|---:|---:|\n", s.LatencyWindowMin)
	for _, sl := range s.Slopes {
		fmt.Fprintf(&b, "| %s | %s | %.4g | %.4g | %.4g | %.4g | %+.4g |\n", sl.Series, cmp.Or(sl.Unit, "—"), sl.First, sl.Last, sl.Max, sl.LastMax, sl.PerMin)
	}
	return b.String()
}
