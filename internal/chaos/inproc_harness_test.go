package chaos

// The harness of the in-process scenarios (the inproc_*_test.go files): one outbox
// table per scenario and database, writers that record every event they commit, roll
// back or lose track of, listeners wrapped by a Recorder, a drain that waits until no
// row is pending, and the check of the run's records against the table (Check, Gate,
// Publish). Faults here are inside the process: listeners that panic, hang or always
// fail, full queues, stops, commits that fail, time zones, purges racing replays.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// shortLoad is how long most scenarios write in the short tier.
const shortLoad = 1500 * time.Millisecond

// The route every scenario's events take.
const (
	chaosAggregate = "Chaos"
	chaosEvent     = "Happened"
)

// backend is one database an in-process scenario runs on.
type backend struct {
	name    string // "sqlite", "postgres", "mysql"
	dialect outbox.Dialect
}

var (
	sqliteBackend   = backend{"sqlite", outbox.SQLite}
	postgresBackend = backend{"postgres", outbox.Postgres}
	mysqlBackend    = backend{"mysql", outbox.MySQL}
	allBackends     = []backend{sqliteBackend, postgresBackend, mysqlBackend}
)

// forEachBackend runs fn as a parallel subtest per backend.
func forEachBackend(t *testing.T, backends []backend, fn func(t *testing.T, be backend)) {
	t.Helper()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			fn(t, be)
		})
	}
}

// dsn returns the DSN of the backend's test database, with extra appended to its query
// (for example a session time zone); on SQLite it names a new file in dir.
func (be backend) dsn(t testing.TB, dir, extra string) (driver, dsn string) {
	t.Helper()
	switch be.name {
	case "sqlite":
		return "sqlite", outbox.SQLiteDSN(filepath.Join(dir, "outbox.db")) + extra
	case "postgres":
		return "pgx", withQuery(testdb.PostgresDSN(t), extra)
	case "mysql":
		return "mysql", withQuery(testdb.MySQLDSN(t), extra)
	}
	t.Fatalf("unknown backend %q", be.name)
	return "", ""
}

// withQuery appends extra ("&k=v") to the query of dsn.
func withQuery(dsn, extra string) string {
	if extra == "" {
		return dsn
	}
	if !strings.Contains(dsn, "?") {
		return dsn + "?" + strings.TrimPrefix(extra, "&")
	}
	return dsn + extra
}

// openDB opens and pings a database, and closes it when the test ends.
func openDB(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", driver, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping %s: %v", driver, err)
	}
	return db
}

// scene is one scenario run on one database: a migrated outbox table, a business
// table beside it and the run's record log.
type scene struct {
	t       *testing.T
	name    string // scenario name on the scoreboard
	be      backend
	driver  string // database/sql driver name
	dsn     string
	db      *sql.DB
	dir     string // the test's temp dir (the SQLite file, the record log)
	table   string // outbox table, qualified on PostgreSQL and MariaDB
	orders  string // business table: orders(id VARCHAR(64) PRIMARY KEY)
	log     *Log
	logPath string
	seed    int64
	started time.Time
	faults  atomic.Int64 // faults injected, for the scoreboard
	logs    *logCounter
	deadOK  bool
	stall   time.Duration // sceneOptions.stall
}

// sceneOptions configure newScene.
type sceneOptions struct {
	// dsnExtra is appended to the DSN's query (PostgreSQL and MariaDB session settings).
	dsnExtra string
	// deadOK marks a scenario whose listener fails on purpose, so that events may end
	// DEAD; in every other scenario a DEAD row fails the check (Report.GateNoDead).
	deadOK bool
	// sqliteSeveralConns keeps database/sql's default pool (several connections) on
	// SQLite. Scenes otherwise use one connection, as the library asks of SQLite users
	// (Start warns otherwise): connections waiting for SQLite's write lock in its busy
	// handler are not served in order, and the outbox's status updates starved behind
	// busy writers (listener-panic fell 40 s behind on a loaded machine).
	sqliteSeveralConns bool
	// stall, when positive, counts overlapping attempts that began after the earlier
	// ones had run longer than stall apart (CheckStall), and checks the order of the
	// ordered events with it (CheckOrder): a scenario whose listeners stall on purpose.
	stall time.Duration
}

