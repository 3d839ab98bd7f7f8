package chaos

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestScoreboard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	t.Setenv(EnvResults, path)
	t.Setenv(EnvLong, "")
	t.Setenv(EnvDuration, "")
	t.Run("publish", func(t *testing.T) {
		rep := Report{Committed: 10, Delivered: 12, Duplicates: map[string]int{"a": 2},
			DuplicateCauses: map[string]int{"node killed after delivery": 2}, LongestGap: 1500 * time.Millisecond}
		res := rep.Result("kill-random", "postgres")
		res.Seed = 42
		Publish(t, res)
		Publish(t, Result{Kind: KindBadInput, Target: "envelope decoding", Inputs: 100, Rejected: 60, Note: "fuzzed JSON"})
	})
	// A long-tier line replaces the short ones of its row.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"kind":"scenario","scenario":"no-faults","database":"mysql","tier":"short","committed":1,"pass":true}` + "\n")
	f.WriteString(`{"kind":"scenario","scenario":"no-faults","database":"mysql","tier":"long","committed":7,"pass":false}` + "\n")
	f.WriteString(`{"kind":"scenario","scenario":"late-commit/multi","database":"sqlite","tier":"long","committed":3,"pass":true}` + "\n")
	f.WriteString(`{"kind":"scenario","scenario":"ordered/kill-random","database":"mysql","tier":"long","committed":9,"delivered":9,"pass":true,` +
		`"ordered":true,"keys":24,"out_of_order":1,"takeovers":2,"takeover_ms":3100,"at":"2026-01-02T10:00:00Z"}` + "\n")
	// A run whose server failed its crash recovery is an infrastructure failure, told
	// apart from the library's gates.
	f.WriteString(`{"kind":"scenario","scenario":"db-kill-restart","database":"mysql","tier":"short","seed":7,"committed":5,"delivered":5,"pass":true}` + "\n")
	f.WriteString(`{"kind":"scenario","scenario":"db-kill-restart","database":"mysql","tier":"short","seed":8,"faults":13,` +
		`"infra":"server failed crash recovery: [ERROR] InnoDB: Unable to apply log to corrupted page [page id: space=5, page number=3]","pass":false}` + "\n")
	// A run that paused a subscription: its pauses under the table.
	f.WriteString(`{"kind":"scenario","scenario":"fan-out/kill-random","database":"postgres","tier":"short","committed":4,"delivered":12,` +
		`"pauses":3,"resumes":4,"pause_calls_cut":1,"paused_ms":7250,"pass":true}` + "\n")
	f.WriteString(`{"kind":"scenario","scenario":"no-fa`) // torn
	f.Close()

	results, err := ReadResults(path, filepath.Join(t.TempDir(), "missing.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 9 || results[1].Kind != KindScenario { // cleanups run last first
		t.Fatalf("%d results, want 9: %+v", len(results), results)
	}
	if r := results[1]; !r.Pass || r.Tier != "short" || r.Duplicates != 2 || r.Seed != 42 || r.LongestGapMS != 1500 {
		t.Fatalf("first result %+v", r)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, results, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "abc1234"); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"run on commit `abc1234`",
		"| kill-random | PostgreSQL | 1 |",
		"2 (node killed after delivery: 2)",
		"| no-faults | MariaDB | 1 |", "| 7 |", "**FAIL** (1 of 1 runs)",
		"| envelope decoding | 100 | 60 | 40 | 0 |",
		"- **envelope decoding**: fuzzed JSON",
		"kill-random on PostgreSQL: 42",
		"- **late-commit/multi**: Long transactions write their events early",
		// Ordered runs have their own table, with the order checker's columns.
		"## Ordered delivery",
		"| ordered/kill-random | MariaDB | 1 | 0s | 0 | 9 | 9 | 24 | 0 | 0 | 0 | 0 | 1 | 0 | 0 | 0 | 2 (longest 3.1s) | 0 | pass |",
		"- **ordered/kill-random**: A random node process is killed",
		"| db-kill-restart | MariaDB | 2 | 0s | 13 | 5 | 0 | 5 | 0 | 0 | 0 | 0 | 0 | 0 | – | 0s | **INFRA FAILURE** (1 of 2 runs, not the library's) |",
		"- db-kill-restart on MariaDB, seed 8: server failed crash recovery: [ERROR] InnoDB: Unable to apply log to corrupted page",
		"| fan-out/kill-random | PostgreSQL | 1 |",
		"- fan-out/kill-random on PostgreSQL: pauses 3, resumes 4, calls cut by a kill or failed 1; paused 7.3s in all; attempts started late under a pause: 0",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if i := strings.Index(md, "## Ordered delivery"); strings.Contains(md[:i], "ordered/kill-random") {
		t.Errorf("an ordered row in the unordered table:\n%s", md)
	}
	if strings.Contains(md, "| 1 | 0 | 0 |") && strings.Contains(md, "no-faults | MariaDB | 2") {
		t.Errorf("short-tier line kept next to a long one:\n%s", md)
	}
}

// TestScenariosDescribed: every scenario the suite names with a literal, and every
// scenario of the kill and crash families, has a description in RELIABILITY.md's
// legend (a scenario without one was listed as "(no description)").
func TestScenariosDescribed(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	literal := regexp.MustCompile(`\.finish\((?:prefix\s*\+\s*)?"([^"]+)"`)
	var names []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllSubmatch(src, -1) {
			names = append(names, string(m[1]))
		}
	}
	if len(names) < 4 {
		t.Fatalf("found %d scenario names in the tests (%q): the pattern no longer matches", len(names), names)
	}
	names = append(names, "crash-after-claim", "crash-after-listener", "crash-after-insert")
	for _, name := range names {
		if strings.HasSuffix(name, "-") {
			continue // a prefix completed at run time ("crash-" + point), listed above
		}
		if scenarioInfo(name) == "" {
			t.Errorf("scenario %q has no description in ScenarioInfo", name)
		}
	}
}
