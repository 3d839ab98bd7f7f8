package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// w1m is w1 in MultiNode mode on w1mNodes processes sharing one table: the program
// re-executes itself as each node.
const (
	childW1MArg = "__child-w1m"
	w1mNodes    = 3
	// w1mClaimTTL is the nodes' Config.ClaimTTL: it must exceed ListenerTimeout +
	// StatusTimeout (40 s by default); docs/multinode.md advises a few times that sum.
	// No node crashes here, so it only bounds claims that are never used.
	w1mClaimTTL = 2 * time.Minute
	// reportTick and reportEvery pace a node's "handled" lines: see childW1M.
	reportTick  = time.Millisecond
	reportEvery = 50 * time.Millisecond
)

// childW1MParams is what the parent hands a node, as JSON in the second argument.
type childW1MParams struct {
	Kind      string        `json:"kind"`
	DSN       string        `json:"dsn"`
	Schema    string        `json:"schema"`
	NodeID    string        `json:"node_id"`
	Pool      int           `json:"pool"`
	Producers int           `json:"producers"`
	First     int           `json:"first"` // the node writes transactions First .. First+Txs-1
	Txs       int           `json:"txs"`
	ClaimTTL  time.Duration `json:"claim_ttl"`
	Timeout   time.Duration `json:"timeout"`
	Outbox    childOutbox   `json:"outbox"`
	// StartOnGo starts the outbox at "go" rather than before "ready" (w6: the backlog
	// is in the table already, and no node may take any of it before the clock runs).
	StartOnGo bool `json:"start_on_go"`
	// ListenerDelay is how long the listener takes per event (w6: an I/O-bound one).
	ListenerDelay time.Duration `json:"listener_delay"`
	// CPUProfile is the file of the node's CPU profile, if any.
	CPUProfile string `json:"cpu_profile"`
	// GOMAXPROCS, when positive, is the node's GOMAXPROCS (-node-gomaxprocs).
	GOMAXPROCS int `json:"gomaxprocs,omitempty"`
	// WriterOnly runs the node's outbox in WriterOnly mode (bm: b on the processes of
	// w1m); its "handled" lines then count the transactions its producers committed.
	WriterOnly bool `json:"writer_only,omitempty"`
}

// childW1MResult is the node's last line on stdout, after "result ".
type childW1MResult struct {
	WriteSeconds  float64 `json:"write_seconds"`
	Handled       int64   `json:"handled"`
	HotDropped    int64   `json:"hot_dropped"`
	ColdEnqueued  int64   `json:"cold_enqueued"`
	Failures      int64   `json:"failures"`
	ClaimsLost    int64   `json:"claims_lost"`
	ClaimsExpired int64   `json:"claims_expired"`
	Error         string  `json:"error,omitempty"`
}

// The node's protocol. On stdout, one message a line: "ready" once its outbox runs,
// "handled <n>" whenever its listener's count changed (checked every millisecond), and
// "result <JSON>" at the end. On stdin: "go" starts the producers; the next line or
// the end of input stops the node, which then stops its outbox and reports.

// split returns share k of n items over parts parts, the first ones one larger.
func split(n, parts, k int) int {
	s := n / parts
	if k < n%parts {
		s++
	}
	return s
}

// runMultiNode is w1m (nodes = w1mNodes) and w1m1 (nodes = 1): o.w1Tx transactions of
// one business INSERT and one event, written by o.producers producers split over nodes
// node processes, each running an outbox in MultiNode mode on the same table. The
// clock runs from the parent's "go" until the table holds every event DONE.
func runMultiNode(ctx context.Context, o options, t *target, r int, w string, nodes int) (sample, error) {
	return runNodes(ctx, o, t, r, w, nodes, o.w1Tx, true, false, 0)
}

// runWritersOnly is bm, the ceiling of w1m's process layout: b (one business INSERT and
// one event a transaction, no dispatch) written by o.producers producers split over
// w1mNodes node processes, each with a WriterOnly outbox on the same table. The clock
// runs from the parent's "go" until every node's producers have committed their share.
func runWritersOnly(ctx context.Context, o options, t *target, r int, w string) (sample, error) {
	return runNodes(ctx, o, t, r, w, w1mNodes, o.w1Tx, true, true, 0)
}

