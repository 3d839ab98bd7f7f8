package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestCheckPause(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	subs := map[string]string{"a.1": "fan-1", "b.1": "fan-1", "c.1": "fan-1", "d.1": "fan-1", "e.1": "fan-1",
		"a.2": "fan-2", "f.1": "fan-1"}
	recs := []Record{
		{Kind: Started, Event: "a.1", Node: "n1", At: at(0)}, // before any pause
		{Kind: Paused, Event: "fan-1", Node: "n0", At: at(1000)},
		{Kind: Started, Event: "b.1", Node: "n0", At: at(1400)}, // own node, within 500 ms
		{Kind: Started, Event: "c.1", Node: "n1", At: at(3000)}, // other node, within 2.4 s
		{Kind: Started, Event: "d.1", Node: "n0", At: at(1600)}, // own node, late
		{Kind: Started, Event: "e.1", Node: "n1", At: at(3500)}, // other node, late
		{Kind: Started, Event: "a.2", Node: "n1", At: at(3500)}, // another subscription
		{Kind: Resuming, Event: "fan-1", Node: "n1", At: at(5000)},
		{Kind: Started, Event: "f.1", Node: "n1", At: at(5001)}, // resumed
		// A pause cut by a kill has no Paused record; its resume closes nothing.
		{Kind: Resuming, Event: "fan-2", Node: "n1", At: at(6000)},
		// Still paused at the end of the records.
		{Kind: Paused, Event: "fan-2", Node: "n1", At: at(7000)},
		{Kind: Delivered, Event: "x", Node: "n1", At: at(8000)},
	}
	rep := CheckPause(recs, subs, 2400*time.Millisecond, 500*time.Millisecond)
	if rep.Pauses != 2 || rep.Resumes != 2 || rep.Starts != 4 {
		t.Errorf("pauses %d resumes %d starts %d, want 2 2 4", rep.Pauses, rep.Resumes, rep.Starts)
	}
	if rep.Held != 5*time.Second || rep.Checked != 1600*time.Millisecond {
		t.Errorf("held %s checked %s, want 5s 1.6s", rep.Held, rep.Checked)
	}
	if rep.LatestOwn != 600*time.Millisecond || rep.Latest != 2500*time.Millisecond {
		t.Errorf("latest own %s, others %s, want 600ms 2.5s", rep.LatestOwn, rep.Latest)
	}
	if len(rep.Late) != 2 || !strings.HasPrefix(rep.Late[0], "d.1 (fan-1) on n0, 600ms after the pause on n0") ||
		!strings.HasPrefix(rep.Late[1], "e.1 (fan-1) on n1, 2.5s after the pause on n0") {
		t.Errorf("late %q", rep.Late)
	}
	if strings.Join(rep.LateEvents, ",") != "d.1,e.1" {
		t.Errorf("late events %q", rep.LateEvents)
	}
	// A late attempt's history shows the pause it started under.
	if h := History(recs, nil, "e.1", 5*time.Second); !strings.Contains(h, "paused     n0 fan-1") || strings.Contains(h, "fan-2") {
		t.Errorf("history of e.1:\n%s", h)
	}
	if f := (Report{Pause: rep}).Flagged(); strings.Join(f, ",") != "d.1,e.1" {
		t.Errorf("flagged %q", f)
	}
}
