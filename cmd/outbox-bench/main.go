// Command outbox-bench measures the outbox against the database's own ceiling, in the
// same run, on SQLite, PostgreSQL and MariaDB/MySQL.
//
// Workloads (see docs/BENCHMARKS.md):
//
//	a    ceiling: the bare business transaction (one INSERT), 8 producers
//	b    ceiling: business INSERT + outbox INSERT, no dispatch (WriterOnly mode)
//	b2   ceiling: business INSERT + 100 outbox INSERTs (one multi-row statement), no dispatch
//	min  reference without the library: the business transaction of a and b plus one row
//	     into a minimal outbox table written by hand (text primary key, JSON payload,
//	     status, created_at; no other index), one INSERT per transaction, 8 producers;
//	     every workload's first ratio is to min of the same round
//	min2 min in w2's shape: 200 transactions x 100 rows, one multi-row INSERT each;
//	     the reference of w2 and b2
//	mind min plus delivery by hand: one goroutine reads NEW rows in batches of 100
//	     (oldest first), hands them to a no-op listener and marks each batch DONE with
//	     one UPDATE ... WHERE id IN (...); until every row is DONE
//	river     peer: River (riverpgxv5), the job inserted with InsertTx in the business
//	     transaction, a no-op worker, its documented queue configuration (100 workers,
//	     -river-workers); until every job reached the worker and is completed.
//	     PostgreSQL only
//	watermill peer: Watermill SQL with its forwarder: the event published to the SQL
//	     topic in the business transaction, forwarded to a GoChannel pub/sub whose
//	     subscriber acknowledges it; until every event arrived and its offset is
//	     acknowledged. PostgreSQL and MySQL only
//	w1   8 producers, 20,000 transactions of one business INSERT + one event; time until
//	     every event was handled by a no-op listener and is DONE in the table
//	w1m  w1 in MultiNode mode on three node processes sharing the table (the program
//	     re-executes itself three times; the 8 producers split 3/3/2, each node writes a
//	     third of the transactions); time until every event is DONE; ratio to the same
//	     round's w1 and to b. Not on SQLite (one file, one writer)
//	w1m1 (only when named) w1m on one node process: MultiNode mode's own cost beside
//	     w1 (same process layout as w1m, one node); ratio to w1
//	bm   (only when named) b written by w1m's three node processes, each with a
//	     WriterOnly outbox: the ceiling of that process layout, no dispatch; ratio to b.
//	     Not on SQLite
//	w1o  w1 with every event ordered (Envelope.OrderKey), 1,000 keys; ratio to w1
//	w1n  w1 with the outboxnats relay as the listener, publishing to a
//	     nats-server with JetStream (file storage) in this process; ratio to w1
//	w1k  w1 with the outboxkafka relay publishing to franz-go's kfake
//	     cluster, in this process (not a real Kafka broker); ratio to w1
//	w1n1, w1k1  w1n and w1k with one event per relay call (the relay registered as a
//	     plain Listener, so the dispatcher makes no batches); not run by default
//	w1d  w1 with Config.DeleteDone: delivered rows are deleted instead of marked DONE;
//	     ratio to w1; not run by default
//	w1f3, w4f3  w1 and w4 with three listeners on the route: every event is split into
//	     three deliveries (fan-out), done when all are DONE; ratio to w1 and w4; not run
//	     by default
//	w4n, w4k, w4n1, w4k1  w4's backlog relayed to NATS or Kafka as in w1n and w1k
//	     (w4n1, w4k1: one event per relay call); ratio to w4; not run by default
//	w2   8 producers, 200 transactions x 100 events each; same end condition; also the
//	     latency from each transaction's Commit returning to each of its events' listener
//	     invocation (p50, p99)
//	w3   one paced producer, 200 transactions/s for 10 s; latency from Commit returning
//	     to the listener being invoked
//	w3o  w3 with every event ordered, 1,000 keys (each key idle when written)
//	w4   100,000 NEW rows already in the table, dispatcher started with the hot path
//	     unused; time to drain to DONE and the peak RSS of the process (run in a child
//	     process so that its peak RSS is W4's alone)
//	w5   w3's producer writing through a WriterOnly outbox while another outbox, on a
//	     pool of its own (as another process), delivers; latency from Commit returning
//	     to the listener. On PostgreSQL both use pgnotify (LISTEN/NOTIFY); elsewhere the
//	     deliverer's poller finds the events (library defaults: every 5 s or less)
//	w6   (only when named) 6,000 ordered events over 1,000 keys written first, then
//	     delivered by one MultiNode node process whose listener takes 5 ms; until DONE
//	w6m  (only when named) w6 delivered by 3 node processes; ratio to w6 (scaling)
//	sustain  (only when named in -workloads) a producer pool paced at 5,000 events/s
//	     (one per transaction) for 5 minutes in a child process that samples its own RSS
//	     every second: RSS at 10, 50 and 100 % of the run, maximum, slope over the second
//	     half, achieved rate and commit-to-listener latency
//	soak (only when named in -workloads) producers paced at 1,000 events/s (one per
//	     transaction, -soak-rate) for 20 minutes (-soak-duration) in a child process,
//	     with Config.PurgeRetention shortened to 1 minute (-soak-retention) and the purge
//	     every 10 s, so that the table turns over and reaches a steady state. Every 10 s
//	     (-soak-sample) the child records the transaction's and the commit-to-listener
//	     latency p50/p99 over the interval, the rows per status, the table's, each
//	     index's and the TOAST table's size, PostgreSQL's dead tuples and autovacuum /
//	     autoanalyze counts, the time of one poll statement (the poller's own, through
//	     a second SQL store of the library), its RSS and goroutines; on PostgreSQL
//	     with pg_stat_statements (the servers this program starts for a soak preload
//	     it), also the server's mean and largest time of every kind of poll statement
//	     that ran in the interval, the poller's included. Reported: every sample, each
//	     series' slope over the second half and largest value in the last 5 minutes,
//	     and p99 of the last 5 minutes over the first 5 (halves of runs under 10
//	     minutes); -soak-svg-dir writes the
//	     charts as soak-<db>.svg. -soak-mode multinode runs the outbox in MultiNode
//	     mode (its poller claims; one process, ClaimTTL 2 minutes)
//
// Every workload is reported as events/s, as a ratio to min (w2 and b2: to min2, their
// own shape) and, second, as a ratio to ceiling b (w2 to b2) or to its own reference
// (w1o to w1, ...). The peers are dependencies of this program's module only. With -repeat N the tables show medians, followed by every round's value and
// the minimum, median and maximum. Servers: without -postgres-dsn / -mysql-dsn the
// program starts throwaway servers with scripts/testdb.sh and stops them at the end:
// -durability fast (the script's default: no fsync at commit), durable
// (TESTDB_DURABLE=1: commits on disk; SQLite synchronous=FULL) or fast,durable (both,
// interleaved round by round). Each run works in its own schema (PostgreSQL) or database
// (MariaDB), dropped at the end.
//
// Usage:
//
//	go run ./cmd/outbox-bench                     # everything, full size
//	go run ./cmd/outbox-bench -tiny               # tiny sizes: proves it works (CI)
//	go run ./cmd/outbox-bench -db postgres -workloads b,w1 -repeat 3 -json out.json
//	go run ./cmd/outbox-bench -repeat 5 -durability fast,durable
//	go run ./cmd/outbox-bench -db postgres -workloads sustain -sustain-rate 5000 -sustain-duration 5m
//	go run ./cmd/outbox-bench -db postgres -workloads soak -soak-duration 20m -soak-svg-dir docs
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command-line settings.
type options struct {
	deleteDone bool // Config.DeleteDone (workload w1d)
	listeners  int  // subscriptions of the route; > 1 fans every event out (w1f3, w4f3)
	dbs        []string
	workloads  []string
	repeat     int
	jsonPath   string
	mdPath     string
	timeout    time.Duration
	cpuProfile string // directory for per-workload CPU profiles

	producers   int
	w1Tx        int
	w2Tx        int
	w2Events    int
	w3Rate      int
	w3Duration  time.Duration
	w4Rows      int
	payloadSize int

	sustainRate     int
	sustainDuration time.Duration

	// soak: the paced rate, the run's length, the purge retention, the sample interval
	// and where to write the charts ("": nowhere).
	soakRate      int
	soakDuration  time.Duration
	soakRetention time.Duration
	soakSample    time.Duration
	soakSVGDir    string
	soakMode      string // "singlenode" or "multinode"
	// soakPartitions, when positive, makes the soak's PostgreSQL table partitioned
	// (package outboxpartition) with partitions of that period.
	soakPartitions time.Duration

	// durabilities are the server settings to run: "fast", "durable" or both, in this
	// order. durabilityGiven tells whether -durability was on the command line: without
	// it, a server given by DSN is labelled with what it does.
	durabilities    []string
	durabilityGiven bool

	// Outbox settings; 0 keeps the library default.
	workers      int
	hotQueue     int
	coldQueue    int
	pollInterval time.Duration
	pollBatch    int
	doneWindow   time.Duration
	// maxConns sizes the pool: open = idle = maxConns; 0 keeps database/sql's
	// defaults (unlimited open, 2 idle), -1 picks per database (see poolSize).
	maxConns int
	// nodeGOMAXPROCS is GOMAXPROCS of the node processes of w1m, w1m1, w6 and w6m;
	// 0 leaves the runtime's default (the machine's CPUs).
	nodeGOMAXPROCS int
	// riverWorkers is MaxWorkers of River's default queue (workload river).
	riverWorkers int

	postgresDSN string
	mysqlDSN    string
	sqliteDir   string
	script      string
	verbose     bool
}

