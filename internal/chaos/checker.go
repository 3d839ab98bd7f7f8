// Package chaos proves the library under faults: node processes killed with SIGKILL
// (at random and at exact crash points), database servers restarted, connections killed
// by the server or cut by a TCP proxy, and the in-process scenarios of the inproc_*
// files. Every scenario records what writers committed and what listeners delivered,
// reads the table's final state, and checks the gates of [Report.Gate].
//
// Import path: github.com/outboxkit/outbox/internal/chaos (package chaos). Only tests
// and the chaos programs import it.
//
// # Records and the checker (API for scenario authors)
//
//	log, err := chaos.CreateLog(path)     // one file per process is simplest; Append fsyncs
//	log.Append(chaos.Record{Kind: chaos.Committed, Event: id, Node: "w1"}) // At defaults to now
//	recs, err := chaos.ReadLogs(paths...) // tolerates a torn last line
//	finals, err := chaos.ReadFinals(ctx, db, dialect, table) // the table after draining
//	rep := chaos.Check(recs, finals)
//	rep.Gate(t, faultFree)
//
// Writers append, once per event: [Begun] right before Commit, then [Committed] after
// Commit returned nil or [Unknown] after Commit returned an error; instead of these,
// [RolledBack] after rolling back on purpose, or [Aborted] after a statement failed and
// the transaction was rolled back. A Begun alone (the writer died) counts as Unknown. Listeners append
// [Started] when an attempt begins, then [Delivered] before returning nil or [Failed]
// before returning an error or panicking: wrap the listener with [Recorder.Wrap], which
// does exactly that. The harness appends [Fault] when it injects a fault (Node: the
// killed node, or empty for a database fault; Event: a description), and [Down]/[Up]
// around a database stop and restart.
//
// [Check] computes from these the [Report]: Lost, Phantom, Unexpected, Duplicates with
// their causes, Stuck, Overlaps, the longest gap without delivery while work was pending
// and the database was up, and the recovery time after each restart. [Report.Gate]
// fails the test on lost, phantom, unexpected, stuck or overlapping attempts, and, when
// the run was fault free, on duplicates, unknown commit outcomes and aborted business
// transactions (an outbox that makes a business transaction fail). Gate counts a DEAD
// row as accounted for; a scenario whose listener never fails adds [Report.GateNoDead]
// (any DEAD row fails it). [Report.GateDuplicates] bounds the duplicates of a
// database-fault scenario by the events that could have been in flight at its faults,
// and [Report.GateTimes] bounds the recovery time and the longest gap. When a gate
// fails, [History] prints an event's every attempt (node, start, end) and the fault
// records around it, so that an overlap can be told apart from a late fault record.
// [Report.Result] turns a report into a scoreboard line (see scoreboard.go).
//
// # Process scenarios, tiers and the scoreboard
//
// The process scenarios (process_test.go) run the node program (node.go: the library
// with a [Recorder] listener and writer goroutines doing business transactions) as
// separate processes: the test binary re-executed with OUTBOX_CHAOS_ROLE=node, or,
// for the crash points of core, internal/chaos/node built with -tags outboxchaos.
// [StartServer] gives a test its own PostgreSQL or MariaDB server to stop, kill and
// start again; [Proxy] cuts the network between nodes and server.
//
// Every scenario runs briefly by default (CI). OUTBOX_CHAOS_LONG=1 or
// OUTBOX_CHAOS_DURATION=<duration> selects the long tier ([Long], [Duration]); each
// scenario logs its seed, and OUTBOX_CHAOS_SEED=<seed> replays its fault schedule
// ([Seed]). With OUTBOX_CHAOS_RESULTS=<file> every scenario appends its result, and
// internal/chaos/cmd/scoreboard turns such files into docs/RELIABILITY.md.
package chaos

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// Final is a row's state after the drain deadline, read from the table.
type Final struct {
	Event    string
	Status   int // an outbox.Status value
	Attempts int
	OrderKey string // "" for an unordered event
	OrderSeq int64  // the event's place in its key
}

