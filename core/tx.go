package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/outboxkit/outbox/core/adapterkit"
)

// Tx is a *sql.Tx with after-commit and after-rollback callbacks.
type Tx struct {
	tx *sql.Tx
	db *sql.DB // the DB it was begun on: a store on the same DB may run prepared statements in it
	cb adapterkit.Callbacks
}

var (
	_ Executor             = (*Tx)(nil)
	_ adapterkit.Registrar = (*Tx)(nil)
)

// BeginTx starts a transaction on db; call [Tx.Commit] or [Tx.Rollback].
func BeginTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions) (*Tx, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidArgument)
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &Tx{tx: tx, db: db}, nil
}

// RunInTx runs fn in a transaction on db: it commits when fn returns nil and rolls back
// when fn returns an error or panics (the panic is re-raised), then runs the after-commit
// or after-rollback callbacks. fn's ctx carries the transaction ([TxFromContext]). The
// error is fn's, or the commit's.
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

// SQLTx returns the underlying *sql.Tx; commit and roll back through t, or the callbacks
// will not run.
func (t *Tx) SQLTx() *sql.Tx { return t.tx }

// AfterCommit registers fn to run after a successful commit.
func (t *Tx) AfterCommit(fn func()) { t.cb.AfterCommit(fn) }

// AfterRollback registers fn to run after a rollback or a failed commit.
func (t *Tx) AfterRollback(fn func()) { t.cb.AfterRollback(fn) }

// Commit commits, then runs the after-commit callbacks, or the after-rollback ones when
// it fails (the commit may still have happened: the poller then delivers).
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

type txContextKey struct{}

// ContextWithTx returns ctx carrying exec, the transaction, for middleware.
func ContextWithTx(ctx context.Context, exec Executor) context.Context {
	return context.WithValue(ctx, txContextKey{}, exec)
}

// TxFromContext returns the transaction stored by [ContextWithTx], or false.
func TxFromContext(ctx context.Context) (Executor, bool) {
	exec, ok := ctx.Value(txContextKey{}).(Executor)
	return exec, ok && exec != nil
}
