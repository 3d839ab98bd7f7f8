package chaos

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// ReadResults reads scoreboard lines from files; missing files read as empty and blank
// or torn lines are skipped.
func ReadResults(paths ...string) ([]Result, error) {
	var out []Result
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			var r Result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				continue
			}
			out = append(out, r)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return out, nil
}

// ScenarioInfo describes the scenarios for the legend of docs/RELIABILITY.md, by name
// or by the name's part before its first "/" or "(" (the mode or zone); a scenario not
// described takes its description from its results' note.
var ScenarioInfo = map[string]string{
	"no-faults":            "Baseline: writers and node processes, no fault. Duplicates must be 0.",
	"kill-random":          "A random node process is killed with SIGKILL at random times and restarted.",
	"crash-after-claim":    "Nodes kill themselves (SIGKILL) right after a poller claim committed, before its events run (crash point `after-claim`), and are restarted.",
	"crash-after-listener": "Nodes kill themselves right after a listener returned nil, before DONE is written (crash point `after-listener`).",
	"crash-after-insert":   "Nodes kill themselves inside a business transaction right after the event was inserted, before commit (crash point `after-insert`).",
	"db-restart-immediate": "PostgreSQL stopped with `pg_ctl stop -m immediate` (a crash) under load, then started again.",
	"db-restart-fast":      "PostgreSQL stopped with `pg_ctl stop -m fast` under load, then started again.",
	"db-kill-restart":      "MariaDB killed with SIGKILL under load, then started again.",
	"conn-kill":            "The server kills every client connection (`pg_terminate_backend`, `KILL CONNECTION`) at random times.",
	"proxy-blackhole":      "A TCP proxy between nodes and server silently drops all traffic for 2–4 s; the cut connections stay dead, so only the library's deadlines free its calls.",
	"proxy-reset":          "A TCP proxy aborts every connection with a TCP reset at random times.",

	"commit-unknown":              "COMMIT reports an error after committing (lost acknowledgement) or after rolling back, through a driver wrapper; the writer records the outcome as unknown. Committed events must be delivered, rolled-back ones never.",
	"late-commit":                 "Long transactions write their events early (OccurredAt an hour ago, or when the transaction began) and commit after many others were delivered; each must still be delivered promptly.",
	"listener-panic":              "The listener panics on the first one or two attempts of about a third of the events; panics are recovered, counted as failed attempts and retried.",
	"listener-hang":               "Listeners hang past ListenerTimeout on their first attempt: waiting for the context, ignoring it and failing late, ignoring it and succeeding late. Attempts never overlap.",
	"poison-event":                "Events that always fail (error, panic) go DEAD after MaxAttempts, an unrecoverable one at once; the events around them flow meanwhile: no healthy event is delivered after the last retry of a poison event committed after it.",
	"stuck-listener":              "As many listeners as workers ignore their context and block for 10 s while writers keep writing: the stuck attempts free their workers (OnStuck) and healthy events keep flowing (longest gap within 2 × (ListenerTimeout + 1 s + poll) + 4 s); the stuck events end DONE once their listeners return; Stop returns by its deadline with listeners still blocked, and a new Outbox delivers what it left.",
	"pool-starvation":             "A pool of 4 connections shared by the outbox (8 workers, listeners sleeping 200 ms) and two writers: more listeners run at once than the pool has connections, writers commit while every worker is in a listener, and in SingleNode nothing waits for a connection.",
	"purge-racing-replay":         "The purger deletes finished rows milliseconds after they finish while replayers bring DEAD events back, by ID and by filter; a replayed row is never purged under its replay.",
	"hot-queue-overflow":          "A hot queue of 4 events and two slow workers under bursts of writers: what the queue cannot take is left to the poller.",
	"cold-queue-overflow":         "No hot path, a cold queue of 4 events and poll batches of 64: the poller keeps meeting a full queue and rows already queued or in flight.",
	"savepoint-rollback":          "Events written in nested transactions (savepoints, through the GORM and bun adapters) that roll back are never delivered; outer rollbacks too.",
	"shutdown-graceful":           "Stop with events queued and in flight and a generous deadline: everything queued is delivered before Stop returns; a new Outbox finds nothing to redo.",
	"shutdown-hard":               "Stop's context ends during a backlog: listeners see their context cancelled, nothing runs after Stop returns, and a new Outbox delivers what was left.",
	"sqlite-writers-never-locked": "Eight writers (sixteen in the long tier) commit as fast as they can on SQLite while the poller, purger and a dead-event reader run: no \"database is locked\", no failed outcome update.",
	"timezone-process":            "Delayed events in a child process whose TZ has a half-hour offset, so time.Local is not UTC.",
	"listener-failures":           "Ordered events whose listener fails by key: the first attempt of every event of a quarter of the keys (transient, retried), every attempt of one event in five of another quarter (permanent: DEAD after MaxAttempts 3); the nodes run DeadKeySkips, so a key moves past its DEAD events and only then.",
	"stalled-listener":            "Two MultiNode nodes (one SingleNode process on SQLite) deliver ordered events; the first attempt of two events of every key ignores its context for 2.5 s, longer than the 1 s claim: the claim is taken over, the event delivered again and the key moved on while the stalled attempt runs, its late outcome fenced out. These overlaps, and only these, are counted apart as stalled; on SQLite nothing takes over and nothing overlaps.",
	"fan-out":                     "Three listeners take every event (fan-out), the second limited (MaxConcurrency 1, RateLimit 400/s), the last failing each delivery's first attempt, while a random node process is killed with SIGKILL at random times and restarted; meanwhile the second or the last is paused for 1–5 s and resumed, again and again, through a node picked at random (which may be killed mid-call), and resumed before the drain: every delivery is delivered, none lost, and none of a paused subscription starts past the pause bound.",
	"nodes-1-3-1":                 "Nodes join and leave while writers write: one node process, then three, then one again (one leaves with a graceful stop, one is killed with SIGKILL and its keys move to the node left).",
	"timezone-session":            "Delayed events over database sessions whose time zone is not UTC (PostgreSQL Pacific/Chatham, MariaDB +05:45).",
}