// w6 is the ordered backlog of the scaling workloads: w6Events ordered events over
// orderKeys keys, written before the nodes start, delivered by a listener that takes
// w6Delay each (I/O-bound), by one node process (w6) or w1mNodes (w6m).
const (
	w6Events = 6000
	w6Delay  = 5 * time.Millisecond
)

// runOrderedBacklog is w6 and w6m: the parent writes the backlog through a WriterOnly
// outbox, then nodes nodes deliver it; the clock runs from "go" until every row is DONE.
func runOrderedBacklog(ctx context.Context, o options, t *target, r int, w string, nodes int) (sample, error) {
	n := max(1, o.w1Tx*w6Events/20000) // 6,000 at the default size; -scale scales it
	ob, err := outbox.New(t.db, o.config(t, outbox.WriterOnly, nil))
	if err != nil {
		return sample{}, err
	}
	insert := t.insertOrderSQL()
	wr := ob.Writer()
	err = produce(ctx, o.producers, n, func(ctx context.Context, i int) error {
		return outbox.RunInTx(ctx, t.db, func(ctx context.Context, tx *outbox.Tx) error {
			id := "o-" + strconv.Itoa(i)
			if _, err := tx.ExecContext(ctx, insert, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(time.Now())); err != nil {
				return err
			}
			// Occurred an hour ago, as W4's rows: a backlog, not events the hot path of
			// a running node would take (the pollers skip rows younger than SkipRecent).
			_, err := wr.Write(ctx, tx, outbox.Envelope{Type: eventType, AggregateType: aggregateType,
				AggregateID: strconv.Itoa(i), OrderKey: strconv.Itoa(i % orderKeys), Payload: o.payload(id, i),
				OccurredAt: time.Now().Add(-time.Hour)})
			return err
		})
	})
	if err != nil {
		return sample{}, fmt.Errorf("write the backlog: %w", err)
	}
	return runNodes(ctx, o, t, r, w, nodes, n, false, false, w6Delay)
}

// runNodes starts nodes node processes in MultiNode mode on the table; with write, the
// producers, split over them, write n transactions, else the n events are in the
// table already. It returns when every one of the n rows is DONE; with writerOnly
// (bm), the nodes' outboxes are WriterOnly and it returns when the n transactions are
// committed.
func runNodes(ctx context.Context, o options, t *target, r int, w string, nodeCount, n int, write, writerOnly bool, delay time.Duration) (sample, error) {
	if t.kind == "sqlite" {
		return sample{}, fmt.Errorf("%s does not run on SQLite (one file, one writer)", w)
	}
	exe, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	progressed := make(chan struct{}, 1)
	var nodes []*w1mNode
	defer func() {
		cancel() // kills the nodes still running after an error
		for _, nd := range nodes {
			nd.stop()
		}
	}()
	// Nodes with producers write the transactions; with fewer producers than nodes,
	// the others only dispatch.
	writers := min(nodeCount, o.producers)
	if !write {
		writers = 0
	}
	first := 0
	for k := range nodeCount {
		producers, txs := 0, 0
		if k < writers {
			producers, txs = split(o.producers, nodeCount, k), split(n, writers, k)
		}
		workers := o.workers
		if workers == 0 {
			workers = outbox.DefaultWorkers
		}
		p := childW1MParams{
			Kind: t.kind, DSN: t.dsn, Schema: t.schema, NodeID: fmt.Sprintf("bench-node-%d", k+1),
			Pool: producers + workers + 4, Producers: producers, First: first, Txs: txs,
			ClaimTTL: w1mClaimTTL, Timeout: o.timeout, Outbox: o.childOutbox(), ListenerDelay: delay, StartOnGo: !write,
			GOMAXPROCS: o.nodeGOMAXPROCS, WriterOnly: writerOnly,
		}
		if o.maxConns >= 0 {
			p.Pool = o.maxConns
		}
		if o.cpuProfile != "" {
			if p.CPUProfile, err = profilePath(o.cpuProfile, t, w, r, fmt.Sprintf("node%d", k+1)); err != nil {
				return sample{}, err
			}
		}
		first += txs
		nd, err := startW1MNode(ctx, exe, p, progressed)
		if err != nil {
			return sample{}, fmt.Errorf("node %d: %w", k+1, err)
		}
		nodes = append(nodes, nd)
	}
	for k, nd := range nodes {
		select {
		case <-nd.ready:
		case <-nd.exited:
			return sample{}, fmt.Errorf("node %d exited before it was ready: %w", k+1, nd.err())
		case <-ctx.Done():
			return sample{}, fmt.Errorf("waiting for node %d: %w", k+1, ctx.Err())
		}
	}
	start := time.Now()
	for k, nd := range nodes {
		if _, err := io.WriteString(nd.stdin, "go\n"); err != nil {
			return sample{}, fmt.Errorf("node %d: %w", k+1, err)
		}
	}
	// First every event handled by some node, then every row DONE (as waitDone).
	for {
		var handled int64
		for _, nd := range nodes {
			handled += nd.handled.Load()
		}
		if handled >= int64(n) {
			break
		}
		select {
		case <-progressed:
		case <-time.After(100 * time.Millisecond): // a node's exit is checked below
		case <-ctx.Done():
			return sample{}, fmt.Errorf("waiting for deliveries: %d of %d handled: %w", handled, n, ctx.Err())
		}
		for k, nd := range nodes {
			select {
			case <-nd.exited:
				return sample{}, fmt.Errorf("node %d exited early: %w", k+1, nd.err())
			default:
			}
		}
	}
	if !writerOnly {
		if err := waitDoneRows(ctx, t, int64(n), time.Millisecond); err != nil {
			return sample{}, err
		}
	}
	s := sample{events: n, txs: n, seconds: time.Since(start).Seconds()}
	for k, nd := range nodes {
		res, err := nd.finish()
		if err != nil {
			return sample{}, fmt.Errorf("node %d: %w", k+1, err)
		}
		s.writeSeconds = max(s.writeSeconds, res.WriteSeconds)
		s.hotDropped += res.HotDropped
		s.coldEnqueued += res.ColdEnqueued
		s.failures += res.Failures
		s.claimsLost += res.ClaimsLost
		s.claimsExpired += res.ClaimsExpired
		s.nodeHandled = append(s.nodeHandled, res.Handled)
	}
	return s, nil
}