// Report is what [Check] computes for one run.
type Report struct {
	Committed, Unknown, RolledBack int // writers' records (Unknown counts Begun alone)
	Aborted                        int // transactions that failed before commit
	Delivered                      int // Delivered records, duplicates included
	Dead                           int // rows DEAD in the final state
	Lost                           []string
	// Phantom are events delivered although their transaction rolled back: RolledBack,
	// Aborted, or Unknown with no row in the final state (only when finals were given).
	Phantom []string
	// Unexpected are events delivered that no writer recorded.
	Unexpected []string
	// Duplicates maps an event to its extra deliveries.
	Duplicates map[string]int
	// DuplicateCauses counts the extra deliveries by cause, best effort: "node killed
	// after delivery", "database fault", "claim taken over by another node",
	// "redelivered by the same node".
	DuplicateCauses map[string]int
	// Stuck are rows neither DONE nor DEAD in the final state.
	Stuck []string
	// Overlaps are events with an attempt started while another was still running.
	Overlaps []string
	// StalledOverlaps are events whose only overlaps began after the earlier attempts
	// had run longer than the stall bound of [CheckStall]: a listener that ignored its
	// context, whose lease another node took over (the documented exception).
	StalledOverlaps []string
	// LongestGap is the longest time without any delivery while some committed event
	// was waiting for its first delivery, not counting time the database was down
	// (between Down and Up records).
	LongestGap time.Duration
	// Recovery is, over the Up records, the longest time from Up until every event
	// committed before it and not yet delivered had been delivered (the backlog of the
	// outage cleared), or, with no backlog, until the next delivery. Zero without Up.
	Recovery time.Duration
	// Restarts counts Up records.
	Restarts int
	// Order is the order check of a run with ordered events: not computed by Check
	// (it needs the stall bound), set by the caller from [CheckOrder].
	Order OrderReport
	// Pause is the pause check of a run that paused subscriptions: set by the caller
	// from [CheckPause].
	Pause PauseReport
}

// DuplicateCount is the number of extra deliveries.
func (r Report) DuplicateCount() int {
	n := 0
	for _, c := range r.Duplicates {
		n += c
	}
	return n
}

// Check computes the report of one run from all its records and the table's final
// state. finals may be nil when the table was not read; then Stuck is empty, Unknown
// events count as committed when delivered, and DEAD rows are not known.
func Check(records []Record, finals []Final) Report { return CheckStall(records, finals, 0) }