// newScene creates the tables and the record log of one run.
func newScene(t *testing.T, name string, be backend, seed int64, opts sceneOptions) *scene {
	t.Helper()
	dir := t.TempDir()
	driver, dsn := be.dsn(t, dir, opts.dsnExtra)
	db := openDB(t, driver, dsn)
	if be.name == "sqlite" && !opts.sqliteSeveralConns {
		db.SetMaxOpenConns(1)
	}
	table := testdb.IsolatedTable(t, db, be.name)
	ctx := context.Background()
	if err := outbox.MigrateTable(ctx, db, be.dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s := &scene{t: t, name: name, be: be, driver: driver, dsn: dsn, db: db, dir: dir, table: table, seed: seed, started: time.Now(), logs: &logCounter{},
		deadOK: opts.deadOK, stall: opts.stall}
	s.orders = "orders"
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		s.orders = table[:i] + ".orders"
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+s.orders+" (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatalf("create orders: %v", err)
	}
	s.logPath = filepath.Join(dir, "records.jsonl")
	log, err := CreateLog(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	s.log = log
	return s
}

// ph returns the n-th placeholder of the scene's dialect.
func (s *scene) ph(n int) string {
	if s.be.dialect == outbox.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// behaviour is what a scenario's listener does before the recorder notes its outcome.
type behaviour func(ctx context.Context, e *outbox.Event) error

// succeed is a listener that succeeds at once.
func succeed(context.Context, *outbox.Event) error { return nil }

// newOutbox builds an Outbox over the scene's table whose listener for the scenario's
// route runs b, recorded under node. Dialect, Table and Logger are filled in when zero.
// It is not started; the test's cleanup stops it.
func (s *scene) newOutbox(cfg outbox.Config, node string, b behaviour) *outbox.Outbox {
	s.t.Helper()
	return s.newOutboxOn(s.db, cfg, node, b)
}

// newOutboxOn is newOutbox over another connection pool to the scene's database.
func (s *scene) newOutboxOn(db *sql.DB, cfg outbox.Config, node string, b behaviour) *outbox.Outbox {
	s.t.Helper()
	if cfg.Dialect == nil {
		cfg.Dialect = s.be.dialect
	}
	if cfg.Table == "" {
		cfg.Table = s.table
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(s.logs)
	}
	if s.be.name == "sqlite" && cfg.Mode == outbox.MultiNode && cfg.StatusTimeout > 0 && cfg.StatusTimeout < outbox.DefaultStatusTimeout {
		// SQLite has one writer at a time, and its busy handler is not fair: a claimed
		// event's status update can wait several seconds for the write lock behind busy
		// business writers (it passed 2 s in the long tier), then fails, and the event is
		// delivered again once its claim expires. Run SQLite with the default timeout.
		cfg.StatusTimeout = outbox.DefaultStatusTimeout
		cfg.ClaimTTL = max(cfg.ClaimTTL, cfg.ListenerTimeout+cfg.StatusTimeout+2*time.Second)
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		s.t.Fatalf("new outbox: %v", err)
	}
	s.register(ob, chaosEvent, node, b)
	s.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			s.t.Errorf("stop %s: %v", node, err)
		}
	})
	return ob
}

// register routes the scenario's aggregate type and eventType to b, recorded under node.
func (s *scene) register(ob *outbox.Outbox, eventType, node string, b behaviour) {
	s.t.Helper()
	rec := Recorder{Log: s.log, Node: node}
	if err := ob.Register(chaosAggregate, eventType, rec.Wrap(outbox.ListenerFunc(b))); err != nil {
		s.t.Fatal(err)
	}
}

// start builds and starts an Outbox; see newOutbox.
func (s *scene) start(cfg outbox.Config, node string, b behaviour) *outbox.Outbox {
	s.t.Helper()
	ob := s.newOutbox(cfg, node, b)
	if err := ob.Start(context.Background()); err != nil {
		s.t.Fatalf("start %s: %v", node, err)
	}
	return ob
}

