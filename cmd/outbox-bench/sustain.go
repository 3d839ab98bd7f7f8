package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// childSustainArg, as the first argument, makes the program run the sustain workload
// as a child process, whose RSS is then the outbox's and the producers' alone.
const childSustainArg = "__child-sustain"

// childSustainParams is what the parent hands the child, as JSON in the second argument.
type childSustainParams struct {
	Kind       string        `json:"kind"`
	DSN        string        `json:"dsn"`
	Schema     string        `json:"schema"`
	Pool       int           `json:"pool"`
	Producers  int           `json:"producers"`
	Rate       int           `json:"rate"`
	Duration   time.Duration `json:"duration"`
	Timeout    time.Duration `json:"timeout"`
	Outbox     childOutbox   `json:"outbox"`
	CPUProfile string        `json:"cpu_profile"`
}

// rssSample is the child's VmRSS T seconds after its producers started.
type rssSample struct {
	T      float64 `json:"t_s"`
	RSSKiB int64   `json:"rss_kib"`
}

// childSustainResult is what the child prints on stdout, as one JSON line.
type childSustainResult struct {
	Written      int64       `json:"written"`
	WriteSeconds float64     `json:"write_seconds"`
	DrainSeconds float64     `json:"drain_seconds"` // after the producers, until every row is DONE
	BaseRSSKiB   int64       `json:"base_rss_kib"`
	PeakRSSKiB   int64       `json:"peak_rss_kib"`
	Samples      []rssSample `json:"samples"`
	Latency      latency     `json:"latency_ms"`
	HotDropped   int64       `json:"hot_dropped"`
	ColdEnqueued int64       `json:"cold_enqueued"`
	Failures     int64       `json:"failures"`
	childErr
}

// sustainRun is one sustain round as reported.
type sustainRun struct {
	TargetRate     int     `json:"target_rate_per_s"`
	Duration       string  `json:"duration"`
	Written        int64   `json:"events_written"`
	AchievedRate   float64 `json:"achieved_rate_per_s"`
	DrainSeconds   float64 `json:"drain_seconds"`
	BaseRSSMiB     float64 `json:"rss_before_start_mib"`
	RSSAt10MiB     float64 `json:"rss_at_10pct_mib"`
	RSSAt50MiB     float64 `json:"rss_at_50pct_mib"`
	RSSAt100MiB    float64 `json:"rss_at_100pct_mib"`
	RSSMaxMiB      float64 `json:"rss_max_mib"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"` // VmHWM at the end: between samples too
	SlopeMiBPerMin float64 `json:"rss_slope_second_half_mib_per_min"`
	Latency        latency `json:"latency_ms"`
	// Samples are the RSS samples, one a second, while writing and draining.
	Samples []rssSample `json:"rss_samples"`
}

func (s sustainRun) String() string {
	return fmt.Sprintf("target %d events/s for %s, achieved %.0f events/s (%d events), DONE %.1fs later; "+
		"RSS %.1f MiB before start, %.1f / %.1f / %.1f MiB at 10 / 50 / 100 %% of the run, max %.1f MiB (peak %.1f MiB), "+
		"slope over the second half %+.2f MiB/min; commit-to-listener p50 %.3f ms, p99 %.3f ms, max %.3f ms",
		s.TargetRate, s.Duration, s.AchievedRate, s.Written, s.DrainSeconds,
		s.BaseRSSMiB, s.RSSAt10MiB, s.RSSAt50MiB, s.RSSAt100MiB, s.RSSMaxMiB, s.PeakRSSMiB,
		s.SlopeMiBPerMin, s.Latency.P50, s.Latency.P99, s.Latency.Max)
}

// sustainDetails is the main table's summary of the sustain rounds: medians.
func sustainDetails(runs []sustainRun) string {
	var at10, at100, mx, slope []float64
	for _, r := range runs {
		at10, at100 = append(at10, r.RSSAt10MiB), append(at100, r.RSSAt100MiB)
		mx, slope = append(mx, r.RSSMaxMiB), append(slope, r.SlopeMiBPerMin)
	}
	what := "RSS"
	if len(runs) > 1 {
		what = "RSS (medians)"
	}
	return fmt.Sprintf("target %d/s for %s; %s %.1f MiB at 10 %%, %.1f MiB at 100 %%, max %.1f MiB, slope over the second half %+.2f MiB/min",
		runs[0].TargetRate, runs[0].Duration, what, median(at10), median(at100), median(mx), median(slope))
}

