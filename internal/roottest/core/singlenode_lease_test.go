package outbox_test

// The dispatch lease on the three databases: the SQL store's statements, the upgrade of
// a table that holds rows, and two OS processes (this test binary re-executed in the
// "lease node" role, see TestMain) started with the defaults on one table — a second
// replica, a rolling update and a crash.

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// leaseOf returns the store's LeaseStore.
func leaseOf(t *testing.T, s storage.Store) storage.LeaseStore {
	t.Helper()
	ls, ok := s.(storage.LeaseStore)
	if !ok {
		t.Fatalf("%T is not a LeaseStore", s)
	}
	return ls
}

// TestSQLLeaseStore: the lease statements by the database clock. A SingleNode holder
// keeps the lease from every other holder until it releases it or it expires;
// MultiNode holders share it, a shorter TTL never shortens it, and a SingleNode holder
// cannot take it from them; a table without the lease table reports ErrUnsupported.
func TestSQLLeaseStore(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		db, table := b.open(t)
		if err := outbox.MigrateTable(t.Context(), db, b.dialect, table); err != nil {
			t.Fatal(err)
		}
		s, err := outbox.NewSQLStore(db, b.dialect, outbox.SQLStoreConfig{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		ls := leaseOf(t, s)
		ctx := t.Context()
		acquire := func(holder string, mode outbox.Mode, ttl time.Duration) storage.Lease {
			t.Helper()
			l, err := ls.AcquireLease(ctx, storage.LeaseParams{Holder: holder, Shared: mode == outbox.MultiNode, TTL: ttl})
			if err != nil {
				t.Fatalf("AcquireLease(%s, %s, %s): %v", holder, mode, ttl, err)
			}
			return l
		}
		want := func(l storage.Lease, held bool, holder string, mode outbox.Mode) {
			t.Helper()
			if l.Held != held || l.Holder != holder || l.Shared != (mode == outbox.MultiNode) {
				t.Fatalf("lease %+v, want held %v by %s in %s", l, held, holder, mode)
			}
		}
		before := time.Now()
		a := acquire("a", outbox.SingleNode, time.Hour)
		want(a, true, "a", outbox.SingleNode)
		if a.ExpiresAt.Before(before.Add(time.Hour-time.Minute)) || a.ExpiresAt.After(time.Now().Add(time.Hour+time.Minute)) {
			t.Errorf("expires at %s, want about an hour after %s", a.ExpiresAt, before)
		}
		want(acquire("b", outbox.SingleNode, time.Hour), false, "a", outbox.SingleNode)
		want(acquire("m1", outbox.MultiNode, time.Hour), false, "a", outbox.SingleNode)
		want(acquire("a", outbox.SingleNode, time.Hour), true, "a", outbox.SingleNode) // a renewal
		// A release by another holder changes nothing.
		if err := ls.ReleaseLease(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		want(acquire("b", outbox.SingleNode, time.Hour), false, "a", outbox.SingleNode)
		if err := ls.ReleaseLease(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		want(acquire("b", outbox.SingleNode, time.Hour), true, "b", outbox.SingleNode)

		// b renews for 50 ms: once that passed by the database clock, c takes it.
		want(acquire("b", outbox.SingleNode, 50*time.Millisecond), true, "b", outbox.SingleNode)
		eventually(t, "b's short lease to expire", func() bool {
			return acquire("c", outbox.SingleNode, time.Hour).Held
		})

		// MultiNode processes share the lease once it is free, and keep SingleNode out.
		if err := ls.ReleaseLease(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		want(acquire("m1", outbox.MultiNode, time.Hour), true, "m1", outbox.MultiNode)
		want(acquire("m2", outbox.MultiNode, 100*time.Millisecond), true, "m2", outbox.MultiNode)
		if err := ls.ReleaseLease(ctx, "m2"); err != nil { // a MultiNode lease is not released
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // past m2's TTL: m1's hour still holds
		want(acquire("d", outbox.SingleNode, time.Hour), false, "m2", outbox.MultiNode)

		// A table whose lease table is gone (a schema before the version).
		if _, err := db.ExecContext(ctx, "DROP TABLE "+quoteTable(b.dialect, table+"_lease")); err != nil {
			t.Fatal(err)
		}
		if _, err := ls.AcquireLease(ctx, storage.LeaseParams{Holder: "a", TTL: time.Hour}); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("AcquireLease without the lease table: %v, want ErrUnsupported", err)
		}
	})
}

// TestLeaseMigrationUpgradesATableWithRows: a table of the version before the lease
// (its lease table dropped), holding rows, is still started, with a WARN, and its
// events delivered; MigrateTable then adds the lease table, the rows stay, and the next
// start holds the lease, which a graceful stop releases.
func TestLeaseMigrationUpgradesATableWithRows(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		db, table := b.open(t)
		if err := outbox.MigrateTable(ctx, db, b.dialect, table); err != nil {
			t.Fatal(err)
		}
		for _, side := range []string{"_lease", "_pause"} { // the pause came after the lease
			if _, err := db.ExecContext(ctx, "DROP TABLE "+quoteTable(b.dialect, table+side)); err != nil {
				t.Fatal(err)
			}
		}
		have, latest, err := outbox.SchemaVersion(ctx, db, b.dialect, table)
		if want := versionOf(t, b.dialect, "lease") - 1; err != nil || have != want {
			t.Fatalf("without the lease table: version %d of %d, %v; want %d", have, latest, err, want)
		}
		s, err := outbox.NewSQLStore(db, b.dialect, outbox.SQLStoreConfig{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-time.Minute)
		var events []outbox.Event
		for i := range 3 {
			events = append(events, outbox.Event{ID: fmt.Sprintf("old-%d", i), Type: "Ping", AggregateType: "Thing",
				Payload: json.RawMessage(`{}`), CreatedAt: at, AvailableAt: at})
		}
		if _, err := s.Insert(ctx, db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		start := func(logs *logSink, got *deliveries) *outbox.Outbox {
			t.Helper()
			ob, err := outbox.New(db, outbox.Config{Dialect: b.dialect, Table: table, Logger: logs.logger(),
				PollInterval: 50 * time.Millisecond, SkipRecent: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := ob.Register("Thing", "Ping", got); err != nil {
				t.Fatal(err)
			}
			if err := ob.Start(ctx); err != nil {
				t.Fatalf("Start: %v", err)
			}
			return ob
		}
		logs, got := newLogSink(), newDeliveries(nil)
		ob := start(logs, got)
		if !ob.Dispatching() || len(logs.find(slog.LevelWarn, "no dispatch lease")) != 1 {
			t.Fatalf("on a table without the lease: dispatching %v, WARN lines %+v; want true and one", ob.Dispatching(), logs.atLevel(slog.LevelWarn))
		}
		eventually(t, "the old rows to be delivered", func() bool { return got.total() == 3 })
		if err := ob.Stop(ctx); err != nil {
			t.Fatal(err)
		}

		for range 2 { // the second run changes nothing
			if err := outbox.MigrateTable(ctx, db, b.dialect, table); err != nil {
				t.Fatalf("MigrateTable: %v", err)
			}
		}
		if have, latest, err := outbox.SchemaVersion(ctx, db, b.dialect, table); err != nil || have != latest {
			t.Fatalf("after MigrateTable: version %d of %d, %v", have, latest, err)
		}
		for _, e := range events {
			if got, err := s.Get(ctx, e.ID); err != nil || got.Status != outbox.StatusDone {
				t.Fatalf("row %s after the upgrade: %+v, %v; want DONE", e.ID, got, err)
			}
		}
		logs = newLogSink()
		ob = start(logs, newDeliveries(nil))
		other := storage.LeaseParams{Holder: "other", TTL: time.Minute}
		if l, err := leaseOf(t, s).AcquireLease(ctx, other); err != nil || l.Held || l.Shared || !ob.Dispatching() {
			t.Fatalf("after the upgrade: lease %+v, %v, dispatching %v; want held by the outbox", l, err, ob.Dispatching())
		}
		if w := logs.find(slog.LevelWarn, "lease"); len(w) != 0 {
			t.Errorf("WARN lines about the lease after the upgrade: %+v, want none", w)
		}
		if err := ob.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if l, err := leaseOf(t, s).AcquireLease(ctx, other); err != nil || !l.Held {
			t.Fatalf("after a graceful stop: %+v, %v; want the lease free", l, err)
		}
	})
}

// Environment of a lease node process. envLeaseNode selects the role.
const (
	envLeaseNode    = "OUTBOX_TEST_LEASE_NODE" // the process's name
	envLeaseDialect = "OUTBOX_TEST_LEASE_DIALECT"
	envLeaseDSN     = "OUTBOX_TEST_LEASE_DSN"
	envLeaseTable   = "OUTBOX_TEST_LEASE_TABLE"
	envLeaseLog     = "OUTBOX_TEST_LEASE_LOG"
	envLeaseTTL     = "OUTBOX_TEST_LEASE_TTL"   // Config.LeaseTTL; empty: the default
	envLeaseDelay   = "OUTBOX_TEST_LEASE_DELAY" // how long the listener takes per event
)

// leasePollInterval is the node processes' poll interval, with no idle back-off: short,
// so that the events one process writes and the other delivers do not wait for
// DefaultPollInterval. Mode and the lease keep their defaults.
const leasePollInterval = 100 * time.Millisecond

// runLeaseNodeProcess is the lease node role: an Outbox with the default mode on the
// table, whose listener appends "<unix ns> <id> <order key> <order seq>" for each
// delivery to its own file, fsynced before it returns. It prints "ready" once started,
// then "dispatching true|false" whenever Outbox.Dispatching changes. On stdin,
// "write <prefix> <n> <keys>" writes n ordered Ping events, each in a transaction of
// its own, over <keys> keys and answers "wrote <prefix>"; at the end of stdin it stops
// gracefully. It returns the exit code.
func runLeaseNodeProcess() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "lease node:", err)
		return 1
	}
	dialects := map[string]struct {
		d      outbox.Dialect
		driver string
	}{"sqlite": {outbox.SQLite, "sqlite"}, "postgres": {outbox.Postgres, "pgx"}, "mysql": {outbox.MySQL, "mysql"}}
	dia, ok := dialects[os.Getenv(envLeaseDialect)]
	if !ok {
		return fail(fmt.Errorf("unknown dialect %q", os.Getenv(envLeaseDialect)))
	}
	db, err := sql.Open(dia.driver, os.Getenv(envLeaseDSN))
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	if dia.d == outbox.SQLite {
		db.SetMaxOpenConns(1)
	}
	logFile, err := os.OpenFile(os.Getenv(envLeaseLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fail(err)
	}
	defer logFile.Close()
	var delay time.Duration
	if v := os.Getenv(envLeaseDelay); v != "" {
		if delay, err = time.ParseDuration(v); err != nil {
			return fail(err)
		}
	}
	cfg := outbox.Config{Dialect: dia.d, Table: os.Getenv(envLeaseTable), PollInterval: leasePollInterval, PollMaxInterval: -1,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if v := os.Getenv(envLeaseTTL); v != "" {
		if cfg.LeaseTTL, err = time.ParseDuration(v); err != nil {
			return fail(err)
		}
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		return fail(err)
	}
	log := newSyncedLog(logFile)
	err = ob.Register("Thing", "Ping", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return log.append(fmt.Sprintf("%d %s %s %d\n", time.Now().UnixNano(), e.ID, e.OrderKey, e.OrderSeq))
	}))
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	if err := ob.Start(ctx); err != nil {
		return fail(err)
	}
	var outMu sync.Mutex
	say := func(s string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Println(s)
	}
	say("ready")
	stop := make(chan struct{})
	var reporter sync.WaitGroup
	reporter.Go(func() {
		last := ""
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if s := fmt.Sprint("dispatching ", ob.Dispatching()); s != last {
				say(s)
				last = s
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "write" {
			return fail(fmt.Errorf("unknown command %q", sc.Text()))
		}
		n, err1 := strconv.Atoi(f[2])
		keys, err2 := strconv.Atoi(f[3])
		if err := errors.Join(err1, err2); err != nil {
			return fail(err)
		}
		for i := range n {
			err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
				_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{ID: fmt.Sprintf("%s-%04d", f[1], i), Type: "Ping",
					AggregateType: "Thing", OrderKey: fmt.Sprintf("k%d", i%keys), Payload: json.RawMessage(`{}`)})
				return err
			})
			if err != nil {
				return fail(fmt.Errorf("write %s-%04d: %w", f[1], i, err))
			}
		}
		say("wrote " + f[1])
	}
	close(stop)
	reporter.Wait()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := ob.Stop(sctx); err != nil {
		return fail(err)
	}
	return 0
}

// leaseNode is one running lease node process.
type leaseNode struct {
	name, logPath, errPath string
	cmd                    *exec.Cmd
	stdin                  io.WriteCloser
	lines                  chan string // stdout after "ready"; closed at its end
	waited                 chan error
	dispatching            *bool // the last state it reported; nil before the first
}

// leaseSlack is the room a loaded 2-core machine under -race gets, beyond what the
// configuration allows, to start a process, run its statements and report a change.
const leaseSlack = 60 * time.Second

// leaseTarget is a database that two processes can open: its driver's DSN and the
// table's name, and a pool of the test's own on it.
type leaseTarget struct {
	b          backend
	db         *sql.DB
	dsn, table string
}

func newLeaseTarget(t *testing.T, b backend) leaseTarget {
	t.Helper()
	var lt leaseTarget
	lt.b = b
	switch b.dialect {
	case outbox.SQLite:
		lt.dsn, lt.table = outbox.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")), outbox.DefaultTable
		db, err := sql.Open("sqlite", lt.dsn)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = db.Close() })
		lt.db = db
	case outbox.Postgres:
		lt.dsn = testdb.PostgresDSN(t)
		lt.db, lt.table = b.open(t)
	default:
		lt.dsn = testdb.MySQLDSN(t)
		lt.db, lt.table = b.open(t)
	}
	if err := outbox.MigrateTable(t.Context(), lt.db, b.dialect, lt.table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return lt
}

