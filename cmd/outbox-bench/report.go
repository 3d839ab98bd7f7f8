package main

import (
	"cmp"
	"context"
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
	Notes        []string   `json:"notes,omitempty"`
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
	// NodeGOMAXPROCS is GOMAXPROCS of the node processes (w1m, w1m1, w6, w6m), when
	// -node-gomaxprocs set it.
	NodeGOMAXPROCS int `json:"node_gomaxprocs,omitempty"`
	// Durability lists the durability settings of the databases run, "fast" and/or
	// "durable" (see database.Durability).
	Durability      []string `json:"durability"`
	SustainRate     int      `json:"sustain_rate_per_s,omitempty"`
	SustainDuration string   `json:"sustain_duration,omitempty"`
	// SoakRate, SoakDuration, SoakRetention and SoakSample are the soak flags, when soak ran.
	SoakRate      int    `json:"soak_rate_per_s,omitempty"`
	SoakDuration  string `json:"soak_duration,omitempty"`
	SoakRetention string `json:"soak_retention,omitempty"`
	SoakSample    string `json:"soak_sample,omitempty"`
	// Peers are the versions of the peers' modules, when a peer workload ran.
	Peers map[string]string `json:"peers,omitempty"`
	// RiverWorkers is MaxWorkers of River's default queue, when river ran.
	RiverWorkers int `json:"river_workers,omitempty"`
}

// database is one database with one durability setting: each has a table of its own.
type database struct {
	Name       string `json:"name"`
	Durability string `json:"durability"`
	// ServerSettings are the settings that make commits durable or not, as read from
	// the server (SQLite: the connection's PRAGMAs).
	ServerSettings string `json:"server_settings"`
	Version        string `json:"version"`
	PoolSize       string `json:"pool_size"`
}

type result struct {
	DB string `json:"db"`
	// Durability is the database's setting, "fast" or "durable" (see database).
	Durability  string `json:"durability"`
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
	// RatioToCeilingRuns are the per-round ratios, in round order.
	RatioToCeilingRuns []float64 `json:"ratio_to_ceiling_runs,omitempty"`
	// MinCeiling names the reference without the library that RatioToMin is taken to:
	// min, or min2 for the 100-event shape (w2, b2). RatioToMin is the median of the
	// per-round ratios, RatioToMinRuns every round's.
	MinCeiling     string    `json:"min_ceiling,omitempty"`
	RatioToMin     float64   `json:"ratio_to_min,omitempty"`
	RatioToMinRuns []float64 `json:"ratio_to_min_runs,omitempty"`
	// Skipped says why the workload did not run on this database (a peer that does not
	// support it); the result has no measurement then.
	Skipped string `json:"skipped,omitempty"`
	// RatioToB is the same ratio to ceiling b, for every workload (the unit;
	// for w2 it compares 100-event transactions with 1-event ones).
	RatioToB     float64   `json:"ratio_to_b,omitempty"`
	RatioToBRuns []float64 `json:"ratio_to_b_runs,omitempty"`
	// WriteEventsPerSec is the producers' rate alone (w1, w1m, w1o, w2), median.
	WriteEventsPerSec float64 `json:"write_events_per_sec,omitempty"`
	// Latency is the median over the rounds of each percentile (w2, w3, sustain);
	// LatencyRuns has every round's.
	Latency      *latency  `json:"latency_ms,omitempty"`
	LatencyRuns  []latency `json:"latency_ms_runs,omitempty"`
	PeakRSSMiB   float64   `json:"peak_rss_mib,omitempty"`
	BaseRSSMiB   float64   `json:"base_rss_mib,omitempty"`
	HotDropped   int64     `json:"hot_dropped,omitempty"`
	ColdEnqueued int64     `json:"cold_enqueued,omitempty"`
	Failures     int64     `json:"failures,omitempty"`
	// Lost counts, summed over the rounds, the events a peer never delivered (it
	// delivered nothing for a while after its producers were done); in those rounds
	// events/s counts the delivered events up to the latest.
	Lost int64 `json:"lost,omitempty"`
	// ClaimsLost and ClaimsExpired are w1m's claims that another node took over or that
	// were left to expire, summed over the nodes and rounds.
	ClaimsLost    int64 `json:"claims_lost,omitempty"`
	ClaimsExpired int64 `json:"claims_expired,omitempty"`
	// NodeHandledRuns are, per round, the listener invocations of each w1m node.
	NodeHandledRuns [][]int64 `json:"node_handled_runs,omitempty"`
	// SustainRuns are the sustain rounds, with their RSS samples.
	SustainRuns []sustainRun `json:"sustain_runs,omitempty"`
	// SoakRuns are the soak rounds, with every sample and the slopes.
	SoakRuns []soakRun `json:"soak_runs,omitempty"`
}

type latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	// Early counts events whose listener ran before their Commit returned (latency 0).
	Early int `json:"invoked_before_commit_returned"`
	// Events is the number of latencies measured.
	Events int `json:"events"`
	// Unmatched counts sustain events whose latency could not be measured (see
	// latencySlots).
	Unmatched int64 `json:"unmatched,omitempty"`
}

// ceilingOf names the ceiling or reference each workload's second ratio is taken to
// (the first is to min, see minCeilingOf): b, except for w2 and min2, whose own shape
// (100 events per transaction) has the ceiling b2, for w2o, compared with w2, for w1m,
// w1o and the other variants of w1, and the peers, which are compared with w1 (SingleNode) of the same round, and
// for w4's and w6's variants, compared with w4 and w6.
var ceilingOf = map[string]string{"a": "b", "bm": "b", "min": "b", "min2": "b2", "mind": "b", "river": "w1", "watermill": "w1", "w1": "b", "w1m": "w1", "w1m1": "w1", "w1o": "w1", "w1n": "w1", "w1k": "w1", "w1n1": "w1", "w1k1": "w1", "w1d": "w1", "w1f3": "w1", "w4f3": "w4", "w4n": "w4", "w4k": "w4", "w4n1": "w4", "w4k1": "w4", "w2": "b2", "w2o": "w2", "w3": "b", "w3o": "w3", "w4": "b", "w5": "b", "w6m": "w6"}

// minCeilingOf names the reference without the library that w's first ratio is taken
// to: min2 for the 100-event shape (w2, b2), min for every other workload, none for min
// itself and for sustain and soak (paced).
func minCeilingOf(w string) string {
	switch w {
	case "min", "sustain", "soak":
		return ""
	case "w2", "w2o", "b2":
		return "min2"
	}
	return "min"
}

// describe is w's description in the report; the peers' name their versions and
// settings.
func describe(o options, w string) string {
	switch w {
	case "river":
		return fmt.Sprintf("peer river: River %s (riverpgxv5), InsertTx in the business tx, no-op worker, %d workers, "+
			"other settings default; until every job is completed", moduleVersion(riverModule), o.riverWorkers)
	case "watermill":
		return fmt.Sprintf("peer watermill: Watermill SQL %s, forwarder (watermill %s) to a GoChannel subscriber, "+
			"settings default; until every event is acknowledged",
			moduleVersion(watermillSQLModule), moduleVersion(watermillModule))
	}
	return descriptions[w]
}

