package chaos

// The scoreboard: every scenario run appends one JSON line to the file named by
// $OUTBOX_CHAOS_RESULTS (when set), and internal/chaos/cmd/scoreboard turns the lines of
// one or more such files into docs/RELIABILITY.md.
//
// Two record shapes share the type [Result], told apart by "kind":
//
//	{"kind":"scenario","scenario":"kill-random","database":"postgres","tier":"long",
//	 "seed":42,"seconds":61.2,"faults":12,"committed":5000,"unknown":3,"rolledback":0,
//	 "delivered":5007,"dead":0,"lost":0,"phantom":0,"unexpected":0,"stuck":0,"overlaps":0,
//	 "duplicates":7,"duplicate_causes":{"node killed after delivery":7},
//	 "restarts":0,"recovery_ms":0,"longest_gap_ms":850,"pass":true,"at":"…"}
//
// A scenario that pauses and resumes a subscription adds "pauses", "resumes",
// "pause_calls_cut", "paused_ms" and "paused_late" (see Result).
//
//	{"kind":"badinput","target":"envelope decoding","inputs":120000,"rejected":119000,
//	 "crashes":0,"seconds":30,"tier":"long","pass":true,"at":"…"}
//
// A scenario whose infrastructure failed (a server that failed its crash recovery)
// publishes a line with "infra" set, "pass":false and no figures:
//
//	{"kind":"scenario","scenario":"db-kill-restart","database":"mysql","tier":"short",
//	 "seed":7,"seconds":20.5,"faults":13,"infra":"server failed crash recovery: …",
//	 "pass":false,"at":"…"}
//
// A scenario result is built with [Report.Result] and published with [Publish]; a
// bad-input result is built by hand (Kind: KindBadInput, Target, Inputs, Rejected,
// Crashes) and published the same way. Publish fills Tier, At and, in a cleanup after
// the test, Pass (= the test did not fail), then appends the line. "rejected" counts
// inputs refused with an error (cleanly), "crashes" panics or hangs; inputs accepted as
// valid are inputs − rejected.
//
// The generator keeps, for each (scenario, database) or bad-input target, the results
// of the longest tier present (long over short) and sums their figures over runs
// (recovery and longest gap: the maximum). A scenario's "note" (the first non-empty
// one) describes it in the legend when the generator does not know the scenario.

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"
)

// Result kinds.
const (
	KindScenario = "scenario"
	KindBadInput = "badinput"
)

// EnvResults names the JSON-lines file results are appended to.
const EnvResults = "OUTBOX_CHAOS_RESULTS"