// scenarioInfo returns the description of scenario from ScenarioInfo, or "". An
// ordered variant ("ordered/<scenario>") has its scenario's description.
func scenarioInfo(scenario string) string {
	scenario = strings.TrimPrefix(scenario, "ordered/")
	if d, ok := ScenarioInfo[scenario]; ok {
		return d
	}
	if i := strings.IndexAny(scenario, "/("); i > 0 {
		return ScenarioInfo[scenario[:i]]
	}
	return ""
}

// scenarioOrder puts the known scenarios first, in this order.
var scenarioOrder = []string{"no-faults", "kill-random", "crash-after-claim", "crash-after-listener",
	"crash-after-insert", "db-restart-immediate", "db-restart-fast", "db-kill-restart", "conn-kill",
	"proxy-blackhole", "proxy-reset"}

var databaseNames = map[string]string{"postgres": "PostgreSQL", "mysql": "MariaDB", "sqlite": "SQLite"}

// aggregate is the sum of one row's results.
type aggregate struct {
	Result
	runs  int
	seeds []int64
	tier  string
	fails int       // runs the library's gates (or the test) failed
	infra []string  // runs whose infrastructure failed: "seed N: why"
	first time.Time // the earliest result's At
}

func (a *aggregate) add(r Result) {
	a.runs++
	switch {
	case r.Infra != "":
		a.infra = append(a.infra, fmt.Sprintf("seed %d: %s", r.Seed, r.Infra))
	case !r.Pass:
		a.fails++
	}
	if r.Seed != 0 {
		a.seeds = append(a.seeds, r.Seed)
	}
	a.Seconds += r.Seconds
	a.Faults += r.Faults
	a.Committed += r.Committed
	a.Unknown += r.Unknown
	a.RolledBack += r.RolledBack
	a.Aborted += r.Aborted
	a.Delivered += r.Delivered
	a.Dead += r.Dead
	a.Lost += r.Lost
	a.Phantom += r.Phantom
	a.Unexpected += r.Unexpected
	a.Stuck += r.Stuck
	a.Overlaps += r.Overlaps
	a.Duplicates += r.Duplicates
	for c, n := range r.DuplicateCauses {
		if a.DuplicateCauses == nil {
			a.DuplicateCauses = map[string]int{}
		}
		a.DuplicateCauses[c] += n
	}
	a.Restarts += r.Restarts
	a.RecoveryMS = max(a.RecoveryMS, r.RecoveryMS)
	a.LongestGapMS = max(a.LongestGapMS, r.LongestGapMS)
	a.Ordered = a.Ordered || r.Ordered
	a.Keys = max(a.Keys, r.Keys)
	a.OutOfOrder += r.OutOfOrder
	a.SeqAgainstCommit += r.SeqAgainstCommit
	a.KeyOverlaps += r.KeyOverlaps
	a.StalledOverlaps += r.StalledOverlaps
	a.Takeovers += r.Takeovers
	a.TakeoverMS = max(a.TakeoverMS, r.TakeoverMS)
	a.Pauses += r.Pauses
	a.Resumes += r.Resumes
	a.PauseCallsCut += r.PauseCallsCut
	a.PausedMS += r.PausedMS
	a.PausedLate += r.PausedLate
	a.Inputs += r.Inputs
	a.Rejected += r.Rejected
	a.Crashes += r.Crashes
	if a.Note == "" {
		a.Note = r.Note
	}
	if a.Server == "" {
		a.Server = r.Server
	}
	if r.At.After(a.At) {
		a.At = r.At
	}
	if a.first.IsZero() || r.At.Before(a.first) {
		a.first = r.At
	}
}

