package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outbox/adapters/pgnotify"
	outbox "github.com/outboxkit/outbox/core"
)

// The route every benchmark event takes.
const (
	aggregateType = "Order"
	eventType     = "OrderPlaced"
)

// sample is one measurement of one workload.
type sample struct {
	events  int
	txs     int
	seconds float64
	// writeSeconds is how long the producers took (w1, w1m, w2): the write phase alone.
	writeSeconds float64
	// lat is the commit-to-listener latency (w2, w3, sustain, soak).
	lat        *latency
	peakRSSKiB int64 // w4
	baseRSSKiB int64 // w4: before the dispatcher started
	// claimsLost and claimsExpired count claims of w1m's nodes (Metrics.Claims).
	claimsLost    int64
	claimsExpired int64
	nodeHandled   []int64     // w1m: listener invocations per node
	sustain       *sustainRun // sustain
	soak          *soakRun    // soak
	hotDropped    int64
	coldEnqueued  int64
	failures      int64
	// lost counts the events a peer never delivered (river, watermill); events then
	// counts those it did.
	lost int64
}

func (s sample) eventsPerSec() float64 {
	if s.seconds <= 0 {
		return 0
	}
	return float64(s.events) / s.seconds
}

// benchDatabase runs the selected workloads on one database, o.repeat times interleaved,
// and adds the results to rep. Each durability of o.durabilities is a group with a
// server (or SQLite directory) of its own; every round runs every group, one after the
// other, so that their results come from the same minutes.
func benchDatabase(ctx context.Context, o options, kind string, servers *serverSet, rep *report) error {
	var groups []*target
	defer func() {
		for _, t := range groups {
			t.close()
		}
	}()
	for _, d := range o.durabilities {
		t, err := openTarget(ctx, o, kind, d, servers)
		if err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		if fs := fsType(t.dataDir); t.durability == "durable" && fs == "tmpfs" {
			note := fmt.Sprintf("%s: the durable server's files are on tmpfs (%s), where fsync does nothing: "+
				"set TMPDIR to a directory on a disk", t.label(), t.dataDir)
			progress("WARNING: %s", note)
			rep.Notes = append(rep.Notes, note)
		}
		groups = append(groups, t)
	}
	workloads := o.workloads
	multiNode := func(w string) bool { return w == "w1m" || w == "w1m1" || w == "bm" }
	if skipped := slices.DeleteFunc(slices.Clone(workloads), func(w string) bool { return !multiNode(w) }); kind == "sqlite" && len(skipped) > 0 {
		note := "sqlite: " + strings.Join(skipped, ", ") + " skipped: MultiNode on SQLite is one file, one writer"
		progress("%s", note)
		rep.Notes = append(rep.Notes, note)
		workloads = slices.DeleteFunc(slices.Clone(workloads), multiNode)
	}
	// A peer that does not support the database is skipped, in the table and the notes.
	skipped := make(map[string]string)
	for _, w := range workloads {
		if why := peerUnsupported(w, kind); why != "" {
			skipped[w] = why
			note := kind + ": " + w + " skipped: " + why
			progress("%s", note)
			rep.Notes = append(rep.Notes, note)
		}
	}
	run := slices.DeleteFunc(slices.Clone(workloads), func(w string) bool { return skipped[w] != "" })
	samples := make([]map[string][]sample, len(groups))
	for i := range samples {
		samples[i] = make(map[string][]sample)
	}
	for r := range o.repeat {
		for gi, t := range groups {
			for _, w := range run {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				progress("%s: %s (run %d/%d)", t.label(), w, r+1, o.repeat)
				s, err := runWorkload(ctx, o, t, w, r)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", t.durability, w, err)
				}
				progress("%s: %s: %d events in %.3fs = %.0f events/s", t.label(), w, s.events, s.seconds, s.eventsPerSec())
				samples[gi][w] = append(samples[gi][w], s)
			}
		}
	}
	for gi, t := range groups {
		rep.addDatabase(t)
		rep.addResults(o, t, workloads, samples[gi], skipped)
	}
	return nil
}

