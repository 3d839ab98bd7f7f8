// Package testdb gives tests real databases: throwaway PostgreSQL and MariaDB servers
// started once per test process by scripts/testdb.sh (or the ones named by
// OUTBOX_TEST_POSTGRES_DSN and OUTBOX_TEST_MYSQL_DSN), an isolated schema (PostgreSQL)
// or database (MariaDB) per test, and SQLite files in temp dirs.
//
// Import path: github.com/outboxkit/outbox/internal/testdb (package testdb). Only tests
// import it.
//
// A package that uses PostgresDSN or MySQLDSN stops the servers it started from its
// TestMain:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		testdb.StopAll()
//		os.Exit(code)
//	}
//
// # Skipping
//
// When no server can be had (the server binaries are missing), tests skip with a loud
// message. When the environment variable CI or OUTBOX_TEST_REQUIRE_DBS is set, they
// fail instead: CI must never skip.
//
// A skip message shows only with go test -v, so [StopAll] (which TestMain calls, also
// through [VerifyTestMain]) ends the run with one summary line per package naming the
// package and the databases whose tests were skipped and why, for example
//
//	outbox tests (internal/roottest/core): skipped PostgreSQL in 12 tests (no server binaries and OUTBOX_TEST_POSTGRES_DSN unset)
//
// go test discards a passing package's output unless -v is set or it runs in the
// package's directory without arguments, so the line is written to stderr and, when
// go test would discard it, to the go command's own standard error as well (see
// printSummary); a package with skipped tests is also never cached as passed.
package testdb

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
	"testing"
	"time"

	// Drivers for the databases the helpers open.
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"

	"go.uber.org/goleak"
)

// Environment variables read by the package.
const (
	// EnvPostgresDSN names an existing PostgreSQL database to use instead of starting one.
	EnvPostgresDSN = "OUTBOX_TEST_POSTGRES_DSN"
	// EnvMySQLDSN names an existing MySQL or MariaDB database to use instead of starting
	// one. It must carry outbox.MySQLDSNParams, and its user must be allowed to create
	// and drop databases.
	EnvMySQLDSN = "OUTBOX_TEST_MYSQL_DSN"
	// EnvRequireDBs makes a missing database fail tests instead of skipping them.
	EnvRequireDBs = "OUTBOX_TEST_REQUIRE_DBS"
)

// server is one throwaway server of this process, started on first use and again after
// StopAll. mu is held while it starts, so concurrent tests wait for one server.
type server struct {
	kind   string // scripts/testdb.sh's kind: "postgres" or "mysql"
	what   string // for messages
	envDSN string

	mu      sync.Mutex
	started bool
	dsn     string
	dir     string // set when this process started the server
	err     error
	skipped int // tests skipped because the server was unavailable, for StopAll's summary
}

// The servers of this process.
var (
	postgresServer = &server{kind: "postgres", what: "PostgreSQL", envDSN: EnvPostgresDSN}
	mysqlServer    = &server{kind: "mysql", what: "MariaDB", envDSN: EnvMySQLDSN}
)

// dsnFor returns the DSN from the server's environment variable, or starts the server.
func (s *server) dsnFor(tb testing.TB) string {
	tb.Helper()
	if dsn := os.Getenv(s.envDSN); dsn != "" {
		return dsn
	}
	s.mu.Lock()
	if !s.started {
		s.dsn, s.dir, s.err = runStart(s.kind)
		s.started = true
	}
	dsn, err := s.dsn, s.err
	skip := err != nil && !requireDBs()
	if skip {
		s.skipped++
	}
	s.mu.Unlock()
	if skip {
		noteSkip()
	}
	if err != nil {
		unavailable(tb, s.what, s.envDSN, err)
	}
	return dsn
}

// requireDBs reports whether a missing database fails tests instead of skipping them.
func requireDBs() bool { return os.Getenv("CI") != "" || os.Getenv(EnvRequireDBs) != "" }

// errNoBinaries is the error of a start that found no server binaries (scripts/testdb.sh
// exits with status 2).
var errNoBinaries = errors.New("no server binaries")

// skipReason is the summary's short account of why the server could not be had.
func (s *server) skipReason(err error) string {
	if errors.Is(err, errNoBinaries) {
		return "no server binaries and " + s.envDSN + " unset"
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return "could not start: " + first
}

// PostgresDSN returns the DSN of a PostgreSQL database for tests: OUTBOX_TEST_POSTGRES_DSN
// when set, else a server started by scripts/testdb.sh on the first call and shared by
// the rest of the process (stop it with [StopAll]). It skips the test, or fails it under
// CI or OUTBOX_TEST_REQUIRE_DBS, when no server can be had.
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	return postgresServer.dsnFor(tb)
}

// MySQLDSN returns the DSN of a MySQL/MariaDB database for tests, for the
// github.com/go-sql-driver/mysql driver: OUTBOX_TEST_MYSQL_DSN when set, else a MariaDB
// server started by scripts/testdb.sh on the first call and shared by the rest of the
// process (stop it with [StopAll]). It skips the test, or fails it under CI or
// OUTBOX_TEST_REQUIRE_DBS, when no server can be had.
func MySQLDSN(tb testing.TB) string {
	tb.Helper()
	return mysqlServer.dsnFor(tb)
}

