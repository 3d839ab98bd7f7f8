package adapterkit_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/outboxkit/outbox/core/adapterkit"
)

type callLog struct {
	mu  sync.Mutex
	log []string
}

func (l *callLog) fn(s string) func() {
	return func() {
		l.mu.Lock()
		l.log = append(l.log, s)
		l.mu.Unlock()
	}
}

func (l *callLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.log, ",")
}

func TestCallbacksCommitRunsOnlyCommitCallbacksOnce(t *testing.T) {
	t.Parallel()
	var cb adapterkit.Callbacks
	var l callLog
	cb.AfterCommit(l.fn("c1"))
	cb.AfterRollback(l.fn("r1"))
	cb.AfterCommit(l.fn("c2"))
	cb.Committed()
	cb.Committed()
	cb.RolledBack()
	if got := l.String(); got != "c1,c2" {
		t.Fatalf("got %s", got)
	}
	// Registering after the end runs at once when the outcome matches, never otherwise.
	cb.AfterCommit(l.fn("late-c"))
	cb.AfterRollback(l.fn("late-r"))
	if got := l.String(); got != "c1,c2,late-c" {
		t.Fatalf("got %s", got)
	}
}

func TestCallbacksRollbackRunsOnlyRollbackCallbacks(t *testing.T) {
	t.Parallel()
	var cb adapterkit.Callbacks
	var l callLog
	cb.AfterCommit(l.fn("c1"))
	cb.AfterRollback(l.fn("r1"))
	cb.AfterRollback(l.fn("r2"))
	cb.RolledBack()
	cb.Committed()
	if got := l.String(); got != "r1,r2" {
		t.Fatalf("got %s", got)
	}
}

func TestCallbacksSavepointRollbackForgetsInnerRegistrations(t *testing.T) {
	t.Parallel()
	var cb adapterkit.Callbacks
	var l callLog
	cb.AfterCommit(l.fn("outer"))
	mark := cb.Savepoint()
	cb.AfterCommit(l.fn("inner"))
	cb.AfterRollback(l.fn("inner-rb"))
	cb.RollbackTo(mark)
	if got := l.String(); got != "inner-rb" {
		t.Fatalf("after RollbackTo: %s", got)
	}
	cb.AfterCommit(l.fn("after"))
	cb.RollbackTo(99) // beyond: nothing
	cb.Committed()
	if got := l.String(); got != "inner-rb,outer,after" {
		t.Fatalf("after commit: %s", got)
	}
}

func TestCallbacksPanicDoesNotSkipOthers(t *testing.T) {
	t.Parallel()
	var cb adapterkit.Callbacks
	var l callLog
	cb.AfterCommit(func() { panic("user bug") })
	cb.AfterCommit(l.fn("second"))
	func() {
		defer func() {
			if r := recover(); r != "user bug" {
				t.Fatalf("recovered %v, want the user's panic", r)
			}
		}()
		cb.Committed()
	}()
	if got := l.String(); got != "second" {
		t.Fatalf("got %s", got)
	}
}

// execOnly is an executor without callbacks of its own.
type execOnly struct{}

func (execOnly) ExecContext(context.Context, string, ...any) (sql.Result, error) { return nil, nil }
func (execOnly) QueryContext(context.Context, string, ...any) (*sql.Rows, error) { return nil, nil }

// TestJoinRegistersThroughCallbacks: the joined executor is a Registrar whose callbacks
// are the given ones, and a registration after the end runs at once or never.
func TestJoinRegistersThroughCallbacks(t *testing.T) {
	t.Parallel()
	var cb adapterkit.Callbacks
	var l callLog
	exec := adapterkit.Join(execOnly{}, &cb)
	r, ok := exec.(adapterkit.Registrar)
	if !ok {
		t.Fatal("a joined executor is not a Registrar")
	}
	r.AfterCommit(l.fn("commit"))
	r.AfterRollback(l.fn("rollback"))
	cb.Committed()
	r.AfterCommit(l.fn("late-commit"))     // runs at once
	r.AfterRollback(l.fn("late-rollback")) // never runs
	if got := l.String(); got != "commit,late-commit" {
		t.Fatalf("got %s", got)
	}
}