// runSustain is sustain: in a child process, o.producers producers write one event per
// transaction at o.sustainRate events/s for o.sustainDuration while the child samples
// its RSS every second; then it waits until every event is DONE.
func runSustain(ctx context.Context, o options, t *target, r int) (sample, error) {
	p := childSustainParams{
		Kind: t.kind, DSN: t.dsn, Schema: t.schema, Pool: t.pool, Producers: o.producers, Rate: o.sustainRate,
		Duration: o.sustainDuration, Timeout: o.sustainDuration + o.timeout, Outbox: o.childOutbox(),
	}
	if o.cpuProfile != "" {
		var err error
		if p.CPUProfile, err = profilePath(o.cpuProfile, t, "sustain", r, ""); err != nil {
			return sample{}, err
		}
	}
	var res childSustainResult
	_, err := runChild(ctx, childSustainArg, p, &res)
	if err != nil {
		return sample{}, err
	}
	run := analyzeSustain(res, o.sustainRate, o.sustainDuration)
	return sample{
		events: int(res.Written), txs: int(res.Written), seconds: res.WriteSeconds, lat: &run.Latency, sustain: &run,
		peakRSSKiB: res.PeakRSSKiB, baseRSSKiB: res.BaseRSSKiB,
		hotDropped: res.HotDropped, coldEnqueued: res.ColdEnqueued, failures: res.Failures,
	}, nil
}

// analyzeSustain derives the reported figures from the child's samples: the RSS at 10,
// 50 and 100 % of the duration (the sample nearest to each), the maximum of all samples,
// and the least-squares slope of the samples of the second half.
func analyzeSustain(res childSustainResult, rate int, d time.Duration) sustainRun {
	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	run := sustainRun{
		TargetRate: rate, Duration: d.String(), Written: res.Written, DrainSeconds: res.DrainSeconds,
		BaseRSSMiB: mib(res.BaseRSSKiB), PeakRSSMiB: mib(res.PeakRSSKiB), Latency: res.Latency, Samples: res.Samples,
	}
	if res.WriteSeconds > 0 {
		run.AchievedRate = float64(res.Written) / res.WriteSeconds
	}
	if len(res.Samples) == 0 {
		return run
	}
	total := d.Seconds()
	at := func(frac float64) float64 {
		want := frac * total
		best := res.Samples[0]
		for _, s := range res.Samples {
			if s.T <= total+0.5 && math.Abs(s.T-want) < math.Abs(best.T-want) {
				best = s
			}
		}
		return mib(best.RSSKiB)
	}
	run.RSSAt10MiB, run.RSSAt50MiB, run.RSSAt100MiB = at(0.1), at(0.5), at(1)
	for _, s := range res.Samples {
		run.RSSMaxMiB = max(run.RSSMaxMiB, mib(s.RSSKiB))
	}
	var xs, ys []float64
	for _, s := range res.Samples {
		if s.T >= total/2 && s.T <= total+0.5 {
			xs, ys = append(xs, s.T/60), append(ys, mib(s.RSSKiB))
		}
	}
	run.SlopeMiBPerMin = slope(xs, ys)
	return run
}

// slope is the least-squares slope of ys over xs (0 with fewer than two points).
func slope(xs, ys []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(ys))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// runChildSustain is the child process of sustain. It prints one childSustainResult line
// and returns the exit code.
func runChildSustain(args []string) int {
	var res childSustainResult
	return childMain(&res, func() error { return childSustain(args, &res) })
}

func childSustain(args []string, res *childSustainResult) error {
	if len(args) != 1 {
		return fmt.Errorf("want one JSON argument, got %d", len(args))
	}
	var p childSustainParams
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
	// Everything that lives as long as the run is allocated (and touched) before the
	// first sample, so that the samples show what the outbox and the producers add.
	probe := newLatencySlots(p.Rate)
	samples := make([]rssSample, 0, int(p.Duration.Seconds())+int(p.Timeout.Seconds())+16)
	m := newBenchMetrics(-1)
	ob, err := outbox.New(t.db, o.config(t, outbox.SingleNode, m))
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

	start := time.Now()
	var written atomic.Int64
	// The sampler: VmRSS now and every second until the end.
	var samplerWG sync.WaitGroup
	samplerDone := make(chan struct{})
	var samplesMu sync.Mutex
	samplerWG.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			kib := procStatusKiB("VmRSS")
			elapsed := time.Since(start)
			samplesMu.Lock()
			if len(samples) < cap(samples) {
				samples = append(samples, rssSample{T: math.Round(elapsed.Seconds()*1000) / 1000, RSSKiB: kib})
			}
			samplesMu.Unlock()
			if s := int(elapsed.Round(time.Second) / time.Second); s > 0 && s%30 == 0 {
				fmt.Fprintf(os.Stderr, "%s sustain: %ds, %d events written, %d handled, RSS %.1f MiB\n",
					time.Now().Format("15:04:05"), s, written.Load(), m.done.Load(), float64(kib)/1024)
			}
			select {
			case <-tick.C:
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
	w := ob.Writer()
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
		if err := writeOne(ctx, o, t, insert, w, int(seq)); err != nil {
			return err
		}
		probe.committed(seq)
		written.Add(1)
		return nil
	})
	res.WriteSeconds = time.Since(start).Seconds()
	res.Written = written.Load()
	if err != nil {
		return err
	}
	drainStart := time.Now()
	for m.done.Load() < res.Written {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("waiting for deliveries: %d of %d done: %w", m.done.Load(), res.Written, ctx.Err())
		}
	}
	if err := waitDoneRows(ctx, t, res.Written, 10*time.Millisecond); err != nil {
		return err
	}
	res.DrainSeconds = time.Since(drainStart).Seconds()
	stopSampler()
	stopOutbox(ob)
	stopped = true
	res.Samples = samples
	res.PeakRSSKiB = procStatusKiB("VmHWM")
	res.Latency = probe.summary(res.Written)
	res.HotDropped, res.ColdEnqueued, res.Failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	return nil
}

