package chaos

// Pausing under faults: while a fan-out scenario's faults run, the harness pauses one
// fan-out subscription at a time and resumes it (outbox.Events.Pause and Resume, issue
// 56), each call through a node picked at random, which the scenario may kill mid-call.
// Before the drain it resumes whatever may still be paused and checks that the pause
// table is empty; the checker then holds the run to CheckPause besides the usual gates.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// The pause schedule: a pause holds for [pauseHeldMin, pauseHeldMax), then the
// subscriptions run for [pauseGapMin, pauseGapMax), drawn from the scenario's seed.
// Pauses as long as the bound of the other processes (PauseBound: 2.4 s with the
// "fault" timing) and longer are needed for the check to have time to check.
const (
	pauseHeldMin, pauseHeldMax = time.Second, 5 * time.Second
	pauseGapMin, pauseGapMax   = 500 * time.Millisecond, 2500 * time.Millisecond
	// pauseCallLimit bounds a node's reply to a pause or resume command: the call has
	// the store's deadlines (the query timeout) and the node's own 30 s; a later reply is
	// a hang.
	pauseCallLimit = 60 * time.Second
)

// pauser pauses and resumes subscriptions of a cluster's nodes in a goroutine of its own.
type pauser struct {
	c        *cluster
	subs     []string // paused one at a time, each pause picking one at random
	rng      *rand.Rand
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	mu sync.Mutex
	// maybe are the subscriptions that may be paused: a pause was asked for and no
	// Resume of it has returned nil since.
	maybe map[string]bool
	// pauses and resumes count the calls that returned nil; cut those whose node died
	// before it replied, failed those that returned an error (their outcome unknown
	// either way); viaStore the final resumes made through the store, no node answering.
	pauses, resumes, cut, failed, viaStore int
}

// startPauser starts pausing subs, one at a time, until stopAndResume.
func (c *cluster) startPauser(subs []string) *pauser {
	pz := &pauser{c: c, subs: subs, rng: Rand(c.cfg.seed + 2), stop: make(chan struct{}), done: make(chan struct{}),
		maybe: map[string]bool{}}
	c.pz = pz
	go pz.run()
	// A test that ends early (t.Fatal) stops it before the nodes are killed.
	c.t.Cleanup(pz.halt)
	return pz
}

// halt stops the pauser and waits for it; it may be called more than once.
func (pz *pauser) halt() {
	pz.stopOnce.Do(func() { close(pz.stop) })
	<-pz.done
}

func (pz *pauser) run() {
	defer close(pz.done)
	for {
		if !pz.sleep(pz.between(pauseGapMin, pauseGapMax)) {
			return
		}
		sub := pz.subs[pz.rng.IntN(len(pz.subs))]
		pz.mu.Lock()
		pz.maybe[sub] = true
		pz.mu.Unlock()
		pz.call("pause", sub) // cut or failed: maybe paused; resumed all the same
		if !pz.sleep(pz.between(pauseHeldMin, pauseHeldMax)) {
			return
		}
		// Resume until a call returns nil: a node killed mid-call leaves it unknown.
		for !pz.call("resume", sub) {
			if !pz.sleep(100 * time.Millisecond) {
				return
			}
		}
	}
}

func (pz *pauser) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(pz.rng.Int64N(int64(hi-lo)))
}

// sleep waits d and reports whether the pauser is still running.
func (pz *pauser) sleep(d time.Duration) bool {
	select {
	case <-pz.stop:
		return false
	case <-time.After(d):
		return true
	}
}

// call sends "<cmd> <sub>" to a running node picked at random and reports whether the
// call returned nil. It waits for a node while none runs, unless the pauser stops.
func (pz *pauser) call(cmd, sub string) bool {
	var p *nodeProc
	for p == nil {
		var ready []*nodeProc
		for _, x := range pz.c.live() {
			if x.ready.Load() { // its "ready" line was read: the lines that follow are replies
				ready = append(ready, x)
			}
		}
		if len(ready) > 0 {
			p = ready[pz.rng.IntN(len(ready))]
		} else if !pz.sleep(50 * time.Millisecond) {
			return false
		}
	}
	reply, replied := pz.send(p, cmd+" "+sub)
	pz.mu.Lock()
	defer pz.mu.Unlock()
	switch {
	case !replied:
		pz.cut++
		return false
	case reply != "ok":
		pz.failed++
		pz.c.t.Logf("%s %s through %s: %s", cmd, sub, p.name, reply)
		return false
	case cmd == "pause":
		pz.pauses++
	default:
		pz.resumes++
		delete(pz.maybe, sub)
	}
	return true
}