// allWorkloads is every workload in the order they run; defaultWorkloads leaves out the
// long sustain and soak runs, which run only when named.
var (
	allWorkloads     = []string{"a", "b", "b2", "min", "min2", "bm", "w1", "mind", "river", "watermill", "w1o", "w1n", "w1k", "w1n1", "w1k1", "w1d", "w1f3", "w1m", "w1m1", "w2", "w2o", "w3", "w3o", "w4", "w4n", "w4k", "w4n1", "w4k1", "w4f3", "w5", "w6", "w6m", "sustain", "soak"}
	defaultWorkloads = []string{"a", "b", "b2", "min", "min2", "w1", "mind", "river", "watermill", "w1o", "w1n", "w1k", "w1m", "w2", "w2o", "w3", "w3o", "w4", "w5"}
	allDurabilities  = []string{"fast", "durable"}
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case childW4Arg:
			os.Exit(runChildW4(os.Args[2:]))
		case childW1MArg:
			os.Exit(runChildW1M(os.Args[2:]))
		case childSustainArg:
			os.Exit(runChildSustain(os.Args[2:]))
		case childSoakArg:
			os.Exit(runChildSoak(os.Args[2:]))
		}
	}
	os.Exit(run())
}

func run() int {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox-bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rep := newReport(o)
	servers := &serverSet{script: o.script}
	if slices.Contains(o.workloads, "soak") {
		// The soak's sampler reads the server's own times of the poll statements from
		// pg_stat_statements (soakSampler.pollServer), which must be preloaded.
		servers.postgresArgs = "-c shared_preload_libraries=pg_stat_statements"
	}
	defer servers.stopAll()

	failed := false
	for _, kind := range o.dbs {
		if ctx.Err() != nil {
			break
		}
		if err := benchDatabase(ctx, o, kind, servers, rep); err != nil {
			fmt.Fprintf(os.Stderr, "outbox-bench: %s: %v\n", kind, err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", kind, err))
			failed = true
		}
	}
	rep.finish()
	md := rep.markdown()
	fmt.Print(md)
	if o.mdPath != "" {
		if err := os.WriteFile(o.mdPath, []byte(md), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "outbox-bench:", err)
			failed = true
		}
	}
	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "outbox-bench:", err)
			failed = true
		}
	}
	if failed || ctx.Err() != nil {
		return 1
	}
	return 0
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("outbox-bench", flag.ContinueOnError)
	dbs := fs.String("db", "sqlite,postgres,mysql", "comma-separated databases: sqlite, postgres, mysql")
	workloads := fs.String("workloads", strings.Join(defaultWorkloads, ","),
		"comma-separated workloads: "+strings.Join(allWorkloads, ", ")+" (sustain and soak run only when named)")
	durability := fs.String("durability", "fast", "comma-separated server settings: fast (throwaway servers without fsync at commit; "+
		"SQLite synchronous=NORMAL), durable (TESTDB_DURABLE=1: commits on disk; SQLite synchronous=FULL) or fast,durable "+
		"(both, interleaved per round); a server given by DSN is checked against it, or labelled with its own settings when the flag is not given")
	tiny := fs.Bool("tiny", false, "tiny sizes (proves the program works; CI): w1 and w1m 200 tx, w2 10x10, w3 50/s for 1s, w4 1000 rows; no sustain or soak")
	scale := fs.Float64("scale", 1, "multiply the transaction and row counts (-w1-tx, -w2-tx, -w4-rows: every workload but w3, w5 and sustain) by this factor")
	fs.IntVar(&o.repeat, "repeat", 1, "run every workload this many times (interleaved) and report the median, every round's value and min/median/max")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&o.mdPath, "md", "", "write the results table (Markdown) to this file too")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on one workload after this long (sustain, soak: after -sustain-duration or -soak-duration plus this)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile per database and workload into this directory")
	fs.IntVar(&o.producers, "producers", 8, "producer goroutines (a, b, b2, min, min2, mind, w1, w2, river, watermill, sustain, soak; w1m splits them over its 3 node processes)")
	fs.IntVar(&o.w1Tx, "w1-tx", 20000, "transactions of a, b, min, mind, w1, w1m, river and watermill (one event each; w1m: a third per node process)")
	fs.IntVar(&o.w2Tx, "w2-tx", 200, "transactions of b2, min2 and w2")
	fs.IntVar(&o.w2Events, "w2-events", 100, "events per transaction in b2, min2 and w2")
	fs.IntVar(&o.w3Rate, "w3-rate", 200, "w3 transactions per second")
	fs.DurationVar(&o.w3Duration, "w3-duration", 10*time.Second, "w3 duration")
	fs.IntVar(&o.w4Rows, "w4-rows", 100000, "w4 rows in the table before the dispatcher starts")
	fs.IntVar(&o.sustainRate, "sustain-rate", 5000, "sustain: target events/s (one event per transaction, on -producers goroutines)")
	fs.DurationVar(&o.sustainDuration, "sustain-duration", 5*time.Minute, "sustain: how long the producers write")
	fs.IntVar(&o.soakRate, "soak-rate", 1000, "soak: target events/s (one event per transaction, on -producers goroutines)")
	fs.DurationVar(&o.soakDuration, "soak-duration", 20*time.Minute, "soak: how long the producers write")
	fs.DurationVar(&o.soakRetention, "soak-retention", time.Minute, "soak: Config.PurgeRetention, short so that the table reaches a steady state "+
		"within the run (the purge runs every 10 s, or every retention when that is shorter)")
	fs.DurationVar(&o.soakSample, "soak-sample", 10*time.Second, "soak: time between two samples of latencies, rows, sizes, poll statement, RSS and goroutines")
	fs.StringVar(&o.soakMode, "soak-mode", "singlenode", "soak: the outbox's Config.Mode, singlenode or multinode (claims, one process; ClaimTTL 2 minutes, as docs/multinode.md configures it)")
	fs.DurationVar(&o.soakPartitions, "soak-partition-period", 0, "soak: 0 for the default table; a period (1m, 1h, …) makes the PostgreSQL table "+
		"partitioned by event ID with partitions of that period (package outboxpartition), which the purger drops whole")
	fs.StringVar(&o.soakSVGDir, "soak-svg-dir", "", "soak: write the charts of each database as soak-<db>.svg into this directory (e.g. docs); empty: no files")
	fs.IntVar(&o.payloadSize, "payload", 64, "approximate payload size in bytes (a JSON object)")
	fs.IntVar(&o.workers, "workers", 0, "dispatcher workers (0: library default)")
	fs.IntVar(&o.hotQueue, "hot-queue", 0, "hot queue size (0: library default)")
	fs.IntVar(&o.coldQueue, "cold-queue", 0, "cold queue size (0: library default)")
	fs.DurationVar(&o.pollInterval, "poll-interval", 0, "poller interval (0: library default)")
	fs.IntVar(&o.pollBatch, "poll-batch", 0, "poller batch size (0: library default)")
	fs.DurationVar(&o.doneWindow, "done-window", 0, "Config.DoneBatchWindow (0: library default, 2ms; -1: no window)")
	fs.IntVar(&o.maxConns, "max-conns", -1, "connection pool size, open = idle (0: database/sql defaults; -1: 1 on SQLite, producers+workers+4 elsewhere)")
	fs.IntVar(&o.riverWorkers, "river-workers", 100, "river: MaxWorkers of River's default queue (100: the configuration of River's documentation; "+
		"River fetches at most that many jobs per FetchCooldown, 100 ms by default)")
	fs.IntVar(&o.nodeGOMAXPROCS, "node-gomaxprocs", 0, "GOMAXPROCS of the node processes of w1m, w1m1, w6 and w6m (0: the runtime's default, the machine's CPUs)")
	fs.StringVar(&o.postgresDSN, "postgres-dsn", "", "PostgreSQL DSN (pgx); empty starts a throwaway server with scripts/testdb.sh")
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", "", "MariaDB/MySQL DSN (go-sql-driver, with parseTime=true&loc=UTC); empty starts a throwaway server")
	fs.StringVar(&o.sqliteDir, "sqlite-dir", "", "directory for the SQLite files (default: a temp dir, removed at the end)")
	fs.StringVar(&o.script, "testdb-script", "", "path of scripts/testdb.sh (default: found above the working directory)")
	fs.BoolVar(&o.verbose, "v", false, "log the outbox's warnings")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "durability" {
			o.durabilityGiven = true
		}
	})
	if *tiny {
		o.w1Tx, o.w2Tx, o.w2Events, o.w3Rate, o.w3Duration, o.w4Rows = 200, 10, 10, 50, time.Second, 1000
	}
	if *scale <= 0 {
		return o, errors.New("-scale must be positive")
	}
	o.w1Tx = max(1, int(float64(o.w1Tx)**scale))
	o.w2Tx = max(1, int(float64(o.w2Tx)**scale))
	o.w4Rows = max(1, int(float64(o.w4Rows)**scale))
	var err error
	if o.dbs, err = splitList(*dbs, []string{"sqlite", "postgres", "mysql"}); err != nil {
		return o, fmt.Errorf("-db: %w", err)
	}
	if o.workloads, err = splitList(*workloads, allWorkloads); err != nil {
		return o, fmt.Errorf("-workloads: %w", err)
	}
	if *tiny && slices.Contains(o.workloads, "sustain") {
		return o, errors.New("-tiny does not run sustain (a long run by design); for a short one, leave out -tiny and set -sustain-duration and -sustain-rate")
	}
	if *tiny && slices.Contains(o.workloads, "soak") {
		return o, errors.New("-tiny does not run soak (a long run by design); for a short one, leave out -tiny and set -soak-duration, -soak-retention and -soak-sample")
	}
	if o.durabilities, err = splitList(*durability, allDurabilities); err != nil {
		return o, fmt.Errorf("-durability: %w", err)
	}
	if len(o.durabilities) > 1 {
		for _, kind := range o.dbs {
			if dsn := o.dsnOf(kind); dsn != "" {
				return o, fmt.Errorf("-durability %s needs throwaway servers, but -%s-dsn is given: a given server is "+
					"as durable as its own configuration makes it; run once per server with -durability fast or -durability durable "+
					"(checked against the server's settings), or leave out the DSN", strings.Join(o.durabilities, ","), kind)
			}
		}
	}
	if o.riverWorkers < 1 {
		return o, errors.New("-river-workers must be positive")
	}
	if o.nodeGOMAXPROCS < 0 {
		return o, errors.New("-node-gomaxprocs must not be negative")
	}
	if o.repeat < 1 || o.producers < 1 || o.w2Events < 1 || o.w3Rate < 1 || o.w3Duration <= 0 {
		return o, errors.New("-repeat, -producers, -w2-events, -w3-rate and -w3-duration must be positive")
	}
	if slices.Contains(o.workloads, "sustain") && (o.sustainRate < 1 || o.sustainDuration <= 0) {
		return o, errors.New("-sustain-rate and -sustain-duration must be positive")
	}
	if err := o.validateSoak(); err != nil {
		return o, err
	}
	return o, nil
}