func runWorkload(ctx context.Context, o options, t *target, w string, r int) (sample, error) {
	timeout := o.timeout
	switch w {
	case "sustain":
		timeout += o.sustainDuration
	case "soak":
		timeout += o.soakDuration
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := t.reset(ctx); err != nil {
		return sample{}, fmt.Errorf("reset tables: %w", err)
	}
	var stopProfile func()
	if o.cpuProfile != "" && !inChild[w] {
		var err error
		if stopProfile, err = startProfile(o.cpuProfile, t, w, r); err != nil {
			return sample{}, err
		}
		defer stopProfile()
	}
	switch w {
	case "a":
		return runBare(ctx, o, t)
	case "b":
		return runWrites(ctx, o, t, o.w1Tx, 1, false, 0)
	case "b2":
		return runWrites(ctx, o, t, o.w2Tx, o.w2Events, false, 0)
	case "min":
		return runMinimal(ctx, o, t, o.w1Tx, 1, false)
	case "min2":
		return runMinimal(ctx, o, t, o.w2Tx, o.w2Events, false)
	case "mind":
		return runMinimal(ctx, o, t, o.w1Tx, 1, true)
	case "river":
		return runRiver(ctx, o, t)
	case "watermill":
		return runWatermill(ctx, o, t)
	case "w1":
		return runWrites(ctx, o, t, o.w1Tx, 1, true, 0)
	case "w1d":
		o.deleteDone = true
		return runWrites(ctx, o, t, o.w1Tx, 1, true, 0)
	case "w1o":
		return runWrites(ctx, o, t, o.w1Tx, 1, true, orderKeys)
	case "w1f3":
		o.listeners = 3
		return runWrites(ctx, o, t, o.w1Tx, 1, true, 0)
	case "w4f3":
		o.listeners = 3
		return runDrain(ctx, o, t, r, "")
	case "w1n", "w1k", "w1n1", "w1k1":
		relay, stop, err := relayListener(ctx, strings.TrimSuffix(w, "1"))
		if err != nil {
			return sample{}, fmt.Errorf("start the broker: %w", err)
		}
		defer stop()
		if strings.HasSuffix(w, "1") { // one event per call: the relay as a plain Listener
			relay = outbox.ListenerFunc(relay.Handle)
		}
		return runWritesTo(ctx, o, t, o.w1Tx, 1, true, 0, relay)
	case "w2":
		return runWrites(ctx, o, t, o.w2Tx, o.w2Events, true, 0)
	case "w2o":
		return runWrites(ctx, o, t, o.w2Tx, o.w2Events, true, orderKeys)
	case "w3":
		return runPaced(ctx, o, t, false, 0)
	case "w3o":
		return runPaced(ctx, o, t, false, orderKeys)
	case "w5":
		return runPaced(ctx, o, t, true, 0)
	case "w4":
		return runDrain(ctx, o, t, r, "")
	case "w4n", "w4k", "w4n1", "w4k1":
		return runDrain(ctx, o, t, r, "w1"+strings.TrimPrefix(w, "w4"))
	case "w1m":
		return runMultiNode(ctx, o, t, r, w, w1mNodes)
	case "w1m1":
		return runMultiNode(ctx, o, t, r, w, 1)
	case "bm":
		return runWritersOnly(ctx, o, t, r, w)
	case "w6":
		return runOrderedBacklog(ctx, o, t, r, w, 1)
	case "w6m":
		return runOrderedBacklog(ctx, o, t, r, w, w1mNodes)
	case "sustain":
		return runSustain(ctx, o, t, r)
	case "soak":
		return runSoak(ctx, o, t, r)
	}
	return sample{}, fmt.Errorf("unknown workload %q", w)
}

// inChild marks the workloads that run in child processes, which take their own CPU
// profiles.
var inChild = map[string]bool{"bm": true, "w4": true, "w4f3": true, "w4n": true, "w4k": true, "w4n1": true, "w4k1": true, "w1m": true, "w1m1": true, "w6": true, "w6m": true, "sustain": true, "soak": true}

func startProfile(dir string, t *target, w string, r int) (func(), error) {
	path, err := profilePath(dir, t, w, r, "")
	if err != nil {
		return nil, err
	}
	return startProfileFile(path)
}

// profilePath is the CPU profile file of workload w in round r of t:
// <dir>/<kind>[-durable]-<w>-<round>[-<suffix>].pprof. It creates dir.
func profilePath(dir string, t *target, w string, r int, suffix string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := t.kind
	if t.durability == "durable" {
		name += "-durable"
	}
	name += fmt.Sprintf("-%s-%d", w, r+1)
	if suffix != "" {
		name += "-" + suffix
	}
	return filepath.Join(dir, name+".pprof"), nil
}

// startProfileFile starts a CPU profile into path and returns the function that ends it.
func startProfileFile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// benchMetrics counts finished deliveries and signals when target successes are in.
type benchMetrics struct {
	outbox.NopMetrics
	target        int64
	done          atomic.Int64
	failures      atomic.Int64
	hotDropped    atomic.Int64
	coldEnqueued  atomic.Int64
	claimsLost    atomic.Int64
	claimsExpired atomic.Int64
	all           chan struct{} // closed at target successes
}

func newBenchMetrics(target int) *benchMetrics {
	return &benchMetrics{target: int64(target), all: make(chan struct{})}
}

func (m *benchMetrics) Dispatched(info outbox.DispatchInfo) {
	if info.Outcome != outbox.OutcomeDone {
		m.failures.Add(1)
		return
	}
	if m.done.Add(1) == m.target {
		close(m.all)
	}
}
func (m *benchMetrics) HotDropped()   { m.hotDropped.Add(1) }
func (m *benchMetrics) ColdEnqueued() { m.coldEnqueued.Add(1) }
func (m *benchMetrics) Claims(event outbox.ClaimEvent, n int) {
	switch event {
	case outbox.ClaimLost:
		m.claimsLost.Add(int64(n))
	case outbox.ClaimExpired:
		m.claimsExpired.Add(int64(n))
	}
}

// config returns the outbox configuration of every workload: library defaults except
// what the flags set.
func (o options) config(t *target, mode outbox.Mode, m outbox.Metrics) outbox.Config {
	return outbox.Config{
		Mode:            mode,
		Dialect:         t.dialect,
		Table:           t.outboxTable(),
		Workers:         o.workers,
		HotQueueSize:    o.hotQueue,
		ColdQueueSize:   o.coldQueue,
		PollInterval:    o.pollInterval,
		PollBatchSize:   o.pollBatch,
		DoneBatchWindow: o.doneWindow,
		PurgeInterval:   -1,
		DeleteDone:      o.deleteDone,
		Logger:          o.logger(),
		Metrics:         m,
	}
}

// orderPlaced is the event payload; encoding/json marshals it in the writer.
type orderPlaced struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
	Note    string `json:"note"`
}

