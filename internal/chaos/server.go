package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/outboxkit/outbox/internal/testdb"
)

// Server is a database server of one test, started by scripts/testdb.sh in its own
// temp dir, that the test may stop, kill and start again on the same data dir and port
// (the shared servers of internal/testdb must never be restarted: other packages' tests
// use them). It is stopped and removed when the test ends.
type Server struct {
	Kind string // "postgres" or "mysql"
	DSN  string
	Dir  string
	Port string

	// Failed is the last Start's InfraError (the server did not come back), nil once a
	// Start succeeded: the scenarios after a failed one report it instead of running.
	Failed *InfraError
}

// StartServer starts a server of kind ("postgres" or "mysql") with the durability
// settings of a production server (see Start). Where the binaries are missing it skips
// the test, or fails it under CI or OUTBOX_TEST_REQUIRE_DBS.
func StartServer(tb testing.TB, kind string) *Server {
	tb.Helper()
	script, err := scriptPath()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script, "start", kind)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "TESTDB_OWNER_PID="+strconv.Itoa(os.Getpid()), "TESTDB_DURABLE=1")
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("%s start %s: %v\n%s", script, kind, err, strings.TrimSpace(stderr.String()))
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 2 && os.Getenv("CI") == "" && os.Getenv(testdb.EnvRequireDBs) == "" {
			tb.Skip("*** server binaries missing; this test did NOT run: " + msg)
		}
		tb.Fatal(msg)
	}
	s := &Server{Kind: kind}
	prefix := "OUTBOX_TEST_" + strings.ToUpper(kind) + "_"
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case prefix + "DSN":
			s.DSN = v
		case prefix + "DIR":
			s.Dir = v
		}
	}
	if s.DSN == "" || s.Dir == "" {
		tb.Fatalf("%s start %s printed no DSN/DIR:\n%s", script, kind, stdout.String())
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", script, "stop", s.Dir).CombinedOutput()
		if err != nil {
			tb.Errorf("stop %s: %v\n%s", s.Dir, err, out)
		}
	})
	_, port, err := net.SplitHostPort(HostPort(s.DSN))
	if err != nil {
		tb.Fatalf("DSN %s: %v", s.DSN, err)
	}
	s.Port = port
	return s
}

// HostPort returns the "host:port" of a PostgreSQL URL or MySQL driver DSN.
func HostPort(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") {
		if u, err := url.Parse(dsn); err == nil {
			return u.Host
		}
		return ""
	}
	if cfg, err := mysqldriver.ParseDSN(dsn); err == nil {
		return cfg.Addr
	}
	return ""
}

// WithHostPort returns dsn pointing at addr instead ("host:port").
func WithHostPort(dsn, addr string) string {
	old := HostPort(dsn)
	if strings.HasPrefix(dsn, "postgres://") {
		return strings.Replace(dsn, "@"+old+"/", "@"+addr+"/", 1)
	}
	return strings.Replace(dsn, "tcp("+old+")", "tcp("+addr+")", 1)
}

// Stop stops the server: for PostgreSQL with pg_ctl stop -m mode ("immediate", "fast"
// or "smart"); for MariaDB, mode "kill" sends SIGKILL and any other mode SIGTERM. It
// returns once the server is gone.
func (s *Server) Stop(mode string) error {
	switch s.Kind {
	case "postgres":
		return s.asOwner("postgres", pgBin("pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-m", mode, "-w", "-t", "60", "-s", "stop")
	case "mysql":
		b, err := os.ReadFile(filepath.Join(s.Dir, "mysqld.pid"))
		if err != nil {
			return err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return err
		}
		sig := syscall.SIGTERM
		if mode == "kill" {
			sig = syscall.SIGKILL
		}
		if err := syscall.Kill(pid, sig); err != nil {
			return err
		}
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if syscall.Kill(pid, 0) != nil {
				_ = os.Remove(filepath.Join(s.Dir, "mysqld.pid"))
				return nil
			}
		}
		return fmt.Errorf("mariadbd %d still running a minute after signal %v", pid, sig)
	}
	return fmt.Errorf("unknown server kind %q", s.Kind)
}

// Start starts the stopped server on its data dir and port, and returns once it accepts
// connections. It runs with the settings of scripts/testdb.sh with TESTDB_DURABLE=1,
// which StartServer starts the server with: the durability settings of a production
// server, so that what the restart scenarios do to the server (an immediate stop, a
// SIGKILL) is a crash the server is built to recover from. PostgreSQL: fsync=on,
// synchronous_commit=on, full_page_writes=on (a page torn by a crash is restored from
// its full image in the WAL); MariaDB: innodb_flush_log_at_trx_commit=1, the
// doublewrite buffer on (a torn page is restored from its copy there) and the default
// innodb_flush_method. Without these, a SIGKILL of MariaDB in the middle of a page
// write once left a page the server could not recover ("Unable to apply log to
// corrupted page"). A server that does not come back (it fails its crash recovery, or
// does not answer within a minute) is an *InfraError carrying its log's lines since
// the start.
func (s *Server) Start() error {
	err := s.start()
	s.Failed = nil
	if ie := (*InfraError)(nil); errors.As(err, &ie) {
		s.Failed = ie
	}
	return err
}