// validateSoak checks the soak flags. They are checked only when soak runs, except
// -soak-svg-dir, which would silently write nothing without it.
func (o options) validateSoak() error {
	if !slices.Contains(o.workloads, "soak") {
		if o.soakSVGDir != "" {
			return errors.New("-soak-svg-dir is given but soak is not in -workloads: add it (-workloads soak) or leave out -soak-svg-dir")
		}
		return nil
	}
	switch {
	case o.soakMode != "singlenode" && o.soakMode != "multinode":
		return fmt.Errorf("-soak-mode must be singlenode or multinode, got %q", o.soakMode)
	case o.soakPartitions < 0:
		return fmt.Errorf("-soak-partition-period must not be negative, got %s", o.soakPartitions)
	case o.soakPartitions > 0 && !slices.Equal(o.dbs, []string{"postgres"}):
		return fmt.Errorf("-soak-partition-period partitions a PostgreSQL table: run it with -db postgres alone, not %s", strings.Join(o.dbs, ","))
	case o.soakRate < 1:
		return fmt.Errorf("-soak-rate must be positive, got %d", o.soakRate)
	case o.soakDuration <= 0:
		return fmt.Errorf("-soak-duration must be positive, got %s", o.soakDuration)
	case o.soakRetention < time.Second:
		// Zero would be the library's default retention (7 days): nothing would be purged.
		return fmt.Errorf("-soak-retention must be at least 1s, got %s", o.soakRetention)
	case o.soakSample < time.Second:
		return fmt.Errorf("-soak-sample must be at least 1s (each sample counts the table's rows), got %s", o.soakSample)
	case 2*o.soakSample > o.soakDuration:
		return fmt.Errorf("-soak-sample %s leaves fewer than two samples in -soak-duration %s", o.soakSample, o.soakDuration)
	case 2*o.soakRetention > o.soakDuration:
		return fmt.Errorf("-soak-retention %s is more than half of -soak-duration %s: the table would not reach a steady "+
			"state within the run; shorten the retention or lengthen the run", o.soakRetention, o.soakDuration)
	}
	return nil
}