// CheckStall is [Check] that counts an overlap apart, in StalledOverlaps, when every
// attempt it overlaps had already run longer than stall (ListenerTimeout) when it
// started. stall <= 0 counts every overlap in Overlaps.
func CheckStall(records []Record, finals []Final, stall time.Duration) Report {
	recs := slices.Clone(records)
	slices.SortStableFunc(recs, func(a, b Record) int { return a.At.Compare(b.At) })

	var rep Report
	written := map[string]Kind{}        // event → writer's kind
	writtenAt := map[string]time.Time{} // event → writer's record time
	delivered := map[string]int{}
	firstDelivery := map[string]time.Time{}
	byEvent := map[string][]Record{}
	var deliveries []time.Time
	var downs, ups []time.Time
	var faults []Record
	for _, r := range recs {
		switch r.Kind {
		case Begun:
			if _, ok := written[r.Event]; !ok {
				written[r.Event] = Begun
				writtenAt[r.Event] = r.At
			}
		case Committed, Unknown, RolledBack, Aborted:
			switch r.Kind {
			case Committed:
				rep.Committed++
			case Unknown:
				rep.Unknown++
			case RolledBack:
				rep.RolledBack++
			case Aborted:
				rep.Aborted++
			}
			written[r.Event] = r.Kind
			writtenAt[r.Event] = r.At
		case Delivered:
			rep.Delivered++
			delivered[r.Event]++
			if _, ok := firstDelivery[r.Event]; !ok {
				firstDelivery[r.Event] = r.At
			}
			deliveries = append(deliveries, r.At)
			byEvent[r.Event] = append(byEvent[r.Event], r)
		case Started, Failed:
			byEvent[r.Event] = append(byEvent[r.Event], r)
		case Fault:
			faults = append(faults, r)
		case Down:
			downs = append(downs, r.At)
			faults = append(faults, r)
		case Up:
			ups = append(ups, r.At)
			rep.Restarts++
		}
	}

	for id, k := range written {
		if k == Begun { // the writer died during the commit
			written[id] = Unknown
			rep.Unknown++
		}
	}

	final := map[string]Final{}
	for _, f := range finals {
		final[f.Event] = f
		switch outbox.Status(f.Status) {
		case outbox.StatusDone:
		case outbox.StatusDead:
			rep.Dead++
		default:
			rep.Stuck = append(rep.Stuck, f.Event)
		}
	}

	// mustDeliver: committed, or unknown with its row present.
	mustDeliver := func(id string) bool {
		switch written[id] {
		case Committed:
			return true
		case Unknown:
			_, ok := final[id]
			return ok
		}
		return false
	}
	for id := range written {
		if !mustDeliver(id) || delivered[id] > 0 {
			continue
		}
		if f, ok := final[id]; ok && outbox.Status(f.Status) == outbox.StatusDead {
			continue // accounted for: DEAD, not lost
		}
		rep.Lost = append(rep.Lost, id)
	}
	for id := range delivered {
		kind, ok := written[id]
		switch {
		case !ok:
			rep.Unexpected = append(rep.Unexpected, id)
		case kind == RolledBack || kind == Aborted:
			rep.Phantom = append(rep.Phantom, id)
		case kind == Unknown && finals != nil:
			if _, ok := final[id]; !ok {
				rep.Phantom = append(rep.Phantom, id)
			}
		}
	}

	// Duplicates, their causes, and overlapping attempts.
	for id, evs := range byEvent {
		if delivered[id] > 1 {
			if rep.Duplicates == nil {
				rep.Duplicates = map[string]int{}
				rep.DuplicateCauses = map[string]int{}
			}
			rep.Duplicates[id] = delivered[id] - 1
			var prev *Record
			explained := 0
			for i := range evs {
				r := evs[i]
				if r.Kind == Started && prev != nil {
					rep.DuplicateCauses[duplicateCause(*prev, r, faults)]++
					explained++
					prev = nil
				}
				if r.Kind == Delivered {
					prev = &evs[i]
				}
			}
			if n := delivered[id] - 1 - explained; n > 0 {
				// The extra delivery came from an attempt that began before the first
				// one ended: a stalled attempt finishing after a take-over.
				rep.DuplicateCauses["stalled attempt finished late"] += n
			}
		}
		switch overlap, stalled := overlapping(evs, faults, stall); {
		case overlap:
			rep.Overlaps = append(rep.Overlaps, id)
		case stalled:
			rep.StalledOverlaps = append(rep.StalledOverlaps, id)
		}
	}

	// The longest gap and the recovery time.
	var pending []span
	end := time.Time{}
	if len(recs) > 0 {
		end = recs[len(recs)-1].At
	}
	for id := range written {
		if !mustDeliver(id) && delivered[id] == 0 {
			continue
		}
		from := writtenAt[id]
		to, ok := firstDelivery[id]
		if !ok {
			if f, dead := final[id]; dead && outbox.Status(f.Status) == outbox.StatusDead {
				continue
			}
			to = end
		}
		if to.After(from) {
			pending = append(pending, span{from, to})
		}
	}
	down := downSpans(downs, ups, end)
	rep.LongestGap = longestGap(mergeSpans(pending), deliveries, down)
	for _, u := range ups {
		// The backlog at u: events committed before u and not yet delivered.
		var cleared time.Time
		for id, at := range writtenAt {
			if !at.Before(u) || (!mustDeliver(id) && delivered[id] == 0) {
				continue
			}
			first, ok := firstDelivery[id]
			switch {
			case ok && first.Before(u):
				continue // delivered before
			case !ok:
				if f, dead := final[id]; dead && outbox.Status(f.Status) == outbox.StatusDead {
					continue
				}
				first = end
			}
			cleared = maxTime(cleared, first)
		}
		if cleared.IsZero() { // no backlog: until new work is delivered
			i, _ := slices.BinarySearchFunc(deliveries, u, func(a, b time.Time) int { return a.Compare(b) })
			cleared = end
			if i < len(deliveries) {
				cleared = deliveries[i]
			}
		}
		rep.Recovery = max(rep.Recovery, cleared.Sub(u))
	}

	slices.Sort(rep.Lost)
	slices.Sort(rep.Phantom)
	slices.Sort(rep.Unexpected)
	slices.Sort(rep.Stuck)
	slices.Sort(rep.Overlaps)
	slices.Sort(rep.StalledOverlaps)
	return rep
}