func (s *Server) start() error {
	logPath := filepath.Join(s.Dir, "server.log")
	var logFrom int64
	if fi, err := os.Stat(logPath); err == nil {
		logFrom = fi.Size()
	}
	switch s.Kind {
	case "postgres":
		// The options of scripts/testdb.sh, durable.
		opts := "-c listen_addresses=127.0.0.1 -c port=" + s.Port + " -c unix_socket_directories=" + s.Dir +
			" -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=200" +
			" -c shared_buffers=64MB -c log_min_messages=warning -c log_statement=none"
		if err := s.asOwner("postgres", pgBin("pg_ctl"), "-D", filepath.Join(s.Dir, "data"), "-l",
			logPath, "-w", "-t", "60", "-s", "start", "-o", opts); err != nil {
			// pg_ctl -w fails when the server exits during its start (it failed its
			// crash recovery), or is not ready within 60 s.
			what := "server failed crash recovery"
			if strings.Contains(err.Error(), "did not start in time") {
				what = "server did not answer within 1m0s"
			}
			return &InfraError{What: what, Log: logExcerpt(logPath, logFrom), Err: err}
		}
	case "mysql":
		server, err := mysqlBin("mariadbd", "mysqld")
		if err != nil {
			return err
		}
		// The command line of scripts/testdb.sh, detached from this process.
		args := []string{server, "--no-defaults",
			"--datadir=" + filepath.Join(s.Dir, "data"), "--socket=" + filepath.Join(s.Dir, "mysqld.sock"),
			"--pid-file=" + filepath.Join(s.Dir, "mysqld.pid"), "--tmpdir=" + s.Dir,
			"--log-error=" + filepath.Join(s.Dir, "server.log"),
			"--bind-address=127.0.0.1", "--port=" + s.Port, "--skip-name-resolve",
			"--skip-log-bin", "--innodb-flush-log-at-trx-commit=1", "--innodb-doublewrite=1",
			"--innodb-buffer-pool-size=128M", "--innodb-fast-shutdown=2",
			"--max-connections=1000", "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"}
		run := `as_user=$1; shift; if [ "$(id -u)" -eq 0 ]; then exec runuser -u "$as_user" -- "$@"; else exec "$@"; fi`
		shell := `setsid bash -c "$0" outbox-chaos-mariadbd mysql "$@" </dev/null >/dev/null 2>&1 &`
		cmd := exec.Command("bash", append([]string{"-c", shell, run}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("start mariadbd: %v\n%s", err, out)
		}
	default:
		return fmt.Errorf("unknown server kind %q", s.Kind)
	}
	return s.waitReady(time.Minute, logPath, logFrom)
}

// InfraError is a failure of a scenario's infrastructure rather than of the library: a
// database server that did not come back after the scenario stopped or killed it. The
// scenario's gates cannot judge the library then; the scenario reports the failure
// apart (Result.Infra, "infra: …" in the test's failure).
type InfraError struct {
	What string // "server failed crash recovery", "server did not answer within 1m0s"
	Log  string // the server log's error lines written since the start, or its last ones
	Err  error  // what the start returned, if anything (shown when Log is empty)
}

func (e *InfraError) Error() string {
	why := e.Log
	if why == "" && e.Err != nil {
		why = strings.TrimSpace(firstLine(e.Err.Error()))
	}
	return "infra: " + e.What + ": " + why
}

// Result is the text Result.Infra records: the error without its "infra: " prefix.
func (e *InfraError) Result() string { return strings.TrimPrefix(e.Error(), "infra: ") }

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// waitReady pings the server until it answers. MariaDB logs "[ERROR] Aborting" and
// exits when it cannot start (scripts/testdb.sh watches for the same line); the server
// log is read from logFrom, where this start began.
func (s *Server) waitReady(limit time.Duration, logPath string, logFrom int64) error {
	driver := Dialects[s.Kind].Driver
	db, err := sql.Open(driver, s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if s.Kind == "mysql" && strings.Contains(readFrom(logPath, logFrom), "[ERROR] Aborting") {
			return &InfraError{What: "server failed crash recovery", Log: logExcerpt(logPath, logFrom)}
		}
		if time.Now().After(deadline) {
			return &InfraError{What: fmt.Sprintf("server did not answer within %s", limit), Log: logExcerpt(logPath, logFrom), Err: err}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readFrom returns the file's contents from offset on ("" when it cannot be read).
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	return string(b[offset:])
}

// logExcerpt is the part of a server log a failed start wrote, on one line: its error
// lines (ERROR, PANIC, FATAL, corrupt…) or, when it has none, its last lines, at most
// 1,500 bytes; "" when it wrote nothing.
func logExcerpt(path string, offset int64) string {
	var lines, errs []string
	for line := range strings.Lines(readFrom(path, offset)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		lines = append(lines, line)
		if l := strings.ToLower(line); strings.Contains(l, "error") || strings.Contains(l, "panic") ||
			strings.Contains(l, "fatal") || strings.Contains(l, "corrupt") {
			errs = append(errs, line)
		}
	}
	pick := errs
	if len(pick) == 0 {
		pick = lines[max(len(lines)-10, 0):]
	}
	out := strings.Join(pick, " / ")
	if len(out) > 1500 {
		out = out[:1500] + "…"
	}
	return out
}

// asOwner runs a server program as the OS user owning the server files when running as
// root (PostgreSQL refuses to run as root), else as ourselves.
func (s *Server) asOwner(user string, args ...string) error {
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", user, "--"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func pgBin(name string) string {
	return filepath.Join(cmp.Or(os.Getenv("PG_BIN"), "/usr/lib/postgresql/15/bin"), name)
}

// mysqlBin finds the first of names as scripts/testdb.sh does.
func mysqlBin(names ...string) (string, error) {
	for _, name := range names {
		if dir := os.Getenv("MYSQL_BIN"); dir != "" {
			if p := filepath.Join(dir, name); isExec(p) {
				return p, nil
			}
			continue
		}
		dirs := append(filepath.SplitList(os.Getenv("PATH")), "/usr/sbin", "/usr/bin")
		for _, d := range dirs {
			if p := filepath.Join(d, name); isExec(p) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("none of %v found", names)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
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
