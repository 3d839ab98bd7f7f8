package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report is the JSON document the program writes.
type report struct {
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   time.Time  `json:"finished_at"`
	Machine      machine    `json:"machine"`
	LoadAvgStart string     `json:"load_avg_start"`
	LoadAvgEnd   string     `json:"load_avg_end"`
	Settings     settings   `json:"settings"`
	Databases    []database `json:"databases"`
	Results      []result   `json:"results"`
	Errors       []string   `json:"errors,omitempty"`
}

type machine struct {
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model"`
	MemTotalMB int64  `json:"mem_total_mb"`
	OS         string `json:"os"`
	Kernel     string `json:"kernel"`
	GoVersion  string `json:"go_version"`
}

type settings struct {
	Repeat        int    `json:"repeat"`
	Producers     int    `json:"producers"`
	W1Tx          int    `json:"w1_tx"`
	W2Tx          int    `json:"w2_tx"`
	W2EventsPerTx int    `json:"w2_events_per_tx"`
	W3Rate        int    `json:"w3_rate_per_s"`
	W3Duration    string `json:"w3_duration"`
	W4Rows        int    `json:"w4_rows"`
	PayloadBytes  int    `json:"payload_bytes"`
	Workers       string `json:"workers"`
	HotQueue      string `json:"hot_queue"`
	ColdQueue     string `json:"cold_queue"`
	PollInterval  string `json:"poll_interval"`
	PollBatch     string `json:"poll_batch"`
	DoneWindow    string `json:"done_batch_window"`
	MaxConns      string `json:"max_conns"`
}

type database struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	PoolSize string `json:"pool_size"`
}

type result struct {
	DB          string `json:"db"`
	Workload    string `json:"workload"`
	Description string `json:"description"`
	Txs         int    `json:"transactions,omitempty"`
	Events      int    `json:"events"`
	Runs        int    `json:"runs"`
	// Seconds and EventsPerSec are the medians over the runs.
	Seconds          float64   `json:"seconds"`
	EventsPerSec     float64   `json:"events_per_sec"`
	EventsPerSecRuns []float64 `json:"events_per_sec_runs"`
	// Ceiling names the ceiling the ratio is taken to; RatioToCeiling is the median of
	// the per-run ratios (each workload run divided by the ceiling of the same round).
	Ceiling        string  `json:"ceiling,omitempty"`
	RatioToCeiling float64 `json:"ratio_to_ceiling,omitempty"`
	// RatioToB is the same ratio to ceiling b, for every workload (the unit;
	// for w2 it compares 100-event transactions with 1-event ones).
	RatioToB float64 `json:"ratio_to_b,omitempty"`
	// WriteEventsPerSec is the producers' rate alone (w1, w2), median.
	WriteEventsPerSec float64  `json:"write_events_per_sec,omitempty"`
	Latency           *latency `json:"latency_ms,omitempty"`
	PeakRSSMiB        float64  `json:"peak_rss_mib,omitempty"`
	BaseRSSMiB        float64  `json:"base_rss_mib,omitempty"`
	HotDropped        int64    `json:"hot_dropped,omitempty"`
	ColdEnqueued      int64    `json:"cold_enqueued,omitempty"`
	Failures          int64    `json:"failures,omitempty"`
}

type latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	// Early counts events whose listener ran before their Commit returned (latency 0).
	Early int `json:"invoked_before_commit_returned"`
}

// ceilingOf names the ceiling each workload's ratio is taken to: b, except for w2,
// whose own shape (100 events per transaction) has the ceiling b2.
var ceilingOf = map[string]string{"a": "b", "w1": "b", "w2": "b2", "w3": "b", "w4": "b"}

var descriptions = map[string]string{
	"a":  "ceiling a: bare business transaction (1 INSERT)",
	"b":  "ceiling b: business INSERT + outbox INSERT, no dispatch",
	"b2": "ceiling b2: business INSERT + 100-event outbox INSERT, no dispatch",
	"w1": "W1: 1 event/tx, end-to-end until DONE",
	"w2": "W2: 100 events/tx, end-to-end until DONE",
	"w3": "W3: paced producer, commit-to-listener latency",
	"w4": "W4: drain pre-filled table (cold path only)",
}

func newReport(o options) *report {
	def := func(v int) string {
		if v == 0 {
			return "default"
		}
		return strconv.Itoa(v)
	}
	poll := "default"
	if o.pollInterval != 0 {
		poll = o.pollInterval.String()
	}
	return &report{
		StartedAt:    time.Now().UTC(),
		Machine:      readMachine(),
		LoadAvgStart: loadAvg(),
		Settings: settings{
			Repeat: o.repeat, Producers: o.producers, W1Tx: o.w1Tx, W2Tx: o.w2Tx, W2EventsPerTx: o.w2Events,
			W3Rate: o.w3Rate, W3Duration: o.w3Duration.String(), W4Rows: o.w4Rows, PayloadBytes: o.payloadSize,
			Workers: def(o.workers), HotQueue: def(o.hotQueue), ColdQueue: def(o.coldQueue), PollInterval: poll,
			PollBatch: def(o.pollBatch), DoneWindow: o.doneWindow.String(), MaxConns: maxConns(o.maxConns),
		},
	}
}

func maxConns(n int) string {
	switch n {
	case -1:
		return "auto (1 on SQLite, producers+workers+4 elsewhere)"
	case 0:
		return "database/sql defaults (unlimited open, 2 idle)"
	}
	return strconv.Itoa(n)
}

func (r *report) finish() {
	r.FinishedAt = time.Now().UTC()
	r.LoadAvgEnd = loadAvg()
}

