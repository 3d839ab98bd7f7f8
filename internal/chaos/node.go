package chaos

// The node program: a process that runs the library over one table, with a recording
// listener and writer goroutines doing business transactions. Scenarios start it by
// re-executing the test binary (TestMain calls RunRole) or, for crash points, as
// internal/chaos/node built with -tags outboxchaos. It is configured through the
// environment (the Env* constants below) and controlled through stdin and stdout:
//
//   - it prints "ready" once the outbox runs and the writers write;
//   - a line "quiet" on stdin stops its writers; it prints "quiet" once they returned;
//   - a line "pause <subscription>" or "resume <subscription>" pauses or resumes that
//     subscription on every process of the table (Events.Pause, Events.Resume); it
//     prints "ok" or "error: <why>" once the call returned (see pauseCommand);
//   - end of stdin stops the outbox gracefully, and the process exits 0 on success.

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// The drivers of Dialects.
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
)

// The node program's environment.
const (
	EnvRole      = "OUTBOX_CHAOS_ROLE" // "node": run the node program instead of tests
	EnvDialect   = "OUTBOX_CHAOS_DIALECT"
	EnvDSN       = "OUTBOX_CHAOS_DSN"
	EnvTable     = "OUTBOX_CHAOS_TABLE"
	EnvNode      = "OUTBOX_CHAOS_NODE"      // the incarnation's name: record Node and NodeID
	EnvLog       = "OUTBOX_CHAOS_LOG"       // the record file
	EnvWriters   = "OUTBOX_CHAOS_WRITERS"   // writer goroutines; default 2
	EnvWritePace = "OUTBOX_CHAOS_PACE"      // mean pause between a writer's transactions; default 5ms
	EnvTiming    = "OUTBOX_CHAOS_TIMING"    // "fault" (short claims and timeouts) or "steady"
	EnvNodeSeed  = "OUTBOX_CHAOS_NODE_SEED" // the writers' random choices
	// EnvOrderKeys > 0 orders every event: each gets one of that many order keys, and
	// one transaction in eight holds its key for up to 200 ms before committing (a late
	// commit, which same-key writers must wait for).
	EnvOrderKeys = "OUTBOX_CHAOS_ORDER_KEYS"
	// EnvFailures "1": the listener fails, by order key (see failingListener), with
	// MaxAttempts 3 and DeadKeySkips, so that a key moves past its DEAD events.
	EnvFailures = "OUTBOX_CHAOS_FAILURES"
	// EnvFanOut > 1: that many listeners subscribe to the events (fan-out), named
	// FanOutListener(i); the last one fails the first attempt of every delivery, so that
	// an event's deliveries are in different states when a node dies.
	EnvFanOut = "OUTBOX_CHAOS_FANOUT"
)

// FanOutListener is the name of fan-out listener i (EnvFanOut).
func FanOutListener(i int) string { return "fan-" + strconv.Itoa(i) }

// RoleNode is the node program's role.
const RoleNode = "node"

// Event routing of the node program.
const (
	AggregateType = "Chaos"
	EventType     = "Ping"
)

// BusinessTable is the business table next to the outbox table (same schema): one row
// per business transaction, keyed by the event ID the transaction wrote. A row here and
// a row in the outbox table must exist together or not at all.
func BusinessTable(outboxTable string) string {
	if i := strings.LastIndexByte(outboxTable, '.'); i >= 0 {
		return outboxTable[:i+1] + "chaos_business"
	}
	return "chaos_business"
}

// Timing is the node's claim and timeout settings.
type Timing struct {
	ClaimTTL, Listener, Status, Poll time.Duration
}

// Timings by name. "fault": short claims, so that a dead node's events are taken over
// quickly; "steady": generous timeouts, so that a slow statement on a loaded machine is
// not a fault (a timed-out status update means a redelivery).
var Timings = map[string]Timing{
	"fault":  {ClaimTTL: 3 * time.Second, Listener: time.Second, Status: time.Second, Poll: 200 * time.Millisecond},
	"steady": {ClaimTTL: 30 * time.Second, Listener: 5 * time.Second, Status: 10 * time.Second, Poll: 200 * time.Millisecond},
}

// Dialects by name, with their database/sql driver.
var Dialects = map[string]struct {
	Dialect outbox.Dialect
	Driver  string
}{
	"postgres": {outbox.Postgres, "pgx"},
	"mysql":    {outbox.MySQL, "mysql"},
	"sqlite":   {outbox.SQLite, "sqlite"},
}