// duplicateCause names why the attempt started at next followed the delivery prev.
func duplicateCause(prev, next Record, faults []Record) string {
	dbFault := false
	for _, f := range faults {
		if f.At.Before(prev.At) || f.At.After(next.At) {
			continue
		}
		if f.Node != "" && f.Node == prev.Node {
			return "node killed after delivery"
		}
		if f.Node == "" {
			dbFault = true
		}
	}
	switch {
	case dbFault:
		return "database fault"
	case next.Node != prev.Node:
		return "claim taken over by another node"
	default:
		return "redelivered by the same node"
	}
}

// overlapping reports whether an attempt of the event started while another attempt
// (on any node) was still running: stalled when every running one had started more than
// stall earlier (stall > 0), overlap otherwise. An attempt runs from Started to the same
// node's Delivered or Failed, or to a Fault naming its node (the node was killed).
func overlapping(evs []Record, faults []Record, stall time.Duration) (overlap, stalled bool) {
	open := map[string][]time.Time{} // node → starts of its running attempts
	fi := 0
	for _, r := range evs {
		for fi < len(faults) && !faults[fi].At.After(r.At) {
			if n := faults[fi].Node; n != "" {
				delete(open, n)
			}
			fi++
		}
		switch r.Kind {
		case Started:
			var latest time.Time
			for _, starts := range open {
				for _, s := range starts {
					latest = maxTime(latest, s)
				}
			}
			if !latest.IsZero() {
				if stall > 0 && r.At.Sub(latest) > stall {
					stalled = true
				} else {
					return true, stalled
				}
			}
			open[r.Node] = append(open[r.Node], r.At)
		case Delivered, Failed:
			if starts := open[r.Node]; len(starts) > 0 {
				open[r.Node] = starts[1:]
			}
		}
	}
	return false, stalled
}

type span struct{ from, to time.Time }

func (s span) dur() time.Duration { return s.to.Sub(s.from) }