var descriptions = map[string]string{
	"a":       "ceiling a: bare business transaction (1 INSERT)",
	"b":       "ceiling b: business INSERT + outbox INSERT, no dispatch",
	"b2":      "ceiling b2: business INSERT + 100-event outbox INSERT, no dispatch",
	"min":     "reference min: business INSERT + 1 row into a minimal outbox table by hand, no library",
	"min2":    "reference min2: business INSERT + 100 rows into the minimal table (one multi-row INSERT), no library",
	"mind":    "reference mind: min + delivery by hand (batches of 100 NEW rows, no-op listener, one UPDATE … IN per batch), until DONE",
	"bm":      "ceiling bm: b written by 3 node processes (WriterOnly), no dispatch",
	"w1":      "W1: 1 event/tx, end-to-end until DONE",
	"w1m":     "W1m: W1 in MultiNode mode, 3 node processes, until DONE",
	"w1m1":    "W1m1: W1 in MultiNode mode, 1 node process, until DONE",
	"w1o":     "W1o: W1 with every event ordered, 1,000 keys, until DONE",
	"w1n":     "W1n: W1 relayed to NATS JetStream (nats-server in the same process), until DONE",
	"w1k":     "W1k: W1 relayed to Kafka (franz-go's kfake cluster, in the same process), until DONE",
	"w1d":     "W1d: W1 with Config.DeleteDone (delivered rows deleted, not marked DONE)",
	"w1f3":    "W1f3: W1 with three listeners on the route: every event split into three deliveries, until all DONE",
	"w4f3":    "W4f3: W4 with three listeners: the backlog split and delivered three times (the deliveries take the hot queue, default size)",
	"w1n1":    "W1n1: W1n with one event per relay call (the relay as a plain Listener, no batches)",
	"w1k1":    "W1k1: W1k with one event per relay call (the relay as a plain Listener, no batches)",
	"w4n":     "W4n: W4's backlog relayed to NATS JetStream (nats-server in the same process)",
	"w4k":     "W4k: W4's backlog relayed to Kafka (franz-go's kfake cluster, in the same process)",
	"w4n1":    "W4n1: W4n with one event per relay call (no batches)",
	"w4k1":    "W4k1: W4k with one event per relay call (no batches)",
	"w2":      "W2: 100 events/tx, end-to-end until DONE",
	"w2o":     "W2o: W2 with every event ordered, 1,000 keys, until DONE",
	"w3":      "W3: paced producer, commit-to-listener latency",
	"w3o":     "W3o: W3 with every event ordered, 1,000 keys",
	"w4":      "W4: drain pre-filled table (cold path only)",
	"w5":      "W5: W3 written by a WriterOnly outbox, delivered by another (pgnotify on PostgreSQL)",
	"w6":      "W6: ordered backlog (6,000 events, 1,000 keys), 5 ms listener, 1 node process",
	"w6m":     "W6m: W6 on 3 node processes",
	"sustain": "sustain: paced producers, RSS over time",
	"soak":    "soak: paced producers, short purge retention, table and process sampled over time",
}

// shortName is the workload's name in the per-round table.
var shortName = map[string]string{"w1": "W1", "w1m": "W1m", "w1m1": "W1m1", "w1o": "W1o", "w1n": "W1n", "w1k": "W1k", "w1n1": "W1n1", "w1k1": "W1k1", "w1d": "W1d", "w1f3": "W1f3", "w4f3": "W4f3", "w4n": "W4n", "w4k": "W4k", "w4n1": "W4n1", "w4k1": "W4k1", "w2": "W2", "w2o": "W2o", "w3": "W3", "w3o": "W3o", "w4": "W4", "w5": "W5", "w6": "W6", "w6m": "W6m"}

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
	r := &report{
		StartedAt:    time.Now().UTC(),
		Machine:      readMachine(),
		LoadAvgStart: loadAvg(),
		Settings: settings{
			Repeat: o.repeat, Producers: o.producers, W1Tx: o.w1Tx, W2Tx: o.w2Tx, W2EventsPerTx: o.w2Events,
			W3Rate: o.w3Rate, W3Duration: o.w3Duration.String(), W4Rows: o.w4Rows, PayloadBytes: o.payloadSize,
			Workers: def(o.workers), HotQueue: def(o.hotQueue), ColdQueue: def(o.coldQueue), PollInterval: poll,
			PollBatch: def(o.pollBatch), DoneWindow: o.doneWindow.String(), MaxConns: maxConns(o.maxConns),
			Durability: o.durabilities, NodeGOMAXPROCS: o.nodeGOMAXPROCS,
		},
	}
	if slices.Contains(o.workloads, "sustain") {
		r.Settings.SustainRate, r.Settings.SustainDuration = o.sustainRate, o.sustainDuration.String()
	}
	if slices.Contains(o.workloads, "soak") {
		r.Settings.SoakRate, r.Settings.SoakDuration = o.soakRate, o.soakDuration.String()
		r.Settings.SoakRetention, r.Settings.SoakSample = o.soakRetention.String(), o.soakSample.String()
	}
	if slices.Contains(o.workloads, "river") {
		r.Settings.RiverWorkers = o.riverWorkers
		r.Settings.Peers = map[string]string{riverModule: moduleVersion(riverModule)}
	}
	if slices.Contains(o.workloads, "watermill") {
		if r.Settings.Peers == nil {
			r.Settings.Peers = make(map[string]string)
		}
		r.Settings.Peers[watermillModule] = moduleVersion(watermillModule)
		r.Settings.Peers[watermillSQLModule] = moduleVersion(watermillSQLModule)
	}
	return r
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
	// A server given by DSN without -durability is labelled with what it does.
	var ds []string
	for _, d := range allDurabilities {
		if slices.ContainsFunc(r.Databases, func(db database) bool { return db.Durability == d }) {
			ds = append(ds, d)
		}
	}
	if len(ds) > 0 {
		r.Settings.Durability = ds
	}
}