// runDates is "on D" or "from D1 to D2": when the rows' runs ended.
func runDates(rows []*aggregate) string {
	var first, last time.Time
	for _, a := range rows {
		if !a.first.IsZero() && (first.IsZero() || a.first.Before(first)) {
			first = a.first
		}
		if a.At.After(last) {
			last = a.At
		}
	}
	if first.IsZero() {
		return "on an unknown date"
	}
	d1, d2 := first.UTC().Format("2006-01-02 15:04"), last.UTC().Format("2006-01-02 15:04")
	if d1 == d2 {
		return "on " + d1 + " UTC"
	}
	return "from " + d1 + " to " + d2 + " UTC"
}

// group aggregates results by key, keeping only the longest tier of each key.
func group(results []Result, key func(Result) string) map[string]*aggregate {
	best := map[string]string{}
	for _, r := range results {
		if k := key(r); r.Tier == "long" || best[k] == "" {
			best[k] = cmp.Or(r.Tier, "short")
		}
	}
	out := map[string]*aggregate{}
	for _, r := range results {
		k := key(r)
		if cmp.Or(r.Tier, "short") != best[k] {
			continue
		}
		a := out[k]
		if a == nil {
			a = &aggregate{tier: best[k]}
			a.Kind, a.Scenario, a.Database, a.Target = r.Kind, r.Scenario, r.Database, r.Target
			out[k] = a
		}
		a.add(r)
	}
	return out
}