// send writes line to p's stdin and returns its reply, or false when p died first.
func (pz *pauser) send(p *nodeProc, line string) (string, bool) {
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return "", false // killed before
	}
	select {
	case reply, ok := <-p.lines:
		return reply, ok
	case <-p.waited:
		// Its lines are closed before waited: a reply it printed before it died is
		// still buffered.
		select {
		case reply, ok := <-p.lines:
			return reply, ok
		default:
			return "", false
		}
	case <-time.After(pauseCallLimit):
		pz.c.t.Errorf("node %s: no reply to %q within %s:\n%s", p.name, line, pauseCallLimit, p.stderrTail())
		return "", false
	}
}

// stopAndResume stops the pauser, resumes every subscription that may be paused (through
// a running node, or the store when none answers) and fails the test unless the pause
// table is empty afterwards. The scenario calls it before finish: paused events stay
// pending, and the drain would wait for them in vain.
func (pz *pauser) stopAndResume() {
	t := pz.c.t
	t.Helper()
	// A kill can cut the only pause of a short phase: give the pauser, the faults over,
	// the time for one that returns.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pz.mu.Lock()
		n := pz.pauses
		pz.mu.Unlock()
		if n > 0 {
			break
		}
	}
	pz.halt()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ps := pz.store()
	for _, sub := range slices.Sorted(maps.Keys(pz.maybe)) {
		resumed := false
		for range 3 {
			if resumed = pz.callNow("resume", sub); resumed {
				break
			}
		}
		if !resumed {
			pz.viaStore++
			if err := pz.c.harness.Append(Record{Kind: Resuming, Event: sub, Node: "harness"}); err != nil {
				t.Fatal(err)
			}
			if err := storeResume(ctx, ps, sub); err != nil {
				t.Fatalf("resume %s through the store: %v", sub, err)
			}
		}
	}
	list, err := ps.Paused(ctx)
	if err != nil {
		t.Fatalf("read the pause table: %v", err)
	}
	if len(list) > 0 {
		// Nothing the harness paused may still be paused: every pause asked for was
		// followed by a Resume that returned nil.
		t.Errorf("PAUSED after the final resume: %+v", list)
		for _, p := range list {
			if err := pz.c.harness.Append(Record{Kind: Resuming, Event: p.Listener, Node: "harness"}); err != nil {
				t.Fatal(err)
			}
			if err := storeResume(ctx, ps, p.Listener); err != nil {
				t.Fatalf("resume %s through the store: %v", p.Listener, err)
			}
		}
	}
	t.Logf("pause/resume: %d pauses, %d resumes, %d calls cut by a kill, %d failed, %d final resumes through the store",
		pz.pauses, pz.resumes, pz.cut, pz.failed, pz.viaStore)
}

// callNow is call without waiting for a node: false when none runs.
func (pz *pauser) callNow(cmd, sub string) bool {
	if len(pz.c.live()) == 0 {
		return false
	}
	return pz.call(cmd, sub) // the pauser is stopped: call does not wait
}

// store is the pause store of the cluster's table, as an admin tool would open it.
func (pz *pauser) store() storage.PauseStore {
	t := pz.c.t
	st, err := outbox.NewSQLStore(pz.c.cfg.db, Dialects[pz.c.cfg.dialect].Dialect, outbox.SQLStoreConfig{Table: pz.c.cfg.table})
	if err != nil {
		t.Fatal(err)
	}
	ps, ok := st.(storage.PauseStore)
	if !ok {
		t.Fatalf("the SQL store %T keeps no pauses", st)
	}
	return ps
}

// storeResume resumes sub through the store, with an audit entry as Events.Resume writes.
func storeResume(ctx context.Context, ps storage.PauseStore, sub string) error {
	now := time.Now().UTC()
	_, err := ps.SetPaused(ctx, storage.SetPausedParams{Listener: sub, Entry: outbox.AuditEntry{
		ID: outbox.NewID(), At: now, Actor: "chaos harness", Action: outbox.AuditResume, Target: sub}})
	return err
}

// check checks the pauses of the run (CheckPause), subscription mapping each delivery
// to its subscription.
func (pz *pauser) check(recs []Record, subscription map[string]string) PauseReport {
	t := pz.c.t
	t.Helper()
	tm := Timings[pz.c.cfg.timing]
	rep := CheckPause(recs, subscription, PauseBound(tm), PauseOwnBound)
	rep.Gate(t, fmt.Sprintf("%s on the node that paused, %s on the others: the pause refresh (%s) + 2 × poll interval + 1 s",
		PauseOwnBound, PauseBound(tm), pauseRefresh))
	if rep.Pauses == 0 {
		t.Errorf("no pause was in force during the run: the pausing proved nothing")
	}
	for _, id := range rep.LateEvents[:min(len(rep.LateEvents), 10)] {
		t.Log(History(recs, nil, id, 5*time.Second))
	}
	return rep
}

// fill sets the result's counts of pause and resume calls.
func (pz *pauser) fill(res *Result) {
	res.Pauses, res.Resumes, res.PauseCallsCut = pz.pauses, pz.resumes, pz.cut+pz.failed
}