func (r *report) addDatabase(t *target) {
	size := strconv.Itoa(t.pool)
	if t.pool == 0 {
		size = "database/sql default (unlimited open, 2 idle)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.Databases = append(r.Databases, database{Name: t.kind, Durability: t.durability, ServerSettings: t.settings,
		Version: t.version(ctx), PoolSize: size})
}

// ratios returns runs[i]/base[i] in events/s for every round, or nil when the ceiling
// did not run in every round.
func ratios(runs, base []sample) []float64 {
	if len(base) != len(runs) {
		return nil
	}
	var out []float64
	for i := range runs {
		if c := base[i].eventsPerSec(); c > 0 {
			out = append(out, runs[i].eventsPerSec()/c)
		}
	}
	return out
}

// addResults aggregates the runs of every workload of one database and durability;
// skipped names the workloads that did not run there, and why.
func (r *report) addResults(o options, t *target, workloads []string, samples map[string][]sample, skipped map[string]string) {
	for _, w := range workloads {
		if why := skipped[w]; why != "" {
			r.Results = append(r.Results, result{DB: t.kind, Durability: t.durability, Workload: w,
				Description: describe(o, w), Skipped: why})
			continue
		}
		runs := samples[w]
		if len(runs) == 0 {
			continue
		}
		res := result{DB: t.kind, Durability: t.durability, Workload: w, Description: describe(o, w),
			Txs: runs[0].txs, Events: runs[0].events, Runs: len(runs)}
		var secs, eps, weps, evs []float64
		for _, s := range runs {
			secs = append(secs, s.seconds)
			eps = append(eps, s.eventsPerSec())
			evs = append(evs, float64(s.events))
			if s.writeSeconds > 0 && slices.Contains(writePhaseWorkloads, w) {
				weps = append(weps, float64(s.events)/s.writeSeconds)
			}
			res.HotDropped += s.hotDropped
			res.ColdEnqueued += s.coldEnqueued
			res.Failures += s.failures
			res.Lost += s.lost
			res.ClaimsLost += s.claimsLost
			res.ClaimsExpired += s.claimsExpired
			if s.nodeHandled != nil {
				res.NodeHandledRuns = append(res.NodeHandledRuns, s.nodeHandled)
			}
		}
		res.Seconds, res.EventsPerSec, res.EventsPerSecRuns = median(secs), median(eps), eps
		if w == "sustain" || w == "soak" { // paced: the events written vary from round to round
			res.Events = int(median(evs))
		}
		if len(weps) > 0 {
			res.WriteEventsPerSec = median(weps)
		}
		if ceiling := minCeilingOf(w); ceiling != "" {
			if rs := ratios(runs, samples[ceiling]); len(rs) > 0 {
				res.MinCeiling, res.RatioToMin, res.RatioToMinRuns = ceiling, median(rs), rs
			}
		}
		if ceiling := ceilingOf[w]; ceiling != "" {
			if rs := ratios(runs, samples[ceiling]); len(rs) > 0 {
				res.Ceiling, res.RatioToCeiling, res.RatioToCeilingRuns = ceiling, median(rs), rs
			}
		}
		if w != "b" && w != "sustain" && w != "soak" {
			if rs := ratios(runs, samples["b"]); len(rs) > 0 {
				res.RatioToB, res.RatioToBRuns = median(rs), rs
			}
		}
		if runs[0].lat != nil {
			var p50, p95, p99, mx []float64
			agg := &latency{}
			for _, s := range runs {
				if s.lat == nil {
					continue
				}
				res.LatencyRuns = append(res.LatencyRuns, *s.lat)
				p50 = append(p50, s.lat.P50)
				p95 = append(p95, s.lat.P95)
				p99 = append(p99, s.lat.P99)
				mx = append(mx, s.lat.Max)
				agg.Early += s.lat.Early
				agg.Events += s.lat.Events
				agg.Unmatched += s.lat.Unmatched
			}
			agg.P50, agg.P95, agg.P99, agg.Max = median(p50), median(p95), median(p99), median(mx)
			res.Latency = agg
		}
		if w == "sustain" {
			for _, s := range runs {
				if s.sustain != nil {
					res.SustainRuns = append(res.SustainRuns, *s.sustain)
				}
			}
		}
		if w == "soak" {
			for _, s := range runs {
				if s.soak != nil {
					res.SoakRuns = append(res.SoakRuns, *s.soak)
				}
			}
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

// writePhaseWorkloads are the end-to-end workloads whose producers' rate alone is
// reported too (the write phase).
var writePhaseWorkloads = []string{"w1", "w1m", "w1m1", "w1o", "w1n", "w1k", "w1n1", "w1k1", "w1d", "w1f3", "w2", "w2o", "mind", "river", "watermill"}

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

// markdown renders the results as one table per database and durability, followed,
// with more than one round, by every round's value and the minimum, median and maximum.
func (r *report) markdown() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d CPUs (%s), %d MB RAM, %s, GOMAXPROCS %d; load average %s -> %s\n",
		r.Machine.NumCPU, r.Machine.CPUModel, r.Machine.MemTotalMB, r.Machine.GoVersion, r.Machine.GOMAXPROCS,
		r.LoadAvgStart, r.LoadAvgEnd)
	if r.Settings.NodeGOMAXPROCS > 0 {
		fmt.Fprintf(&sb, "\nNode processes (w1m, w1m1, w6, w6m): GOMAXPROCS %d.\n", r.Settings.NodeGOMAXPROCS)
	}
	for _, d := range r.Databases {
		fmt.Fprintf(&sb, "\n### %s, %s commits (%s; pool %s)\n\n", d.Name, d.Durability, d.Version, d.PoolSize)
		fmt.Fprintf(&sb, "Server settings: %s.\n\n", d.ServerSettings)
		sb.WriteString(tableHeader)
		var results []result
		for _, res := range r.Results {
			if res.DB == d.Name && res.Durability == d.Durability {
				results = append(results, res)
			}
		}
		for _, res := range results {
			sb.WriteString(res.markdownRow())
		}
		writeRounds(&sb, results)
		for _, res := range results {
			for i, run := range res.SustainRuns {
				fmt.Fprintf(&sb, "\nsustain, round %d: %s\n", i+1, run.String())
			}
			for i, run := range res.SoakRuns {
				fmt.Fprintf(&sb, "\nsoak, round %d: %s\n\n%s", i+1, run.String(), run.markdownTable())
				if run.SamplerErrorCount > 0 {
					fmt.Fprintf(&sb, "\n%d sampler reads failed (see the JSON report's samples).\n", run.SamplerErrorCount)
				}
				if run.SVG != "" {
					fmt.Fprintf(&sb, "\nCharts: %s\n", run.SVG)
				}
			}
		}
	}
	if len(r.Notes) > 0 {
		sb.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&sb, "Note: %s\n", n)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&sb, "\nERROR: %s\n", e)
	}
	return sb.String()
}