// WriteMarkdown writes docs/RELIABILITY.md from results. commit, when not empty, names
// the code the fault tests ran (git describe of the working tree).
func WriteMarkdown(w io.Writer, results []Result, generated time.Time, commit string) error {
	var scen, bad []Result
	for _, r := range results {
		switch r.Kind {
		case KindScenario:
			scen = append(scen, r)
		case KindBadInput:
			bad = append(bad, r)
		}
	}
	all := group(scen, func(r Result) string { return r.Scenario + "\x00" + r.Database })
	rows, ordered := map[string]*aggregate{}, map[string]*aggregate{}
	for k, a := range all {
		if a.Ordered {
			ordered[k] = a
		} else {
			rows[k] = a
		}
	}
	targets := group(bad, func(r Result) string { return r.Target })

	b := &strings.Builder{}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("# Reliability under faults\n\n")
	p("Generated by `make chaos` (internal/chaos/cmd/scoreboard) on %s from the fault tests in\n", generated.UTC().Format("2006-01-02"))
	if commit != "" {
		p("`internal/chaos`, run on commit `%s`. Do not edit by hand: run `make chaos` again.\n\n", commit)
	} else {
		p("`internal/chaos`. Do not edit by hand: run `make chaos` again.\n\n")
	}
	p("Every scenario runs writers that commit business transactions (a business row and an\n")
	p("event in one transaction) and listeners that record each delivery in an fsynced log\n")
	p("before returning, injects its fault for the whole fault phase, then lets the nodes\n")
	p("drain and checks the logs against the table. The gates, asserted by the tests:\n\n")
	p("- **lost = 0**: every event whose commit returned nil (or whose row exists after an\n  unknown commit outcome) is delivered;\n")
	p("- **phantom = 0**: no event of a rolled-back transaction is delivered;\n")
	p("- **unexpected = 0**: nothing is delivered that no writer wrote;\n")
	p("- **stuck = 0**: every row is DONE or DEAD after the drain, which fails when the count\n  of pending rows stops falling for 2 × (query timeout + ClaimTTL + listener and status\n  timeouts + poll interval) + 15 s of the scenario's timing (how long a drain that\n  progresses takes is the machine's speed: reported, capped at 20 minutes);\n")
	p("- **overlaps = 0**: no two attempts of one event ever run at the same time (a crash is\n  recorded before the node dies, or the moment its exit is seen, so that a take-over of\n  a dead node's claim is not an overlap);\n")
	p("- **dead = 0** where the listener never fails (the process scenarios and every\n  in-process scenario but poison-event and purge-racing-replay): a DEAD row fails them;\n")
	p("- a business row exists if and only if its event row does;\n")
	p("- without faults, **duplicates = 0** and no business transaction fails; no goroutine\n  leaks and no panic escapes.\n\n")
	p("Duplicates under faults are expected (delivery is at least once) and reported with\n")
	p("their cause; under database and network faults they are gated: at most the events\n")
	p("that could have been in flight at the faults (faults × nodes × (Workers + hot queue +\n")
	p("cold queue)). *Recovery* is the longest time, after the database came back (or the\n")
	p("network healed), until every event left pending by the outage was delivered.\n")
	p("*Longest gap* is the longest time without any delivery while events were waiting and\n")
	p("the database was up. In the database and network fault scenarios both are gated:\n")
	p("within 2 × (query timeout + ClaimTTL + listener and status timeouts + poll interval)\n")
	p("+ 15 s, about 45 s. Figures are summed over the runs of a row (recovery and gap:\n")
	p("the maximum). A seed replays a run's fault schedule: `OUTBOX_CHAOS_SEED=<seed>`.\n\n")

	if len(rows) > 0 {
		tiers := map[string]bool{}
		for _, a := range rows {
			tiers[a.tier] = true
		}
		p("## Process, database and network faults\n\n")
		p("Tier: %s; runs ended %s.\n\n", strings.Join(slices.Sorted(maps.Keys(tiers)), ", "), runDates(slices.Collect(maps.Values(rows))))
		p("| Scenario | Database | Runs | Time | Faults | Committed | Unknown | Delivered | Lost | Phantom | Unexpected | Stuck | Overlaps | Duplicates | Recovery | Longest gap | Result |\n")
		p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|---|\n")
		keys := rowOrder(rows)
		for _, k := range keys {
			a := rows[k]
			p("| %s | %s | %d | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s |\n",
				a.Scenario, cmp.Or(databaseNames[a.Database], a.Database), a.runs, seconds(a.Seconds), a.Faults,
				a.Committed, a.Unknown, a.Delivered, a.Lost, a.Phantom, a.Unexpected, a.Stuck, a.Overlaps,
				duplicates(a), recovery(a), millis(a.LongestGapMS), verdict(a))
		}
		p("\n")
		writeInfra(p, rows, keys)
		writePauses(p, rows, keys)
		p("### Scenarios\n\n")
		writeLegend(p, rows, keys)
		p("\n")
		servers := map[string]string{}
		for _, a := range rows {
			if a.Server != "" {
				servers[a.Database] = a.Server
			}
		}
		if len(servers) > 0 {
			p("Servers: ")
			var parts []string
			for _, db := range slices.Sorted(maps.Keys(servers)) {
				parts = append(parts, fmt.Sprintf("%s `%s`", cmp.Or(databaseNames[db], db), servers[db]))
			}
			p("%s.\n\n", strings.Join(parts, "; "))
		}
		writeSeeds(p, rows, keys)
	}

	if len(ordered) > 0 {
		writeOrdered(p, ordered)
	}

	if len(targets) > 0 {
		p("## Bad input\n\n")
		p("Inputs generated or mutated (fuzzing and crafted corpora) and fed to each decoder or\n")
		p("validator. *Rejected* counts inputs refused with an error; the rest were accepted as\n")
		p("valid. A crash is a panic or a hang; the gate is crashes = 0.\n\n")
		p("| Target | Inputs | Rejected cleanly | Accepted | Crashes | Time | Result |\n")
		p("|---|--:|--:|--:|--:|--:|---|\n")
		for _, k := range slices.Sorted(maps.Keys(targets)) {
			a := targets[k]
			p("| %s | %d | %d | %d | %d | %s | %s |\n", a.Target, a.Inputs, a.Rejected, a.Inputs-a.Rejected,
				a.Crashes, seconds(a.Seconds), verdict(a))
		}
		p("\n")
		for _, k := range slices.Sorted(maps.Keys(targets)) {
			if a := targets[k]; a.Note != "" {
				p("- **%s**: %s\n", a.Target, a.Note)
			}
		}
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
	return err
}

// writeOrdered writes the section of the ordered-delivery scenarios.
func writeOrdered(p func(string, ...any), rows map[string]*aggregate) {
	tiers := map[string]bool{}
	for _, a := range rows {
		tiers[a.tier] = true
	}
	p("## Ordered delivery\n\n")
	p("The same harness with every event ordered (docs/ordering.md): each writer gives its\n")
	p("events one of a few dozen order keys at random, and one transaction in eight holds its\n")
	p("key for up to 200 ms before committing (a late commit, which the other writers of the\n")
	p("key wait for). Beside the gates above, the order checker reads each key's write order\n")
	p("from the rows' `order_seq` and gates:\n\n")
	p("- **out of order = 0**: no attempt of an event starts before every earlier event of\n  its key was delivered (or, where the key moves past DEAD events, ended DEAD);\n")
	p("- **seq vs commit = 0**: an event committed before another's commit began has the\n  lower `order_seq` (write order is commit order);\n")
	p("- **key overlaps = 0**: no two attempts of different events of one key ever run at\n  once, on any node. An overlap whose earlier attempt had run longer than\n  ListenerTimeout (a stalled listener whose lease was taken over) is the documented\n  exception, counted apart as *stalled*;\n")
	p("- **take-over**: an ordered event a killed node held (in its listener, or claimed when\n  the after-claim crash point killed it) is started by another node within ClaimTTL +\n  the shorter of ClaimTTL and 10 s (a claim from the oldest row finds it behind the\n  claimer's low-water mark) + 2 × poll interval + 10 s (6.4 s + 10 s with the \"fault\"\n  timing; the 10 s leave room for a restarted SingleNode process and a loaded host). A node that claims the event\n  and dies before running it loses it again and starts a take-over of its own, so a\n  chain of deaths is gated link by link. *Take-overs* counts them, with the longest.\n\n")
	p("Tier: %s; runs ended %s.\n\n", strings.Join(slices.Sorted(maps.Keys(tiers)), ", "), runDates(slices.Collect(maps.Values(rows))))
	p("| Scenario | Database | Runs | Time | Faults | Committed | Delivered | Keys | Lost | Stuck | Overlaps | Dead | Out of order | Seq vs commit | Key overlaps | Stalled | Take-overs | Duplicates | Result |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|\n")
	keys := rowOrder(rows)
	for _, k := range keys {
		a := rows[k]
		takeovers := "–"
		if a.Takeovers > 0 {
			takeovers = fmt.Sprintf("%d (longest %s)", a.Takeovers, millis(a.TakeoverMS))
		}
		p("| %s | %s | %d | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n",
			a.Scenario, cmp.Or(databaseNames[a.Database], a.Database), a.runs, seconds(a.Seconds), a.Faults,
			a.Committed, a.Delivered, a.Keys, a.Lost, a.Stuck, a.Overlaps, a.Dead, a.OutOfOrder, a.SeqAgainstCommit,
			a.KeyOverlaps, a.StalledOverlaps, takeovers, duplicates(a), verdict(a))
	}
	p("\n")
	writeInfra(p, rows, keys)
	writePauses(p, rows, keys)
	p("### Ordered scenarios\n\n")
	writeLegend(p, rows, keys)
	p("\n")
	writeSeeds(p, rows, keys)
}

// rowOrder returns the keys of rows in table order: known scenarios first, then by
// name and database.
func rowOrder(rows map[string]*aggregate) []string {
	return slices.SortedFunc(maps.Keys(rows), func(x, y string) int {
		a, b := rows[x], rows[y]
		return cmp.Or(cmp.Compare(scenarioRank(a.Scenario), scenarioRank(b.Scenario)),
			cmp.Compare(a.Scenario, b.Scenario), cmp.Compare(dbRank(a.Database), dbRank(b.Database)))
	})
}

// writeLegend writes one line per scenario of rows, in keys' order.
func writeLegend(p func(string, ...any), rows map[string]*aggregate, keys []string) {
	seen := map[string]bool{}
	for _, k := range keys {
		a := rows[k]
		if seen[a.Scenario] {
			continue
		}
		seen[a.Scenario] = true
		p("- **%s**: %s\n", a.Scenario, cmp.Or(scenarioInfo(a.Scenario), a.Note, "(no description)"))
	}
}

// writeSeeds writes the seeds of rows' runs, in keys' order.
func writeSeeds(p func(string, ...any), rows map[string]*aggregate, keys []string) {
	p("Seeds of the runs (replay with `OUTBOX_CHAOS_SEED`):\n\n")
	for _, k := range keys {
		if a := rows[k]; len(a.seeds) > 0 {
			p("- %s on %s: %s\n", a.Scenario, cmp.Or(databaseNames[a.Database], a.Database), seedList(a.seeds))
		}
	}
	p("\n")
}

func scenarioRank(s string) int {
	if i := slices.Index(scenarioOrder, s); i >= 0 {
		return i
	}
	return len(scenarioOrder)
}

func dbRank(db string) int {
	if i := slices.Index([]string{"postgres", "mysql", "sqlite"}, db); i >= 0 {
		return i
	}
	return 3
}

func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func millis(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond).String()
}