// w1mNode is a running node process, seen from the parent.
type w1mNode struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	ready   chan struct{} // closed at "ready"
	exited  chan struct{} // closed once the process was waited for
	handled atomic.Int64

	mu        sync.Mutex
	result    *childW1MResult
	waitErr   error
	stopOnce  sync.Once
	readyOnce sync.Once
}

func startW1MNode(ctx context.Context, exe string, p childW1MParams, progressed chan struct{}) (*w1mNode, error) {
	arg, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	nd := &w1mNode{ready: make(chan struct{}), exited: make(chan struct{})}
	nd.cmd = exec.CommandContext(ctx, exe, childW1MArg, string(arg))
	nd.cmd.Stderr = os.Stderr
	nd.cmd.WaitDelay = 10 * time.Second
	if nd.stdin, err = nd.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := nd.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := nd.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			kind, rest, _ := strings.Cut(sc.Text(), " ")
			switch kind {
			case "ready":
				nd.readyOnce.Do(func() { close(nd.ready) })
			case "handled":
				if v, err := strconv.ParseInt(rest, 10, 64); err == nil {
					nd.handled.Store(v)
					select {
					case progressed <- struct{}{}:
					default:
					}
				}
			case "result":
				var res childW1MResult
				if err := json.Unmarshal([]byte(rest), &res); err != nil {
					res.Error = fmt.Sprintf("bad result %q: %v", rest, err)
				}
				nd.mu.Lock()
				nd.result = &res
				nd.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		err := nd.cmd.Wait()
		nd.mu.Lock()
		nd.waitErr = err
		nd.mu.Unlock()
		close(nd.exited)
	}()
	return nd, nil
}

// err explains why an exited node failed.
func (nd *w1mNode) err() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.result != nil && nd.result.Error != "" {
		return errors.New(nd.result.Error)
	}
	if nd.waitErr != nil {
		return nd.waitErr
	}
	return errors.New("no result")
}

// stop tells the node to stop (closing its stdin) and waits for it to exit; a node that
// does not exit within a minute is killed.
func (nd *w1mNode) stop() {
	nd.stopOnce.Do(func() { _ = nd.stdin.Close() })
	select {
	case <-nd.exited:
	case <-time.After(time.Minute):
		_ = nd.cmd.Process.Kill()
		<-nd.exited
	}
}