// RunRole runs the process role named by OUTBOX_CHAOS_ROLE and returns the exit code.
func RunRole(role string) int {
	switch role {
	case RoleNode:
		if err := runNode(); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown %s %q\n", EnvRole, role)
	return 2
}

func runNode() error {
	dialectName := os.Getenv(EnvDialect)
	dia, ok := Dialects[dialectName]
	if !ok {
		return fmt.Errorf("unknown dialect %q", dialectName)
	}
	timing, ok := Timings[os.Getenv(EnvTiming)]
	if !ok {
		return fmt.Errorf("unknown timing %q", os.Getenv(EnvTiming))
	}
	name, table, dsn := os.Getenv(EnvNode), os.Getenv(EnvTable), os.Getenv(EnvDSN)
	nWriters := envInt(EnvWriters, 2)
	pace, err := time.ParseDuration(cmp.Or(os.Getenv(EnvWritePace), "5ms"))
	if err != nil {
		return err
	}
	seed := int64(envInt(EnvNodeSeed, 1))
	orderKeys := envInt(EnvOrderKeys, 0)
	failures := os.Getenv(EnvFailures) == "1"

	// The outbox's connections carry no client-side timeouts: its own deadlines must
	// bound every call. The writers' connections (business code) get the drivers'
	// read/write timeouts where they have them, so that a cut network does not hold a
	// writer forever in COMMIT, which the MySQL driver sends without a context.
	db, err := sql.Open(dia.Driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	bizDSN := dsn
	if dialectName == "mysql" {
		bizDSN += "&readTimeout=5s&writeTimeout=5s&timeout=5s"
	}
	bizDB := db
	if bizDSN != dsn {
		if bizDB, err = sql.Open(dia.Driver, bizDSN); err != nil {
			return err
		}
		defer bizDB.Close()
	}
	log, err := CreateLog(os.Getenv(EnvLog))
	if err != nil {
		return err
	}
	defer log.Close()

	cfg := outbox.Config{
		Dialect: dia.Dialect, Table: table,
		ListenerTimeout: timing.Listener, StatusTimeout: timing.Status,
		PollInterval: timing.Poll, PollBatchSize: 100, SkipRecent: -1,
		// The purger runs (its statements need deadlines too) but keeps every row for
		// the checker.
		PurgeInterval: time.Second, PurgeRetention: 24 * time.Hour,
		Retry:  outbox.ExponentialBackoff{Base: 100 * time.Millisecond, Max: 2 * time.Second},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if failures {
		cfg.MaxAttempts, cfg.DeadKeyPolicy = 3, outbox.DeadKeySkips
	}
	if dialectName == "sqlite" {
		// A node restarted after a kill delivers once the killed node's dispatch lease
		// expired: as short as a claim of the other targets.
		cfg.Mode, cfg.LeaseTTL = outbox.SingleNode, timing.ClaimTTL
	} else {
		cfg.Mode, cfg.ClaimTTL, cfg.NodeID = outbox.MultiNode, timing.ClaimTTL, name
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		return err
	}
	rec := Recorder{Log: log, Node: name}
	crash := newCrashRecorder(log, name)
	l := rec.Listener()
	if failures {
		l = rec.Wrap(outbox.ListenerFunc(failingListener))
	}
	if fan := envInt(EnvFanOut, 0); fan > 1 {
		for i := range fan {
			fl := l
			if i == fan-1 {
				fl = rec.Wrap(outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
					if e.Attempts == 0 {
						return errors.New("first attempt of the last fan-out listener fails")
					}
					return nil
				}))
			}
			sub := outbox.Subscription{Name: FanOutListener(i), AggregateType: AggregateType,
				EventType: EventType, Listener: crash.wrap(fl)}
			if i == 1 {
				// A limited subscription (docs/listeners.md, fair delivery) through the
				// same kills: its events wait in its lane, claimed in MultiNode, and every
				// gate still holds.
				sub.MaxConcurrency, sub.RateLimit, sub.RateBurst = 1, 400, 20
			}
			if err := ob.Subscribe(sub); err != nil {
				return err
			}
		}
	} else if err := ob.Register(AggregateType, EventType, crash.wrap(l)); err != nil {
		return err
	}
	// Start retries: the database may be restarting when the node starts.
	startCtx, cancelStart := context.WithTimeout(context.Background(), time.Minute)
	defer cancelStart()
	for {
		err = ob.Start(startCtx)
		if err == nil {
			break
		}
		if startCtx.Err() != nil {
			return fmt.Errorf("start: %w", err)
		}
		fmt.Fprintln(os.Stderr, "node: start:", err, "(retrying)")
		time.Sleep(200 * time.Millisecond)
	}

	w := &writers{
		db: bizDB, ob: ob, log: log, node: name, dialect: dialectName, table: BusinessTable(table),
		pace: pace, stop: make(chan struct{}), crash: crash, orderKeys: orderKeys,
	}
	for i := range nWriters {
		w.wg.Go(func() { w.run(i, Rand(seed+int64(i))) })
	}
	fmt.Println("ready")

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch cmd, arg, _ := strings.Cut(sc.Text(), " "); cmd {
		case "quiet":
			w.quiet()
			fmt.Println("quiet")
		case "pause", "resume":
			fmt.Println(pauseCommand(ob, w, cmd == "pause", arg))
		}
	}
	quietBegan := time.Now()
	w.quiet()
	quietTook := time.Since(quietBegan)
	stopBegan := time.Now()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A slow stop leaves the goroutines' stacks on stderr, to show what it waits for.
	slow := time.AfterFunc(8*time.Second, func() {
		fmt.Fprintln(os.Stderr, "node: stop slow; goroutines:")
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	})
	defer slow.Stop()
	if err := ob.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop (after %s; writers quiet in %s): %w", time.Since(stopBegan).Round(time.Millisecond), quietTook.Round(time.Millisecond), err)
	}
	fmt.Fprintf(os.Stderr, "node %s: stopped (writers quiet in %s, outbox stopped in %s); writers: %d committed, %d unknown, %d rolled back, %d aborted\n",
		name, quietTook.Round(time.Millisecond), time.Since(stopBegan).Round(time.Millisecond),
		w.committed.Load(), w.unknown.Load(), w.rolledBack.Load(), w.aborted.Load())
	return nil
}