// mergeSpans returns the union of spans, sorted.
func mergeSpans(spans []span) []span {
	s := slices.Clone(spans)
	slices.SortFunc(s, func(a, b span) int { return a.from.Compare(b.from) })
	var out []span
	for _, x := range s {
		if n := len(out); n > 0 && !x.from.After(out[n-1].to) {
			if x.to.After(out[n-1].to) {
				out[n-1].to = x.to
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

func covered(spans []span, t time.Time) bool {
	for _, s := range spans {
		if !t.Before(s.from) && t.Before(s.to) {
			return true
		}
	}
	return false
}

// downSpans pairs each Down with the next Up (or end).
func downSpans(downs, ups []time.Time, end time.Time) []span {
	var out []span
	for _, d := range downs {
		to := end
		for _, u := range ups {
			if u.After(d) {
				to = u
				break
			}
		}
		out = append(out, span{d, to})
	}
	return mergeSpans(out)
}

// upTime is the duration of s minus its overlap with the down spans.
func upTime(s span, down []span) time.Duration {
	d := s.dur()
	for _, x := range down {
		from, to := maxTime(s.from, x.from), minTime(s.to, x.to)
		if to.After(from) {
			d -= to.Sub(from)
		}
	}
	return d
}

// longestGap is the longest up-time stretch inside a pending span without a delivery.
func longestGap(pending []span, deliveries []time.Time, down []span) time.Duration {
	var longest time.Duration
	for _, p := range pending {
		last := p.from
		for _, d := range deliveries {
			if !d.After(p.from) {
				continue
			}
			if d.After(p.to) {
				break
			}
			longest = max(longest, upTime(span{last, d}, down))
			last = d
		}
		longest = max(longest, upTime(span{last, p.to}, down))
	}
	return longest
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Gate fails tb for any lost, phantom, unexpected, stuck or overlapping event, and,
// when faultFree, for duplicates and unknown commit outcomes. It logs a compact summary
// either way.
func (r Report) Gate(tb testing.TB, faultFree bool) {
	tb.Helper()
	tb.Log(r.Summary())
	fail := func(what string, ids []string) {
		tb.Helper()
		if len(ids) > 0 {
			tb.Errorf("%s: %d event(s): %s", what, len(ids), abbrev(ids))
		}
	}
	fail("LOST (committed, never delivered)", r.Lost)
	fail("PHANTOM (delivered from a rolled-back transaction)", r.Phantom)
	fail("UNEXPECTED (delivered, never written)", r.Unexpected)
	fail("STUCK (not DONE/DEAD after the drain deadline)", r.Stuck)
	fail("OVERLAP (attempts of one event ran concurrently)", r.Overlaps)
	if r.Committed+r.Unknown == 0 {
		tb.Errorf("no event was committed: the run proved nothing")
	}
	if faultFree {
		if n := r.DuplicateCount(); n > 0 {
			tb.Errorf("DUPLICATES without faults: %d extra deliveries (%v)", n, r.DuplicateCauses)
		}
		if r.Unknown > 0 {
			tb.Errorf("UNKNOWN commit outcomes without faults: %d", r.Unknown)
		}
		if r.Aborted > 0 {
			tb.Errorf("ABORTED business transactions without faults: %d", r.Aborted)
		}
	}
}

// GateNoDead fails tb for any DEAD row: in a scenario whose listener never fails, an
// event can only end DEAD by a bug (Gate counts DEAD rows as accounted for).
func (r Report) GateNoDead(tb testing.TB) {
	tb.Helper()
	if r.Dead > 0 {
		tb.Errorf("DEAD: %d event(s) ended DEAD although the listener never fails", r.Dead)
	}
}

// GateDuplicates fails tb when the extra deliveries exceed bound: in a database-fault
// scenario, at most the events that could have been in flight at the faults (delivered
// or running, their DONE not yet durable) can be delivered again. why explains the bound.
func (r Report) GateDuplicates(tb testing.TB, bound int, why string) {
	tb.Helper()
	if n := r.DuplicateCount(); n > bound {
		tb.Errorf("DUPLICATES %d (%v) exceed the events that could have been in flight at the faults: %d (%s)",
			n, r.DuplicateCauses, bound, why)
	}
}

// GateTimes fails tb when the recovery time after a restart or the longest gap with
// work waiting (the database up) exceeds bound; why explains the bound.
func (r Report) GateTimes(tb testing.TB, bound time.Duration, why string) {
	tb.Helper()
	if r.Restarts > 0 && r.Recovery > bound {
		tb.Errorf("RECOVERY %s after a restart, want within %s (%s)", r.Recovery.Round(time.Millisecond), bound, why)
	}
	if r.LongestGap > bound {
		tb.Errorf("LONGEST GAP %s without a delivery while work was waiting, want within %s (%s)",
			r.LongestGap.Round(time.Millisecond), bound, why)
	}
}

// Flagged returns the events a failed gate names: duplicated, lost, phantom,
// overlapping, stuck and out-of-order ones, and those started late under a pause, sorted,
// without repeats.
func (r Report) Flagged() []string {
	var ids []string
	for id := range r.Duplicates {
		ids = append(ids, id)
	}
	ids = append(ids, r.Lost...)
	ids = append(ids, r.Phantom...)
	ids = append(ids, r.Overlaps...)
	ids = append(ids, r.Stuck...)
	ids = append(ids, r.Order.OutOfOrder...)
	ids = append(ids, r.Order.SeqAgainstCommit...)
	ids = append(ids, r.Pause.LateEvents...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// History is the full story of one event, for a failed gate: its writer's records, every
// attempt by node (start, end or "no end"), each node's last and first record of any kind
// (a killed node was alive until then; a node started then), the database faults and the
// faults of the nodes that ran it (down, up, crash and kill records) from window before
// its first record to window after its last, the last pause or resume of any
// subscription before each of its attempts, and its final row. An overlap whose "killed"
// record comes after the other node's start, while the killed node's last record comes
// before it, is a fault recorded late; one whose first node still wrote records after
// the second started is a real overlap.
func History(records []Record, finals []Final, id string, window time.Duration) string {
	recs := slices.Clone(records)
	slices.SortStableFunc(recs, func(a, b Record) int { return a.At.Compare(b.At) })
	var b strings.Builder
	var first, last time.Time
	nodes := map[string]bool{}
	ts := func(t time.Time) string { return t.Format("15:04:05.000000") }
	fmt.Fprintf(&b, "history of %s:", id)
	for _, r := range recs {
		if r.Event != id || r.Kind == Fault || r.Kind == Down || r.Kind == Up {
			continue
		}
		if first.IsZero() {
			first = r.At
		}
		last = r.At
		fmt.Fprintf(&b, "\n  %s %-10s %s", ts(r.At), r.Kind, r.Node)
		if r.Kind == Started || r.Kind == Delivered || r.Kind == Failed {
			nodes[r.Node] = true
		}
	}
	if first.IsZero() {
		return b.String() + " no records"
	}
	// Attempts by node: Started to the node's next Delivered or Failed.
	open := map[string]time.Time{}
	for _, r := range recs {
		if r.Event != id {
			continue
		}
		switch r.Kind {
		case Started:
			if at, ok := open[r.Node]; ok {
				fmt.Fprintf(&b, "\n  attempt %s: %s → no end before its next start", r.Node, ts(at))
			}
			open[r.Node] = r.At
		case Delivered, Failed:
			if at, ok := open[r.Node]; ok {
				fmt.Fprintf(&b, "\n  attempt %s: %s → %s %s (%s)", r.Node, ts(at), ts(r.At), r.Kind, r.At.Sub(at).Round(time.Microsecond))
				delete(open, r.Node)
			}
		}
	}
	for n, at := range open {
		fmt.Fprintf(&b, "\n  attempt %s: %s → no end", n, ts(at))
	}
	for n := range nodes {
		var firstOf, lastOf time.Time
		for _, r := range recs {
			if r.Node == n && r.Kind != Fault {
				if firstOf.IsZero() {
					firstOf = r.At
				}
				lastOf = r.At
			}
		}
		fmt.Fprintf(&b, "\n  node %s: last record of any event at %s (first at %s)", n, ts(lastOf), ts(firstOf))
	}
	// The pause or resume of any subscription that came last before each attempt.
	var pause *Record
	shown := map[*Record]bool{}
	for i, r := range recs {
		switch {
		case r.Kind == Paused || r.Kind == Resuming:
			pause = &recs[i]
		case r.Kind == Started && r.Event == id && pause != nil && !shown[pause]:
			shown[pause] = true
		}
	}
	for i, r := range recs {
		if shown[&recs[i]] || (r.Kind == Fault || r.Kind == Down || r.Kind == Up) && (r.Node == "" || nodes[r.Node]) &&
			!r.At.Before(first.Add(-window)) && !r.At.After(last.Add(window)) {
			fmt.Fprintf(&b, "\n  %s %-10s %s %s", ts(r.At), r.Kind, r.Node, r.Event)
		}
	}
	for _, f := range finals {
		if f.Event == id {
			fmt.Fprintf(&b, "\n  final: %v after %d failed attempt(s)", outbox.Status(f.Status), f.Attempts)
		}
	}
	return b.String()
}

// Summary is a one-line account of the report.
func (r Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "committed=%d unknown=%d rolledback=%d aborted=%d delivered=%d dead=%d lost=%d phantom=%d unexpected=%d stuck=%d overlaps=%d duplicates=%d",
		r.Committed, r.Unknown, r.RolledBack, r.Aborted, r.Delivered, r.Dead, len(r.Lost), len(r.Phantom), len(r.Unexpected),
		len(r.Stuck), len(r.Overlaps), r.DuplicateCount())
	if len(r.DuplicateCauses) > 0 {
		causes := make([]string, 0, len(r.DuplicateCauses))
		for c, n := range r.DuplicateCauses {
			causes = append(causes, fmt.Sprintf("%s: %d", c, n))
		}
		slices.Sort(causes)
		fmt.Fprintf(&b, " (%s)", strings.Join(causes, ", "))
	}
	if len(r.StalledOverlaps) > 0 {
		fmt.Fprintf(&b, " stalled-overlaps=%d", len(r.StalledOverlaps))
	}
	fmt.Fprintf(&b, " longest-gap=%s", r.LongestGap.Round(time.Millisecond))
	if r.Restarts > 0 {
		fmt.Fprintf(&b, " restarts=%d recovery=%s", r.Restarts, r.Recovery.Round(time.Millisecond))
	}
	return b.String()
}

func abbrev(ids []string) string {
	if len(ids) > 10 {
		return strings.Join(ids[:10], ", ") + fmt.Sprintf(", … (%d more)", len(ids)-10)
	}
	return strings.Join(ids, ", ")
}