// start starts a lease node process on the target and waits for its first state.
func (lt leaseTarget) start(t *testing.T, name, ttl, delay, dir string) *leaseNode {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &leaseNode{name: name, logPath: filepath.Join(dir, name+".log"), errPath: filepath.Join(dir, name+".stderr"),
		lines: make(chan string, 1024), waited: make(chan error, 1)}
	stderr, err := os.Create(p.errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), envLeaseNode+"="+name, envLeaseDialect+"="+lt.b.name, envLeaseDSN+"="+lt.dsn,
		envLeaseTable+"="+lt.table, envLeaseLog+"="+p.logPath, envLeaseTTL+"="+ttl, envLeaseDelay+"="+delay)
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
		_, _ = io.Copy(io.Discard, stdout)
		p.waited <- p.cmd.Wait()
	}()
	t.Cleanup(func() { // a failed test leaves no process behind
		_ = p.cmd.Process.Kill()
		for range p.lines {
		}
	})
	p.expect(t, "ready", leaseSlack)
	return p
}

// expect reads the node's output until the line want, within d; it notes the
// dispatching states it passes.
func (p *leaseNode) expect(t *testing.T, want string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s exited before %q:\n%s", p.name, want, p.stderrTail())
			}
			p.note(line)
			if line == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s did not print %q within %s:\n%s", p.name, want, d, p.stderrTail())
		}
	}
}

