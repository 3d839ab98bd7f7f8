// Package adapterkit is for authors of transaction adapters: code that lets
// [github.com/outboxkit/outbox/core.Writer] write through an ORM's or a driver's
// transaction and still deliver committed events on the hot path. Application code does
// not need it; the gorm, bun and sqlx adapters are built on it.
//
// Import path: github.com/outboxkit/outbox/core/adapterkit (package adapterkit). It
// imports only the standard library.
//
// # Writing an adapter
//
// The writer inserts events through an executor (ExecContext and QueryContext) that
// must be inside a transaction. When that executor also implements [Registrar], the
// writer registers an after-commit callback that hands the committed events to the
// dispatcher (the hot path) and an after-rollback callback that forgets them. A
// transaction wrapper therefore:
//
//  1. owns one [Callbacks] per outermost transaction;
//  2. passes [Join](its executor, the Callbacks) to the writer;
//  3. calls [Callbacks.Savepoint] before a nested transaction (a savepoint) and
//     [Callbacks.RollbackTo] when that savepoint rolls back, so that events written in it
//     are never delivered;
//  4. calls [Callbacks.Committed] after the outermost commit succeeds, or
//     [Callbacks.RolledBack] after a rollback or a failed commit.
//
// An executor without callbacks still writes (the events are committed with the
// business rows), but the events wait for the poller.
package adapterkit

import (
	"context"
	"database/sql"
	"sync"
)

// Executor runs SQL inside a transaction. It has the method set of outbox.Executor, so
// values convert both ways.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Registrar is implemented by transaction handles that run callbacks when their
// transaction ends: outbox.Tx, [Callbacks], and every executor returned by [Join]. The
// writer registers its after-commit and after-rollback work through it.
type Registrar interface {
	// AfterCommit registers fn to run after the transaction commits successfully.
	AfterCommit(fn func())
	// AfterRollback registers fn to run after the transaction rolls back, or after its
	// commit fails.
	AfterRollback(fn func())
}

// Join returns an executor that runs SQL through exec and registers transaction
// callbacks through r. Give it to the writer so that committed events take the hot path.
func Join(exec Executor, r Registrar) Executor {
	return joined{Executor: exec, Registrar: r}
}

type joined struct {
	Executor
	Registrar
}

// Callbacks collects the after-commit and after-rollback callbacks of one transaction.
// Transaction wrappers (outbox.Tx and the ORM adapters) own one and call
// [Callbacks.Committed] or [Callbacks.RolledBack] when the transaction ends. It supports
// savepoints: [Callbacks.RollbackTo] forgets what was registered after a
// [Callbacks.Savepoint]. The zero value is ready to use; it is safe for concurrent use.
type Callbacks struct {
	mu      sync.Mutex
	entries []callbackEntry
	state   txState
}

type callbackEntry struct{ onCommit, onRollback func() }

type txState int

const (
	txActive txState = iota
	txCommitted
	txRolledBack
)

var _ Registrar = (*Callbacks)(nil)

// AfterCommit registers fn to run after a successful commit. If the transaction has
// already committed, fn runs at once; if it has rolled back, fn never runs.
func (c *Callbacks) AfterCommit(fn func()) { c.add(callbackEntry{onCommit: fn}) }

// AfterRollback registers fn to run after a rollback or a failed commit. If the
// transaction has already rolled back, fn runs at once; if it has committed, fn never runs.
func (c *Callbacks) AfterRollback(fn func()) { c.add(callbackEntry{onRollback: fn}) }

func (c *Callbacks) add(e callbackEntry) {
	c.mu.Lock()
	state := c.state
	if state == txActive {
		c.entries = append(c.entries, e)
	}
	c.mu.Unlock()
	switch {
	case state == txCommitted && e.onCommit != nil:
		runCallbacks([]func(){e.onCommit})
	case state == txRolledBack && e.onRollback != nil:
		runCallbacks([]func(){e.onRollback})
	}
}

// Savepoint returns a mark for [Callbacks.RollbackTo].
func (c *Callbacks) Savepoint() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// RollbackTo handles a rollback to a savepoint: callbacks registered after mark are
// forgotten and their after-rollback callbacks run now, in registration order. A mark
// beyond the current registrations does nothing.
func (c *Callbacks) RollbackTo(mark int) {
	c.mu.Lock()
	if mark < 0 || mark >= len(c.entries) || c.state != txActive {
		c.mu.Unlock()
		return
	}
	dropped := c.entries[mark:]
	c.entries = c.entries[:mark:mark]
	c.mu.Unlock()
	runCallbacks(rollbackFns(dropped))
}

// Committed marks the transaction committed and runs the after-commit callbacks in
// registration order. Only the first call to Committed or RolledBack has an effect. Every
// callback runs even if an earlier one panics; the first panic is then re-raised.
func (c *Callbacks) Committed() {
	if entries, ok := c.finish(txCommitted); ok {
		fns := make([]func(), 0, len(entries))
		for _, e := range entries {
			if e.onCommit != nil {
				fns = append(fns, e.onCommit)
			}
		}
		runCallbacks(fns)
	}
}

// RolledBack marks the transaction rolled back and runs the after-rollback callbacks in
// registration order, with the same rules as [Callbacks.Committed].
func (c *Callbacks) RolledBack() {
	if entries, ok := c.finish(txRolledBack); ok {
		runCallbacks(rollbackFns(entries))
	}
}

func (c *Callbacks) finish(s txState) ([]callbackEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != txActive {
		return nil, false
	}
	c.state = s
	entries := c.entries
	c.entries = nil
	return entries, true
}

func rollbackFns(entries []callbackEntry) []func() {
	fns := make([]func(), 0, len(entries))
	for _, e := range entries {
		if e.onRollback != nil {
			fns = append(fns, e.onRollback)
		}
	}
	return fns
}

// runCallbacks runs every fn; a panic does not stop the others and the first one is
// re-raised at the end, so a caller's bug is not hidden.
func runCallbacks(fns []func()) {
	var first any
	panicked := false
	for _, fn := range fns {
		func() {
			defer func() {
				if r := recover(); r != nil && !panicked {
					first, panicked = r, true
				}
			}()
			fn()
		}()
	}
	if panicked {
		panic(first)
	}
}