// envelope is an event of the scenario's route with the given ID.
func envelope(id string) outbox.Envelope {
	return outbox.Envelope{ID: id, Type: chaosEvent, AggregateType: chaosAggregate, AggregateID: id,
		Payload: map[string]string{"id": id}}
}

// txKind is how a writer runs its business transaction.
type txKind int

const (
	// viaOutboxTx uses outbox.BeginTx: committed events take the hot path.
	viaOutboxTx txKind = iota
	// viaSQLTx uses a bare *sql.Tx: the poller delivers the events.
	viaSQLTx
)

// writeOutcome is how one business transaction ended.
type writeOutcome int

const (
	wroteCommitted writeOutcome = iota
	wroteRolledBack
	wroteUnknown
)

// writeTx runs one business transaction on db: an orders row per event and the events
// through w, then commits (or rolls back when rollback is set). It records every event
// as Committed (commit returned nil), RolledBack, or Unknown (commit returned an
// error). An error before the commit is returned with nothing recorded: nothing was
// committed.
func (s *scene) writeTx(ctx context.Context, db *sql.DB, w *outbox.Writer, kind txKind, envs []outbox.Envelope, rollback bool) (writeOutcome, error) {
	var (
		exec     outbox.Executor
		commit   func() error
		rollbck  func() error
		business func(ctx context.Context, q string, args ...any) error
	)
	switch kind {
	case viaOutboxTx:
		tx, err := outbox.BeginTx(ctx, db, nil)
		if err != nil {
			return 0, err
		}
		exec, commit, rollbck = tx, tx.Commit, tx.Rollback
		business = func(ctx context.Context, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}
	case viaSQLTx:
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		exec, commit, rollbck = tx, tx.Commit, tx.Rollback
		business = func(ctx context.Context, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}
	}
	for _, env := range envs {
		if err := business(ctx, "INSERT INTO "+s.orders+" (id) VALUES ("+s.ph(1)+")", env.ID); err != nil {
			_ = rollbck()
			return 0, fmt.Errorf("business insert: %w", err)
		}
	}
	ids, err := w.WriteAll(ctx, exec, envs)
	if err != nil {
		_ = rollbck()
		return 0, fmt.Errorf("write: %w", err)
	}
	record := func(k Kind) error {
		for _, id := range ids {
			if err := s.log.Append(Record{Kind: k, Event: id, Node: "writer"}); err != nil {
				return err
			}
		}
		return nil
	}
	if rollback {
		if err := rollbck(); err != nil {
			return 0, fmt.Errorf("rollback: %w", err)
		}
		return wroteRolledBack, record(RolledBack)
	}
	if err := commit(); err != nil {
		if rerr := record(Unknown); rerr != nil {
			return 0, rerr
		}
		return wroteUnknown, err
	}
	return wroteCommitted, record(Committed)
}

// loadOptions configure a writer load.
type loadOptions struct {
	writers  int           // concurrent writer goroutines
	duration time.Duration // how long they write
	batch    int           // events per transaction (1 when zero)
	pause    time.Duration // between transactions of one writer
	kind     func(n int) txKind
	// rollback, when set, decides which transactions roll back on purpose.
	rollback func(n int) bool
	// db is the pool writers use; the scene's when nil.
	db *sql.DB
	// unknownOK tolerates commit errors (a scenario that injects them).
	unknownOK bool
	// prefix starts the event IDs: "<prefix>w<writer>-<n>-<i>".
	prefix string
	// envelope builds the event of an ID; envelope (the scenario's route) when nil.
	envelope func(id string) outbox.Envelope
}

// loadResult counts what a load wrote.
type loadResult struct {
	committed, rolledBack, unknown, txErrors atomic.Int64
	maxTx                                    atomic.Int64 // the longest transaction, in ns

	mu    sync.Mutex
	first error // the first transaction error
}

// fail counts a failed business transaction.
func (r *loadResult) fail(err error) {
	r.txErrors.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == nil {
		r.first = err
	}
}

