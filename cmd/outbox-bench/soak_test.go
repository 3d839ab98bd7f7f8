package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSoakWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d      time.Duration
		want   time.Duration
		scaled bool
	}{
		{20 * time.Minute, 5 * time.Minute, false},
		{10 * time.Minute, 5 * time.Minute, false},
		{9 * time.Minute, 270 * time.Second, true},
		{time.Minute, 30 * time.Second, true},
	} {
		got, scaled := soakWindow(tc.d)
		if got != tc.want || scaled != tc.scaled {
			t.Errorf("soakWindow(%s) = %s, %v; want %s, %v", tc.d, got, scaled, tc.want, tc.scaled)
		}
	}
}

func TestP99Ratio(t *testing.T) {
	t.Parallel()
	if got := p99Ratio(2, 3); got != 1.5 {
		t.Errorf("p99Ratio(2, 3) = %v, want 1.5", got)
	}
	if got := p99Ratio(0, 3); got != 0 {
		t.Errorf("p99Ratio(0, 3) = %v, want 0 (nothing measured in the first window)", got)
	}
}

// TestWindowQuantile checks that the difference of two snapshots holds what was
// recorded between them alone.
func TestWindowQuantile(t *testing.T) {
	t.Parallel()
	var h histogram
	var zero, a, b histCounts
	for range 100 {
		h.add(time.Millisecond)
	}
	h.snapshot(&a)
	for range 100 {
		h.add(10 * time.Millisecond)
	}
	h.snapshot(&b)
	within := func(got, want time.Duration) bool {
		return math.Abs(float64(got-want)) <= 0.011*float64(want) // a bucket is 1 % wide
	}
	if got := windowQuantile(&zero, &a, 0.99); !within(got, time.Millisecond) {
		t.Errorf("first window p99 = %s, want about 1ms", got)
	}
	if got := windowQuantile(&a, &b, 0.50); !within(got, 10*time.Millisecond) {
		t.Errorf("second window p50 = %s, want about 10ms", got)
	}
	if got := windowQuantile(&zero, &b, 0.50); !within(got, time.Millisecond) {
		t.Errorf("whole run p50 = %s, want about 1ms", got)
	}
	if got := windowQuantile(&a, &a, 0.99); got != 0 {
		t.Errorf("empty window p99 = %s, want 0", got)
	}
}

// soakSamples builds a 10-minute run sampled every 10 s: RSS grows 2 MiB a minute, DONE
// rows stay flat, RETRY rows appear at 5 minutes, autovacuum runs every 2 minutes, the
// slowest poll statement from the mark takes 2 ms but 12 ms at 100 s.
func soakSamples() []soakSample {
	var out []soakSample
	for i := 1; i <= 60; i++ {
		t := float64(i * 10)
		s := soakSample{
			T: t, CommitP50: 0.5, CommitP99: 2, ListenerP50: 0.01, ListenerP99: 1,
			Rows:   map[string]int64{"DONE": 60000, "NEW": 3},
			Sizes:  []relationSize{{Name: "outbox_event", Kind: "heap", Bytes: 8 << 20}, {Name: "outbox_event_pkey", Kind: "index", Bytes: 2 << 20}},
			PG:     &pgTableStats{DeadTuples: int64(i%12) * 1000, Autovacuums: int64(i / 12)},
			PollMS: 0.3, RSSKiB: int64((100 + 2*t/60) * 1024), Goroutines: 30, CPUBusyPct: 55,
			PollServer: []pollServerStats{{Kind: "mark", Calls: 12, MeanMS: 1, MaxMS: 2, Buffers: 40}, {Kind: "head", Calls: 1, MeanMS: 3, MaxMS: 3, Buffers: 900}},
		}
		if t == 100 {
			s.PollServer[0].MaxMS = 12
		}
		if t >= 300 {
			s.Rows["RETRY"] = 5
		}
		out = append(out, s)
	}
	return out
}