// dsnOf is the DSN given for kind, or "" (SQLite, or a throwaway server).
func (o options) dsnOf(kind string) string {
	switch kind {
	case "postgres":
		return o.postgresDSN
	case "mysql":
		return o.mysqlDSN
	}
	return ""
}

const usageHeader = `usage: outbox-bench [flags]

Measures the outbox against the database's own ceiling, in the same run (docs/BENCHMARKS.md).
Workloads (-workloads):
  a, b, b2  ceilings: bare business transaction; + one outbox INSERT (WriterOnly); + 100 events
  min       reference without the library: the business transaction + one row into a minimal
            outbox table by hand (text id, JSON payload, status, created_at), 8 producers;
            every workload's first ratio is to min (w2, b2: to min2)
  min2      min in w2's shape: 200 tx x 100 rows, one multi-row INSERT per transaction
  mind      min + delivery by hand: batches of NEW rows to a no-op listener, one UPDATE ... IN
            (...) per batch marks them DONE; until every row is DONE
  river     peer: River (PostgreSQL only), InsertTx in the business transaction, no-op worker,
            -river-workers workers (100, as River's documentation); until every job is completed
  watermill peer: Watermill SQL (PostgreSQL, MySQL) + forwarder to a GoChannel subscriber, at
            its defaults; until every event arrived and its offset is acknowledged
  w1        8 producers, 1 event/tx, SingleNode, until every event is DONE (ratio to min and b)
  w1m       w1 in MultiNode mode on 3 node processes sharing the table (ratio to w1 and b; not on SQLite)
  w1m1      only when named: w1m on 1 node process (MultiNode mode's own cost; ratio to w1)
  bm        only when named: b written by w1m's 3 node processes, WriterOnly (the ceiling of that
            process layout; ratio to b)
  w2        200 tx x 100 events, until DONE (ratio to min2, b2 and b); commit-to-listener p50/p99 of the burst
  w3        one paced producer; commit-to-listener latency
  w4        drain a pre-filled table, cold path only, in a child process; peak RSS
  w5        w3 written by a WriterOnly outbox, delivered by another on its own pool (PostgreSQL: pgnotify)
  sustain   only when named: paced producers (-sustain-rate, -sustain-duration) in a child process
            sampling its RSS every second; RSS at 10/50/100 %, max, slope, latency
  soak      only when named: paced producers (-soak-rate, -soak-duration) in a child process
            with a short purge retention (-soak-retention); every -soak-sample: latencies,
            rows per status, table/index sizes, dead tuples, poll statement time, RSS,
            goroutines; slopes over the second half, p99 last/first 5 min; SVG charts
            with -soak-svg-dir
Servers (-durability): without DSNs, throwaway servers from scripts/testdb.sh, "fast" (no fsync at
commit), "durable" (TESTDB_DURABLE=1) or both, interleaved round by round.
With -repeat N: medians, then every round's value and min/median/max. The peers (river,
watermill) are dependencies of this program's module only; a database a peer does not
support is skipped, and the report says so.

Flags:
`

func splitList(s string, allowed []string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !slices.Contains(allowed, part) {
			return nil, fmt.Errorf("unknown %q (allowed: %s)", part, strings.Join(allowed, ", "))
		}
		if !slices.Contains(out, part) {
			out = append(out, part)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	// Keep the canonical order, so ceilings run before the workloads that need them.
	slices.SortFunc(out, func(a, b string) int { return slices.Index(allowed, a) - slices.Index(allowed, b) })
	return out, nil
}

// logger returns the outbox's logger: errors only, warnings too with -v.
func (o options) logger() *slog.Logger {
	level := slog.LevelError
	if o.verbose {
		level = slog.LevelWarn
	}
	if os.Getenv("OUTBOX_BENCH_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// poolSize is the pool size for kind: see -max-conns.
func (o options) poolSize(kind string) int {
	if o.maxConns >= 0 {
		return o.maxConns
	}
	if kind == "sqlite" {
		return 1
	}
	workers := o.workers
	if workers == 0 {
		workers = 4 // outbox.DefaultWorkers
	}
	return o.producers + workers + 4
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
