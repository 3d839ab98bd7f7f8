package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// childW4Arg, as the first argument, makes the program run w4's dispatcher as a child
// process: its peak RSS (VmHWM) is then the dispatcher's alone, not the maximum of the
// parent's earlier workloads, seeding included.
const childW4Arg = "__child-w4"

// childW4Params is what the parent hands the child, as JSON in the second argument.
type childW4Params struct {
	Kind         string        `json:"kind"`
	DSN          string        `json:"dsn"`
	Schema       string        `json:"schema"`
	Rows         int           `json:"rows"`
	Pool         int           `json:"pool"`
	Workers      int           `json:"workers"`
	ColdQueue    int           `json:"cold_queue"`
	PollInterval time.Duration `json:"poll_interval"`
	PollBatch    int           `json:"poll_batch"`
	DoneWindow   time.Duration `json:"done_window"`
	Timeout      time.Duration `json:"timeout"`
	CPUProfile   string        `json:"cpu_profile"`
	Verbose      bool          `json:"verbose"`
	Listeners    int           `json:"listeners"` // > 1: that many subscriptions, every event split
	Relay        string        `json:"relay"`     // "": the no-op listener; else a relay workload of relayListener
}

// childW4Result is what the child prints on stdout, as one JSON line.
type childW4Result struct {
	Seconds      float64 `json:"seconds"`
	PeakRSSKiB   int64   `json:"peak_rss_kib"`
	BaseRSSKiB   int64   `json:"base_rss_kib"`
	HotDropped   int64   `json:"hot_dropped"`
	ColdEnqueued int64   `json:"cold_enqueued"`
	Failures     int64   `json:"failures"`
	childErr
}

// runDrain is w4: it seeds o.w4Rows NEW rows (created an hour ago, so that no poller
// setting skips them), then runs the dispatcher in a child process until every row is
// DONE.
func runDrain(ctx context.Context, o options, t *target, r int, relay string) (sample, error) {
	n := o.w4Rows
	if err := seed(ctx, o, t, n); err != nil {
		return sample{}, fmt.Errorf("seed: %w", err)
	}
	if t.kind != "sqlite" { // most SQLite databases never run ANALYZE; keep it that way
		if err := t.analyze(ctx); err != nil {
			return sample{}, fmt.Errorf("analyze: %w", err)
		}
	}
	p := childW4Params{
		Kind: t.kind, DSN: t.dsn, Schema: t.schema, Rows: n, Pool: t.pool, Workers: o.workers,
		ColdQueue: o.coldQueue, PollInterval: o.pollInterval, PollBatch: o.pollBatch, DoneWindow: o.doneWindow,
		Timeout: o.timeout, Verbose: o.verbose, Relay: relay, Listeners: o.listeners,
	}
	if o.cpuProfile != "" {
		var err error
		name := "w4" + strings.TrimPrefix(relay, "w1")
		if o.listeners > 1 {
			name += "f" + strconv.Itoa(o.listeners)
		}
		if p.CPUProfile, err = profilePath(o.cpuProfile, t, name, r, ""); err != nil {
			return sample{}, err
		}
	}
	var res childW4Result
	state, err := runChild(ctx, childW4Arg, p, &res)
	if err != nil {
		return sample{}, err
	}
	if ru, ok := state.SysUsage().(*syscall.Rusage); ok && res.PeakRSSKiB == 0 {
		res.PeakRSSKiB = ru.Maxrss // KiB on Linux
	}
	return sample{
		events: n, seconds: res.Seconds, peakRSSKiB: res.PeakRSSKiB, baseRSSKiB: res.BaseRSSKiB,
		hotDropped: res.HotDropped, coldEnqueued: res.ColdEnqueued, failures: res.Failures,
	}, nil
}

