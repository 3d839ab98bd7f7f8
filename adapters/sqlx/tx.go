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

// RunInTx runs fn in a transaction on db, started with opts (nil for the driver's
// default). It commits when fn returns nil and rolls back when fn returns an error or
// panics; the panic is re-raised after the rollback. Events written with [Write] inside
// fn are dispatched after a successful commit, and never when the transaction rolls back
// or its commit fails.
//
// fn's ctx carries the transaction; pass it to [Write]. The error is fn's error, or the
// error of the begin or the commit, wrapped.
func RunInTx(ctx context.Context, db *sqlx.DB, opts *sql.TxOptions, fn func(ctx context.Context, tx *sqlx.Tx) error) error {
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
