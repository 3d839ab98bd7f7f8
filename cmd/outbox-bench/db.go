package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	// The drivers of the three databases.
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
)

// serverSet starts throwaway servers with scripts/testdb.sh and stops them.
type serverSet struct {
	script string
	// postgresArgs are more options of the PostgreSQL servers it starts
	// (TESTDB_POSTGRES_ARGS, after any in the environment).
	postgresArgs string
	mu           sync.Mutex
	dirs         []string
}

// start runs "testdb.sh start <kind>", with durable commits if durable
// (TESTDB_DURABLE=1), and returns the DSN and the server's directory it prints.
func (s *serverSet) start(ctx context.Context, kind string, durable bool) (dsn, dir string, err error) {
	script, err := s.scriptPath()
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "start", kind)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	// The script's watcher stops the server if this process dies before stopAll.
	// TESTDB_DURABLE is set either way, so that one in the environment changes nothing.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TESTDB_DURABLE=") })
	cmd.Env = append(env, "TESTDB_OWNER_PID="+strconv.Itoa(os.Getpid()), "TESTDB_DURABLE="+map[bool]string{false: "0", true: "1"}[durable])
	if kind == "postgres" && s.postgresArgs != "" {
		cmd.Env = append(cmd.Env, "TESTDB_POSTGRES_ARGS="+strings.TrimSpace(os.Getenv("TESTDB_POSTGRES_ARGS")+" "+s.postgresArgs))
	}
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("%s start %s: %w\n%s", script, kind, err, strings.TrimSpace(stderr.String()))
	}
	prefix := "OUTBOX_TEST_" + strings.ToUpper(kind) + "_"
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case prefix + "DSN":
			dsn = v
		case prefix + "DIR":
			dir = v
		}
	}
	if dir != "" {
		s.mu.Lock()
		s.dirs = append(s.dirs, dir)
		s.mu.Unlock()
	}
	if dsn == "" {
		return "", "", fmt.Errorf("%s start %s printed no DSN:\n%s", script, kind, stdout.String())
	}
	return dsn, dir, nil
}

// stopAll stops every server start started.
func (s *serverSet) stopAll() {
	s.mu.Lock()
	dirs := s.dirs
	s.dirs = nil
	s.mu.Unlock()
	if len(dirs) == 0 {
		return
	}
	script, err := s.scriptPath()
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox-bench: stop servers:", err)
		return
	}
	for _, dir := range dirs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", script, "stop", dir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "outbox-bench: stop %s: %v\n", dir, err)
		}
		cancel()
	}
}

// scriptPath is -testdb-script, or scripts/testdb.sh in the first directory above the
// working directory that holds it (the repository root).
func (s *serverSet) scriptPath() (string, error) {
	if s.script != "" {
		return s.script, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "testdb.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/testdb.sh not found above the working directory; pass -testdb-script or the DSNs")
		}
		dir = parent
	}
}

// target is one database under test: a pool, its dialect and where the tables go.
type target struct {
	kind    string // sqlite, postgres, mysql
	driver  string
	dsn     string // for the child process; for SQLite the DSN of the current file
	dialect outbox.Dialect
	db      *sql.DB
	pool    int

	schema    string // PostgreSQL schema or MariaDB database of this run; "" on SQLite
	sqliteDir string
	ownsDir   bool
	fileSeq   int

	// durability is "fast" or "durable": what the server does (checked, see
	// checkDurability). settings are the server's settings behind it, for the report;
	// dataDir is where its files are ("" for a server given by DSN).
	durability string
	settings   string
	dataDir    string
}

// label names the target in progress lines: "postgres/durable".
func (t *target) label() string { return t.kind + "/" + t.durability }

