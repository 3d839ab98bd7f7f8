package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// writeSeconds is how long the producers took (w1, w2): the write phase alone.
	writeSeconds float64
	latencies    []time.Duration // w3
	// earlyInvocations counts w3 events whose listener ran before Commit returned.
	earlyInvocations int
	peakRSSKiB       int64 // w4
	baseRSSKiB       int64 // w4: before the dispatcher started
	hotDropped       int64
	coldEnqueued     int64
	failures         int64
}

func (s sample) eventsPerSec() float64 {
	if s.seconds <= 0 {
		return 0
	}
	return float64(s.events) / s.seconds
}

// benchDatabase runs the selected workloads on one database, o.repeat times interleaved,
// and adds the results to rep.
func benchDatabase(ctx context.Context, o options, kind string, servers *serverSet, rep *report) error {
	t, err := openTarget(ctx, o, kind, servers)
	if err != nil {
		return err
	}
	defer t.close()
	rep.addDatabase(kind, t.version(ctx), t.pool)
	samples := make(map[string][]sample)
	for r := range o.repeat {
		for _, w := range o.workloads {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			progress("%s: %s (run %d/%d)", kind, w, r+1, o.repeat)
			s, err := runWorkload(ctx, o, t, w, r)
			if err != nil {
				return fmt.Errorf("%s: %w", w, err)
			}
			progress("%s: %s: %d events in %.3fs = %.0f events/s", kind, w, s.events, s.seconds, s.eventsPerSec())
			samples[w] = append(samples[w], s)
		}
	}
	rep.addResults(o, kind, samples)
	return nil
}

func runWorkload(ctx context.Context, o options, t *target, w string, r int) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := t.reset(ctx); err != nil {
		return sample{}, fmt.Errorf("reset tables: %w", err)
	}
	var stopProfile func()
	if o.cpuProfile != "" && w != "w4" { // w4 profiles in its child process
		var err error
		if stopProfile, err = startProfile(o.cpuProfile, t.kind, w, r); err != nil {
			return sample{}, err
		}
		defer stopProfile()
	}
	switch w {
	case "a":
		return runBare(ctx, o, t)
	case "b":
		return runWrites(ctx, o, t, o.w1Tx, 1, false)
	case "b2":
		return runWrites(ctx, o, t, o.w2Tx, o.w2Events, false)
	case "w1":
		return runWrites(ctx, o, t, o.w1Tx, 1, true)
	case "w2":
		return runWrites(ctx, o, t, o.w2Tx, o.w2Events, true)
	case "w3":
		return runPaced(ctx, o, t)
	case "w4":
		return runDrain(ctx, o, t, r)
	}
	return sample{}, fmt.Errorf("unknown workload %q", w)
}

func startProfile(dir, kind, w string, r int) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startProfileFile(filepath.Join(dir, fmt.Sprintf("%s-%s-%d.pprof", kind, w, r+1)))
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
	target       int64
	done         atomic.Int64
	failures     atomic.Int64
	hotDropped   atomic.Int64
	coldEnqueued atomic.Int64
	all          chan struct{} // closed at target successes
}

func newBenchMetrics(target int) *benchMetrics {
	return &benchMetrics{target: int64(target), all: make(chan struct{})}
}

func (m *benchMetrics) Dispatched(info outbox.DispatchInfo) {
	if info.Outcome != outbox.OutcomeSuccess {
		m.failures.Add(1)
		return
	}
	if m.done.Add(1) == m.target {
		close(m.all)
	}
}
func (m *benchMetrics) HotDropped()   { m.hotDropped.Add(1) }
func (m *benchMetrics) ColdEnqueued() { m.coldEnqueued.Add(1) }

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
// mode and the clock stops when the last transaction committed.
func runWrites(ctx context.Context, o options, t *target, txs, perTx int, dispatch bool) (sample, error) {
	n := txs * perTx
	mode := outbox.WriterOnly
	if dispatch {
		mode = outbox.SingleNode
	}
	m := newBenchMetrics(n)
	ob, err := outbox.New(t.db, o.config(t, mode, m))
	if err != nil {
		return sample{}, err
	}
	if err := ob.Register(aggregateType, eventType, outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })); err != nil {
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
		return outbox.RunInTx(ctx, t.db, func(ctx context.Context, tx *outbox.Tx) error {
			id := "o-" + strconv.Itoa(i)
			if _, err := tx.ExecContext(ctx, insert, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(time.Now())); err != nil {
				return err
			}
			if perTx == 1 {
				_, err := w.Write(ctx, tx, outbox.Envelope{Type: eventType, AggregateType: aggregateType,
					AggregateID: strconv.Itoa(i), Payload: o.payload(id, i)})
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
	})
	if err != nil {
		return sample{}, err
	}
	written := time.Since(start)
	s := sample{events: n, txs: txs, writeSeconds: written.Seconds(), seconds: written.Seconds()}
	if dispatch {
		if err := waitDone(ctx, t, m, n); err != nil {
			return sample{}, err
		}
		s.seconds = time.Since(start).Seconds()
	}
	s.hotDropped, s.coldEnqueued, s.failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	return s, nil
}

// waitDone waits until the metrics saw n successful deliveries, then until the table
// holds n DONE rows (a delivery whose DONE update failed is redelivered by the poller).
func waitDone(ctx context.Context, t *target, m *benchMetrics, n int) error {
	select {
	case <-m.all:
	case <-ctx.Done():
		return fmt.Errorf("waiting for deliveries: %d of %d done: %w", m.done.Load(), n, ctx.Err())
	}
	for {
		got, err := t.countDone(ctx)
		if err != nil {
			return fmt.Errorf("count DONE rows: %w", err)
		}
		if got >= int64(n) {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("waiting for DONE rows: %d of %d: %w", got, n, ctx.Err())
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
func runPaced(ctx context.Context, o options, t *target) (sample, error) {
	n := max(1, int(float64(o.w3Rate)*o.w3Duration.Seconds()))
	invoked := make([]atomic.Int64, n) // nanoseconds since base, +1 so that 0 means "not yet"
	base := time.Now()
	m := newBenchMetrics(n)
	ob, err := outbox.New(t.db, o.config(t, outbox.SingleNode, m))
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
	insert := t.insertOrderSQL()
	w := ob.Writer()
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
		if _, err := w.Write(ctx, tx, outbox.Envelope{Type: eventType, AggregateType: aggregateType,
			AggregateID: strconv.Itoa(i), Payload: o.payload(id, i)}); err != nil {
			_ = tx.Rollback()
			return sample{}, err
		}
		if err := tx.Commit(); err != nil {
			return sample{}, err
		}
		committed[i] = int64(time.Since(base)) + 1
	}
	if err := waitDone(ctx, t, m, n); err != nil {
		return sample{}, err
	}
	s := sample{events: n, txs: n, seconds: time.Since(start).Seconds(), latencies: make([]time.Duration, n)}
	for i := range n {
		lat := time.Duration(invoked[i].Load() - committed[i])
		if lat < 0 {
			// The hot path ran the listener while Commit was still returning.
			s.earlyInvocations++
			lat = 0
		}
		s.latencies[i] = lat
	}
	s.hotDropped, s.coldEnqueued, s.failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	return s, nil
}
