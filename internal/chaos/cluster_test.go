package chaos

// The process harness: a cluster of node processes (node.go) over one table, which the
// scenarios kill, restart and cut off from the database, then drain and check.

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// clusterConfig describes a cluster.
type clusterConfig struct {
	dialect string // "postgres", "mysql" or "sqlite"
	dsn     string // for the admin connection (direct to the server)
	nodeDSN string // for the nodes; defaults to dsn (a proxy's address otherwise)
	db      *sql.DB
	table   string
	nodes   int    // node slots; SQLite has one
	writers int    // writer goroutines per node
	timing  string // "fault" or "steady"
	exe     string // node binary; defaults to this test binary
	env     func(slot, incarnation int) []string
	seed    int64
	// orderKeys > 0: the writers order their events by that many keys (EnvOrderKeys),
	// and the run is gated by the order checker too.
	orderKeys int
	failures  bool // the listener fails by key (EnvFailures): DEAD rows are expected
	// fanOut > 1: that many listeners take every event (EnvFanOut), and the checker
	// expects each committed event delivered once to each (fanOutRecords).
	fanOut  int
	initial int // node slots started at creation; the others are parked (default: all)
}

type cluster struct {
	t       *testing.T
	cfg     clusterConfig
	dir     string
	harness *Log
	rng     *rand.Rand
	began   time.Time

	mu     sync.Mutex
	armed  bool        // new incarnations get cfg.env (crash points); false once draining
	quiet  bool        // new incarnations run no writers: the cluster is draining
	slots  []*nodeProc // the current incarnation of each slot, nil when down
	parked []bool      // slots left down on purpose (not started by ensureAll)
	incs   []int       // incarnations started per slot
	logs   []string    // every record file
	faults int
	// reaps are the crashed nodes as reaped: when their exit was seen, when the slot
	// was reaped (where the harness used to record the fault).
	reaps []reaped
	// pz pauses and resumes subscriptions during the faults (startPauser), or is nil.
	pz *pauser
}

type reaped struct {
	node         string
	exit, reaped time.Time
}

// nodeProc is one node process.
type nodeProc struct {
	name    string
	slot    int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string // stdout
	waited  chan struct{}
	err     error // cmd.Wait's, once waited is closed
	errPath string
	// claimsPath is where the chaos build writes the IDs of the claim it dies holding.
	claimsPath string
	killed     atomic.Bool // by the harness (kill, cleanup): no crash record
	ready      atomic.Bool // its "ready" line was read: its next lines answer commands
	noted      atomic.Bool // its crash was recorded the moment its exit was seen
	exitAt     time.Time   // when its exit was seen (set before waited is closed)
}

func (p *nodeProc) exited() bool {
	select {
	case <-p.waited:
		return true
	default:
		return false
	}
}

func (p *nodeProc) stderrTail() string {
	b, _ := os.ReadFile(p.errPath)
	s := string(b)
	if len(s) > 3000 {
		s = "…" + s[len(s)-3000:]
	}
	return s
}