func unavailable(tb testing.TB, what, envDSN string, err error) {
	tb.Helper()
	msg := fmt.Sprintf("\n*** %s IS UNAVAILABLE: %v\n*** Set %s, or install the server binaries; these tests did NOT run.",
		strings.ToUpper(what), err, envDSN)
	if requireDBs() {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// runStart runs "scripts/testdb.sh start <kind>" and parses its two output lines.
func runStart(kind string) (dsn, dir string, err error) {
	script, err := scriptPath()
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "start", kind)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	// The script's watcher stops the server if this process dies without StopAll.
	cmd.Env = append(os.Environ(), "TESTDB_OWNER_PID="+strconv.Itoa(os.Getpid()))
	if err := cmd.Run(); err != nil {
		if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) && exitErr.ExitCode() == 2 {
			err = fmt.Errorf("%w (%v)", errNoBinaries, err)
		}
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
	if dsn == "" || dir == "" {
		return "", dir, fmt.Errorf("%s start %s printed no DSN/DIR:\n%s", script, kind, stdout.String())
	}
	return dsn, dir, nil
}

// StopAll stops the servers this process started and removes their directories, and
// prints the summary line of the databases whose tests were skipped since the last
// StopAll (see the package documentation), if any. Call it from TestMain after m.Run.
// It is safe to call when nothing was started; a later PostgresDSN or MySQLDSN starts a
// new server.
func StopAll() {
	if line := skipSummary(postgresServer, mysqlServer); line != "" {
		printSummary(summaryLine(packageDir(), line))
	}
	var wg sync.WaitGroup
	for _, s := range []*server{postgresServer, mysqlServer} {
		wg.Go(s.stop)
	}
	wg.Wait()
}

// stop stops the server if this process started it.
func (s *server) stop() {
	s.mu.Lock()
	dir := s.dir
	s.started, s.dsn, s.dir, s.err, s.skipped = false, "", "", nil, 0
	s.mu.Unlock()
	if dir == "" {
		return
	}
	script, err := scriptPath()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testdb: stop %s: %v\n", dir, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "stop", dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: stop %s: %v\n", dir, err)
	}
}

// scriptPath finds scripts/testdb.sh in the first directory above the working directory
// that holds it (the repository root: each module has a go.mod of its own).
func scriptPath() (string, error) {
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
			return "", errors.New("no scripts/testdb.sh above the working directory")
		}
		dir = parent
	}
}

// NewPostgresDB opens the test PostgreSQL database with the pgx stdlib driver ("pgx")
// and closes it when the test ends.
func NewPostgresDB(tb testing.TB) *sql.DB {
	tb.Helper()
	return open(tb, "pgx", PostgresDSN(tb))
}

// NewMySQLDB opens the test MySQL/MariaDB database with the github.com/go-sql-driver/mysql
// driver ("mysql") and closes it when the test ends.
func NewMySQLDB(tb testing.TB) *sql.DB {
	tb.Helper()
	return open(tb, "mysql", MySQLDSN(tb))
}

// NewSQLiteDB opens a new SQLite database file in the test's temp dir with
// [outbox.SQLiteDSN] and closes it when the test ends.
func NewSQLiteDB(tb testing.TB) *sql.DB {
	tb.Helper()
	return open(tb, "sqlite", outbox.SQLiteDSN(filepath.Join(tb.TempDir(), "outbox.db")))
}

func open(tb testing.TB, driver, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		tb.Fatalf("open %s: %v", driver, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close %s: %v", driver, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		tb.Fatalf("ping %s: %v", driver, err)
	}
	return db
}

// IsolatedTable returns a table name no other test uses. On PostgreSQL (dialectName
// "postgres") it creates a fresh schema, and on MySQL/MariaDB ("mysql") a fresh
// database, dropped with everything in it when the test ends, and returns
// "<schema>.outbox_event". Other dialects get outbox.DefaultTable: their databases are
// per test already. The table itself is not created; use [outbox.MigrateTable].
func IsolatedTable(tb testing.TB, db *sql.DB, dialectName string) string {
	tb.Helper()
	var create, drop string
	switch dialectName {
	case outbox.Postgres.Name():
		create, drop = `CREATE SCHEMA "%s"`, `DROP SCHEMA "%s" CASCADE`
	case outbox.MySQL.Name():
		create, drop = "CREATE DATABASE `%s` CHARACTER SET utf8mb4", "DROP DATABASE `%s`"
	default:
		return outbox.DefaultTable
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "outbox_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, fmt.Sprintf(create, schema)); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, fmt.Sprintf(drop, schema)); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema + "." + outbox.DefaultTable
}

// VerifyTestMain is the TestMain of a package whose tests use these databases: it runs
// the tests, fails the run when goroutines leak (goleak, with opts), runs what AtExit
// registered, stops the throwaway servers the tests started and exits with the run's
// code.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	// goleak's Cleanup replaces its os.Exit, so it exits itself with the code goleak
	// computed (non-zero on a leak).
	opts = append(opts, goleak.Cleanup(func(exitCode int) {
		atExitMu.Lock()
		fns := atExit
		atExitMu.Unlock()
		for _, f := range fns {
			f()
		}
		StopAll()
		os.Exit(exitCode)
	}))
	goleak.VerifyTestMain(m, opts...)
}

var (
	atExitMu sync.Mutex
	atExit   []func()
)

// AtExit registers f to run when VerifyTestMain's tests have run, before it exits: a
// TestMain's deferred calls never run, since VerifyTestMain exits the process.
func AtExit(f func()) {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	atExit = append(atExit, f)
}