// Result is one scoreboard line. See the file comment for the two shapes.
type Result struct {
	Kind     string    `json:"kind"`
	Scenario string    `json:"scenario,omitempty"`
	Database string    `json:"database,omitempty"` // "postgres", "mysql", "sqlite"
	Target   string    `json:"target,omitempty"`   // bad input: what was fed the inputs
	Tier     string    `json:"tier"`               // "short" or "long"
	Seed     int64     `json:"seed,omitempty"`
	Seconds  float64   `json:"seconds"`
	Faults   int       `json:"faults,omitempty"` // faults injected
	Pass     bool      `json:"pass"`
	At       time.Time `json:"at"`
	Note     string    `json:"note,omitempty"`   // describes the scenario or target
	Server   string    `json:"server,omitempty"` // the server's version string
	// Infra, when set, is why the run failed apart from the library: its
	// infrastructure failed (a database server that did not come back from a restart,
	// InfraError), so the gates did not judge it and its figures are not the run's.
	Infra string `json:"infra,omitempty"`

	// Scenario figures, from a Report.
	Committed       int            `json:"committed,omitempty"`
	Unknown         int            `json:"unknown,omitempty"`
	RolledBack      int            `json:"rolledback,omitempty"`
	Aborted         int            `json:"aborted,omitempty"`
	Delivered       int            `json:"delivered,omitempty"`
	Dead            int            `json:"dead,omitempty"`
	Lost            int            `json:"lost"`
	Phantom         int            `json:"phantom"`
	Unexpected      int            `json:"unexpected"`
	Stuck           int            `json:"stuck"`
	Overlaps        int            `json:"overlaps"`
	Duplicates      int            `json:"duplicates"`
	DuplicateCauses map[string]int `json:"duplicate_causes,omitempty"`
	Restarts        int            `json:"restarts,omitempty"`
	RecoveryMS      float64        `json:"recovery_ms,omitempty"`
	LongestGapMS    float64        `json:"longest_gap_ms"`

	// Order figures, for a run with ordered events (see OrderReport).
	Ordered          bool    `json:"ordered,omitempty"`
	Keys             int     `json:"keys,omitempty"`
	OutOfOrder       int     `json:"out_of_order,omitempty"`
	SeqAgainstCommit int     `json:"seq_against_commit,omitempty"`
	KeyOverlaps      int     `json:"key_overlaps,omitempty"`
	StalledOverlaps  int     `json:"stalled_overlaps,omitempty"`
	Takeovers        int     `json:"takeovers,omitempty"`
	TakeoverMS       float64 `json:"takeover_ms,omitempty"`

	// Pause figures, for a run that paused and resumed a subscription (see
	// PauseReport): the Pause and Resume calls that returned nil, those whose outcome
	// is unknown (the node was killed mid-call, or the call failed), the time pauses were
	// known to be in force, and the attempts that started past the bound under a pause
	// (the gate: 0).
	Pauses        int     `json:"pauses,omitempty"`
	Resumes       int     `json:"resumes,omitempty"`
	PauseCallsCut int     `json:"pause_calls_cut,omitempty"`
	PausedMS      float64 `json:"paused_ms,omitempty"`
	PausedLate    int     `json:"paused_late,omitempty"`

	// Bad-input figures.
	Inputs   int `json:"inputs,omitempty"`
	Rejected int `json:"rejected,omitempty"`
	Crashes  int `json:"crashes"`
}

// Result turns the report into a scenario result for the scoreboard.
func (r Report) Result(scenario, database string) Result {
	return Result{
		Kind: KindScenario, Scenario: scenario, Database: database,
		Committed: r.Committed, Unknown: r.Unknown, RolledBack: r.RolledBack, Aborted: r.Aborted,
		Delivered: r.Delivered, Dead: r.Dead,
		Lost: len(r.Lost), Phantom: len(r.Phantom), Unexpected: len(r.Unexpected),
		Stuck: len(r.Stuck), Overlaps: len(r.Overlaps),
		Duplicates: r.DuplicateCount(), DuplicateCauses: r.DuplicateCauses,
		Restarts:     r.Restarts,
		RecoveryMS:   ms(r.Recovery),
		LongestGapMS: ms(r.LongestGap),

		Ordered: r.Order.Events > 0, Keys: r.Order.Keys,
		OutOfOrder: len(r.Order.OutOfOrder), SeqAgainstCommit: len(r.Order.SeqAgainstCommit),
		KeyOverlaps: len(r.Order.KeyOverlaps), StalledOverlaps: len(r.Order.StalledOverlaps) + len(r.StalledOverlaps),
		Takeovers: r.Order.Takeovers, TakeoverMS: ms(r.Order.Takeover),

		PausedMS: ms(r.Pause.Held), PausedLate: len(r.Pause.Late),
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

var resultsMu sync.Mutex

// Publish appends res to $OUTBOX_CHAOS_RESULTS after the test ends (in a cleanup, so
// Pass reflects the test's outcome). It sets Tier and At. Without the variable it does
// nothing.
func Publish(tb testing.TB, res Result) {
	tb.Helper()
	path := os.Getenv(EnvResults)
	if path == "" {
		return
	}
	res.Tier = Tier()
	res.At = time.Now().UTC().Round(0)
	tb.Cleanup(func() {
		res.Pass = !tb.Failed()
		b, err := json.Marshal(res)
		if err != nil {
			tb.Errorf("scoreboard: %v", err)
			return
		}
		resultsMu.Lock()
		defer resultsMu.Unlock()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			tb.Errorf("scoreboard: %v", err)
			return
		}
		defer f.Close()
		if _, err := f.Write(append(b, '\n')); err != nil {
			tb.Errorf("scoreboard: %v", err)
		}
	})
}