// killedBySignal reports whether the process died of SIGKILL.
func (p *nodeProc) killedBySignal() bool {
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// newCluster migrates the tables and starts every node.
func newCluster(t *testing.T, cfg clusterConfig) *cluster {
	t.Helper()
	if cfg.nodeDSN == "" {
		cfg.nodeDSN = cfg.dsn
	}
	if cfg.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cfg.exe = exe
	}
	cfg.writers = max(cfg.writers, 1)
	cfg.nodes = max(cfg.nodes, 1)
	ctx := t.Context()
	d := Dialects[cfg.dialect].Dialect
	if err := outbox.MigrateTable(ctx, cfg.db, d, cfg.table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if _, err := cfg.db.ExecContext(ctx, "CREATE TABLE "+BusinessTable(cfg.table)+
		" (event_id VARCHAR(64) NOT NULL PRIMARY KEY, node VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatalf("create business table: %v", err)
	}
	// The record files outlive a failed test (their path is logged), so that a failure
	// seen once can be explained afterwards; a passing test removes them.
	dir, err := os.MkdirTemp("", "chaos-"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("record files kept in %s (harness.jsonl, <node>.jsonl, <node>.stderr)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	c := &cluster{t: t, cfg: cfg, dir: dir, rng: Rand(cfg.seed), began: time.Now(), armed: true,
		slots: make([]*nodeProc, cfg.nodes), incs: make([]int, cfg.nodes), parked: make([]bool, cfg.nodes)}
	hpath := filepath.Join(c.dir, "harness.jsonl")
	h, err := CreateLog(hpath)
	if err != nil {
		t.Fatal(err)
	}
	c.harness = h
	c.logs = append(c.logs, hpath)
	t.Cleanup(func() { // a failed test leaves no process behind
		c.mu.Lock()
		procs := slices.Clone(c.slots)
		c.mu.Unlock()
		for _, p := range procs {
			if p != nil {
				p.killed.Store(true)
				_ = p.cmd.Process.Kill()
				<-p.waited
			}
		}
		_ = h.Close()
	})
	if cfg.initial <= 0 {
		cfg.initial = cfg.nodes
		c.cfg.initial = cfg.nodes
	}
	for slot := range cfg.nodes {
		if slot < cfg.initial {
			c.start(slot)
		} else {
			c.parked[slot] = true
		}
	}
	return c
}

// join starts a node in a parked slot: a node joins the cluster.
func (c *cluster) join(slot int) {
	c.mu.Lock()
	c.parked[slot] = false
	c.mu.Unlock()
	c.start(slot)
}

// leave takes the node in slot out of the cluster for good: stopped gracefully, or
// killed with SIGKILL (recorded as a fault).
func (c *cluster) leave(slot int, kill bool) {
	c.mu.Lock()
	c.parked[slot] = true
	c.mu.Unlock()
	if kill {
		c.kill(slot)
		return
	}
	if _, err := c.stopNode(slot, 2*stopBound); err != nil {
		c.t.Errorf("node in slot %d did not leave gracefully: %v", slot, err)
	}
}

// faultCount is the number of faults recorded so far (a node's exit is recorded by its
// waiting goroutine).
func (c *cluster) faultCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.faults
}

// note appends a harness record.
func (c *cluster) note(kind Kind, node, what string) {
	if err := c.harness.Append(Record{Kind: kind, Node: node, Event: what}); err != nil {
		c.t.Fatal(err)
	}
	if kind == Fault || kind == Down {
		c.mu.Lock()
		c.faults++
		c.mu.Unlock()
	}
}

// start starts a new incarnation in slot and waits for it to be ready.
func (c *cluster) start(slot int) *nodeProc {
	t := c.t
	t.Helper()
	c.mu.Lock()
	c.incs[slot]++
	inc := c.incs[slot]
	armed, writers := c.armed, c.cfg.writers
	if c.quiet {
		writers = 0
	}
	c.mu.Unlock()
	name := fmt.Sprintf("n%d.%d", slot, inc)
	logPath := filepath.Join(c.dir, name+".jsonl")
	p := &nodeProc{name: name, slot: slot, lines: make(chan string, 16), waited: make(chan struct{}),
		errPath: filepath.Join(c.dir, name+".stderr"), claimsPath: filepath.Join(c.dir, name+".claims")}
	stderr, err := os.Create(p.errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	p.cmd = exec.Command(c.cfg.exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(),
		EnvRole+"="+RoleNode, EnvDialect+"="+c.cfg.dialect, EnvDSN+"="+c.cfg.nodeDSN, EnvTable+"="+c.cfg.table,
		EnvNode+"="+name, EnvLog+"="+logPath, EnvWriters+"="+strconv.Itoa(writers),
		EnvTiming+"="+c.cfg.timing, EnvNodeSeed+"="+strconv.FormatInt(c.cfg.seed+int64(slot*1000+inc)*7919, 10),
		EnvOrderKeys+"="+strconv.Itoa(c.cfg.orderKeys), "OUTBOX_CRASH_EVENTS="+p.claimsPath)
	if c.cfg.failures {
		p.cmd.Env = append(p.cmd.Env, EnvFailures+"=1")
	}
	if c.cfg.fanOut > 1 {
		p.cmd.Env = append(p.cmd.Env, EnvFanOut+"="+strconv.Itoa(c.cfg.fanOut))
	}
	if c.cfg.env != nil && armed {
		p.cmd.Env = append(p.cmd.Env, c.cfg.env(slot, inc)...)
	}
	p.cmd.Stderr = stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		p.exitAt = time.Now()
		if !p.killed.Load() && p.killedBySignal() {
			// A crash point killed it: record the fault now, not when the harness
			// reaps the slot (it may be busy starting another node for seconds, and a
			// take-over of the dead node's claims before the record would look like an
			// overlap). The chaos node records after-listener and after-insert crashes
			// itself, durably, before it dies; an after-claim crash is recorded here.
			if err := c.harness.Append(Record{Kind: Fault, Node: p.name, Event: "crash point (exit seen)"}); err == nil {
				p.noted.Store(true)
				c.mu.Lock()
				c.faults++
				c.mu.Unlock()
			}
			c.noteClaims(p)
		}
		close(p.waited)
	}()
	c.mu.Lock()
	c.slots[slot] = p
	c.logs = append(c.logs, logPath)
	c.mu.Unlock()
	select {
	case line, ok := <-p.lines:
		if ok && line == "ready" {
			p.ready.Store(true)
			return p
		}
		<-p.waited
		if p.killedBySignal() { // a crash point hit during start-up
			return p
		}
		t.Fatalf("node %s did not start (%v):\n%s", name, p.err, p.stderrTail())
	case <-time.After(90 * time.Second):
		t.Fatalf("node %s not ready after 90 s:\n%s", name, p.stderrTail())
	}
	return p
}

// noteClaims records the events whose claim p held when the after-claim crash point
// killed it (the chaos build writes their IDs to p.claimsPath before it dies), so that
// the order checker measures a take-over from the death that lost the claim.
func (c *cluster) noteClaims(p *nodeProc) {
	data, err := os.ReadFile(p.claimsPath)
	if err != nil {
		return // another crash point, or a kill: no claim file
	}
	var wg sync.WaitGroup
	for _, id := range strings.Fields(string(data)) {
		wg.Go(func() { // concurrent appends share their fsyncs
			if err := c.harness.Append(Record{Kind: Claimed, Node: p.name, Event: id}); err != nil {
				c.t.Errorf("record the claims of %s: %v", p.name, err)
			}
		})
	}
	wg.Wait()
}

// kill sends SIGKILL to the node in slot and records the fault.
func (c *cluster) kill(slot int) {
	c.mu.Lock()
	p := c.slots[slot]
	c.slots[slot] = nil
	c.mu.Unlock()
	if p == nil {
		return
	}
	p.killed.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.waited
	c.note(Fault, p.name, "kill -9")
}

// stderrOf returns the stderr of the last incarnation in slot.
func (c *cluster) stderrOf(slot int) string {
	c.mu.Lock()
	name := fmt.Sprintf("n%d.%d", slot, c.incs[slot])
	c.mu.Unlock()
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".stderr"))
	return string(b)
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// stopNode stops the node in slot gracefully (end of stdin) and returns how long it
// took and its exit error; it gives up after limit (then kills it).
func (c *cluster) stopNode(slot int, limit time.Duration) (time.Duration, error) {
	c.mu.Lock()
	p := c.slots[slot]
	c.slots[slot] = nil
	c.mu.Unlock()
	if p == nil {
		return 0, nil
	}
	began := time.Now()
	_ = p.stdin.Close()
	select {
	case <-p.waited:
		if p.err != nil {
			return time.Since(began), fmt.Errorf("%v\n%s", p.err, p.stderrTail())
		}
		return time.Since(began), nil
	case <-time.After(limit):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump to stderr
		<-p.waited
		return time.Since(began), fmt.Errorf("did not stop within %s:\n%s", limit, p.stderrTail())
	}
}

