package main

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rounds returns one sample per events/s value, each 1,000 events.
func rounds(eps ...float64) []sample {
	out := make([]sample, len(eps))
	for i, e := range eps {
		out[i] = sample{events: 1000, txs: 1000, seconds: 1000 / e}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func nearAll(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !near(got[i], want[i]) {
			return false
		}
	}
	return true
}

func TestMinCeilingOf(t *testing.T) {
	t.Parallel()
	for w, want := range map[string]string{
		"min": "", "sustain": "", "soak": "", "min2": "min", "mind": "min", "a": "min", "b": "min", "b2": "min2", "w1": "min",
		"w1o": "min", "w1m": "min", "w2": "min2", "w3": "min", "w4": "min", "river": "min", "watermill": "min",
	} {
		if got := minCeilingOf(w); got != want {
			t.Errorf("minCeilingOf(%q) = %q, want %q", w, got, want)
		}
	}
}

// TestAddResultsRatios checks that every workload's first ratio is to min of the same
// round (w2 and b2: to min2), that the ratio to b and to the workload's own reference
// stay beside it, and that a skipped peer gets a row that says why.
func TestAddResultsRatios(t *testing.T) {
	t.Parallel()
	samples := map[string][]sample{
		"b":     rounds(800, 900),
		"b2":    rounds(5000, 6000),
		"min":   rounds(1000, 1200),
		"min2":  rounds(10000, 12000),
		"w1":    rounds(700, 600),
		"w2":    rounds(4000, 3000),
		"mind":  rounds(900, 1080),
		"river": rounds(350, 300),
	}
	pg := &target{kind: "postgres", durability: "fast"}
	workloads := []string{"b", "b2", "min", "min2", "w1", "mind", "river", "watermill", "w2"}
	r := &report{}
	r.addResults(options{riverWorkers: 100}, pg, workloads, samples, map[string]string{"watermill": "not here"})
	byName := make(map[string]result)
	var order []string
	for _, res := range r.Results {
		byName[res.Workload] = res
		order = append(order, res.Workload)
	}
	if !slices.Equal(order, workloads) {
		t.Fatalf("results in order %v, want %v", order, workloads)
	}
	tests := []struct {
		w                  string
		minCeiling         string
		toMinRuns          []float64
		ceiling            string
		toCeiling, toB     float64
		toCeilingRunsCount int
	}{
		{w: "b", minCeiling: "min", toMinRuns: []float64{0.8, 0.75}},
		{w: "b2", minCeiling: "min2", toMinRuns: []float64{0.5, 0.5}, toB: (6.25 + 6.0/0.9) / 2},
		{w: "min", ceiling: "b", toCeiling: (1.25 + 1.2/0.9) / 2, toB: (1.25 + 1.2/0.9) / 2, toCeilingRunsCount: 2},
		{w: "min2", minCeiling: "min", toMinRuns: []float64{10, 10}, ceiling: "b2", toCeiling: 2, toB: (12.5 + 12/0.9) / 2, toCeilingRunsCount: 2},
		{w: "w1", minCeiling: "min", toMinRuns: []float64{0.7, 0.5}, ceiling: "b", toCeiling: (0.875 + 6.0/9) / 2, toB: (0.875 + 6.0/9) / 2, toCeilingRunsCount: 2},
		{w: "mind", minCeiling: "min", toMinRuns: []float64{0.9, 0.9}, ceiling: "b", toCeiling: (1.125 + 1.2) / 2, toB: (1.125 + 1.2) / 2, toCeilingRunsCount: 2},
		{w: "river", minCeiling: "min", toMinRuns: []float64{0.35, 0.25}, ceiling: "w1", toCeiling: 0.5, toB: (0.4375 + 1.0/3) / 2, toCeilingRunsCount: 2},
		{w: "w2", minCeiling: "min2", toMinRuns: []float64{0.4, 0.25}, ceiling: "b2", toCeiling: (0.8 + 0.5) / 2, toB: (5 + 3/0.9) / 2, toCeilingRunsCount: 2},
	}
	for _, tt := range tests {
		res := byName[tt.w]
		if res.MinCeiling != tt.minCeiling || !nearAll(res.RatioToMinRuns, tt.toMinRuns) {
			t.Errorf("%s: ratio to %q %v, want to %q %v", tt.w, res.MinCeiling, res.RatioToMinRuns, tt.minCeiling, tt.toMinRuns)
		}
		if len(tt.toMinRuns) > 0 && !near(res.RatioToMin, median(tt.toMinRuns)) {
			t.Errorf("%s: median ratio to min %v, want %v", tt.w, res.RatioToMin, median(tt.toMinRuns))
		}
		if res.Ceiling != tt.ceiling || !near(res.RatioToCeiling, tt.toCeiling) || len(res.RatioToCeilingRuns) != tt.toCeilingRunsCount {
			t.Errorf("%s: ratio to own reference %q %v (%d runs), want %q %v (%d runs)", tt.w, res.Ceiling, res.RatioToCeiling,
				len(res.RatioToCeilingRuns), tt.ceiling, tt.toCeiling, tt.toCeilingRunsCount)
		}
		if !near(res.RatioToB, tt.toB) {
			t.Errorf("%s: ratio to b %v, want %v", tt.w, res.RatioToB, tt.toB)
		}
	}
	wm := byName["watermill"]
	if wm.Skipped != "not here" || wm.Runs != 0 || !strings.HasPrefix(wm.Description, "peer watermill: Watermill SQL v") {
		t.Errorf("skipped watermill = %+v, want Skipped %q, no runs, a description naming its version", wm, "not here")
	}
	if rv := byName["river"]; !strings.Contains(rv.Description, "River v") || !strings.Contains(rv.Description, "100 workers") {
		t.Errorf("river's description %q names no version or worker count", rv.Description)
	}
	if got := byName["river"].WriteEventsPerSec; got != 0 {
		t.Errorf("river without a write phase: WriteEventsPerSec %v, want 0", got)
	}

	// JSON carries the ratios to min and the reason of a skip.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"min_ceiling":"min2"`, `"ratio_to_min_runs":[0.4,0.25]`, `"skipped":"not here"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

func TestMarkdownRow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  result
		want string
	}{
		{
			name: "ratio to min and to b",
			res: result{Workload: "w1", Description: "W1", Events: 20000, EventsPerSec: 6503, Runs: 5, MinCeiling: "min", RatioToMin: 0.61,
				Ceiling: "b", RatioToCeiling: 0.87, RatioToB: 0.87, WriteEventsPerSec: 6521},
			want: "| W1 | 20000 | 6503 | 0.61 × min | 0.87 × b | median of 5; write phase 6521 ev/s |\n",
		},
		{
			name: "own reference beside b",
			res: result{Workload: "w2", Description: "W2", Events: 20000, EventsPerSec: 43953, Runs: 1, MinCeiling: "min2", RatioToMin: 0.2,
				Ceiling: "b2", RatioToCeiling: 0.6, RatioToB: 6.25},
			want: "| W2 | 20000 | 43953 | 0.20 × min2 | 0.60 × b2 (6.25 × b) |  |\n",
		},
		{
			name: "min itself",
			res:  result{Workload: "min", Description: "min", Events: 20000, EventsPerSec: 8000, Runs: 1, Ceiling: "b", RatioToCeiling: 1.14, RatioToB: 1.14},
			want: "| min | 20000 | 8000 | — | 1.14 × b |  |\n",
		},
		{
			name: "peer that lost events",
			res: result{Workload: "watermill", Description: "watermill", Events: 194, EventsPerSec: 150, Runs: 1, MinCeiling: "min", RatioToMin: 0.05,
				Ceiling: "w1", RatioToCeiling: 0.1, RatioToB: 0.08, Lost: 6},
			want: "| watermill | 194 | 150 | 0.05 × min | 0.10 × w1 (0.08 × b) | **6 events lost** (never reached the consumer; events/s counts the delivered ones) |\n",
		},
		{
			name: "skipped peer",
			res:  result{Workload: "river", Description: "river", Skipped: "PostgreSQL only"},
			want: "| river | — | — | — | — | skipped: PostgreSQL only |\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.res.markdownRow(); got != tt.want {
				t.Errorf("markdownRow() =\n%q\nwant\n%q", got, tt.want)
			}
			if n := strings.Count(tt.want, "|") - 1; n != strings.Count(tableHeader[:strings.Index(tableHeader, "\n")], "|")-1 {
				t.Errorf("row has %d columns, the header another count", n)
			}
		})
	}
}

