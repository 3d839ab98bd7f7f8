package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/internal/testdb"
)

// TestConfigQueryTimeoutBoundsTheOutboxsOwnStatements: Config.QueryTimeout reaches the
// poller, the purger and the SQL store. With the table locked by another transaction,
// a poll, a purge and a dead-event count each fail with a deadline error instead of
// waiting for the lock (PostgreSQL: LOCK TABLE blocks every statement on the table).
func TestConfigQueryTimeoutBoundsTheOutboxsOwnStatements(t *testing.T) {
	t.Parallel()
	db := testdb.NewPostgresDB(t)
	table := testdb.IsolatedTable(t, db, "postgres")
	ctx := t.Context()
	if err := outbox.MigrateTable(ctx, db, outbox.Postgres, table); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.Postgres, Table: table, QueryTimeout: 200 * time.Millisecond,
		PollInterval: time.Hour, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// Start's own statements run under the same QueryTimeout: on a loaded machine its
	// catalog checks can pass 200 ms, which fails Start with a deadline error (as it
	// should) and leaves it to be called again.
	for attempt := 1; ; attempt++ {
		err := ob.Start(ctx)
		if err == nil {
			break
		}
		if !isDeadline(err) || attempt == 50 {
			t.Fatalf("Start, attempt %d: %v", attempt, err)
		}
	}
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })

	lock, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if _, err := lock.ExecContext(ctx, `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Each call would wait for the lock forever without the timeout; the test's own
	// deadline (go test -timeout) catches a regression.
	if _, err := outboxtest.Poll(ctx, ob); err == nil || !isDeadline(err) {
		t.Errorf("poll with the table locked: err = %v, want a deadline error", err)
	}
	if _, err := outboxtest.Purge(ctx, ob); err == nil || !isDeadline(err) {
		t.Errorf("purge with the table locked: err = %v, want a deadline error", err)
	}
	if _, err := ob.Events().CountDead(ctx, outbox.DeadFilter{}); err == nil || !isDeadline(err) {
		t.Errorf("dead count with the table locked: err = %v, want a deadline error", err)
	}
	if _, err := outbox.New(db, outbox.Config{Dialect: outbox.Postgres, QueryTimeout: -2}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Errorf("QueryTimeout -2: err = %v, want a ConfigError", err)
	}
}

// isDeadline reports whether err is a statement cut by its deadline: the context's
// error, or PostgreSQL's "canceling statement due to user request" that pgx returns
// when it cancels the query for the context.
func isDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || containsAny(err.Error(), "deadline", "canceling statement")
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