// tableHeader heads a database's table: the first ratio is to the reference without the
// library (min, or min2 for the 100-event shape), the second to ceiling b or to the
// workload's own reference (w1o to w1, ...), with its ratio to b beside.
const tableHeader = "| workload | events | events/s | ratio to min | ratio to b or own reference | details |\n|---|---:|---:|---:|---:|---|\n"

// markdownRow is res's row in its database's table.
func (res result) markdownRow() string {
	if res.Skipped != "" {
		return fmt.Sprintf("| %s | — | — | — | — | skipped: %s |\n", res.Description, res.Skipped)
	}
	toMin := "—"
	if res.MinCeiling != "" {
		toMin = fmt.Sprintf("%.2f × %s", res.RatioToMin, res.MinCeiling)
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
	if sr := res.SustainRuns; len(sr) > 0 {
		details = append(details, sustainDetails(sr))
	}
	for _, sr := range res.SoakRuns {
		details = append(details, fmt.Sprintf("target %d/s for %s, purge retention %s; p99 last/first %.3g min: commit %.2f ×, commit-to-listener %.2f ×; purge %.1f µs per row",
			sr.TargetRate, sr.Duration, sr.Retention, sr.LatencyWindowMin, sr.CommitP99Ratio, sr.ListenerP99Ratio, sr.PurgeMicrosPerRow))
	}
	if l := res.Latency; l != nil {
		what := ""
		switch res.Workload {
		case "w2", "w2o":
			what = "burst latency "
		case "sustain", "soak":
			what = "commit-to-listener latency "
		}
		details = append(details, fmt.Sprintf("%sp50 %.3f ms, p95 %.3f ms, p99 %.3f ms, max %.3f ms", what, l.P50, l.P95, l.P99, l.Max))
		if len(res.LatencyRuns) > 1 {
			worst := slices.MaxFunc(res.LatencyRuns, func(a, b latency) int { return cmp.Compare(a.P99, b.P99) })
			details = append(details, fmt.Sprintf("worst round's p99 %.3f ms", worst.P99))
		}
		if l.Unmatched > 0 {
			details = append(details, fmt.Sprintf("%d latencies not measured", l.Unmatched))
		}
	}
	if res.PeakRSSMiB > 0 && res.Workload == "w4" {
		details = append(details, fmt.Sprintf("peak RSS %.1f MiB (%.1f MiB before start)", res.PeakRSSMiB, res.BaseRSSMiB))
	}
	if res.HotDropped > 0 {
		details = append(details, fmt.Sprintf("%d hot drops", res.HotDropped))
	}
	if res.ColdEnqueued > 0 && !strings.HasPrefix(res.Workload, "w4") {
		details = append(details, fmt.Sprintf("%d via poller", res.ColdEnqueued))
	}
	if res.ClaimsLost > 0 || res.ClaimsExpired > 0 {
		details = append(details, fmt.Sprintf("claims: %d lost, %d expired", res.ClaimsLost, res.ClaimsExpired))
	}
	if res.Failures > 0 {
		details = append(details, fmt.Sprintf("%d failed attempts", res.Failures))
	}
	if res.Lost > 0 {
		details = append(details, fmt.Sprintf("**%d events lost** (never reached the consumer; events/s counts the delivered ones)", res.Lost))
	}
	return fmt.Sprintf("| %s | %d | %.0f | %s | %s | %s |\n", res.Description, res.Events, res.EventsPerSec, toMin, ratio, strings.Join(details, "; "))
}

// writeRounds writes, when the workloads ran more than once, every round's events/s
// and ratios (to min, then to its own reference and to b), in round order, and their
// lowest, median and highest, so that a bimodal workload shows (a median hides it); for
// w2 and w3, every round's latency p50 and p99. A skipped workload has no row.
func writeRounds(sb *strings.Builder, results []result) {
	first := slices.IndexFunc(results, func(r result) bool { return r.Runs > 1 })
	if first < 0 {
		return
	}
	fmt.Fprintf(sb, "\nPer round (rounds 1 to %d in order; each ratio to the reference of the same round):\n\n", results[first].Runs)
	sb.WriteString("| workload | events/s per round | lowest / median / highest | ratio per round | lowest / median / highest | latency p50 / p99 per round (ms) |\n")
	sb.WriteString("|---|---|---|---|---|---|\n")
	for _, res := range results {
		if res.Runs == 0 { // skipped
			continue
		}
		name := shortName[res.Workload]
		if name == "" {
			name = res.Workload
		}
		var ratio, ratioSpread []string
		add := func(runs []float64, ceiling string) {
			if len(runs) > 0 {
				ratio = append(ratio, joinFloats(runs, "%.2f")+" × "+ceiling)
				ratioSpread = append(ratioSpread, spread(runs, "%.2f")+" × "+ceiling)
			}
		}
		add(res.RatioToMinRuns, res.MinCeiling)
		add(res.RatioToCeilingRuns, res.Ceiling)
		if res.Ceiling != "b" {
			add(res.RatioToBRuns, "b")
		}
		lat := "—"
		if len(res.LatencyRuns) > 0 {
			var parts []string
			for _, l := range res.LatencyRuns {
				parts = append(parts, fmt.Sprintf("%.3g / %.3g", l.P50, l.P99))
			}
			lat = strings.Join(parts, ", ")
		}
		fmt.Fprintf(sb, "| %s | %s | %s | %s | %s | %s |\n", name, joinFloats(res.EventsPerSecRuns, "%.0f"),
			spread(res.EventsPerSecRuns, "%.0f"), cmp.Or(strings.Join(ratio, "; "), "—"), cmp.Or(strings.Join(ratioSpread, "; "), "—"), lat)
	}
}

func joinFloats(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, f := range v {
		parts[i] = fmt.Sprintf(format, f)
	}
	return strings.Join(parts, ", ")
}

// spread is "lowest / median / highest" of v.
func spread(v []float64, format string) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf(format+" / "+format+" / "+format, slices.Min(v), median(v), slices.Max(v))
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