func (o options) payload(orderID string, seq int) orderPlaced {
	pad := max(o.payloadSize-len(`{"order_id":"","amount":0,"note":""}`)-len(orderID)-6, 0)
	return orderPlaced{OrderID: orderID, Amount: int64(seq), Note: strings.Repeat("x", pad)}
}

// produce runs fn(i) for i in [0, n) on o.producers goroutines and returns the first error.
func produce(ctx context.Context, producers, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(fmt.Errorf("transaction %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// runBare is ceiling a: the business transaction alone, no outbox.
func runBare(ctx context.Context, o options, t *target) (sample, error) {
	insert := t.insertOrderSQL()
	n := o.w1Tx
	start := time.Now()
	err := produce(ctx, o.producers, n, func(ctx context.Context, i int) error {
		tx, err := t.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		id := "o-" + strconv.Itoa(i)
		if _, err := tx.ExecContext(ctx, insert, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(time.Now())); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return sample{}, err
	}
	return sample{events: n, txs: n, seconds: time.Since(start).Seconds()}, nil
}

// runWrites runs txs transactions of one business INSERT and perTx events on the
// producers. With dispatch (w1, w2) the outbox runs in SingleNode mode and the clock
// stops when every event is DONE in the table; without (b, b2) it runs in WriterOnly
// mode and the clock stops when the last transaction committed. With dispatch and more
// than one event per transaction (w2) it also measures each event's latency from its
// transaction's Commit returning to its listener being invoked.
// orderKeys is the number of order keys of the ordered workloads (w1o, w3o): event i
// has the key i mod orderKeys.
const orderKeys = 1000

// runWrites runs txs transactions of perTx events; with keys > 0 every event is ordered
// under one of keys keys.
func runWrites(ctx context.Context, o options, t *target, txs, perTx int, dispatch bool, keys int) (sample, error) {
	return runWritesTo(ctx, o, t, txs, perTx, dispatch, keys, nil)
}

// runWritesTo is runWrites with relay, when not nil, as the listener instead of the
// no-op one.
func runWritesTo(ctx context.Context, o options, t *target, txs, perTx int, dispatch bool, keys int, relay outbox.Listener) (sample, error) {
	n := txs * perTx
	mode := outbox.WriterOnly
	if dispatch {
		mode = outbox.SingleNode
	}
	var probe *latencyProbe
	if dispatch && perTx > 1 {
		probe = newLatencyProbe(txs, perTx)
	}
	k := max(o.listeners, 1)
	m := newBenchMetrics(n * k)
	ob, err := outbox.New(t.db, o.config(t, mode, m))
	if err != nil {
		return sample{}, err
	}
	var listener outbox.Listener = outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		if probe != nil {
			probe.invoked(e.AggregateID)
		}
		return nil
	})
	if relay != nil {
		listener = relay
	}
	if err := subscribe(ob, listener, k); err != nil {
		return sample{}, err
	}
	if err := ob.Start(ctx); err != nil {
		return sample{}, err
	}
	defer stopOutbox(ob)
	insert := t.insertOrderSQL()
	w := ob.Writer()
	start := time.Now()
	err = produce(ctx, o.producers, txs, func(ctx context.Context, i int) error {
		err := outbox.RunInTx(ctx, t.db, func(ctx context.Context, tx *outbox.Tx) error {
			id := "o-" + strconv.Itoa(i)
			if _, err := tx.ExecContext(ctx, insert, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(time.Now())); err != nil {
				return err
			}
			if perTx == 1 {
				env := outbox.Envelope{Type: eventType, AggregateType: aggregateType,
					AggregateID: strconv.Itoa(i), Payload: o.payload(id, i)}
				if keys > 0 {
					env.OrderKey = strconv.Itoa(i % keys)
				}
				_, err := w.Write(ctx, tx, env)
				return err
			}
			envs := make([]outbox.Envelope, perTx)
			for j := range envs {
				seq := i*perTx + j
				envs[j] = outbox.Envelope{Type: eventType, AggregateType: aggregateType,
					AggregateID: strconv.Itoa(seq), Payload: o.payload(id, seq)}
			}
			_, err := w.WriteAll(ctx, tx, envs)
			return err
		})
		if err == nil && probe != nil {
			probe.committed(i)
		}
		return err
	})
	if err != nil {
		return sample{}, err
	}
	written := time.Since(start)
	s := sample{events: n, txs: txs, writeSeconds: written.Seconds(), seconds: written.Seconds()}
	if dispatch {
		wait := waitDone
		if o.deleteDone {
			wait = waitDeleted
		}
		if err := wait(ctx, t, m, n, k); err != nil {
			return sample{}, err
		}
		s.seconds = time.Since(start).Seconds()
	}
	if probe != nil {
		s.lat = probe.summary()
	}
	s.hotDropped, s.coldEnqueued, s.failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	return s, nil
}

// latencyProbe measures, for txs transactions of perTx events each, the time from each
// transaction's Commit returning to each of its events' listener invocation. Event
// i*perTx+j of transaction i carries AggregateID "i*perTx+j", as runWrites writes them.
type latencyProbe struct {
	base      time.Time
	perTx     int
	commitAt  []int64        // nanoseconds since base, +1 so that 0 means "not yet"; one per transaction
	invokedAt []atomic.Int64 // the same, one per event: the first invocation
}

func newLatencyProbe(txs, perTx int) *latencyProbe {
	return &latencyProbe{base: time.Now(), perTx: perTx, commitAt: make([]int64, txs), invokedAt: make([]atomic.Int64, txs*perTx)}
}

// invoked records the listener invocation of the event with this AggregateID.
func (p *latencyProbe) invoked(aggregateID string) {
	at := int64(time.Since(p.base)) + 1
	if seq, err := strconv.Atoi(aggregateID); err == nil && seq >= 0 && seq < len(p.invokedAt) {
		p.invokedAt[seq].CompareAndSwap(0, at)
	}
}

// committed records that transaction i's Commit returned. Each transaction's producer
// calls it once; summary reads it after the producers are done.
func (p *latencyProbe) committed(i int) { p.commitAt[i] = int64(time.Since(p.base)) + 1 }

// summary returns the latency percentiles of every event whose listener ran.
func (p *latencyProbe) summary() *latency {
	lats := make([]time.Duration, 0, len(p.invokedAt))
	early := 0
	for seq := range p.invokedAt {
		inv, c := p.invokedAt[seq].Load(), p.commitAt[seq/p.perTx]
		if inv == 0 || c == 0 {
			continue
		}
		lat := time.Duration(inv - c)
		if lat < 0 {
			// The hot path ran the listener while Commit was still returning.
			early++
			lat = 0
		}
		lats = append(lats, lat)
	}
	return summarize(lats, early)
}

// summarize returns the percentiles of lats (which it sorts).
func summarize(lats []time.Duration, early int) *latency {
	slices.Sort(lats)
	return &latency{
		P50: ms(percentile(lats, 0.50)), P95: ms(percentile(lats, 0.95)), P99: ms(percentile(lats, 0.99)),
		Max: ms(percentile(lats, 1)), Early: early, Events: len(lats),
	}
}

// waitDone waits until the metrics saw n successful deliveries, then until the table
// holds n DONE rows (a delivery whose DONE update failed is redelivered by the poller).
func waitDone(ctx context.Context, t *target, m *benchMetrics, n, k int) error {
	select {
	case <-m.all:
	case <-ctx.Done():
		return fmt.Errorf("waiting for deliveries: %d of %d done: %w", m.done.Load(), n*k, ctx.Err())
	}
	rows := int64(n)
	if k > 1 { // each event split: its row and k deliveries
		rows = int64(n * (k + 1))
	}
	return waitDoneRows(ctx, t, rows, time.Millisecond)
}

// subscribe registers l for the benchmark's route, k times under k names when k > 1:
// every event is then split into k deliveries (fan-out).
func subscribe(ob *outbox.Outbox, l outbox.Listener, k int) error {
	if k <= 1 {
		return ob.Register(aggregateType, eventType, l)
	}
	for i := range k {
		if err := ob.Subscribe(outbox.Subscription{Name: "listener-" + strconv.Itoa(i), AggregateType: aggregateType,
			EventType: eventType, Listener: l}); err != nil {
			return err
		}
	}
	return nil
}

// waitDeleted is waitDone for Config.DeleteDone: the deliveries, then no row left but
// the DONE history rows.
func waitDeleted(ctx context.Context, t *target, m *benchMetrics, n, _ int) error {
	select {
	case <-m.all:
	case <-ctx.Done():
		return fmt.Errorf("waiting for deliveries: %d of %d done: %w", m.done.Load(), n, ctx.Err())
	}
	for {
		var left int64
		err := t.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.quoteIdent(t.outboxTable())+" WHERE status <> 1").Scan(&left)
		if err != nil {
			return fmt.Errorf("count rows left: %w", err)
		}
		if left == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("waiting for the rows to be deleted: %d left: %w", left, ctx.Err())
		}
	}
}