// writers are the node's business-transaction goroutines.
type writers struct {
	db      *sql.DB
	ob      *outbox.Outbox
	log     *Log
	node    string
	dialect string
	table   string
	pace    time.Duration
	crash   *crashRecorder
	// orderKeys > 0: every event is ordered by one of that many keys (EnvOrderKeys).
	orderKeys int

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	committed, unknown, rolledBack, aborted atomic.Int64
}

func (w *writers) quiet() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// run writes business transactions until quiet: a business row and an event in one
// transaction. One in twenty is rolled back on purpose; one event in four is delayed by
// up to 200 ms, so that the poller, not the hot path, hands it over.
func (w *writers) run(n int, rng *rand.Rand) {
	insert := "INSERT INTO " + w.table + " (event_id, node) VALUES (?, ?)"
	if w.dialect == "postgres" {
		insert = "INSERT INTO " + w.table + " (event_id, node) VALUES ($1, $2)"
	}
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-time.After(time.Duration(rng.Int64N(int64(2*w.pace) + 1))):
		}
		id := fmt.Sprintf("%s-w%d-%06d", w.node, n, i)
		var delay time.Duration
		if rng.IntN(4) == 0 { // a delayed event skips the hot path: the poller claims it
			delay = time.Duration(rng.Int64N(int64(200 * time.Millisecond)))
		}
		var key string
		var hold time.Duration
		if w.orderKeys > 0 {
			key = fmt.Sprintf("k%03d", rng.IntN(w.orderKeys))
			if rng.IntN(8) == 0 {
				hold = time.Duration(rng.Int64N(int64(200 * time.Millisecond)))
			}
		}
		w.one(id, insert, delay, rng.IntN(20) == 0, key, hold)
	}
}

// one writes one business transaction. An ordered event (key set) is held for hold
// between its Write and its commit, its key locked meanwhile.
func (w *writers) one(id, insert string, delay time.Duration, rollback bool, key string, hold time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := outbox.BeginTx(ctx, w.db, nil)
	if err != nil {
		return // nothing written: no record
	}
	abort := func(err error) {
		_ = tx.Rollback()
		w.aborted.Add(1)
		w.append(Record{Kind: Aborted, Event: id, Node: w.node})
		fmt.Fprintf(os.Stderr, "node %s: write %s: %v\n", w.node, id, err)
	}
	if _, err := tx.ExecContext(ctx, insert, id, w.node); err != nil {
		abort(err)
		return
	}
	w.crash.beforeInsert()
	_, err = w.ob.Writer().Write(ctx, tx, outbox.Envelope{
		ID: id, AggregateType: AggregateType, Type: EventType, AggregateID: w.node,
		Payload: map[string]string{"id": id}, DeliverAfter: delay, OrderKey: key,
	})
	if err != nil {
		abort(err)
		return
	}
	if rollback {
		_ = tx.Rollback()
		w.rolledBack.Add(1)
		w.append(Record{Kind: RolledBack, Event: id, Node: w.node})
		return
	}
	if hold > 0 {
		time.Sleep(hold) // a late commit: same-key writers wait for it in their Write
	}
	w.append(Record{Kind: Begun, Event: id, Node: w.node})
	if err := tx.Commit(); err != nil {
		w.unknown.Add(1)
		w.append(Record{Kind: Unknown, Event: id, Node: w.node})
		fmt.Fprintf(os.Stderr, "node %s: commit %s: %v\n", w.node, id, err)
		return
	}
	w.committed.Add(1)
	w.append(Record{Kind: Committed, Event: id, Node: w.node})
}

