package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	outboxpartition "github.com/outboxkit/outbox/core/partition"
)

// childSoakArg, as the first argument, makes the program run the soak workload as a
// child process, whose RSS and goroutines are then the outbox's and the producers' alone.
const childSoakArg = "__child-soak"

// soakPurgeInterval is the purge interval of the soak workload: short beside the
// retention, so that the purge turns the table over many times within the run and the
// table's size shows a steady state, not the hour-long saw-tooth of the default interval.
const soakPurgeInterval = 10 * time.Second

// soakLatencyWindow is the length of the first and the last stretch of a run whose p99
// latencies are compared; runs shorter than twice this compare their halves.
const soakLatencyWindow = 5 * time.Minute

// childSoakParams is what the parent hands the child, as JSON in the second argument.
type childSoakParams struct {
	Kind       string        `json:"kind"`
	DSN        string        `json:"dsn"`
	Schema     string        `json:"schema"`
	Pool       int           `json:"pool"`
	Producers  int           `json:"producers"`
	Rate       int           `json:"rate"`
	Duration   time.Duration `json:"duration"`
	Retention  time.Duration `json:"retention"`
	Sample     time.Duration `json:"sample"`
	Timeout    time.Duration `json:"timeout"`
	Outbox     childOutbox   `json:"outbox"`
	CPUProfile string        `json:"cpu_profile"`
	// MultiNode runs the outbox in MultiNode mode (-soak-mode multinode): the poller
	// claims, with ClaimTTL 2 minutes (docs/multinode.md's configuration, as w1m's).
	MultiNode bool `json:"multinode"`
	// Partitions, when positive, is the period of the partitions of a partitioned
	// table (-soak-partition-period).
	Partitions time.Duration `json:"partitions"`
}

// soakSample is what the child records every sample interval. Latencies are over the
// interval that ends at T; the rest is read at T.
type soakSample struct {
	// T is the time since the producers started, in seconds.
	T float64 `json:"t_s"`
	// Written and Handled are the events committed and handled (DONE) so far.
	Written int64 `json:"written"`
	Handled int64 `json:"handled"`
	// CommitP50 and CommitP99 time the producer's whole business transaction, BEGIN to
	// Commit returning, of the transactions that ended in the interval.
	CommitP50 float64 `json:"commit_p50_ms"`
	CommitP99 float64 `json:"commit_p99_ms"`
	// ListenerP50 and ListenerP99 are the commit-to-listener latencies measured in the
	// interval.
	ListenerP50 float64 `json:"listener_p50_ms"`
	ListenerP99 float64 `json:"listener_p99_ms"`
	// Rows are the outbox table's rows per status ("NEW", "DONE", ...), from one
	// SELECT status, COUNT(*) ... GROUP BY status, which reads every row: CountMS is
	// what it took.
	Rows    map[string]int64 `json:"rows_by_status"`
	CountMS float64          `json:"count_ms"`
	// Sizes are the table's relations on disk (see readSizes); SizeMS is what reading
	// them took.
	Sizes  []relationSize `json:"sizes"`
	SizeMS float64        `json:"size_ms"`
	// PG holds PostgreSQL's counters from pg_stat_user_tables; nil elsewhere.
	PG *pgTableStats `json:"pg_stat_user_tables,omitempty"`
	// PollMS is one execution of the poller's statement (Store.Pending with the poller's
	// parameters) from the head of the pending index, as the poller reads once a minute,
	// on the sampler's connection; PollRows is how many rows it returned. PollLowMS is
	// the statement of the poller's other cycles, from its low-water mark (the sample's
	// time less SkipRecent and the poller's 10 s margin, the mark when nothing older is
	// pending).
	PollMS    float64 `json:"poll_ms"`
	PollRows  int     `json:"poll_rows"`
	PollLowMS float64 `json:"poll_low_ms"`
	// PollServer is PostgreSQL's own measure (pg_stat_statements) of every poll
	// statement that ended in the interval, the poller's, the claims' and the sampler's
	// own, per kind: the statement's execution alone, without the client's wait for a
	// core, which on a busy machine added 5 to 20 ms to the times above. Nil elsewhere,
	// or when the server does not preload pg_stat_statements.
	PollServer []pollServerStats `json:"poll_server,omitempty"`
	// Purge is the purge runs so far (cumulative).
	Purge purgeTotals `json:"purge"`
	// RSSKiB is the child's VmRSS, Goroutines runtime.NumGoroutine().
	RSSKiB     int64 `json:"rss_kib"`
	Goroutines int   `json:"goroutines"`
	// CPUBusyPct is the machine's CPU time busy (all cores, every process: the outbox,
	// the producers and the database server) over the interval since the last sample,
	// in percent, from /proc/stat; 0 where there is none.
	CPUBusyPct float64 `json:"cpu_busy_pct"`
	// Errors are the sampler's failed reads; a failed read leaves its fields zero.
	Errors []string `json:"errors,omitempty"`
}