func recovery(a *aggregate) string {
	if a.Restarts == 0 {
		return "–"
	}
	return millis(a.RecoveryMS)
}

func duplicates(a *aggregate) string {
	if a.Duplicates == 0 {
		return "0"
	}
	causes := make([]string, 0, len(a.DuplicateCauses))
	for _, c := range slices.Sorted(maps.Keys(a.DuplicateCauses)) {
		causes = append(causes, fmt.Sprintf("%s: %d", c, a.DuplicateCauses[c]))
	}
	return fmt.Sprintf("%d (%s)", a.Duplicates, strings.Join(causes, "; "))
}

// verdict is a row's result: pass, the runs the library failed, and apart from them
// the runs whose infrastructure failed (listed under the table by writeInfra).
func verdict(a *aggregate) string {
	var parts []string
	if a.fails > 0 {
		parts = append(parts, fmt.Sprintf("**FAIL** (%d of %d runs)", a.fails, a.runs))
	}
	if len(a.infra) > 0 {
		parts = append(parts, fmt.Sprintf("**INFRA FAILURE** (%d of %d runs, not the library's)", len(a.infra), a.runs))
	}
	if len(parts) == 0 {
		return "pass"
	}
	return strings.Join(parts, "; ")
}

// writeInfra lists the runs of rows whose infrastructure failed, in keys' order.
func writeInfra(p func(string, ...any), rows map[string]*aggregate, keys []string) {
	var lines []string
	for _, k := range keys {
		a := rows[k]
		for _, why := range a.infra {
			lines = append(lines, fmt.Sprintf("- %s on %s, %s\n", a.Scenario, cmp.Or(databaseNames[a.Database], a.Database), why))
		}
	}
	if len(lines) == 0 {
		return
	}
	p("Infrastructure failures: runs the gates did not judge, because a database server the\n")
	p("scenario restarted did not come back (it failed its own crash recovery); their\n")
	p("figures are not in the table:\n\n")
	for _, l := range lines {
		p("%s", l)
	}
	p("\n")
}