func (r *report) addDatabase(name, version string, pool int) {
	size := strconv.Itoa(pool)
	if pool == 0 {
		size = "database/sql default (unlimited open, 2 idle)"
	}
	r.Databases = append(r.Databases, database{Name: name, Version: version, PoolSize: size})
}

// addResults aggregates the runs of every workload of one database.
func (r *report) addResults(o options, db string, samples map[string][]sample) {
	for _, w := range o.workloads {
		runs := samples[w]
		if len(runs) == 0 {
			continue
		}
		res := result{DB: db, Workload: w, Description: descriptions[w], Txs: runs[0].txs, Events: runs[0].events, Runs: len(runs)}
		var secs, eps, weps []float64
		for _, s := range runs {
			secs = append(secs, s.seconds)
			eps = append(eps, s.eventsPerSec())
			if s.writeSeconds > 0 && (w == "w1" || w == "w2") {
				weps = append(weps, float64(s.events)/s.writeSeconds)
			}
			res.HotDropped += s.hotDropped
			res.ColdEnqueued += s.coldEnqueued
			res.Failures += s.failures
		}
		res.Seconds, res.EventsPerSec, res.EventsPerSecRuns = median(secs), median(eps), eps
		if len(weps) > 0 {
			res.WriteEventsPerSec = median(weps)
		}
		ceiling := ceilingOf[w]
		if base := samples[ceiling]; ceiling != "" && len(base) == len(runs) {
			var ratios []float64
			for i := range runs {
				if c := base[i].eventsPerSec(); c > 0 {
					ratios = append(ratios, runs[i].eventsPerSec()/c)
				}
			}
			if len(ratios) > 0 {
				res.Ceiling, res.RatioToCeiling = ceiling, median(ratios)
			}
		}
		if base := samples["b"]; w != "b" && len(base) == len(runs) {
			var ratios []float64
			for i := range runs {
				if c := base[i].eventsPerSec(); c > 0 {
					ratios = append(ratios, runs[i].eventsPerSec()/c)
				}
			}
			res.RatioToB = median(ratios)
		}
		if w == "w3" {
			var p50, p95, p99, mx []float64
			early := 0
			for _, s := range runs {
				l := slices.Clone(s.latencies)
				slices.Sort(l)
				p50 = append(p50, ms(percentile(l, 0.50)))
				p95 = append(p95, ms(percentile(l, 0.95)))
				p99 = append(p99, ms(percentile(l, 0.99)))
				mx = append(mx, ms(percentile(l, 1)))
				early += s.earlyInvocations
			}
			res.Latency = &latency{P50: median(p50), P95: median(p95), P99: median(p99), Max: median(mx), Early: early}
		}
		if w == "w4" {
			var peak, base []float64
			for _, s := range runs {
				peak = append(peak, float64(s.peakRSSKiB)/1024)
				base = append(base, float64(s.baseRSSKiB)/1024)
			}
			res.PeakRSSMiB, res.BaseRSSMiB = slices.Max(peak), median(base)
		}
		r.Results = append(r.Results, res)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the q-quantile of sorted values (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// markdown renders the results as one table per database.
func (r *report) markdown() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d CPUs (%s), %d MB RAM, %s, GOMAXPROCS %d; load average %s -> %s\n",
		r.Machine.NumCPU, r.Machine.CPUModel, r.Machine.MemTotalMB, r.Machine.GoVersion, r.Machine.GOMAXPROCS,
		r.LoadAvgStart, r.LoadAvgEnd)
	for _, d := range r.Databases {
		fmt.Fprintf(&sb, "\n### %s (%s; pool %s)\n\n", d.Name, d.Version, d.PoolSize)
		sb.WriteString("| workload | events | events/s | ratio to ceiling | details |\n|---|---:|---:|---:|---|\n")
		for _, res := range r.Results {
			if res.DB != d.Name {
				continue
			}
			ratio := "—"
			if res.Ceiling != "" {
				ratio = fmt.Sprintf("%.2f × %s", res.RatioToCeiling, res.Ceiling)
			}
			if res.Ceiling != "b" && res.RatioToB > 0 {
				if res.Ceiling != "" {
					ratio += fmt.Sprintf(" (%.2f × b)", res.RatioToB)
				} else {
					ratio = fmt.Sprintf("%.2f × b", res.RatioToB)
				}
			}
			var details []string
			if res.Runs > 1 {
				details = append(details, fmt.Sprintf("median of %d", res.Runs))
			}
			if res.WriteEventsPerSec > 0 {
				details = append(details, fmt.Sprintf("write phase %.0f ev/s", res.WriteEventsPerSec))
			}
			if l := res.Latency; l != nil {
				details = append(details, fmt.Sprintf("p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, max %.3f ms", l.P50, l.P95, l.P99, l.Max))
			}
			if res.PeakRSSMiB > 0 {
				details = append(details, fmt.Sprintf("peak RSS %.1f MiB (%.1f MiB before start)", res.PeakRSSMiB, res.BaseRSSMiB))
			}
			if res.HotDropped > 0 {
				details = append(details, fmt.Sprintf("%d hot drops", res.HotDropped))
			}
			if res.ColdEnqueued > 0 && res.Workload != "w4" {
				details = append(details, fmt.Sprintf("%d via poller", res.ColdEnqueued))
			}
			if res.Failures > 0 {
				details = append(details, fmt.Sprintf("%d failed attempts", res.Failures))
			}
			fmt.Fprintf(&sb, "| %s | %d | %.0f | %s | %s |\n", res.Description, res.Events, res.EventsPerSec, ratio, strings.Join(details, "; "))
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&sb, "\nERROR: %s\n", e)
	}
	return sb.String()
}

func readMachine() machine {
	m := machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: gomaxprocs(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.MemTotalMB = kb / 1024
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
