package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

func TestLogAppendAndRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.jsonl")
	l, err := CreateLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				if err := l.Append(Record{Kind: Committed, Event: string(rune('a'+i)) + string(rune('a'+j)), Node: "w"}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(Record{Kind: Committed}); err == nil {
		t.Fatal("Append after Close succeeded")
	}
	recs, err := ReadLogs(path, filepath.Join(dir, "missing.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 200 {
		t.Fatalf("read %d records, want 200", len(recs))
	}
	for _, r := range recs {
		if r.At.IsZero() || r.At.Location() != time.UTC {
			t.Fatalf("record time %v: want a UTC time", r.At)
		}
	}
}

func TestLogTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "torn.jsonl")
	l, err := CreateLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(Record{Kind: Delivered, Event: "e1", Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// A process killed in the middle of a write leaves a torn last line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"k":"delivered","e":"e2`)
	f.Close()
	recs, err := ReadLogs(path)
	if err != nil {
		t.Fatalf("torn last line: %v", err)
	}
	if len(recs) != 1 || recs[0].Event != "e1" {
		t.Fatalf("records %+v, want e1 only", recs)
	}
	// Reopening cuts the torn line, so the next record starts on its own line.
	l, err = CreateLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(Record{Kind: Delivered, Event: "e3", Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	recs, err = ReadLogs(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Event != "e3" {
		t.Fatalf("records %+v, want e1, e3", recs)
	}
	// A malformed line in the middle is an error.
	os.WriteFile(path, []byte("{\"k\":\"x\"}\nnot json\n{}\n"), 0o644)
	if _, err := ReadLogs(path); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("malformed middle line: err %v", err)
	}
}

// at builds records at increasing times from a compact script.
type script struct {
	t0   time.Time
	recs []Record
}

func (s *script) add(ms int, k Kind, event, node string) {
	s.recs = append(s.recs, Record{Kind: k, Event: event, Node: node, At: s.t0.Add(time.Duration(ms) * time.Millisecond)})
}

func newScript() *script { return &script{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func done(ids ...string) []Final {
	var f []Final
	for _, id := range ids {
		f = append(f, Final{Event: id, Status: 1, Attempts: 1})
	}
	return f
}

func TestCheckClean(t *testing.T) {
	s := newScript()
	s.add(0, Committed, "e1", "w")
	s.add(10, Started, "e1", "n1")
	s.add(20, Delivered, "e1", "n1")
	s.add(30, Committed, "e2", "w")
	s.add(40, Started, "e2", "n2")
	s.add(45, Failed, "e2", "n2")
	s.add(50, Started, "e2", "n1")
	s.add(60, Delivered, "e2", "n1")
	s.add(70, RolledBack, "e3", "w")
	rep := Check(s.recs, done("e1", "e2"))
	if len(rep.Lost)+len(rep.Phantom)+len(rep.Unexpected)+len(rep.Stuck)+len(rep.Overlaps)+rep.DuplicateCount() != 0 {
		t.Fatalf("clean run: %s", rep.Summary())
	}
	if rep.Committed != 2 || rep.RolledBack != 1 || rep.Delivered != 2 {
		t.Fatalf("counts: %s", rep.Summary())
	}
	if rep.LongestGap != 30*time.Millisecond { // e2: committed at 30, delivered at 60
		t.Fatalf("longest gap %v, want 30ms", rep.LongestGap)
	}
	rep.Gate(t, true)
}

func TestCheckFindsEverything(t *testing.T) {
	s := newScript()
	s.add(0, Committed, "lost", "w")
	s.add(0, Committed, "dead", "w")
	s.add(0, RolledBack, "phantom", "w")
	s.add(1, Started, "phantom", "n1")
	s.add(2, Delivered, "phantom", "n1")
	s.add(3, Started, "nobody", "n1")
	s.add(4, Delivered, "nobody", "n1")
	s.add(5, Unknown, "unknown-gone", "w")
	s.add(6, Started, "unknown-gone", "n1")
	s.add(7, Delivered, "unknown-gone", "n1")
	s.add(5, Unknown, "unknown-kept", "w") // row exists: must be delivered, is not
	s.add(10, Committed, "dup", "w")
	s.add(11, Started, "dup", "n1")
	s.add(12, Delivered, "dup", "n1")
	s.add(13, Fault, "kill -9", "n1")
	s.add(20, Started, "dup", "n2")
	s.add(21, Delivered, "dup", "n2")
	s.add(30, Committed, "overlap", "w")
	s.add(31, Started, "overlap", "n1")
	s.add(32, Started, "overlap", "n2")
	s.add(33, Delivered, "overlap", "n2")
	s.add(34, Delivered, "overlap", "n1")
	s.add(40, Committed, "stuck", "w")
	finals := append(done("dup", "overlap", "unknown-kept"),
		Final{Event: "dead", Status: 3}, Final{Event: "stuck", Status: 2}, Final{Event: "lost", Status: 0})
	finals[2].Status = 0
	rep := Check(s.recs, finals)
	want := func(name string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	want("Lost", rep.Lost, []string{"lost", "stuck", "unknown-kept"})
	want("Phantom", rep.Phantom, []string{"phantom", "unknown-gone"})
	want("Unexpected", rep.Unexpected, []string{"nobody"})
	want("Stuck", rep.Stuck, []string{"lost", "stuck", "unknown-kept"})
	want("Overlaps", rep.Overlaps, []string{"overlap"})
	if rep.Duplicates["dup"] != 1 || rep.Duplicates["overlap"] != 1 || rep.DuplicateCount() != 2 {
		t.Errorf("Duplicates = %v", rep.Duplicates)
	}
	if rep.DuplicateCauses["node killed after delivery"] != 1 {
		t.Errorf("DuplicateCauses = %v", rep.DuplicateCauses)
	}
	if rep.Dead != 1 {
		t.Errorf("Dead = %d, want 1", rep.Dead)
	}
	ft := &fakeTB{TB: t}
	rep.Gate(ft, true)
	for _, w := range []string{"LOST", "PHANTOM", "UNEXPECTED", "STUCK", "OVERLAP", "DUPLICATES", "UNKNOWN"} {
		if !strings.Contains(ft.errs, w) {
			t.Errorf("Gate did not report %s:\n%s", w, ft.errs)
		}
	}
}

func TestCheckKilledNodeIsNotOverlap(t *testing.T) {
	s := newScript()
	s.add(0, Committed, "e", "w")
	s.add(1, Started, "e", "n1")
	s.add(2, Fault, "kill -9", "n1") // died mid-attempt: no end record
	s.add(3, Started, "e", "n2")
	s.add(4, Delivered, "e", "n2")
	rep := Check(s.recs, done("e"))
	if len(rep.Overlaps) != 0 || rep.DuplicateCount() != 0 {
		t.Fatalf("%s", rep.Summary())
	}
}

func TestCheckCauses(t *testing.T) {
	s := newScript()
	s.add(0, Committed, "a", "w")
	s.add(0, Committed, "b", "w")
	s.add(0, Committed, "c", "w")
	s.add(1, Started, "a", "n1")
	s.add(2, Delivered, "a", "n1")
	s.add(1, Started, "b", "n1")
	s.add(2, Delivered, "b", "n1")
	s.add(1, Started, "c", "n1")
	s.add(2, Delivered, "c", "n1")
	s.add(3, Down, "pg_ctl stop -m immediate", "")
	s.add(4, Up, "", "")
	s.add(5, Started, "a", "n1")
	s.add(6, Delivered, "a", "n1")
	s.add(7, Started, "b", "n2")
	s.add(8, Delivered, "b", "n2")
	s.add(9, Started, "c", "n1")
	s.add(10, Delivered, "c", "n1")
	rep := Check(s.recs, done("a", "b", "c"))
	if rep.DuplicateCauses["database fault"] != 3 {
		t.Fatalf("causes %v", rep.DuplicateCauses)
	}
	s = newScript()
	s.add(0, Committed, "b", "w")
	s.add(1, Started, "b", "n1")
	s.add(2, Delivered, "b", "n1")
	s.add(7, Started, "b", "n2")
	s.add(8, Delivered, "b", "n2")
	s.add(9, Started, "b", "n2")
	s.add(10, Delivered, "b", "n2")
	rep = Check(s.recs, done("b"))
	if rep.DuplicateCauses["claim taken over by another node"] != 1 || rep.DuplicateCauses["redelivered by the same node"] != 1 {
		t.Fatalf("causes %v", rep.DuplicateCauses)
	}
}

func TestCheckGapAndRecovery(t *testing.T) {
	s := newScript()
	s.add(0, Committed, "a", "w")
	s.add(100, Started, "a", "n1")
	s.add(100, Delivered, "a", "n1")
	s.add(200, Committed, "b", "w")
	s.add(300, Down, "stop", "")
	s.add(1300, Up, "start", "")
	s.add(1350, Committed, "d", "w") // after the restart: not part of the backlog
	s.add(1360, Delivered, "d", "n1")
	s.add(1700, Started, "b", "n1")
	s.add(1700, Delivered, "b", "n1")
	s.add(5000, Committed, "c", "w") // idle time between 1700 and 5000 is not a gap
	s.add(5050, Delivered, "c", "n1")
	rep := Check(s.recs, done("a", "b", "c", "d"))
	// b waited 200→1700; the database was down 300→1300, and d was delivered at 1360:
	// the longest stretch is 1360→1700.
	if rep.LongestGap != 340*time.Millisecond {
		t.Errorf("LongestGap = %v, want 340ms", rep.LongestGap)
	}
	// Recovery: the backlog at 1300 (b) was cleared at 1700.
	if rep.Recovery != 400*time.Millisecond || rep.Restarts != 1 {
		t.Errorf("Recovery = %v restarts %d, want 400ms, 1", rep.Recovery, rep.Restarts)
	}
}

// fakeTB collects errors instead of failing.
type fakeTB struct {
	testing.TB
	errs string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Log(args ...any)                   {}
func (f *fakeTB) Errorf(format string, args ...any) { f.errs += "\n" + fmt.Sprintf(format, args...) }

// A committed event that ends DEAD counts as accounted for by Gate (not lost), but in a
// scenario whose listener never fails GateNoDead fails the run.
func TestGateNoDead(t *testing.T) {
	s := newScript()
	s.add(0, Committed, "e", "w")
	s.add(1, Started, "e", "n1")
	s.add(2, Failed, "e", "n1")
	rep := Check(s.recs, []Final{{Event: "e", Status: int(outbox.StatusDead), Attempts: 1}})
	ft := &fakeTB{TB: t}
	rep.Gate(ft, false)
	if ft.errs != "" || rep.Dead != 1 {
		t.Fatalf("Gate counts DEAD as accounted for: dead %d, errors %q", rep.Dead, ft.errs)
	}
	rep.GateNoDead(ft)
	if !strings.Contains(ft.errs, "DEAD: 1 event") {
		t.Fatalf("GateNoDead passed a DEAD row: %q", ft.errs)
	}
}

// GateDuplicates fails beyond the in-flight bound; GateTimes on recovery and gap.
func TestGateDuplicatesAndTimes(t *testing.T) {
	s := newScript()
	s.add(0, Committed, "e", "w")
	s.add(0, Committed, "f", "w")
	for i, id := range []string{"e", "f"} {
		s.add(10+i, Started, id, "n1")
		s.add(20+i, Delivered, id, "n1")
	}
	s.add(30, Down, "stop", "")
	s.add(40, Up, "start", "")
	for i, id := range []string{"e", "f"} {
		s.add(50+i, Started, id, "n1")
		s.add(60+i, Delivered, id, "n1")
	}
	s.add(100, Committed, "g", "w")
	s.add(5100, Started, "g", "n1")
	s.add(5101, Delivered, "g", "n1")
	rep := Check(s.recs, done("e", "f", "g"))
	ft := &fakeTB{TB: t}
	rep.GateDuplicates(ft, 2, "test")
	if ft.errs != "" {
		t.Fatalf("2 duplicates within a bound of 2: %q", ft.errs)
	}
	rep.GateDuplicates(ft, 1, "test")
	if !strings.Contains(ft.errs, "DUPLICATES 2") {
		t.Fatalf("2 duplicates beyond a bound of 1 passed: %q", ft.errs)
	}
	ft = &fakeTB{TB: t}
	rep.GateTimes(ft, time.Second, "test")
	if !strings.Contains(ft.errs, "LONGEST GAP 5.001s") || strings.Contains(ft.errs, "RECOVERY") {
		t.Fatalf("gap 5s (recovery %s) against 1s: %q", rep.Recovery, ft.errs)
	}
}

// The overlap seen once on crash-after-claim: a node dies mid-attempt, another takes
// the event over, and the harness records the fault only when it reaps the dead node,
// after the take-over. The checker cannot tell that from a real overlap; History shows
// it (the dead node's last record precedes the other's start, its fault record follows
// it), and the node's own record written before it dies (or the harness's, written the
// moment it sees the exit) puts the fault where it belongs.
func TestCheckLateFaultRecord(t *testing.T) {
	late := newScript()
	late.add(0, Committed, "e", "w")
	late.add(1, Started, "e", "n1.1")
	late.add(3100, Started, "e", "n2.1") // n1.1 died at ~2 ms; its claim expired
	late.add(3101, Delivered, "e", "n2.1")
	late.add(3500, Fault, "crash point", "n1.1") // reaped late
	rep := Check(late.recs, done("e"))
	if len(rep.Overlaps) != 1 {
		t.Fatalf("late fault record: %s", rep.Summary())
	}
	h := History(late.recs, done("e"), "e", 5*time.Second)
	for _, want := range []string{"attempt n1.1: 00:00:00.001000 → no end", "node n1.1: last record of any event at 00:00:00.001000",
		"fault      n1.1 crash point", "attempt n2.1: 00:00:03.100000 → 00:00:03.101000 delivered"} {
		if !strings.Contains(h, want) {
			t.Errorf("history lacks %q:\n%s", want, h)
		}
	}
	early := newScript()
	early.add(0, Committed, "e", "w")
	early.add(1, Started, "e", "n1.1")
	early.add(2, Fault, "crash point (recorded by the node before it dies)", "n1.1")
	early.add(3100, Started, "e", "n2.1")
	early.add(3101, Delivered, "e", "n2.1")
	early.add(3500, Fault, "crash point", "n1.1")
	if rep := Check(early.recs, done("e")); len(rep.Overlaps) != 0 {
		t.Fatalf("fault recorded before the kill: %s", rep.Summary())
	}
}