func TestWriteRounds(t *testing.T) {
	t.Parallel()
	results := []result{
		{Workload: "river", Skipped: "PostgreSQL only"},
		{Workload: "w1o", Runs: 2, EventsPerSecRuns: []float64{500, 600}, MinCeiling: "min", RatioToMinRuns: []float64{0.5, 0.6},
			Ceiling: "w1", RatioToCeilingRuns: []float64{0.8, 0.9}, RatioToBRuns: []float64{0.7, 0.75}},
		{Workload: "min", Runs: 2, EventsPerSecRuns: []float64{1000, 1000}, Ceiling: "b", RatioToCeilingRuns: []float64{1.2, 1.3}, RatioToBRuns: []float64{1.2, 1.3}},
	}
	var sb strings.Builder
	writeRounds(&sb, results)
	got := sb.String()
	for _, want := range []string{
		"rounds 1 to 2 in order",
		"| W1o | 500, 600 | 500 / 550 / 600 | 0.50, 0.60 × min; 0.80, 0.90 × w1; 0.70, 0.75 × b | 0.50 / 0.55 / 0.60 × min; 0.80 / 0.85 / 0.90 × w1; 0.70 / 0.72 / 0.75 × b | — |\n",
		"| min | 1000, 1000 | 1000 / 1000 / 1000 | 1.20, 1.30 × b | 1.20 / 1.25 / 1.30 × b | — |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("per-round table lacks\n%s\ngot\n%s", want, got)
		}
	}
	if strings.Contains(got, "| river |") {
		t.Errorf("per-round table has a row for a skipped workload:\n%s", got)
	}
}