// pollServerStats is one kind of poll statement over one sample interval, as
// PostgreSQL's pg_stat_statements counted it. Kind is "mark" (the read from the
// low-water mark, the poller's every cycle), "head" (the read from the oldest pending
// row), "claim mark" or "claim head" (MultiNode's claims). MeanMS and MaxMS are
// execution times on the server (planning excluded); Buffers are the shared buffers
// hit or read per call.
type pollServerStats struct {
	Kind    string  `json:"kind"`
	Calls   int64   `json:"calls"`
	MeanMS  float64 `json:"mean_ms"`
	MaxMS   float64 `json:"max_ms"`
	Buffers float64 `json:"buffers_per_call"`
}

// relationSize is the size of one relation of the outbox table. Kind is "heap" (the
// table's rows; MariaDB's clustered primary key), "index", "toast" (PostgreSQL's TOAST
// table with its index), "free" (space allocated but unused: MariaDB's data_free,
// SQLite's free pages) or "file" (SQLite's whole database file, every table).
type relationSize struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Bytes int64  `json:"bytes"`
}

// pgTableStats are the outbox table's row of pg_stat_user_tables.
type pgTableStats struct {
	DeadTuples   int64 `json:"n_dead_tup"`
	LiveTuples   int64 `json:"n_live_tup"`
	Autovacuums  int64 `json:"autovacuum_count"`
	Autoanalyzes int64 `json:"autoanalyze_count"`
}

// latencyWindow is the p99 of one stretch of the run, [From, To] seconds.
type latencyWindow struct {
	From        float64 `json:"from_s"`
	To          float64 `json:"to_s"`
	CommitP99   float64 `json:"commit_p99_ms"`
	ListenerP99 float64 `json:"listener_p99_ms"`
}

// childSoakResult is what the child prints on stdout, as one JSON line.
type childSoakResult struct {
	Written      int64         `json:"written"`
	WriteSeconds float64       `json:"write_seconds"`
	DrainSeconds float64       `json:"drain_seconds"`
	BaseRSSKiB   int64         `json:"base_rss_kib"`
	PeakRSSKiB   int64         `json:"peak_rss_kib"`
	Samples      []soakSample  `json:"samples"`
	First        latencyWindow `json:"first_window"`
	Last         latencyWindow `json:"last_window"`
	Latency      latency       `json:"latency_ms"`
	HotDropped   int64         `json:"hot_dropped"`
	ColdEnqueued int64         `json:"cold_enqueued"`
	Failures     int64         `json:"failures"`
	// Purge is what the purge runs deleted and took over the whole run.
	Purge purgeTotals `json:"purge"`
	childErr
}