// openTarget connects to kind with the given durability ("fast" or "durable"), starting
// a server when no DSN is given, checks that the server's settings match the durability,
// and creates the run's own schema.
func openTarget(ctx context.Context, o options, kind, durability string, servers *serverSet) (_ *target, err error) {
	t := &target{kind: kind, pool: o.poolSize(kind), durability: durability}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	switch kind {
	case "sqlite":
		t.driver, t.dialect = "sqlite", outbox.SQLite
		t.sqliteDir = o.sqliteDir
		if t.sqliteDir == "" {
			dir, err := os.MkdirTemp("", "outbox-bench-sqlite-")
			if err != nil {
				return nil, err
			}
			t.sqliteDir, t.ownsDir = dir, true
		} else if len(o.durabilities) > 1 {
			// Each durability has its own files.
			t.sqliteDir = filepath.Join(t.sqliteDir, durability)
			if err := os.MkdirAll(t.sqliteDir, 0o755); err != nil {
				return nil, err
			}
		}
		t.dataDir = t.sqliteDir
		if err := t.newSQLiteFile(); err != nil {
			return nil, err
		}
		return t, t.checkDurability(ctx, true)
	case "postgres":
		t.driver, t.dialect, t.dsn = "pgx", outbox.Postgres, o.postgresDSN
	case "mysql":
		t.driver, t.dialect, t.dsn = "mysql", outbox.MySQL, o.mysqlDSN
	}
	// The durability is what was asked for, unless a server is given by DSN and
	// -durability is not: then it is what the server does.
	required := true
	if t.dsn == "" {
		progress("%s: starting a throwaway server with %s commits (scripts/testdb.sh)", kind, durability)
		dsn, dir, err := servers.start(ctx, kind, durability == "durable")
		if err != nil {
			return nil, err
		}
		t.dsn, t.dataDir = dsn, dir
	} else {
		required = o.durabilityGiven
	}
	db, err := openPool(ctx, t.driver, t.dsn, t.pool)
	if err != nil {
		return nil, err
	}
	t.db = db
	if err := t.checkDurability(ctx, required); err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	t.schema = "outbox_bench_" + hex.EncodeToString(b[:])
	create := `CREATE SCHEMA "` + t.schema + `"`
	if kind == "mysql" {
		create = "CREATE DATABASE `" + t.schema + "` CHARACTER SET utf8mb4"
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		t.schema = ""
		return nil, fmt.Errorf("create schema: %w", err)
	}
	return t, nil
}

// checkDurability reads the server's durability settings into t.settings. If required,
// they must match t.durability ("durable": every commit is on disk when it returns;
// "fast": not); else t.durability becomes what they are.
func (t *target) checkDurability(ctx context.Context, required bool) error {
	settings, durable, err := t.readDurability(ctx)
	if err != nil {
		return fmt.Errorf("read the server's durability settings: %w", err)
	}
	t.settings = settings
	got := "fast"
	if durable {
		got = "durable"
	}
	if !required {
		if got != t.durability {
			progress("%s: the server at the given DSN has %s commits (%s); its results are labelled %s", t.kind, got, settings, got)
		}
		t.durability = got
		return nil
	}
	if got != t.durability {
		return fmt.Errorf("-durability %s, but the server's commits are %s: %s", t.durability, got, settings)
	}
	return nil
}

// readDurability returns the settings that decide whether a commit is on disk when it
// returns, and whether it is.
func (t *target) readDurability(ctx context.Context) (string, bool, error) {
	switch t.kind {
	case "sqlite":
		var journal string
		var sync int
		if err := t.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
			return "", false, err
		}
		if err := t.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			return "", false, err
		}
		name := map[int]string{0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[sync]
		// In WAL mode, NORMAL syncs at checkpoints only: a commit can be lost at a power
		// failure. FULL syncs the WAL at every commit.
		return fmt.Sprintf("journal_mode=%s, synchronous=%s", journal, name), sync >= 2, nil
	case "postgres":
		var fsync, syncCommit, fpw string
		err := t.db.QueryRowContext(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')").
			Scan(&fsync, &syncCommit, &fpw)
		if err != nil {
			return "", false, err
		}
		return fmt.Sprintf("fsync=%s, synchronous_commit=%s, full_page_writes=%s", fsync, syncCommit, fpw),
			fsync == "on" && syncCommit != "off" && fpw == "on", nil
	case "mysql":
		vars := []string{"innodb_flush_log_at_trx_commit", "innodb_doublewrite", "innodb_flush_method", "log_bin"}
		vals := make(map[string]string)
		var parts []string
		for _, v := range vars {
			var val sql.NullString
			if err := t.db.QueryRowContext(ctx, "SELECT @@"+v).Scan(&val); err != nil {
				val.String = "unknown" // not every version has every variable
			}
			vals[v] = strings.ToUpper(val.String)
			parts = append(parts, v+"="+val.String)
		}
		durable := vals["innodb_flush_log_at_trx_commit"] == "1" &&
			vals["innodb_doublewrite"] != "0" && vals["innodb_doublewrite"] != "OFF" &&
			vals["innodb_flush_method"] != "NOSYNC"
		return strings.Join(parts, ", "), durable, nil
	}
	return "", false, fmt.Errorf("unknown database %q", t.kind)
}