// writePauses lists the pauses of rows that paused a subscription, in keys' order.
func writePauses(p func(string, ...any), rows map[string]*aggregate, keys []string) {
	var lines []string
	for _, k := range keys {
		a := rows[k]
		if a.Pauses == 0 && a.PausedLate == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("- %s on %s: pauses %d, resumes %d, calls cut by a kill or failed %d; paused %s in all; attempts started late under a pause: %d\n",
			a.Scenario, cmp.Or(databaseNames[a.Database], a.Database), a.Pauses, a.Resumes, a.PauseCallsCut, seconds(a.PausedMS/1000), a.PausedLate))
	}
	if len(lines) == 0 {
		return
	}
	p("Pause and resume (`Events.Pause`, `Events.Resume`) during the faults, through a node\n")
	p("picked at random, which may be killed mid-call. Gated: no attempt of the paused\n")
	p("subscription starts while the pause is in force later than %s after its Pause\n", PauseOwnBound)
	p("returned on that node, or than the pause refresh (%s) + 2 × poll interval + 1 s on the\n", pauseRefresh)
	p("others; the paused deliveries are delivered after the resume (lost and stuck = 0):\n\n")
	for _, l := range lines {
		p("%s", l)
	}
	p("\n")
}

func seedList(seeds []int64) string {
	parts := make([]string, 0, len(seeds))
	for i, s := range seeds {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(seeds)-5))
			break
		}
		parts = append(parts, fmt.Sprint(s))
	}
	return strings.Join(parts, ", ")
}