// runSoak is soak: in a child process, o.producers producers write one event per
// transaction at o.soakRate events/s for o.soakDuration, with the purge's retention
// shortened to o.soakRetention, while the child samples the table and itself every
// o.soakSample; then it waits until every event was handled.
func runSoak(ctx context.Context, o options, t *target, r int) (sample, error) {
	p := childSoakParams{
		Kind: t.kind, DSN: t.dsn, Schema: t.schema, Pool: t.pool, Producers: o.producers, Rate: o.soakRate,
		Duration: o.soakDuration, Retention: o.soakRetention, Sample: o.soakSample,
		Timeout: o.soakDuration + o.timeout, Outbox: o.childOutbox(), MultiNode: o.soakMode == "multinode",
		Partitions: o.soakPartitions,
	}
	if o.cpuProfile != "" {
		var err error
		if p.CPUProfile, err = profilePath(o.cpuProfile, t, "soak", r, ""); err != nil {
			return sample{}, err
		}
	}
	var res childSoakResult
	_, err := runChild(ctx, childSoakArg, p, &res)
	if err != nil {
		return sample{}, err
	}
	run := analyzeSoak(res, p)
	run.DB = t.label()
	if p.MultiNode {
		run.DB += " MultiNode"
	}
	if p.Partitions > 0 {
		run.DB += " partitioned (" + p.Partitions.String() + ")"
	}
	if o.soakSVGDir != "" {
		path := filepath.Join(o.soakSVGDir, soakSVGName(t, p.MultiNode, p.Partitions > 0, r, o.repeat))
		if err := writeSoakSVGFile(path, run); err != nil {
			return sample{}, fmt.Errorf("write the SVG: %w", err)
		}
		run.SVG = path
		progress("%s: soak: wrote %s", t.label(), path)
	}
	return sample{
		events: int(res.Written), txs: int(res.Written), seconds: res.WriteSeconds, lat: &run.Latency, soak: &run,
		peakRSSKiB: res.PeakRSSKiB, baseRSSKiB: res.BaseRSSKiB,
		hotDropped: res.HotDropped, coldEnqueued: res.ColdEnqueued, failures: res.Failures,
	}, nil
}

// soakSVGName is the SVG's file name: soak-<db>.svg, with -multinode for a MultiNode
// outbox, -partitioned for a partitioned table, -durable for a durable server and the
// round's number when there are several rounds.
func soakSVGName(t *target, multiNode, partitioned bool, r, rounds int) string {
	name := "soak-" + t.kind
	if multiNode {
		name += "-multinode"
	}
	if partitioned {
		name += "-partitioned"
	}
	if t.durability == "durable" {
		name += "-durable"
	}
	if rounds > 1 {
		name += "-" + strconv.Itoa(r+1)
	}
	return name + ".svg"
}

// runChildSoak is the child process of soak. It prints one childSoakResult line and
// returns the exit code.
func runChildSoak(args []string) int {
	var res childSoakResult
	return childMain(&res, func() error { return childSoak(args, &res) })
}