// latencySlots measures commit-to-listener latencies of an unbounded stream of events in
// constant memory: event seq meets its commit time in slot seq mod len(slots), and the
// one of the two that comes second records the latency in a histogram. An event whose
// slot was taken by a later event first (it waited longer than len(slots) events) is
// not measured: summary reports it as unmatched.
type latencySlots struct {
	base  time.Time
	slots []latencySlot
	mask  int64
	hist  histogram
	early atomic.Int64
}

type latencySlot struct {
	mu             sync.Mutex
	seq            int64
	commit, invoke int64 // nanoseconds since base, +1 so that 0 means "not yet"
}

// newLatencySlots sizes the slots for about 20 seconds at rate events/s and touches
// them, so that they are resident from the start.
func newLatencySlots(rate int) *latencySlots {
	n := int64(1) << bits.Len64(uint64(max(rate*20, 1024)-1))
	n = min(n, 1<<22)
	l := &latencySlots{base: time.Now(), slots: make([]latencySlot, n), mask: n - 1}
	for i := range l.slots {
		l.slots[i].seq = -1
	}
	return l
}

func (l *latencySlots) now() int64 { return int64(time.Since(l.base)) + 1 }

// committed records that event seq's Commit returned.
func (l *latencySlots) committed(seq int64) {
	now := l.now()
	s := &l.slots[seq&l.mask]
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.seq {
		s.seq, s.commit, s.invoke = seq, 0, 0
	}
	if seq != s.seq || s.commit != 0 {
		return
	}
	s.commit = now
	if s.invoke != 0 {
		l.record(s.invoke - now)
	}
}

// invoked records event seq's first listener invocation.
func (l *latencySlots) invoked(seq int64) {
	now := l.now()
	s := &l.slots[seq&l.mask]
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.seq {
		s.seq, s.commit, s.invoke = seq, 0, 0
	}
	if seq != s.seq || s.invoke != 0 {
		return
	}
	s.invoke = now
	if s.commit != 0 {
		l.record(now - s.commit)
	}
}

func (l *latencySlots) record(d int64) {
	if d < 0 {
		// The hot path ran the listener while Commit was still returning.
		l.early.Add(1)
		d = 0
	}
	l.hist.add(time.Duration(d))
}

// summary returns the percentiles of the recorded latencies of written events.
func (l *latencySlots) summary(written int64) latency {
	n := l.hist.count.Load()
	return latency{
		P50: ms(l.hist.quantile(0.50)), P95: ms(l.hist.quantile(0.95)), P99: ms(l.hist.quantile(0.99)),
		Max: ms(time.Duration(l.hist.max.Load())), Early: int(l.early.Load()), Events: int(n),
		Unmatched: max(written-n, 0),
	}
}

// histogram counts durations in buckets 1 % wide (bucket i >= 1 holds
// [1.01^(i-1), 1.01^i) microseconds; bucket 0 below 1 µs), up to about 12 minutes.
type histogram struct {
	counts [histBuckets]atomic.Int64
	count  atomic.Int64
	max    atomic.Int64
}

const histBuckets = 2048

var histLogBase = math.Log(1.01)

func (h *histogram) add(d time.Duration) {
	i := 0
	if us := float64(d) / float64(time.Microsecond); us >= 1 {
		i = min(1+int(math.Log(us)/histLogBase), histBuckets-1)
	}
	h.counts[i].Add(1)
	h.count.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			break
		}
	}
}

// quantile returns the upper bound of the bucket that holds the q-quantile (nearest
// rank), at most the maximum.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(n))), 1)
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			upper := time.Duration(math.Pow(1.01, float64(i)) * float64(time.Microsecond))
			return min(upper, time.Duration(h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}
