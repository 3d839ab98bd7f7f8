package chaos

// The pause checker: what pausing a subscription (outbox.Events.Pause) promises, checked
// from the records. While a pause is in force, no attempt of the paused subscription's
// events starts, on any process, later than the time its pollers take to read the pause
// set; an attempt already running finishes. That the paused events are delivered after
// the resume is what the lost and stuck gates check.

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// pauseRefresh is how often, at most, a poller reads the table's pause set
// (core/internal/poll's pauseRefreshMin): at the start of a poll cycle, and at each poll
// interval while it waits, once this much time has passed since its last read.
const pauseRefresh = time.Second

// PauseBound bounds, for a timing, the time from a Pause call's return (the pause is
// committed) to the last start of an attempt of the paused subscription on a process
// other than the one that paused: its poller reads the pause set within pauseRefresh of
// its last read, at its next cycle or idle tick (a poll interval), and its query takes
// a moment; the subscription's queued events then leave their lane, and only an attempt
// a worker had taken before records its start. One more second is room for a loaded
// 2-core host under -race.
func PauseBound(tm Timing) time.Duration { return pauseRefresh + 2*tm.Poll + time.Second }

// PauseOwnBound is PauseBound on the process whose Pause call returned: Pause reads the
// pause set again and applies it before returning, so only an attempt a worker had
// taken before may still record its start.
const PauseOwnBound = 500 * time.Millisecond

// PauseReport is what [CheckPause] computes for a run in which subscriptions were paused
// and resumed.
type PauseReport struct {
	// Pauses counts Paused records (a Pause call that returned nil) and Resumes
	// Resuming records (a Resume call that began).
	Pauses, Resumes int
	// Held is the time pauses were known to be in force, summed: from each Paused
	// record to the next Resuming record of its subscription, on any node (or the last
	// record of the run). Checked is the part of it past the bound, in which no attempt
	// of the subscription may start on any process; Starts counts the attempts of paused
	// subscriptions that started within Held (allowed within the bounds: ones the pause
	// had not reached yet).
	Held, Checked time.Duration
	Starts        int
	// LatestOwn and Latest are the longest times from a pause to a start under it, on
	// the node whose Pause call returned and on the others: how close the run came to
	// the bounds.
	LatestOwn, Latest time.Duration
	// Late are the attempts that started while a pause was in force for longer than the
	// bound: "<event> (<subscription>) on <node>, <d> after the pause on <node>";
	// LateEvents their events.
	Late, LateEvents []string
}

// pauseWindow is a span in which a pause of sub was known to be in force.
type pauseWindow struct {
	sub, node string // node: the one whose Pause call returned
	from, to  time.Time
}

// CheckPause checks the attempts of paused subscriptions. subscription maps an event
// (delivery) ID to the subscription that takes it, "" or absent for others. An attempt of
// a subscription's event that starts while a pause of it is in force, later than bound
// after the pause (own on the node whose Pause call returned), is Late.
func CheckPause(records []Record, subscription map[string]string, bound, own time.Duration) PauseReport {
	recs := slices.Clone(records)
	slices.SortStableFunc(recs, func(a, b Record) int { return a.At.Compare(b.At) })
	var rep PauseReport
	var windows []pauseWindow
	open := map[string]int{} // subscription → its open window in windows
	var end time.Time
	for _, r := range recs {
		end = r.At
		switch r.Kind {
		case Paused:
			rep.Pauses++
			if _, ok := open[r.Event]; !ok { // a second pause of a paused one changes nothing
				open[r.Event] = len(windows)
				windows = append(windows, pauseWindow{sub: r.Event, node: r.Node, from: r.At, to: forever})
			}
		case Resuming:
			rep.Resumes++
			if i, ok := open[r.Event]; ok {
				windows[i].to = r.At
				delete(open, r.Event)
			}
		}
	}
	for _, i := range open {
		windows[i].to = end
	}
	for _, w := range windows {
		rep.Held += w.to.Sub(w.from)
		if d := w.to.Sub(w.from) - bound; d > 0 {
			rep.Checked += d
		}
	}
	for _, r := range recs {
		if r.Kind != Started {
			continue
		}
		sub := subscription[r.Event]
		if sub == "" {
			continue
		}
		for _, w := range windows {
			if w.sub != sub || !r.At.After(w.from) || !r.At.Before(w.to) {
				continue
			}
			rep.Starts++
			d, limit := r.At.Sub(w.from), bound
			if r.Node == w.node {
				limit = own
				rep.LatestOwn = max(rep.LatestOwn, d)
			} else {
				rep.Latest = max(rep.Latest, d)
			}
			if d > limit {
				rep.Late = append(rep.Late, fmt.Sprintf("%s (%s) on %s, %s after the pause on %s",
					r.Event, sub, r.Node, d.Round(time.Millisecond), w.node))
				rep.LateEvents = append(rep.LateEvents, r.Event)
			}
			break
		}
	}
	slices.Sort(rep.Late)
	slices.Sort(rep.LateEvents)
	rep.LateEvents = slices.Compact(rep.LateEvents)
	return rep
}

// Gate fails tb for any attempt of a paused subscription that started later than the
// bounds after its pause; why explains the bounds. It logs a summary either way.
func (r PauseReport) Gate(tb testing.TB, why string) {
	tb.Helper()
	tb.Logf("pauses=%d resumes=%d held=%s checked=%s starts-while-paused=%d (latest after the pause: %s on the node that paused, %s on the others) late=%d",
		r.Pauses, r.Resumes, r.Held.Round(time.Millisecond), r.Checked.Round(time.Millisecond), r.Starts,
		r.LatestOwn.Round(time.Millisecond), r.Latest.Round(time.Millisecond), len(r.Late))
	if len(r.Late) > 0 {
		tb.Errorf("PAUSED LATE (an attempt of a paused subscription started past the bound, %s): %d: %s",
			why, len(r.Late), abbrev(r.Late))
	}
}