func childSoak(args []string, res *childSoakResult) error {
	if len(args) != 1 {
		return fmt.Errorf("want one JSON argument, got %d", len(args))
	}
	var p childSoakParams
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	t, err := childTarget(ctx, p.Kind, p.DSN, p.Schema, p.Pool)
	if err != nil {
		return err
	}
	defer t.db.Close()
	o := p.Outbox.options()
	pollBatch := cmp.Or(o.pollBatch, outbox.DefaultPollBatchSize)
	// The sampler reads on a pool of its own, so that its reads neither wait for nor
	// hold up the producers' and the outbox's connections (on SQLite the main pool is
	// one connection): the poll statement's time is then the statement's alone.
	sampler, err := newSoakSampler(ctx, t)
	if err != nil {
		return err
	}
	defer sampler.close()

	// Everything that lives as long as the run is allocated (and touched) before the
	// first sample, so that the samples show what the outbox and the producers add.
	probe := newLatencySlots(p.Rate)
	var commits histogram
	var zero, prev, cur, firstEnd, lastStart histCounts
	var prevL, curL, firstEndL, lastStartL histCounts
	nSamples := int(p.Duration/p.Sample) + 2
	samples := make([]soakSample, 0, nSamples)
	m := newBenchMetrics(-1)
	mode := outbox.SingleNode
	if p.MultiNode {
		mode = outbox.MultiNode
	}
	cfg := o.config(t, mode, m)
	if p.MultiNode {
		cfg.ClaimTTL = w1mClaimTTL // docs/multinode.md's configuration, as w1m's
	}
	cfg.PurgeInterval, cfg.PurgeRetention = soakPurgeIntervalFor(p.Retention), p.Retention
	if p.Partitions > 0 {
		if err := t.partitionForSoak(ctx, p.Partitions); err != nil {
			return err
		}
	}
	purges := newPurgeTap(cfg.Logger.Handler())
	cfg.Logger = slog.New(purges)
	ob, err := outbox.New(t.db, cfg)
	if err != nil {
		return err
	}
	if err := ob.Register(aggregateType, eventType, outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		if seq, err := strconv.ParseInt(e.AggregateID, 10, 64); err == nil {
			probe.invoked(seq)
		}
		return nil
	})); err != nil {
		return err
	}
	if p.CPUProfile != "" {
		stop, err := startProfileFile(p.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	// One poll statement before the run, so that the first sample's does not include
	// preparing it.
	var warm soakSample
	sampler.poll(ctx, &warm, pollBatch, p.Sample)
	res.BaseRSSKiB = procStatusKiB("VmRSS")
	if err := ob.Start(ctx); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			stopOutbox(ob)
		}
	}()

	w, _ := soakWindow(p.Duration)
	prevCPU, _ := readCPUTimes()
	start := time.Now()
	var written atomic.Int64
	haveFirst := false
	var samplerWG sync.WaitGroup
	samplerDone := make(chan struct{})
	var samplesMu sync.Mutex
	// take records one sample: the latencies since the last one, then the table's and
	// the process's state, and keeps the snapshots that bound the first and the last
	// latency windows.
	take := func() {
		commits.snapshot(&cur)
		probe.hist.snapshot(&curL)
		elapsed := time.Since(start).Seconds()
		s := soakSample{
			T: math.Round(elapsed*1000) / 1000, Written: written.Load(), Handled: m.done.Load(), Purge: purges.totals(),
			CommitP50: ms(windowQuantile(&prev, &cur, 0.50)), CommitP99: ms(windowQuantile(&prev, &cur, 0.99)),
			ListenerP50: ms(windowQuantile(&prevL, &curL, 0.50)), ListenerP99: ms(windowQuantile(&prevL, &curL, 0.99)),
		}
		prev, prevL = cur, curL
		if !haveFirst && elapsed >= w.Seconds() {
			firstEnd, firstEndL, haveFirst = cur, curL, true
			res.First.To = s.T
		}
		if elapsed <= p.Duration.Seconds()-w.Seconds() {
			lastStart, lastStartL = cur, curL
			res.Last.From = s.T
		}
		sampler.read(ctx, &s, pollBatch, p.Sample)
		s.RSSKiB, s.Goroutines = procStatusKiB("VmRSS"), runtime.NumGoroutine()
		if ct, ok := readCPUTimes(); ok {
			s.CPUBusyPct = math.Round(busyPct(prevCPU, ct)*10) / 10
			prevCPU = ct
		}
		samplesMu.Lock()
		if len(samples) < cap(samples) {
			samples = append(samples, s)
		}
		samplesMu.Unlock()
		progress("soak: %.0fs, %d events written, %d handled, rows %v, poll %.2f ms (from the low-water mark %.2f ms), RSS %.1f MiB, %d goroutines, CPU %.0f %% busy",
			s.T, s.Written, s.Handled, s.Rows, s.PollMS, s.PollLowMS, float64(s.RSSKiB)/1024, s.Goroutines, s.CPUBusyPct)
	}
	samplerWG.Go(func() {
		tick := time.NewTicker(p.Sample)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				take()
			case <-samplerDone:
				return
			}
		}
	})
	stopSampler := func() {
		if samplerDone != nil {
			close(samplerDone)
			samplerWG.Wait()
			samplerDone = nil
		}
	}
	defer stopSampler()

	insert := t.insertOrderSQL()
	wr := ob.Writer()
	planned := int64(float64(p.Rate) * p.Duration.Seconds())
	interval := float64(time.Second) / float64(p.Rate)
	err = produce(ctx, p.Producers, int(planned), func(ctx context.Context, i int) error {
		// produce hands out the indexes in order; index i is due at start + i*interval.
		seq := int64(i)
		due := start.Add(time.Duration(float64(seq) * interval))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		} else if time.Since(start) >= p.Duration {
			return nil // behind schedule at the end: the achieved rate shows it
		}
		began := time.Now()
		if err := writeOne(ctx, o, t, insert, wr, int(seq)); err != nil {
			return err
		}
		commits.add(time.Since(began))
		probe.committed(seq)
		written.Add(1)
		return nil
	})
	res.WriteSeconds = time.Since(start).Seconds()
	res.Written = written.Load()
	if err != nil {
		return err
	}
	stopSampler()
	// The purge deletes DONE rows, so the end is the listener's count, not the table's.
	drainStart := time.Now()
	for m.done.Load() < res.Written {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("waiting for deliveries: %d of %d done: %w", m.done.Load(), res.Written, ctx.Err())
		}
	}
	res.DrainSeconds = time.Since(drainStart).Seconds()
	stopOutbox(ob)
	stopped = true
	commits.snapshot(&cur)
	probe.hist.snapshot(&curL)
	if !haveFirst { // a run shorter than one sample interval past the window
		firstEnd, firstEndL = cur, curL
		res.First.To = res.WriteSeconds
	}
	res.Last.To = res.WriteSeconds
	res.First.CommitP99 = ms(windowQuantile(&zero, &firstEnd, 0.99))
	res.First.ListenerP99 = ms(windowQuantile(&zero, &firstEndL, 0.99))
	res.Last.CommitP99 = ms(windowQuantile(&lastStart, &cur, 0.99))
	res.Last.ListenerP99 = ms(windowQuantile(&lastStartL, &curL, 0.99))
	res.Samples = samples
	res.PeakRSSKiB = procStatusKiB("VmHWM")
	res.Latency = probe.summary(res.Written)
	res.HotDropped, res.ColdEnqueued, res.Failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	res.Purge = purges.totals()
	return nil
}