// add adds the counts of o to r.
func (r *loadResult) add(o *loadResult) {
	r.committed.Add(o.committed.Load())
	r.rolledBack.Add(o.rolledBack.Load())
	r.unknown.Add(o.unknown.Load())
	r.txErrors.Add(o.txErrors.Load())
	storeMax(&r.maxTx, o.maxTx.Load())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == nil {
		r.first = o.first
	}
}

// load runs writers until the duration passes or ctx ends, writing batches of events
// through w. Every transaction error is counted; unless opts.unknownOK, each one fails
// the test: the outbox must never make a business transaction fail.
func (s *scene) load(ctx context.Context, w *outbox.Writer, opts loadOptions) *loadResult {
	s.t.Helper()
	res := &loadResult{}
	db := opts.db
	if db == nil {
		db = s.db
	}
	batch := max(opts.batch, 1)
	ctx, cancel := context.WithTimeout(ctx, opts.duration)
	defer cancel()
	var wg sync.WaitGroup
	for wi := range max(opts.writers, 1) {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				envs := make([]outbox.Envelope, batch)
				for i := range envs {
					id := fmt.Sprintf("%sw%d-%05d-%d", opts.prefix, wi, n, i)
					if opts.envelope != nil {
						envs[i] = opts.envelope(id)
					} else {
						envs[i] = envelope(id)
					}
				}
				kind := viaOutboxTx
				if opts.kind != nil {
					kind = opts.kind(n)
				}
				rb := opts.rollback != nil && opts.rollback(n)
				// The transaction runs to its end even when the load's time is up.
				began := time.Now()
				out, err := s.writeTx(context.WithoutCancel(ctx), db, w, kind, envs, rb)
				storeMax(&res.maxTx, int64(time.Since(began)))
				switch {
				case err != nil && out == wroteUnknown:
					res.unknown.Add(int64(batch))
					if !opts.unknownOK {
						res.fail(err)
					}
				case err != nil:
					res.fail(err)
				case out == wroteRolledBack:
					res.rolledBack.Add(int64(batch))
				default:
					res.committed.Add(int64(batch))
				}
				if opts.pause > 0 {
					sleepCtx(ctx, opts.pause)
				}
			}
		})
	}
	wg.Wait()
	return res
}