func TestSoakSlopes(t *testing.T) {
	t.Parallel()
	slopes := soakSlopes(soakSamples(), 300, 300)
	by := make(map[string]seriesSlope)
	for _, s := range slopes {
		by[s.Series] = s
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-3 } // RSS is in whole KiB
	if s := by["RSS"]; !near(s.PerMin, 2) || s.Unit != "MiB" || !near(s.First, 100+2.0/6) || !near(s.Last, 120) || !near(s.Max, 120) {
		t.Errorf("RSS = %+v, want slope 2 MiB/min from 100.33 to 120", s)
	}
	if s := by["rows DONE"]; s.PerMin != 0 || s.Last != 60000 {
		t.Errorf("rows DONE = %+v, want flat at 60000", s)
	}
	// RETRY is missing before 5 minutes (no rows), which counts as 0.
	if s := by["rows RETRY"]; s.First != 0 || s.Last != 5 || s.PerMin != 0 {
		t.Errorf("rows RETRY = %+v, want 0 first, 5 last, flat over the second half", s)
	}
	// The largest of the last window (from 300 s) leaves out the 12 ms at 100 s.
	if s := by["poll mark, server max"]; s.Max != 12 || s.LastMax != 2 || s.Unit != "ms" {
		t.Errorf("poll mark, server max = %+v, want max 12, max of the last window 2", s)
	}
	for _, name := range []string{"commit p99", "listener p99", "heap outbox_event", "index outbox_event_pkey", "dead tuples", "autovacuum count", "poll statement",
		"poll head, server mean", "goroutines"} {
		if _, ok := by[name]; !ok {
			t.Errorf("no series %q in %v", name, slopes)
		}
	}
	if slopes[0].Series != "commit p50" {
		t.Errorf("first series %q, want commit p50 (the order of soakSample.series)", slopes[0].Series)
	}
}

func TestAnalyzeSoak(t *testing.T) {
	t.Parallel()
	res := childSoakResult{
		Written: 60000, WriteSeconds: 60, Samples: soakSamples()[:6],
		First: latencyWindow{From: 0, To: 30, CommitP99: 2, ListenerP99: 1},
		Last:  latencyWindow{From: 30, To: 60, CommitP99: 3, ListenerP99: 4},
	}
	run := analyzeSoak(res, childSoakParams{Rate: 1000, Duration: time.Minute, Retention: 20 * time.Second, Sample: 10 * time.Second})
	if !run.WindowScaled || run.LatencyWindowMin != 0.5 {
		t.Errorf("window %v min, scaled %v; want 0.5, true", run.LatencyWindowMin, run.WindowScaled)
	}
	if run.CommitP99Ratio != 1.5 || run.ListenerP99Ratio != 4 {
		t.Errorf("ratios %v, %v; want 1.5, 4", run.CommitP99Ratio, run.ListenerP99Ratio)
	}
	if run.AchievedRate != 1000 || run.PurgeInterval != "10s" {
		t.Errorf("achieved %v/s, purge every %s; want 1000, 10s", run.AchievedRate, run.PurgeInterval)
	}
	if !strings.Contains(run.String(), "halves") || !strings.Contains(run.markdownTable(), "| RSS | MiB |") {
		t.Errorf("summary does not say the windows were scaled, or the table has no RSS row:\n%s\n%s", run.String(), run.markdownTable())
	}
}

func TestSoakPurgeIntervalFor(t *testing.T) {
	t.Parallel()
	if got := soakPurgeIntervalFor(time.Minute); got != 10*time.Second {
		t.Errorf("for 1m: %s, want 10s", got)
	}
	if got := soakPurgeIntervalFor(3 * time.Second); got != 3*time.Second {
		t.Errorf("for 3s: %s, want 3s", got)
	}
}

// svgElements parses an SVG document and counts its elements by name; it fails the
// test if the document is not well-formed XML or its root is not an SVG element.
func svgElements(t *testing.T, doc []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	counts := make(map[string]int)
	first := true
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if first && (se.Name.Local != "svg" || se.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element %v, want svg in the SVG namespace", se.Name)
			}
			first = false
			counts[se.Name.Local]++
		}
	}
	return counts
}