// note records a state line.
func (p *leaseNode) note(line string) {
	if s, ok := strings.CutPrefix(line, "dispatching "); ok {
		v := s == "true"
		p.dispatching = &v
	}
}

// expectState waits until the node reports the dispatching state want, within d.
func (p *leaseNode) expectState(t *testing.T, want bool, d time.Duration) {
	t.Helper()
	for drained := false; !drained; { // the lines printed already
		select {
		case line, ok := <-p.lines:
			if !ok {
				drained = true
			}
			p.note(line)
		default:
			drained = true
		}
	}
	if p.dispatching != nil && *p.dispatching == want {
		return
	}
	p.expect(t, fmt.Sprint("dispatching ", want), d)
}

func (p *leaseNode) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
}

// stop ends stdin and waits for a graceful exit.
func (p *leaseNode) stop(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	for range p.lines {
	}
	select {
	case err := <-p.waited:
		p.waited <- err
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.name, err, p.stderrTail())
		}
	case <-time.After(leaseSlack):
		t.Fatalf("%s did not stop within %s", p.name, leaseSlack)
	}
}

func (p *leaseNode) stderrTail() string {
	b, _ := os.ReadFile(p.errPath)
	s := string(b)
	if len(s) > 6000 {
		s = "…" + s[len(s)-6000:]
	}
	return s
}