// partitionForSoak replaces the soak's outbox table (PostgreSQL) with a table
// partitioned by event ID, one partition per period (package outboxpartition), holding
// the same history of delivered rows as reset writes, with IDs of the current period
// (the history's own IDs are not ULIDs, which a partitioned table refuses).
func (t *target) partitionForSoak(ctx context.Context, period time.Duration) error {
	if t.kind != "postgres" {
		return fmt.Errorf("a partitioned table needs PostgreSQL, not %s", t.kind)
	}
	table := t.quoteIdent(t.outboxTable())
	if _, err := t.db.ExecContext(ctx, "DROP TABLE "+table); err != nil {
		return err
	}
	if err := outboxpartition.Migrate(ctx, t.db, t.outboxTable(), outboxpartition.Config{Period: period}); err != nil {
		return err
	}
	prefix := outbox.NewID()[:10] // the time part of a ULID of now
	if _, err := t.db.ExecContext(ctx, "INSERT INTO "+table+
		" (event_id, event_type, aggregate_type, aggregate_id, payload, status, attempts, available_at, created_at, done_at)"+
		" SELECT $1 || lpad(g::text, 16, '0'), 'bench.history', 'bench', g::text, '{}', 1, 1, now(), now(), now()"+
		" FROM generate_series(1, "+strconv.Itoa(historyRows)+") g", prefix); err != nil {
		return fmt.Errorf("write history rows: %w", err)
	}
	return t.analyze(ctx)
}