func (w *writers) append(r Record) {
	if err := w.log.Append(r); err != nil {
		// Without its record the run cannot be checked: stop loudly.
		fmt.Fprintln(os.Stderr, "node: record:", err)
		os.Exit(3)
	}
}

// pauseCommand pauses or resumes the subscription sub on every process of the table and
// returns the line to print: "ok", or "error: <why>". The records bracket what the
// checker may assume (CheckPause): a Paused record once Pause returned nil (the pause is
// committed and in force on this process), a Resuming record before Resume is called
// (from then on the pause may be over). A node killed mid-call leaves the outcome
// unknown, and no record that claims more.
func pauseCommand(ob *outbox.Outbox, w *writers, pause bool, sub string) string {
	ctx, cancel := context.WithTimeout(outbox.WithActor(context.Background(), "chaos harness via "+w.node), 30*time.Second)
	defer cancel()
	var err error
	if pause {
		if err = ob.Events().Pause(ctx, sub, "paused by the chaos harness"); err == nil {
			w.append(Record{Kind: Paused, Event: sub, Node: w.node})
		}
	} else {
		w.append(Record{Kind: Resuming, Event: sub, Node: w.node})
		err = ob.Events().Resume(ctx, sub)
	}
	if err != nil {
		return "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "ok"
}

// failingListener fails by order key (keys "k<n>"): for n%4 == 1 every event's first
// attempt fails (transient), for n%4 == 2 one event in five fails every attempt
// (permanent: DEAD after MaxAttempts, and its key moves on), other keys never fail.
func failingListener(_ context.Context, e *outbox.Event) error {
	n, err := strconv.Atoi(strings.TrimPrefix(e.OrderKey, "k"))
	if err != nil {
		return nil
	}
	switch n % 4 {
	case 1:
		if e.Attempts == 0 {
			return errors.New("chaos: transient failure")
		}
	case 2:
		if permanentFailure(e.ID) {
			return errors.New("chaos: permanent failure")
		}
	}
	return nil
}

// permanentFailure picks one event ID in five, the same in every process.
func permanentFailure(id string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return h.Sum32()%5 == 0
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// crashRecorder writes a node's crash record before a crash point of the chaos build
// (core/internal/crash/crashpoint_chaos.go) kills it, so that the fault is on disk before the process
// dies and before any other node can take its claims over. The node counts the hits the
// way the crash point does: "after-listener" is hit when a listener returned nil (the
// record goes out in the listener, before it returns: the hit that kills cannot come
// before it), "after-insert" when Writer.Write inserted (the record goes out before the
// Write that can be the fatal hit; a Write that fails makes it early, never late).
// "after-claim" is hit inside the poller, where the node cannot see it: the harness
// records that crash the moment it sees the process exit.
type crashRecorder struct {
	log   *Log
	node  string
	point string
	after int64
	hits  atomic.Int64
	done  atomic.Bool
}

func newCrashRecorder(log *Log, node string) *crashRecorder {
	c := &crashRecorder{log: log, node: node, point: os.Getenv("OUTBOX_CRASH_POINT"), after: 1}
	if n, err := strconv.ParseInt(os.Getenv("OUTBOX_CRASH_AFTER"), 10, 64); err == nil && n >= 1 {
		c.after = n
	}
	return c
}

// hit counts a hit of point and writes the crash record at the one that kills.
func (c *crashRecorder) hit(point string) {
	if c == nil || c.point != point || c.hits.Add(1) < c.after || c.done.Swap(true) {
		return
	}
	if err := c.log.Append(Record{Kind: Fault, Node: c.node, Event: "crash point " + point + " (recorded by the node before it dies)"}); err != nil {
		fmt.Fprintln(os.Stderr, "node: crash record:", err)
		os.Exit(3)
	}
}

func (c *crashRecorder) beforeInsert() { c.hit("after-insert") }

func (c *crashRecorder) wrap(l outbox.Listener) outbox.Listener {
	return outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		err := l.Handle(ctx, e)
		if err == nil {
			c.hit("after-listener")
		}
		return err
	})
}
