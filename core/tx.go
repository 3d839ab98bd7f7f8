package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// TxHooks is implemented by transaction handles that can run callbacks when their
// transaction ends. [Writer.Write] registers its after-commit and after-rollback work
// through it; the hot path needs it. [*Tx] implements it, and so does any executor
// returned by [WithHooks].
type TxHooks interface {
	// AfterCommit registers fn to run after the transaction commits successfully.
	AfterCommit(fn func())
	// AfterRollback registers fn to run after the transaction rolls back, or after its
	// commit fails.
	AfterRollback(fn func())
}

// Callbacks collects the after-commit and after-rollback callbacks of one transaction.
// Transaction wrappers (this package's [Tx] and the ORM adapters) own one and call
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

var _ TxHooks = (*Callbacks)(nil)

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

// Tx is a database/sql transaction that runs after-commit and after-rollback callbacks.
// Get one from [BeginTx], or from the function argument of [RunInTx]. Pass it to
// [Writer.Write] so committed events take the hot path.
type Tx struct {
	tx *sql.Tx
	cb Callbacks
}

var (
	_ Executor = (*Tx)(nil)
	_ TxHooks  = (*Tx)(nil)
)

// BeginTx starts a transaction on db. The caller must call [Tx.Commit] or [Tx.Rollback].
func BeginTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions) (*Tx, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidArgument)
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &Tx{tx: tx}, nil
}

// RunInTx runs fn in a transaction on db. It commits when fn returns nil and rolls back
// when fn returns an error or panics (the panic is re-raised after the rollback).
// After-commit callbacks run only after a successful commit; after-rollback callbacks run
// after a rollback or a failed commit. fn's ctx carries the transaction (see [TxFromContext]).
// The error is fn's error, or the commit's.
func RunInTx(ctx context.Context, db *sql.DB, fn func(ctx context.Context, tx *Tx) error) (err error) {
	tx, err := BeginTx(ctx, db, nil)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			// Rollback after a panic or an error; its error is secondary to fn's.
			_ = tx.Rollback()
		}
	}()
	if err := fn(ContextWithTx(ctx, tx), tx); err != nil {
		return err
	}
	committed = true
	return tx.Commit()
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query expected to return at most one row.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

// SQLTx returns the underlying *sql.Tx, for code that needs it (an ORM, a prepared
// statement). Commit and roll back through t, not through the *sql.Tx, or the callbacks
// will not run; a write made through the *sql.Tx alone is delivered by the poller.
func (t *Tx) SQLTx() *sql.Tx { return t.tx }

// AfterCommit registers fn to run after a successful commit.
func (t *Tx) AfterCommit(fn func()) { t.cb.AfterCommit(fn) }

// AfterRollback registers fn to run after a rollback or a failed commit.
func (t *Tx) AfterRollback(fn func()) { t.cb.AfterRollback(fn) }

// Commit commits the transaction, then runs the after-commit callbacks. If the commit
// fails, the after-rollback callbacks run instead and the error is returned. (A commit
// whose outcome is unknown, such as a lost connection, may still have committed: the
// events are then delivered by the poller.)
func (t *Tx) Commit() error {
	if err := t.tx.Commit(); err != nil {
		if !errors.Is(err, sql.ErrTxDone) {
			t.cb.RolledBack()
		}
		return fmt.Errorf("commit: %w", err)
	}
	t.cb.Committed()
	return nil
}

// Rollback rolls the transaction back and runs the after-rollback callbacks. Calling it
// after Commit returns sql.ErrTxDone and runs nothing.
func (t *Tx) Rollback() error {
	err := t.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		return err
	}
	t.cb.RolledBack()
	return err
}

// WithHooks returns an executor that runs SQL through exec and registers transaction
// callbacks through hooks. Transaction adapters use it to hand an ORM's transaction to
// [Writer.Write] so that committed events take the hot path.
func WithHooks(exec Executor, hooks TxHooks) Executor {
	return hookedExecutor{Executor: exec, TxHooks: hooks}
}

type hookedExecutor struct {
	Executor
	TxHooks
}

type txContextKey struct{}

// ContextWithTx returns a context that carries exec, the current transaction. It is the
// convenience behind transaction-per-request middleware; passing the transaction
// explicitly is the primary API.
func ContextWithTx(ctx context.Context, exec Executor) context.Context {
	return context.WithValue(ctx, txContextKey{}, exec)
}

// TxFromContext returns the transaction stored by [ContextWithTx], or false.
func TxFromContext(ctx context.Context) (Executor, bool) {
	exec, ok := ctx.Value(txContextKey{}).(Executor)
	return exec, ok && exec != nil
}