// seed inserts n NEW rows through the store, in transactions of 1000.
func seed(ctx context.Context, o options, t *target, n int) error {
	store, err := outbox.NewSQLStore(t.db, t.dialect, outbox.SQLStoreConfig{Table: t.outboxTable()})
	if err != nil {
		return err
	}
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	const batch = 1000
	events := make([]outbox.Event, 0, batch)
	for start := 0; start < n; start += batch {
		events = events[:0]
		for i := start; i < min(start+batch, n); i++ {
			id := "o-" + strconv.Itoa(i)
			payload, err := json.Marshal(o.payload(id, i))
			if err != nil {
				return err
			}
			events = append(events, outbox.Event{
				ID: outbox.NewID(), Type: eventType, AggregateType: aggregateType, AggregateID: strconv.Itoa(i),
				Payload: payload, CreatedAt: created, AvailableAt: created,
			})
		}
		tx, err := t.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := store.Insert(ctx, tx, storage.InsertParams{Events: events}); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// runChildW4 is the child process of w4. It prints one childW4Result line and returns
// the exit code.
func runChildW4(args []string) int {
	var res childW4Result
	return childMain(&res, func() error { return childW4(args, &res) })
}

func childW4(args []string, res *childW4Result) error {
	if len(args) != 1 {
		return fmt.Errorf("want one JSON argument, got %d", len(args))
	}
	var p childW4Params
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	t := &target{kind: p.Kind, schema: p.Schema, dsn: p.DSN, pool: p.Pool}
	switch p.Kind {
	case "sqlite":
		t.driver, t.dialect = "sqlite", outbox.SQLite
	case "postgres":
		t.driver, t.dialect = "pgx", outbox.Postgres
	case "mysql":
		t.driver, t.dialect = "mysql", outbox.MySQL
	default:
		return fmt.Errorf("unknown database %q", p.Kind)
	}
	db, err := openPool(ctx, t.driver, t.dsn, t.pool)
	if err != nil {
		return err
	}
	defer db.Close()
	t.db = db
	res.BaseRSSKiB = procStatusKiB("VmRSS")

	o := options{workers: p.Workers, hotQueue: -1, coldQueue: p.ColdQueue, pollInterval: p.PollInterval,
		pollBatch: p.PollBatch, doneWindow: p.DoneWindow, verbose: p.Verbose}
	if p.Listeners > 1 {
		// The rows are read by the poller; the deliveries their splits insert go to the
		// hot queue, as they do with the default Config.
		o.hotQueue = 0
	}
	k := max(p.Listeners, 1)
	m := newBenchMetrics(p.Rows * k)
	ob, err := outbox.New(db, o.config(t, outbox.SingleNode, m))
	if err != nil {
		return err
	}
	var l outbox.Listener = outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })
	if p.Relay != "" {
		relay, stop, err := relayListener(ctx, strings.TrimSuffix(p.Relay, "1"))
		if err != nil {
			return fmt.Errorf("start the broker: %w", err)
		}
		defer stop()
		l = relay
		if strings.HasSuffix(p.Relay, "1") { // one event per call: the relay as a plain Listener
			l = outbox.ListenerFunc(relay.Handle)
		}
	}
	if err := subscribe(ob, l, k); err != nil {
		return err
	}
	if p.CPUProfile != "" {
		stop, err := startProfileFile(p.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	if err := ob.Start(ctx); err != nil {
		return err
	}
	err = waitDone(ctx, t, m, p.Rows, k)
	res.Seconds = time.Since(start).Seconds()
	stopOutbox(ob)
	res.PeakRSSKiB = procStatusKiB("VmHWM")
	res.HotDropped, res.ColdEnqueued, res.Failures = m.hotDropped.Load(), m.coldEnqueued.Load(), m.failures.Load()
	return err
}

// procStatusKiB reads a "kB" field of /proc/self/status (VmHWM: peak resident set size;
// VmRSS: current), or 0 where there is no /proc.
func procStatusKiB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return v
	}
	return 0
}

// cpuTimes is the machine's CPU time from /proc/stat's first line, in clock ticks:
// busy (every state but idle and iowait) and the total.
type cpuTimes struct{ busy, total uint64 }

// readCPUTimes reads /proc/stat; ok is false where there is none.
func readCPUTimes() (t cpuTimes, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return t, false
	}
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t, true
}

// busyPct is the share of every core's time that was busy between a and b, in percent
// (0 when no time passed).
func busyPct(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return 100 * float64(b.busy-a.busy) / float64(b.total-a.total)
}