// finish stops the node and returns its result.
func (nd *w1mNode) finish() (childW1MResult, error) {
	nd.stop()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.result == nil {
		return childW1MResult{}, fmt.Errorf("no result: %v", nd.waitErr)
	}
	if nd.result.Error != "" {
		return *nd.result, errors.New(nd.result.Error)
	}
	if nd.waitErr != nil {
		return *nd.result, nd.waitErr
	}
	return *nd.result, nil
}

// runChildW1M is a node process of w1m. Its last line on stdout is its result.
func runChildW1M(args []string) int {
	out := &lineWriter{}
	var res childW1MResult
	err := childW1M(args, out, &res)
	if err != nil {
		res.Error = err.Error()
	}
	b, _ := json.Marshal(res)
	out.println("result " + string(b))
	if err != nil {
		return 1
	}
	return 0
}

func childW1M(args []string, out *lineWriter, res *childW1MResult) error {
	if len(args) != 1 {
		return fmt.Errorf("want one JSON argument, got %d", len(args))
	}
	var p childW1MParams
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		return err
	}
	if p.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(p.GOMAXPROCS)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	t, err := childTarget(ctx, p.Kind, p.DSN, p.Schema, p.Pool)
	if err != nil {
		return err
	}
	defer t.db.Close()
	o := p.Outbox.options()
	m := newBenchMetrics(-1) // counts only; the parent decides when all is done
	cfg := o.config(t, outbox.WriterOnly, m)
	if !p.WriterOnly {
		cfg = o.config(t, outbox.MultiNode, m)
		cfg.ClaimTTL, cfg.NodeID = p.ClaimTTL, p.NodeID
	}
	ob, err := outbox.New(t.db, cfg)
	if err != nil {
		return err
	}
	var handled atomic.Int64
	if err := ob.Register(aggregateType, eventType, outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		if p.ListenerDelay > 0 {
			time.Sleep(p.ListenerDelay)
		}
		handled.Add(1)
		return nil
	})); err != nil {
		return err
	}
	if p.CPUProfile != "" {
		stop, err := startProfileFile(p.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if !p.StartOnGo {
		if err := ob.Start(ctx); err != nil {
			return err
		}
	}
	stopped := false
	defer func() {
		if !stopped {
			stopOutbox(ob)
		}
	}()
	if err := warmPool(ctx, t.db, p.Pool); err != nil {
		return fmt.Errorf("open connections: %w", err)
	}
	out.println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return errors.New("the parent did not say go")
	}
	if p.StartOnGo {
		if err := ob.Start(ctx); err != nil {
			return err
		}
	}
	stopCh := make(chan struct{})
	go func() {
		in.Scan() // the next line, or the end of input
		close(stopCh)
	}()
	var wg sync.WaitGroup
	reportDone := make(chan struct{})
	wg.Go(func() {
		// The count is reported once it has settled (unchanged over one tick), and
		// every reportEvery while it keeps changing. A line every millisecond, as
		// before, cost each node and the parent a write, a read and their wake-ups a
		// millisecond, which the single-process workloads' in-process counter does
		// not pay: on two shared cores W1m's rate was 3-4 % lower for it.
		tick := time.NewTicker(reportTick)
		defer tick.Stop()
		reported, prev := int64(-1), int64(-1)
		var at time.Time
		for {
			select {
			case now := <-tick.C:
				v := handled.Load()
				if v != reported && (v == prev || now.Sub(at) >= reportEvery) {
					out.println("handled", v)
					reported, at = v, now
				}
				prev = v
			case <-reportDone:
				return
			}
		}
	})
	defer func() {
		close(reportDone)
		wg.Wait()
	}()

	insert := t.insertOrderSQL()
	w := ob.Writer()
	start := time.Now()
	err = produce(ctx, p.Producers, p.Txs, func(ctx context.Context, i int) error {
		if err := writeOne(ctx, o, t, insert, w, p.First+i); err != nil {
			return err
		}
		if p.WriterOnly {
			handled.Add(1) // committed: what the parent waits for
		}
		return nil
	})
	res.WriteSeconds = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	select {
	case <-stopCh:
	case <-ctx.Done():
		return ctx.Err()
	}
	stopOutbox(ob)
	stopped = true
	res.Handled = handled.Load()
	res.HotDropped, res.ColdEnqueued, res.Failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	res.ClaimsLost, res.ClaimsExpired = m.claimsLost.Load(), m.claimsExpired.Load()
	return nil
}
