package outboxsqlx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
)

// txKey is the context key under which RunInTx stores its transaction's state.
type txKey struct{}

// txState is one RunInTx transaction: the *sqlx.Tx handed to fn and the callbacks its
// events registered.
type txState struct {
	tx *sqlx.Tx
	cb adapterkit.Callbacks
}

// RunInTx runs fn in a transaction on db, begun with opts (nil for the driver's
// default), and commits it when fn returns nil. When fn returns an error or panics, it
// rolls back and returns fn's error or re-raises the panic. fn must not commit or roll
// back tx itself. It is db.BeginTxx(ctx, opts), Commit and Rollback in one call with the
// outbox's callbacks wired in (sqlx has no RunInTx of its own), and takes its arguments
// in the order bun's db.RunInTx does.
//
// Events written with [Write] or [WriteAll] through fn's ctx and tx are handed to the
// dispatcher after the commit succeeds, and never after a rollback or a failed commit.
//
// sqlx has no nested transactions: a RunInTx inside fn begins a second, separate
// transaction on db, as BeginTxx would.
//
// Errors: fn's error; a wrapped error of sqlx's BeginTxx or Commit; or an error matching
// [outbox.ErrInvalidArgument] for a nil fn or a nil db.
func RunInTx(ctx context.Context, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil fn", outbox.ErrInvalidArgument)
	}
	if db == nil {
		return fmt.Errorf("%w: nil *sqlx.DB", outbox.ErrInvalidArgument)
	}
	tx, err := db.BeginTxx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	st := &txState{tx: tx}
	done := false
	defer func() {
		if !done {
			// After an error or a panic; the rollback's own error is secondary.
			_ = tx.Rollback()
			st.cb.RolledBack()
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, st), tx); err != nil {
		return err
	}
	done = true
	if err := tx.Commit(); err != nil {
		if !errors.Is(err, sql.ErrTxDone) {
			st.cb.RolledBack()
		}
		return fmt.Errorf("commit: %w", err)
	}
	st.cb.Committed()
	return nil
}