func stopOutbox(ob *outbox.Outbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ob.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-bench: stop outbox:", err)
	}
}

// runPaced is w3: one producer at o.w3Rate transactions per second for o.w3Duration;
// each event's latency runs from its Commit returning to its listener being invoked.
// With cross it is w5: the producer writes through a WriterOnly outbox and another
// outbox on a pool of its own (as another process would) delivers, woken by pgnotify
// on PostgreSQL and by its poller elsewhere.
func runPaced(ctx context.Context, o options, t *target, cross bool, keys int) (sample, error) {
	n := max(1, int(float64(o.w3Rate)*o.w3Duration.Seconds()))
	invoked := make([]atomic.Int64, n) // nanoseconds since base, +1 so that 0 means "not yet"
	base := time.Now()
	m := newBenchMetrics(n)
	dcfg := o.config(t, outbox.SingleNode, m)
	ddb := t.db
	var wob *outbox.Outbox // the WriterOnly outbox of w5
	if cross {
		var err error
		if ddb, err = openPool(ctx, t.driver, t.dsn, o.poolSize(t.kind)); err != nil {
			return sample{}, err
		}
		defer ddb.Close()
		wcfg := o.config(t, outbox.WriterOnly, nil)
		if t.kind == "postgres" {
			wn, err := pgnotify.New(pgnotify.Config{DSN: t.dsn, Channel: t.outboxTable()})
			if err != nil {
				return sample{}, err
			}
			defer wn.Close()
			dn, err := pgnotify.New(pgnotify.Config{DSN: t.dsn, Channel: t.outboxTable()})
			if err != nil {
				return sample{}, err
			}
			defer dn.Close()
			wcfg.Notifier, dcfg.Notifier = wn, dn
		}
		if wob, err = outbox.New(t.db, wcfg); err != nil {
			return sample{}, err
		}
	}
	ob, err := outbox.New(ddb, dcfg)
	if err != nil {
		return sample{}, err
	}
	listener := outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		at := int64(time.Since(base)) + 1
		if seq, err := strconv.Atoi(e.AggregateID); err == nil && seq >= 0 && seq < n {
			invoked[seq].CompareAndSwap(0, at)
		}
		return nil
	})
	if err := ob.Register(aggregateType, eventType, listener); err != nil {
		return sample{}, err
	}
	if err := ob.Start(ctx); err != nil {
		return sample{}, err
	}
	defer stopOutbox(ob)
	w := ob.Writer()
	if wob != nil {
		if err := wob.Start(ctx); err != nil {
			return sample{}, err
		}
		defer stopOutbox(wob)
		w = wob.Writer()
	}
	insert := t.insertOrderSQL()
	committed := make([]int64, n)
	interval := time.Duration(float64(time.Second) / float64(o.w3Rate))
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		id := "o-" + strconv.Itoa(i)
		tx, err := outbox.BeginTx(ctx, t.db, nil)
		if err != nil {
			return sample{}, err
		}
		if _, err := tx.ExecContext(ctx, insert, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(time.Now())); err != nil {
			_ = tx.Rollback()
			return sample{}, err
		}
		env := outbox.Envelope{Type: eventType, AggregateType: aggregateType, AggregateID: strconv.Itoa(i), Payload: o.payload(id, i)}
		if keys > 0 {
			env.OrderKey = strconv.Itoa(i % keys)
		}
		if _, err := w.Write(ctx, tx, env); err != nil {
			_ = tx.Rollback()
			return sample{}, err
		}
		if err := tx.Commit(); err != nil {
			return sample{}, err
		}
		committed[i] = int64(time.Since(base)) + 1
	}
	if err := waitDone(ctx, t, m, n, 1); err != nil {
		return sample{}, err
	}
	s := sample{events: n, txs: n, seconds: time.Since(start).Seconds()}
	lats := make([]time.Duration, n)
	early := 0
	for i := range n {
		lat := time.Duration(invoked[i].Load() - committed[i])
		if lat < 0 {
			// The hot path ran the listener while Commit was still returning.
			early++
			lat = 0
		}
		lats[i] = lat
	}
	s.lat = summarize(lats, early)
	s.hotDropped, s.coldEnqueued, s.failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	return s, nil
}