// reap restarts the nodes that died on their own: by a crash point (SIGKILL, recorded
// as a fault) or by an error (a test failure). It returns how many crashed.
func (c *cluster) reap(restart bool) int {
	n := 0
	for slot := range c.cfg.nodes {
		c.mu.Lock()
		p := c.slots[slot]
		c.mu.Unlock()
		if p == nil || !p.exited() {
			continue
		}
		if p.killedBySignal() {
			if !p.noted.Load() {
				c.note(Fault, p.name, "crash point")
			}
			c.mu.Lock()
			c.reaps = append(c.reaps, reaped{p.name, p.exitAt, time.Now()})
			c.mu.Unlock()
			n++
		} else {
			c.t.Errorf("node %s exited: %v\n%s", p.name, p.err, p.stderrTail())
		}
		c.mu.Lock()
		c.slots[slot] = nil
		c.mu.Unlock()
		if restart {
			c.start(slot)
		}
	}
	return n
}

// ensureAll starts a node in every empty slot that is not parked.
func (c *cluster) ensureAll() {
	for slot := range c.cfg.nodes {
		c.mu.Lock()
		p, parked := c.slots[slot], c.parked[slot]
		c.mu.Unlock()
		if p == nil && !parked {
			c.start(slot)
		}
	}
}

