package pgnotify_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxkit/outbox/adapters/pgnotify"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/testdb"
)

// waitTimeout bounds every wait of these tests. It only turns a hang into a failure;
// it is not a claim about how fast anything is.
const waitTimeout = 30 * time.Second

// testBundle is a throwaway PostgreSQL database with a migrated outbox table of its own;
// channel is unique to the test (the table's schema-qualified name).
type testBundle struct {
	dsn     string
	db      *sql.DB
	table   string
	channel string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	dsn := testdb.PostgresDSN(t)
	db := testdb.NewPostgresDB(t)
	table := testdb.IsolatedTable(t, db, outbox.Postgres.Name())
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return &testBundle{dsn: dsn, db: db, table: table, channel: table}
}

// newNotifier returns a Notifier for cfg, closed when the test ends.
func newNotifier(t *testing.T, cfg pgnotify.Config) *pgnotify.Notifier {
	t.Helper()
	n, err := pgnotify.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

// withAppName returns dsn with application_name set to name (URL or key=value form).
func withAppName(t *testing.T, dsn, name string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " application_name=" + name
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// signal is a counter that tests can wait on.
type signal struct {
	n       atomic.Int64
	changed chan struct{} // has a value after each increment (coalesced)
}

func newSignal() *signal { return &signal{changed: make(chan struct{}, 1)} }

func (s *signal) add() {
	s.n.Add(1)
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// waitAtLeast waits until the count reaches want, failing the test after waitTimeout.
func (s *signal) waitAtLeast(t *testing.T, what string, want int64) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for s.n.Load() < want {
		select {
		case <-s.changed:
		case <-timer.C:
			t.Fatalf("timed out waiting for %s: %d of %d", what, s.n.Load(), want)
		}
	}
}

// listening is one Listen call running in a goroutine of the test.
type listening struct {
	wakes  *signal
	cancel context.CancelFunc
	done   chan struct{} // closed when Listen returned; err is then set
	err    error
}

// listen runs n.Listen until the test ends (or stop is called) and counts its wakes.
func listen(t *testing.T, n *pgnotify.Notifier) *listening {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listening{wakes: newSignal(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.err = n.Listen(ctx, l.wakes.add)
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// wait waits for Listen to return and returns its error.
func (l *listening) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-l.done:
		return l.err
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for Listen to return")
		return nil
	}
}

// terminate terminates the backends whose application_name is appName and whose last
// statement contains the text contains, waiting until they have exited, and returns
// how many there were.
func terminate(t *testing.T, db *sql.DB, appName, contains string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity
		WHERE application_name = $1 AND strpos(query, $2) > 0 AND pid <> pg_backend_pid()`, appName, contains)
	if err != nil {
		t.Fatalf("terminate %s: %v", appName, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var ok bool
		if err := rows.Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("backend of %s did not exit", appName)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// backendPIDs returns the PIDs of the backends whose application_name is appName.
func backendPIDs(t *testing.T, db *sql.DB, appName string) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid`, appName)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// isContextError reports whether err is a context's error.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