func TestWriteSoakSVG(t *testing.T) {
	t.Parallel()
	run := soakRun{DB: "postgres/fast", TargetRate: 1000, Duration: "10m0s", Retention: "1m0s", PurgeInterval: "10s",
		SampleInterval: "10s", Samples: soakSamples()}
	panels := soakPanels(run)
	titles := make([]string, len(panels))
	for i, p := range panels {
		titles[i] = p.title
	}
	if len(panels) != 9 {
		t.Fatalf("%d panels (%q), want 9: latency, rows, sizes, dead tuples, poll, poll on the server, RSS, goroutines, CPU", len(panels), titles)
	}
	if server := panels[5]; len(server.lines) != 2 || server.lines[0].name != "poll mark, server max" {
		t.Errorf("the server's poll panel has %d lines, want 2 (the slowest read from the mark, from the head)", len(server.lines))
	}
	for _, l := range panels[1].lines {
		if segs := svgSegments(l, false); len(segs) != 1 || len(segs[0]) != 60 {
			t.Errorf("%s: %d runs, want one of 60 points (a status with no rows is 0, not a gap)", l.name, len(segs))
		}
	}
	if dead := panels[3]; len(dead.marks) != 5 {
		t.Errorf("%d autovacuum marks, want 5 (every 2 minutes after the first)", len(dead.marks))
	}
	var buf bytes.Buffer
	if err := writeSoakSVG(&buf, `soak <postgres> & "quotes"`, panels); err != nil {
		t.Fatal(err)
	}
	counts := svgElements(t, buf.Bytes())
	// 4 latencies, 3 statuses, 2 sizes, 2 polls (from the oldest row, from the
	// low-water mark), 2 on the server, 1 each for dead tuples, RSS, goroutines, CPU.
	if counts["polyline"] != 17 {
		t.Errorf("%d polylines, want 17", counts["polyline"])
	}
	if counts["g"] != 9 {
		t.Errorf("%d panels drawn, want 9", counts["g"])
	}
	if s := buf.String(); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		t.Errorf("the SVG holds NaN or Inf coordinates")
	}
}

// TestWriteSoakSVGGaps checks that runs of points are cut at values that cannot be
// drawn, and that a panel without data still draws.
func TestWriteSoakSVGGaps(t *testing.T) {
	t.Parallel()
	line := svgLine{name: "p99", x: []float64{0, 1, 2, 3, 4, 5}, y: []float64{1, math.NaN(), 2, 3, 0, 4}}
	if segs := svgSegments(line, false); len(segs) != 2 || len(segs[1]) != 4 {
		t.Errorf("linear: %v, want 2 runs, the second of 4 points", segs)
	}
	if segs := svgSegments(line, true); len(segs) != 3 {
		t.Errorf("log: %v, want 3 runs (0 cannot be drawn)", segs)
	}
	panels := []svgPanel{
		{title: "latency", logY: true, lines: []svgLine{line}},
		{title: "empty"},
		{title: "flat", lines: []svgLine{{name: "c", x: []float64{0, 1}, y: []float64{7, 7}}}},
	}
	var buf bytes.Buffer
	if err := writeSoakSVG(&buf, "gaps", panels); err != nil {
		t.Fatal(err)
	}
	counts := svgElements(t, buf.Bytes())
	if counts["polyline"] != 4 {
		t.Errorf("%d polylines, want 4 (3 runs of the log line, 1 flat line)", counts["polyline"])
	}
	if !strings.Contains(buf.String(), "no data") {
		t.Errorf("the empty panel does not say it has no data")
	}
	if s := buf.String(); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		t.Errorf("the SVG holds NaN or Inf coordinates")
	}
}

func TestParseSoakFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		err  string // a part of the error; "" for none
	}{
		{[]string{"-workloads", "soak"}, ""},
		{[]string{"-workloads", "soak", "-soak-duration", "1m", "-soak-retention", "20s", "-soak-sample", "5s", "-soak-rate", "200", "-soak-svg-dir", "x"}, ""},
		{[]string{"-workloads", "soak", "-tiny"}, "-tiny does not run soak"},
		{[]string{"-workloads", "w1", "-soak-svg-dir", "docs"}, "soak is not in -workloads"},
		{[]string{"-workloads", "soak", "-soak-rate", "0"}, "-soak-rate must be positive"},
		{[]string{"-workloads", "soak", "-soak-mode", "multi"}, "-soak-mode must be singlenode or multinode"},
		{[]string{"-workloads", "soak", "-soak-mode", "multinode"}, ""},
		{[]string{"-workloads", "soak", "-soak-partition-period", "1m"}, "-db postgres alone"},
		{[]string{"-workloads", "soak", "-db", "postgres", "-soak-partition-period", "1m"}, ""},
		{[]string{"-workloads", "soak", "-db", "postgres", "-soak-partition-period", "-1m"}, "must not be negative"},
		{[]string{"-workloads", "soak", "-soak-duration", "0s"}, "-soak-duration must be positive"},
		{[]string{"-workloads", "soak", "-soak-retention", "0s"}, "-soak-retention must be at least 1s"},
		{[]string{"-workloads", "soak", "-soak-sample", "100ms"}, "-soak-sample must be at least 1s"},
		{[]string{"-workloads", "soak", "-soak-duration", "15s"}, "fewer than two samples"},
		{[]string{"-workloads", "soak", "-soak-duration", "1m", "-soak-retention", "40s"}, "steady state"},
		// The soak flags are not checked when soak does not run.
		{[]string{"-workloads", "w1", "-soak-rate", "0"}, ""},
	} {
		_, err := parseFlags(append([]string{"-db", "sqlite"}, tc.args...))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one with %q", tc.args, err, tc.err)
		}
	}
}

func TestNiceStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		span float64
		n    int
		want float64
	}{{6300, 4, 2000}, {1, 5, 0.2}, {0.917, 5, 0.2}, {20, 5, 5}, {100, 4, 25}, {0, 4, 1}} {
		if got := niceStep(tc.span, tc.n); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.want)
		}
	}
	for v, want := range map[float64]string{6000: "6000", 0.25: "0.25", 25000: "25k", 1.5e6: "1.5M", 0: "0"} {
		if got := svgNumber(v); got != want {
			t.Errorf("svgNumber(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestBusyPct: the busy share is the busy ticks over every tick between two readings,
// and /proc/stat, where the machine has one, gives readings that move forward.
func TestBusyPct(t *testing.T) {
	t.Parallel()
	if got := busyPct(cpuTimes{busy: 100, total: 400}, cpuTimes{busy: 160, total: 480}); got != 75 {
		t.Errorf("busyPct = %v, want 75", got)
	}
	if got := busyPct(cpuTimes{busy: 1, total: 2}, cpuTimes{busy: 1, total: 2}); got != 0 {
		t.Errorf("busyPct with no time passed = %v, want 0", got)
	}
	a, ok := readCPUTimes()
	if !ok {
		t.Skip("no /proc/stat here")
	}
	if a.busy == 0 || a.total <= a.busy {
		t.Errorf("readCPUTimes = %+v: want busy > 0 and below the total", a)
	}
}

// TestPurgeTapAddsUpPurgeRuns: the soak's log handler adds up the purge's INFO lines
// (rows deleted, time taken), passes every record on only at its handler's level, and
// keeps adding up through loggers derived with With.
func TestPurgeTapAddsUpPurgeRuns(t *testing.T) {
	var out bytes.Buffer
	tap := newPurgeTap(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError}))
	log := slog.New(tap).With(slog.String("component", "purger"))
	log.Info("purged finished events", slog.Int64("deleted", 500), slog.Duration("took", 5*time.Millisecond))
	log.Info("purged finished events", slog.Int64("deleted", 300), slog.Duration("took", 3*time.Millisecond))
	log.Info("something else", slog.Int64("deleted", 7))
	log.Info("partitions maintained", slog.Any("created", []string{"p3"}), slog.Any("dropped", []string{"p1", "p2"}), slog.Duration("took", 2*time.Millisecond))
	if got := tap.totals(); got.Runs != 2 || got.Rows != 800 || got.Millis != 8 || got.MicrosPerRow() != 10 || got.PartitionsDropped != 2 || got.DropMillis != 2 {
		t.Fatalf("totals %+v (%.1f µs/row), want 2 runs, 800 rows, 8 ms, 10 µs/row, 2 partitions dropped in 2 ms", got, got.MicrosPerRow())
	}
	if out.Len() != 0 {
		t.Fatalf("INFO records passed on to an ERROR handler: %q", out.String())
	}
	log.Error("boom")
	if !strings.Contains(out.String(), "boom") {
		t.Fatalf("an ERROR record was not passed on: %q", out.String())
	}
}

func TestWithoutParallelQuery(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u@h:5432/db", "postgres://u@h:5432/db?max_parallel_workers_per_gather=0"},
		{"postgres://u@h/db?sslmode=disable", "postgres://u@h/db?sslmode=disable&max_parallel_workers_per_gather=0"},
		{"host=h dbname=db", "host=h dbname=db max_parallel_workers_per_gather=0"},
	} {
		if got := withoutParallelQuery(c.in); got != c.want {
			t.Errorf("withoutParallelQuery(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