func TestPeerUnsupported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		w, kind string
		skip    bool
	}{
		{"river", "postgres", false}, {"river", "mysql", true}, {"river", "sqlite", true},
		{"watermill", "postgres", false}, {"watermill", "mysql", false}, {"watermill", "sqlite", true},
		{"w1", "sqlite", false}, {"min", "mysql", false},
	}
	for _, tt := range tests {
		if got := peerUnsupported(tt.w, tt.kind); (got != "") != tt.skip {
			t.Errorf("peerUnsupported(%q, %q) = %q, want a reason: %v", tt.w, tt.kind, got, tt.skip)
		}
	}
}

func TestParseFlagsReferences(t *testing.T) {
	t.Parallel()
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"min", "min2", "mind", "river", "watermill"} {
		if !slices.Contains(o.workloads, w) {
			t.Errorf("default workloads %v lack %s", o.workloads, w)
		}
	}
	if o.riverWorkers != 100 {
		t.Errorf("-river-workers defaults to %d, want 100", o.riverWorkers)
	}
	o, err = parseFlags([]string{"-workloads", "watermill,w1,min,river,min2,mind", "-scale", "0.05"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"min", "min2", "w1", "mind", "river", "watermill"}; !slices.Equal(o.workloads, want) {
		t.Errorf("workloads %v, want %v (the canonical order)", o.workloads, want)
	}
	if o.w1Tx != 1000 || o.w2Tx != 10 {
		t.Errorf("-scale 0.05: w1 %d tx, w2 %d tx, want 1000 and 10", o.w1Tx, o.w2Tx)
	}
	if _, err := parseFlags([]string{"-river-workers", "0"}); err == nil {
		t.Error("-river-workers 0 accepted")
	}
}