// assertNoTxErrors fails the test when a business transaction failed.
func (r *loadResult) assertNoTxErrors(t *testing.T) {
	t.Helper()
	if n := r.txErrors.Load(); n > 0 {
		t.Errorf("%d business transaction(s) failed; first: %v", n, r.first)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// pending counts the rows that are neither DONE nor DEAD.
func (s *scene) pending(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+s.table+" WHERE status IN (0, 2, 4)").Scan(&n)
	return n, err
}

// drain waits until no row is pending, as long as the pending count keeps falling: it
// gives up after timeout with no progress, or after 20 × timeout in all; the check
// reports what is left as stuck.
func (s *scene) drain(timeout time.Duration) {
	s.t.Helper()
	// The deadline moves on while rows keep being delivered: a backlog that the writers
	// built on a loaded machine drains at the dispatcher's pace, and only a drain that
	// makes no progress for timeout (or runs past 20 × timeout) leaves rows for the gates.
	start := time.Now()
	deadline, limit := start.Add(timeout), start.Add(20*timeout)
	least := -1
	for {
		n, err := s.pending(context.Background())
		if err == nil && n == 0 {
			s.t.Logf("drained in %s (scene set up %s before)", time.Since(start).Round(time.Millisecond), start.Sub(s.started).Round(time.Millisecond))
			return
		}
		if err == nil && (least < 0 || n < least) {
			if least >= 0 {
				deadline = time.Now().Add(timeout)
			}
			least = n
		}
		if now := time.Now(); now.After(deadline) || now.After(limit) {
			s.t.Logf("drain: %d row(s) still pending after %s (no progress for %s, or 20 times that in all; err %v)",
				n, now.Sub(start).Round(time.Millisecond), timeout, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check reads the records and the table, gates the run and publishes its result.
// extra finals stand for rows the scenario knows to have been deleted legitimately.
func (s *scene) check(faultFree bool, extra ...Final) Report {
	s.t.Helper()
	recs, err := ReadLogs(s.logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	finals, err := ReadFinals(context.Background(), s.db, s.table)
	if err != nil {
		s.t.Fatal(err)
	}
	rep := CheckStall(recs, append(finals, extra...), s.stall)
	rep.Gate(s.t, faultFree)
	if rep.Order = CheckOrder(recs, finals, s.stall); rep.Order.Events > 0 {
		rep.Order.GateOrder(s.t, 0, "")
	}
	if !s.deadOK {
		rep.GateNoDead(s.t)
	}
	if s.t.Failed() {
		s.explain(recs, finals, rep)
	}
	res := rep.Result(s.name, s.be.name)
	res.Seed = s.seed
	res.Seconds = time.Since(s.started).Seconds()
	res.Faults = int(s.faults.Load())
	Publish(s.t, res)
	return rep
}

// explain logs the full history (History) of a few events the report flags.
func (s *scene) explain(recs []Record, finals []Final, rep Report) {
	s.t.Helper()
	ids := rep.Flagged()
	for _, id := range ids[:min(len(ids), 5)] {
		s.t.Log(History(recs, finals, id, 5*time.Second))
	}
}

// finals reads the final state of every row, keyed by event ID.
func (s *scene) finals() map[string]Final {
	s.t.Helper()
	fs, err := ReadFinals(context.Background(), s.db, s.table)
	if err != nil {
		s.t.Fatal(err)
	}
	m := make(map[string]Final, len(fs))
	for _, f := range fs {
		m[f.Event] = f
	}
	return m
}

// records reads the run's records.
func (s *scene) records() []Record {
	s.t.Helper()
	recs, err := ReadLogs(s.logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	return recs
}

// chance returns a number in [0, 1) fixed by the seed, the event and a salt, so that a
// run's per-event decisions replay with its seed.
func chance(seed int64, id, salt string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s", seed, salt, id)
	// FNV barely moves its high bits for a change in the last bytes: mix them
	// (splitmix64's finalizer) before taking the top 53.
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// logCounter is a slog handler that discards records but counts them by message and
// keeps the highest level and an example of each, so a scenario can assert what the
// library reported.
type logCounter struct {
	mu       sync.Mutex
	byMsg    map[string]int
	levels   map[string]slog.Level
	examples map[string]string // message → first record's attributes
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }

func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byMsg == nil {
		c.byMsg, c.levels, c.examples = map[string]int{}, map[string]slog.Level{}, map[string]string{}
	}
	c.byMsg[r.Message]++
	if lvl, ok := c.levels[r.Message]; !ok || r.Level > lvl {
		c.levels[r.Message] = r.Level
	}
	if _, ok := c.examples[r.Message]; !ok {
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "stack" {
				fmt.Fprintf(&b, "%s=%v ", a.Key, a.Value)
			}
			return true
		})
		c.examples[r.Message] = b.String()
	}
	return nil
}

func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

// count returns how often msg was logged.
func (c *logCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byMsg[msg]
}

// errorsExcept returns the messages logged at error level other than the allowed ones,
// each with its count and an example.
func (c *logCounter) errorsExcept(allowed ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for msg, lvl := range c.levels {
		if lvl >= slog.LevelError && !slices.Contains(allowed, msg) {
			out = append(out, fmt.Sprintf("%q ×%d (%s)", msg, c.byMsg[msg], c.examples[msg]))
		}
	}
	slices.Sort(out)
	return out
}

// assertNoErrorLogs fails the test for error-level logs other than the allowed ones.
func (s *scene) assertNoErrorLogs(allowed ...string) {
	s.t.Helper()
	if errs := s.logs.errorsExcept(allowed...); len(errs) > 0 {
		s.t.Errorf("unexpected error logs: %s", strings.Join(errs, "; "))
	}
}

// errInjected marks a failure a scenario injected on purpose.
var errInjected = errors.New("chaos: injected failure")