// stderrLines returns the lines of the node's log output that contain all of parts.
func (p *leaseNode) stderrLines(parts ...string) []string {
	b, _ := os.ReadFile(p.errPath)
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if !slices.ContainsFunc(parts, func(s string) bool { return !strings.Contains(line, s) }) {
			out = append(out, line)
		}
	}
	return out
}

// leaseDelivery is one line of a node's delivery log.
type leaseDelivery struct {
	at   int64 // unix ns
	id   string
	key  string
	seq  int64
	node string
}

// deliveries reads the node's delivery log. A line cut short by a kill is not a
// delivery: the listener had not returned.
func (p *leaseNode) deliveries(t *testing.T) []leaseDelivery {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []leaseDelivery
	for _, line := range lines[:len(lines)-1] {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("%s: bad log line %q", p.name, line)
		}
		at, err1 := strconv.ParseInt(f[0], 10, 64)
		seq, err2 := strconv.ParseInt(f[3], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("%s: %q: %v", p.name, line, err)
		}
		out = append(out, leaseDelivery{at: at, id: f[1], key: f[2], seq: seq, node: p.name})
	}
	return out
}

// waitAllDelivered waits until the table holds n rows, all DONE.
func (lt leaseTarget) waitAllDelivered(t *testing.T, n int, nodes ...*leaseNode) {
	t.Helper()
	q := "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 1 THEN 1 ELSE 0 END), 0) FROM " + quoteTable(lt.b.dialect, lt.table)
	deadline := time.Now().Add(2 * leaseSlack)
	for {
		var rows, done int
		if err := lt.db.QueryRowContext(t.Context(), q).Scan(&rows, &done); err != nil {
			t.Fatal(err)
		}
		if rows == n && done == n {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range nodes {
				t.Logf("%s:\n%s", p.name, p.stderrTail())
			}
			t.Fatalf("%d rows, %d DONE after %s; want %d DONE", rows, done, 2*leaseSlack, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkLeaseDeliveries checks the nodes' deliveries of the n events in the table: every
// event delivered, an event delivered twice only if dupOK says that its two deliveries
// may be, and each key's deliveries, in time order, in the key's order: each the same
// event as the one before (a redelivery) or the next.
func checkLeaseDeliveries(t *testing.T, n int, dupOK func(first, second leaseDelivery) bool, nodes ...*leaseNode) []leaseDelivery {
	t.Helper()
	var all []leaseDelivery
	for _, p := range nodes {
		all = append(all, p.deliveries(t)...)
	}
	slices.SortFunc(all, func(a, b leaseDelivery) int { return cmp.Compare(a.at, b.at) })
	byID := map[string]leaseDelivery{}
	dups := 0
	for _, d := range all {
		if first, seen := byID[d.id]; seen {
			dups++
			if !dupOK(first, d) {
				t.Errorf("%s delivered by %s and again by %s", d.id, first.node, d.node)
			}
			continue
		}
		byID[d.id] = d
	}
	if len(byID) != n {
		t.Errorf("%d distinct events delivered, want %d", len(byID), n)
	}
	last := map[string]int64{}
	for _, d := range all {
		if prev := last[d.key]; d.seq != prev && d.seq != prev+1 {
			t.Errorf("key %s: %s (seq %d, by %s) delivered after seq %d", d.key, d.id, d.seq, d.node, prev)
		}
		last[d.key] = max(last[d.key], d.seq)
	}
	t.Logf("%d deliveries of %d events, %d again", len(all), n, dups)
	return all
}

// TestTwoDefaultProcessesOneTable: two OS processes started with the default mode on
// one table, as a Deployment with two replicas starts them. Only the first delivers:
// every event the two write is delivered once, by it, in each key's order, while the
// second stands by and says so. When the first stops (a rolling update), the second
// takes over, within a sixth of the default LeaseTTL, and goes on in each key's order.
func TestTwoDefaultProcessesOneTable(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		lt := newLeaseTarget(t, b)
		dir := t.TempDir()
		p1 := lt.start(t, "p1", "", "", dir)
		p1.expectState(t, true, leaseSlack)
		p2 := lt.start(t, "p2", "", "", dir)
		p2.expectState(t, false, leaseSlack)

		p1.send(t, "write a 100 10")
		p2.send(t, "write b 100 10")
		p1.expect(t, "wrote a", leaseSlack)
		p2.expect(t, "wrote b", leaseSlack)
		lt.waitAllDelivered(t, 200, p1, p2)
		never := func(leaseDelivery, leaseDelivery) bool { return false }
		checkLeaseDeliveries(t, 200, never, p1, p2)
		if got := p2.deliveries(t); len(got) != 0 {
			t.Errorf("the second process delivered %d events beside the first", len(got))
		}
		if w := p2.stderrLines("level=WARN", "another process holds this table's dispatch lease", "Mode: MultiNode"); len(w) != 1 {
			t.Errorf("the second process logged %d WARN lines naming the lease and Mode: MultiNode, want 1:\n%s", len(w), p2.stderrTail())
		}
		if l := p1.stderrLines("component=lease"); len(l) != 0 {
			t.Errorf("the holder logged about the lease: %q", l)
		}

		// A rolling update: the old process stops, the new one takes over.
		stopped := time.Now()
		p1.stop(t)
		p2.expectState(t, true, outbox.DefaultLeaseTTL/6+leaseSlack)
		t.Logf("%s: the second process delivers %s after the first stopped (LeaseTTL/6 = %s)", b.name,
			time.Since(stopped).Round(time.Millisecond), outbox.DefaultLeaseTTL/6)
		p2.send(t, "write c 50 10")
		p2.expect(t, "wrote c", leaseSlack)
		lt.waitAllDelivered(t, 250, p2)
		all := checkLeaseDeliveries(t, 250, never, p1, p2)
		for _, d := range all {
			if d.node == "p1" && d.at > stopped.UnixNano() || d.node == "p2" && d.at < stopped.UnixNano() {
				t.Errorf("%s delivered %s at %s, the first process stopped at %s", d.node, d.id, time.Unix(0, d.at), stopped)
			}
		}
		p2.stop(t)
	})
}

// TestDefaultProcessTakesOverAfterACrash: two processes with the default mode and a
// LeaseTTL of 8 s (each renewal may take LeaseTTL/3: at 2 s, renewals on a loaded
// 2-core machine timed out, and the holder rightly stepped down before the kill). The one standing by logs an ERROR naming MultiNode once it stood by
// for 4 × LeaseTTL. The holder is killed with SIGKILL while it delivers; the other
// delivers nothing before the kill, takes over once the lease expired, and delivers
// every event, in each key's order, again only events the killed one had delivered
// without recording them.
func TestDefaultProcessTakesOverAfterACrash(t *testing.T) {
	t.Parallel()
	const ttl = 8 * time.Second
	forEachBackend(t, func(t *testing.T, b backend) {
		lt := newLeaseTarget(t, b)
		dir := t.TempDir()
		p1 := lt.start(t, "p1", ttl.String(), "10ms", dir)
		p1.expectState(t, true, leaseSlack)
		p2 := lt.start(t, "p2", ttl.String(), "10ms", dir)
		p2.expectState(t, false, leaseSlack)
		deadline := time.Now().Add(4*ttl + leaseSlack)
		for len(p2.stderrLines("level=ERROR", "still standing by", "Mode: MultiNode")) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no ERROR naming Mode: MultiNode after 4 × %s:\n%s", ttl, p2.stderrTail())
			}
			time.Sleep(100 * time.Millisecond)
		}

		p1.send(t, "write a 200 10")
		p2.send(t, "write b 200 10")
		p1.expect(t, "wrote a", leaseSlack)
		p2.expect(t, "wrote b", leaseSlack)
		for len(p1.deliveries(t)) < 100 {
			time.Sleep(10 * time.Millisecond)
		}
		if err := p1.cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		killed := time.Now()
		p2.expectState(t, true, ttl+ttl/6+leaseSlack)
		t.Logf("%s: the second process delivers %s after the kill (LeaseTTL %s)", b.name, time.Since(killed).Round(time.Millisecond), ttl)
		lt.waitAllDelivered(t, 400, p2)
		// p1's log was fsynced before each listener returned: an event in it whose row
		// p2 delivered again is one p1 delivered without recording it before it died.
		again := func(first, second leaseDelivery) bool { return first.node == "p1" && second.node == "p2" }
		all := checkLeaseDeliveries(t, 400, again, p1, p2)
		for _, d := range all {
			if d.node == "p2" && d.at < killed.UnixNano() {
				t.Errorf("p2 delivered %s at %s, before the holder was killed at %s", d.id, time.Unix(0, d.at), killed)
			}
		}
		p2.stop(t)
	})
}