// live returns the running nodes.
func (c *cluster) live() []*nodeProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*nodeProc
	for _, p := range c.slots {
		if p != nil && !p.exited() {
			out = append(out, p)
		}
	}
	return out
}

// sleep waits d, restarting crashed nodes meanwhile when restart is set.
func (c *cluster) sleep(d time.Duration, restart bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		c.reap(restart)
		time.Sleep(min(50*time.Millisecond, time.Until(end)))
	}
}

// pending counts rows not DONE/DEAD (NEW, RETRY, WAITING), read directly from the server.
func (c *cluster) pending(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	err := c.cfg.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+c.cfg.table+" WHERE status IN (0, 2, 4)").Scan(&n)
	return n, err
}

// pendingState summarizes the pending rows for a drain that takes long: how many by
// status, claimed (locked_until ahead), backing off (available_at ahead) and place in
// their order key (unordered, the key's head, behind the head).
func (c *cluster) pendingState(ctx context.Context) string {
	if c.cfg.dialect == "sqlite" {
		return "(not summarized on SQLite)"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := "CURRENT_TIMESTAMP"
	if c.cfg.dialect == "mysql" {
		now = "UTC_TIMESTAMP(6)"
	}
	t := c.cfg.table
	rows, err := c.cfg.db.QueryContext(ctx, `SELECT e.status,
		CASE WHEN e.locked_until > `+now+` THEN 1 ELSE 0 END,
		CASE WHEN e.available_at > `+now+` THEN 1 ELSE 0 END,
		CASE WHEN e.order_key IS NULL THEN 0
		     WHEN e.order_seq = (SELECT MIN(x.order_seq) FROM `+t+` x
		          WHERE x.order_key = e.order_key AND x.status <> 1 AND x.status < 5) THEN 1
		     ELSE 2 END,
		COUNT(*)
		FROM `+t+` e WHERE e.status IN (0, 2, 4) GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var status, claimed, later, place, n int
		if err := rows.Scan(&status, &claimed, &later, &place, &n); err != nil {
			return err.Error()
		}
		part := fmt.Sprintf("%d %s", n, outbox.Status(status))
		if claimed == 1 {
			part += " claimed"
		}
		if later == 1 {
			part += " not due"
		}
		part += []string{" unordered", " key head", " behind head"}[place]
		parts = append(parts, part)
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return strings.Join(parts, ", ")
}

// finish stops the writers, waits until every row is DONE or DEAD, stops the nodes
// gracefully and checks the run. Crash points stay armed during the drain only when
// restart is set.
//
// The drain fails when it stops making progress: when the count of pending rows has
// not fallen below its lowest for drainStall, the longest the scenario's timing lets
// a node leave work waiting (waitBound). How long a drain that progresses takes is the
// machine's speed (the backlog, fsyncs, -race), so it is reported, not gated, up to
// drainCap.
func (c *cluster) finish(scenario string, faultFree bool) Report {
	t := c.t
	t.Helper()
	faultEnd := time.Now()
	c.mu.Lock()
	c.armed, c.quiet = false, true
	c.mu.Unlock()
	c.reap(true)
	c.ensureAll()
	// Quiet every node's writers.
	for _, p := range c.live() {
		if _, err := io.WriteString(p.stdin, "quiet\n"); err != nil {
			continue // died meanwhile: reaped below
		}
	}
	for _, p := range c.live() {
		select {
		case line, ok := <-p.lines:
			if ok && line != "quiet" {
				t.Errorf("node %s: %q, want quiet", p.name, line)
			} // !ok: it died (a crash point); reaped below

		case <-p.waited:
		case <-time.After(60 * time.Second):
			t.Errorf("node %s: writers not quiet after 60 s", p.name)
		}
	}
	// Drain.
	drainStall := waitBound(c.cfg.timing)
	lastState, lastLow := time.Now(), time.Now()
	low := -1
	for {
		c.reap(true)
		n, err := c.pending(t.Context())
		if err == nil && n == 0 {
			break
		}
		if err == nil && (low < 0 || n < low) {
			low, lastLow = n, time.Now()
		}
		if since := time.Since(lastLow); since > drainStall || time.Since(faultEnd) > drainCap {
			t.Errorf("%d rows still pending %s after the faults ended, the lowest count (%d) %s ago (stall bound %s, cap %s; err %v)",
				n, time.Since(faultEnd).Round(time.Second), low, since.Round(time.Second), drainStall, drainCap, err)
			t.Logf("pending rows at the drain's end: %s", c.pendingState(t.Context()))
			break
		}
		if time.Since(lastState) >= 15*time.Second {
			lastState = time.Now()
			t.Logf("drain %s after the faults: %d pending: %s", time.Since(faultEnd).Round(time.Second), n, c.pendingState(t.Context()))
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(faultEnd)
	// Stop gracefully.
	for _, p := range c.live() {
		_ = p.stdin.Close()
	}
	for slot, p := range c.slots {
		if p == nil {
			continue
		}
		select {
		case <-p.waited:
			if p.err != nil && !p.killedBySignal() {
				t.Errorf("node %s: %v\n%s", p.name, p.err, p.stderrTail())
			}
		case <-time.After(60 * time.Second):
			_ = p.cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump to stderr
			<-p.waited
			t.Errorf("node %s did not stop within 60 s:\n%s", p.name, p.stderrTail())
		}
		c.slots[slot] = nil
	}
	return c.check(scenario, faultFree, drained)
}

// check reads the records and the tables, computes the report, gates it and publishes
// the result.
func (c *cluster) check(scenario string, faultFree bool, drained time.Duration) Report {
	t := c.t
	t.Helper()
	recs, err := ReadLogs(c.logs...)
	if err != nil {
		t.Fatal(err)
	}
	finals, err := ReadFinals(t.Context(), c.cfg.db, c.cfg.table)
	if err != nil {
		t.Fatalf("read finals: %v", err)
	}
	bizFinals := finals
	var deliveries map[string]string // delivery → its subscription
	if c.cfg.fanOut > 1 {
		recs, deliveries = fanOutRecords(recs, c.cfg.fanOut)
		bizFinals = slices.DeleteFunc(slices.Clone(finals), func(f Final) bool { return deliveries[f.Event] != "" })
	}
	rep := Check(recs, finals)
	rep.Gate(t, faultFree)
	if !c.cfg.failures {
		rep.GateNoDead(t) // the node's listener never fails
	}
	if c.cfg.orderKeys > 0 {
		tm := Timings[c.cfg.timing]
		rep.Order = CheckOrder(recs, finals, tm.Listener)
		bound, why := takeoverBound(c.cfg.timing), "ClaimTTL + the shorter of ClaimTTL and 10 s (the claims from the oldest row) + 2 × poll interval + 10 s for a node's restart and a loaded 2-core host under -race"
		if c.pz != nil {
			// A paused subscription's delivery that a killed node held is taken over once
			// its subscription is resumed.
			bound += pauseHeldMax
			why += ", + the longest pause"
		}
		rep.Order.GateOrder(t, bound, why)
	}
	if c.pz != nil {
		rep.Pause = c.pz.check(recs, deliveries)
	}
	if len(c.reaps) > 0 {
		late, maxDelay := lateReapOverlaps(recs, c.reaps)
		t.Logf("crashes reaped %d; longest delay from exit to reap %s; take-overs of a dead node's attempt before its reap "+
			"(reported as overlaps when the fault was recorded at the reap): %d %s",
			len(c.reaps), maxDelay.Round(time.Millisecond), len(late), abbrev(late))
	}
	if torn := c.torn(bizFinals); len(torn) > 0 {
		t.Errorf("TORN: %d transaction(s) with a business row but no event or the reverse: %s", len(torn), abbrev(torn))
	}
	var nodes, restarts int
	for _, inc := range c.incs {
		nodes++
		restarts += inc - 1
	}
	t.Logf("%s on %s: %d node slots, %d restarts, %d faults; drained %s after the faults",
		scenario, c.cfg.dialect, nodes, restarts, c.faultCount(), drained.Round(time.Millisecond))
	if t.Failed() {
		ids := rep.Flagged()
		for _, id := range ids[:min(len(ids), 10)] {
			t.Log(History(recs, finals, id, 5*time.Second))
		}
	}
	res := rep.Result(scenario, c.cfg.dialect)
	if c.pz != nil {
		c.pz.fill(&res)
	}
	res.Seed, res.Faults = c.cfg.seed, c.faultCount()
	res.Seconds = time.Since(c.began).Seconds()
	res.Server = serverVersion(t, c.cfg.db, c.cfg.dialect)
	Publish(t, res)
	return rep
}

// infraFailure ends a scenario whose infrastructure failed (an InfraError: the server
// did not come back from a restart). The gates cannot judge the library on such a run,
// so the result is published with the failure in Infra and no figures, and the test
// fails with the failure's own message ("infra: …"), not a gate's.
func (c *cluster) infraFailure(scenario string, ie *InfraError) {
	t := c.t
	t.Helper()
	c.note(Down, "", ie.Result())
	Publish(t, Result{Kind: KindScenario, Scenario: scenario, Database: c.cfg.dialect, Seed: c.cfg.seed,
		Faults: c.faultCount(), Seconds: time.Since(c.began).Seconds(), Ordered: c.cfg.orderKeys > 0, Infra: ie.Result()})
	t.Fatal(ie.Error())
}

// takeoverBound bounds the time from a node's kill to another node starting an ordered
// event the dead node had in its listener: its claim expires (ClaimTTL), the next claim
// from the oldest row takes it (every ClaimTTL or 10 s, whichever is shorter: the row
// may be behind the claimer's low-water mark) at a poll (a poll interval), with room for
// a restarted SingleNode process to start and for a loaded machine.
func takeoverBound(timing string) time.Duration {
	tm := Timings[timing]
	return tm.ClaimTTL + min(tm.ClaimTTL, 10*time.Second) + 2*tm.Poll + 10*time.Second
}

// fanOutRecords turns the writers' records of each event into the same records of each
// of its fan listeners' deliveries (outbox.DeliveryID), which is what the listeners
// record, and returns the delivery IDs with their listener's name: the checker then
// holds every delivery to the rules an event is held to (committed: delivered; rolled
// back: never; at most the allowed duplicates), and the event rows themselves only have
// to be finished.
func fanOutRecords(recs []Record, fan int) ([]Record, map[string]string) {
	out := make([]Record, 0, len(recs)*fan)
	deliveries := map[string]string{}
	for _, r := range recs {
		switch r.Kind {
		case Begun, Committed, Unknown, RolledBack, Aborted:
			for i := range fan {
				d := r
				d.Event = outbox.DeliveryID(r.Event, FanOutListener(i))
				deliveries[d.Event] = FanOutListener(i)
				out = append(out, d)
			}
		default:
			out = append(out, r)
		}
	}
	return out, deliveries
}

// torn returns the event IDs present in only one of the business and outbox tables.
func (c *cluster) torn(finals []Final) []string {
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	rows, err := c.cfg.db.QueryContext(ctx, "SELECT event_id FROM "+BusinessTable(c.cfg.table))
	if err != nil {
		c.t.Fatalf("read business table: %v", err)
	}
	defer rows.Close()
	biz := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			c.t.Fatal(err)
		}
		biz[id] = true
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	var torn []string
	for _, f := range finals {
		if !biz[f.Event] {
			torn = append(torn, f.Event)
		}
		delete(biz, f.Event)
	}
	for id := range biz {
		torn = append(torn, id)
	}
	slices.Sort(torn)
	return torn
}

var allTargets = []string{"postgres", "mysql", "sqlite"}

// openTarget opens a fresh table on the shared server (or a new SQLite file) and
// returns the cluster config for it.
func openTarget(t *testing.T, dialect string) clusterConfig {
	t.Helper()
	cfg := clusterConfig{dialect: dialect}
	switch dialect {
	case "postgres":
		cfg.dsn = testdb.PostgresDSN(t)
		cfg.db = testdb.NewPostgresDB(t)
	case "mysql":
		cfg.dsn = testdb.MySQLDSN(t)
		cfg.db = testdb.NewMySQLDB(t)
	case "sqlite":
		cfg.dsn = outbox.SQLiteDSN(filepath.Join(t.TempDir(), "chaos.db"))
		db, err := sql.Open("sqlite", cfg.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		cfg.db = db
	}
	cfg.table = testdb.IsolatedTable(t, cfg.db, Dialects[dialect].Dialect.Name())
	return cfg
}

// openServerTarget is openTarget on a server of the test's own.
func openServerTarget(t *testing.T, s *Server) clusterConfig {
	t.Helper()
	db, err := sql.Open(Dialects[s.Kind].Driver, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := clusterConfig{dialect: s.Kind, dsn: s.DSN, db: db}
	cfg.table = testdb.IsolatedTable(t, db, Dialects[s.Kind].Dialect.Name())
	return cfg
}

// nodeBinary builds internal/chaos/node with the crash points (-tags outboxchaos, and
// -race when this binary has it) into dir.
func nodeBinary(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtimeGOROOT(), "bin", "go")
	}
	out := filepath.Join(dir, "chaos-node")
	args := []string{"build", "-tags", "outboxchaos", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./node")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, goBin, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	t.Logf("built the chaos node (go %s) in %s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
	return out
}

// serverVersion returns the database's version string, or "" when it cannot be read.
func serverVersion(t *testing.T, db *sql.DB, dialect string) string {
	q := map[string]string{"postgres": "SHOW server_version", "mysql": "SELECT VERSION()",
		"sqlite": "SELECT sqlite_version()"}[dialect]
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var v string
	if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return ""
	}
	return v
}

// lateReapOverlaps returns the events whose attempt a crashed node left open and that
// another node started between the crash and the reap of its slot: the overlaps the
// harness reported when it recorded a crash only at the reap. It also returns the
// longest delay from exit to reap.
func lateReapOverlaps(recs []Record, reaps []reaped) ([]string, time.Duration) {
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b Record) int { return a.At.Compare(b.At) })
	var out []string
	var longest time.Duration
	for _, r := range reaps {
		longest = max(longest, r.reaped.Sub(r.exit))
		open := map[string]bool{}
		for _, x := range sorted {
			if x.At.After(r.exit) {
				break
			}
			if x.Node == r.node {
				switch x.Kind {
				case Started:
					open[x.Event] = true
				case Delivered, Failed:
					delete(open, x.Event)
				}
			}
		}
		for _, x := range sorted {
			if x.Kind == Started && open[x.Event] && x.Node != r.node && x.At.After(r.exit) && x.At.Before(r.reaped) {
				out = append(out, x.Event+" (dead "+r.node+", taken by "+x.Node+")")
				delete(open, x.Event)
			}
		}
	}
	slices.Sort(out)
	return out, longest
}