func openPool(ctx context.Context, driver, dsn string, pool int) (*sql.DB, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	if pool > 0 {
		db.SetMaxOpenConns(pool)
		db.SetMaxIdleConns(pool)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("ping %s: %w", driver, err)
	}
	return db, nil
}

// newSQLiteFile switches an SQLite target to a fresh database file.
func (t *target) newSQLiteFile() error {
	if t.db != nil {
		t.db.Close()
	}
	t.fileSeq++
	path := filepath.Join(t.sqliteDir, fmt.Sprintf("bench-%d.db", t.fileSeq))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + suffix)
	}
	t.dsn = sqliteDSN(path, t.durability == "durable")
	db, err := openPool(context.Background(), t.driver, t.dsn, t.pool)
	if err != nil {
		return err
	}
	t.db = db
	return nil
}

// sqliteDSN is outbox.SQLiteDSN (WAL, synchronous=NORMAL), with synchronous=FULL if
// durable: in WAL mode a commit then returns once the WAL is synced.
func sqliteDSN(path string, durable bool) string {
	dsn := outbox.SQLiteDSN(path)
	if !durable {
		return dsn
	}
	const normal, full = "_pragma=synchronous(NORMAL)", "_pragma=synchronous(FULL)"
	if strings.Contains(dsn, normal) {
		return strings.Replace(dsn, normal, full, 1)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + full
}

// close drops the run's schema and closes the pool.
func (t *target) close() {
	if t.db == nil {
		if t.ownsDir {
			os.RemoveAll(t.sqliteDir)
		}
		return
	}
	if t.schema != "" {
		drops := []string{`DROP SCHEMA IF EXISTS "` + t.schema + `" CASCADE`,
			`DROP SCHEMA IF EXISTS "` + t.riverSchema() + `" CASCADE`} // the river workload's
		if t.kind == "mysql" {
			drops = []string{"DROP DATABASE IF EXISTS `" + t.schema + "`"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for _, drop := range drops {
			if _, err := t.db.ExecContext(ctx, drop); err != nil {
				fmt.Fprintf(os.Stderr, "outbox-bench: %s: %v\n", drop, err)
			}
		}
		cancel()
	}
	t.db.Close()
	t.db = nil
	if t.ownsDir {
		os.RemoveAll(t.sqliteDir)
	}
}

// outboxTable is the (qualified) outbox table's name.
func (t *target) outboxTable() string { return t.qualify("outbox_event") }

func (t *target) qualify(name string) string {
	if t.schema == "" {
		return name
	}
	return t.schema + "." + name
}

// quotedOrderTable is the business table as SQL.
func (t *target) quotedOrderTable() string {
	q := `"`
	if t.kind == "mysql" {
		q = "`"
	}
	if t.schema == "" {
		return q + "bench_order" + q
	}
	return q + t.schema + q + "." + q + "bench_order" + q
}

// reset gives the next workload empty tables: a fresh file on SQLite, dropped and
// recreated tables elsewhere.
func (t *target) reset(ctx context.Context) error {
	if t.kind == "sqlite" {
		if err := t.newSQLiteFile(); err != nil {
			return err
		}
	} else {
		for _, table := range []string{t.quoteIdent(t.outboxTable()), t.quotedOrderTable()} {
			if _, err := t.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
				return fmt.Errorf("drop %s: %w", table, err)
			}
		}
	}
	if err := outbox.MigrateTable(ctx, t.db, t.dialect, t.outboxTable()); err != nil {
		return err
	}
	ddl := "CREATE TABLE " + t.quotedOrderTable() + " (id VARCHAR(64) NOT NULL PRIMARY KEY, customer VARCHAR(64) NOT NULL, " +
		"amount BIGINT NOT NULL, created_at " + map[string]string{"sqlite": "TEXT", "postgres": "TIMESTAMPTZ", "mysql": "DATETIME(6)"}[t.kind] + " NOT NULL)"
	if _, err := t.db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("create business table: %w", err)
	}
	return t.writeHistory(ctx)
}

// historyRows is how many delivered events a PostgreSQL outbox table holds, analyzed,
// when a workload starts: the state of a table in service, whose DONE rows stay until
// Purge. On a table created seconds before, PostgreSQL plans the library's prepared
// statements on the statistics of an empty table: from their sixth execution a
// connection keeps a generic plan, here a sequential scan, until autovacuum analyzes
// the table (at most a minute and a threshold later in service, never within a
// workload), and a workload would measure that first minute. MariaDB re-plans every
// execution and SQLite plans without statistics, so they start empty.
const historyRows = 20000

// writeHistory fills a PostgreSQL table with historyRows DONE events and analyzes it.
func (t *target) writeHistory(ctx context.Context) error {
	if t.kind != "postgres" {
		return nil
	}
	table := t.quoteIdent(t.outboxTable())
	if _, err := t.db.ExecContext(ctx, "INSERT INTO "+table+
		" (event_id, event_type, aggregate_type, aggregate_id, payload, status, attempts, available_at, created_at, done_at)"+
		" SELECT 'history-' || g, 'bench.history', 'bench', g::text, '{}', 1, 1, now(), now(), now()"+
		" FROM generate_series(1, "+strconv.Itoa(historyRows)+") g"); err != nil {
		return fmt.Errorf("write history rows: %w", err)
	}
	if err := t.analyze(ctx); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

func (t *target) quoteIdent(qualified string) string {
	q := `"`
	if t.kind == "mysql" {
		q = "`"
	}
	parts := strings.Split(qualified, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// insertOrderSQL is the business INSERT.
func (t *target) insertOrderSQL() string {
	if t.kind == "postgres" {
		return "INSERT INTO " + t.quotedOrderTable() + " (id, customer, amount, created_at) VALUES ($1, $2, $3, $4)"
	}
	return "INSERT INTO " + t.quotedOrderTable() + " (id, customer, amount, created_at) VALUES (?, ?, ?, ?)"
}

// orderTime is the business row's created_at argument.
func (t *target) orderTime(now time.Time) any {
	if t.kind == "sqlite" {
		return now.UTC().Format("2006-01-02T15:04:05.000000Z") // the SQLite dialect's time layout
	}
	return now.UTC()
}

// countDone counts DONE rows, not counting the history rows (writeHistory).
func (t *target) countDone(ctx context.Context) (int64, error) {
	var n int64
	err := t.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.quoteIdent(t.outboxTable())+" WHERE status = 1").Scan(&n)
	if t.kind == "postgres" {
		n -= historyRows
	}
	return n, err
}

// version returns the server's version string.
func (t *target) version(ctx context.Context) string {
	q := map[string]string{"sqlite": "SELECT sqlite_version()", "postgres": "SELECT version()", "mysql": "SELECT VERSION()"}[t.kind]
	var v string
	if err := t.db.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return "unknown: " + err.Error()
	}
	return v
}

// analyze refreshes the planner's statistics of the outbox table, as autovacuum or
// a DBA would on a long-lived table.
func (t *target) analyze(ctx context.Context) error {
	q := "ANALYZE " + t.quoteIdent(t.outboxTable())
	if t.kind == "mysql" {
		q = "ANALYZE TABLE " + t.quoteIdent(t.outboxTable())
	}
	rows, err := t.db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	return rows.Close()
}
