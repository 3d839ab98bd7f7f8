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
	mu     sync.Mutex
	dirs   []string
}

// start runs "testdb.sh start <kind>" and returns the DSN it prints.
func (s *serverSet) start(ctx context.Context, kind string) (string, error) {
	script, err := s.scriptPath()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "start", kind)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	// The script's watcher stops the server if this process dies before stopAll.
	cmd.Env = append(os.Environ(), "TESTDB_OWNER_PID="+strconv.Itoa(os.Getpid()))
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s start %s: %w\n%s", script, kind, err, strings.TrimSpace(stderr.String()))
	}
	prefix := "OUTBOX_TEST_" + strings.ToUpper(kind) + "_"
	var dsn, dir string
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
		return "", fmt.Errorf("%s start %s printed no DSN:\n%s", script, kind, stdout.String())
	}
	return dsn, nil
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
}

// openTarget connects to kind, starting a server when no DSN is given, and creates the
// run's own schema.
func openTarget(ctx context.Context, o options, kind string, servers *serverSet) (*target, error) {
	t := &target{kind: kind, pool: o.poolSize(kind)}
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
		}
		return t, t.newSQLiteFile()
	case "postgres":
		t.driver, t.dialect, t.dsn = "pgx", outbox.Postgres, o.postgresDSN
	case "mysql":
		t.driver, t.dialect, t.dsn = "mysql", outbox.MySQL, o.mysqlDSN
	}
	if t.dsn == "" {
		progress("%s: starting a throwaway server (scripts/testdb.sh)", kind)
		dsn, err := servers.start(ctx, kind)
		if err != nil {
			return nil, err
		}
		t.dsn = dsn
	}
	db, err := openPool(ctx, t.driver, t.dsn, t.pool)
	if err != nil {
		return nil, err
	}
	t.db = db
	var b [6]byte
	_, _ = rand.Read(b[:])
	t.schema = "outbox_bench_" + hex.EncodeToString(b[:])
	create := `CREATE SCHEMA "` + t.schema + `"`
	if kind == "mysql" {
		create = "CREATE DATABASE `" + t.schema + "` CHARACTER SET utf8mb4"
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	return t, nil
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
	t.dsn = outbox.SQLiteDSN(path)
	db, err := openPool(context.Background(), t.driver, t.dsn, t.pool)
	if err != nil {
		return err
	}
	t.db = db
	return nil
}

// close drops the run's schema and closes the pool.
func (t *target) close() {
	if t.db == nil {
		return
	}
	if t.schema != "" {
		drop := `DROP SCHEMA IF EXISTS "` + t.schema + `" CASCADE`
		if t.kind == "mysql" {
			drop = "DROP DATABASE IF EXISTS `" + t.schema + "`"
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := t.db.ExecContext(ctx, drop); err != nil {
			fmt.Fprintf(os.Stderr, "outbox-bench: drop %s: %v\n", t.schema, err)
		}
		cancel()
	}
	t.db.Close()
	t.db = nil
	if t.ownsDir {
		os.RemoveAll(t.sqliteDir)
	}
}

// outboxTable and orderTable are the (qualified) table names.
func (t *target) outboxTable() string { return t.qualify("outbox_event") }
func (t *target) orderTable() string  { return t.qualify("bench_order") }

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

// countDone counts DONE rows.
func (t *target) countDone(ctx context.Context) (int64, error) {
	var n int64
	err := t.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.quoteIdent(t.outboxTable())+" WHERE status = 1").Scan(&n)
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
