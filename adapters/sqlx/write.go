package outboxsqlx

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
)

// Executor returns the [outbox.Executor] to pass to [outbox.Writer.Write] for tx. When
// ctx is the one [RunInTx] passed to its function and tx is that function's transaction,
// the executor carries the transaction's after-commit callbacks and committed events take
// the hot path. Any other live *sqlx.Tx is returned as it is: its events are delivered by
// the poller. A nil tx returns [outbox.ErrNoTransaction].
func Executor(ctx context.Context, tx *sqlx.Tx) (outbox.Executor, error) {
	if tx == nil || tx.Tx == nil {
		return nil, outbox.ErrNoTransaction
	}
	if st, ok := ctx.Value(txKey{}).(*txState); ok && st.tx == tx {
		return adapterkit.Join(tx, &st.cb), nil
	}
	return tx, nil
}

// Write writes one event in tx and returns its ID; see [outbox.Writer.Write] for the
// rules and errors. Inside [RunInTx], pass the ctx and tx it gave you. A nil tx returns
// [outbox.ErrNoTransaction] and a nil w [outbox.ErrInvalidArgument]; nothing is written.
func Write(ctx context.Context, tx *sqlx.Tx, w *outbox.Writer, env outbox.Envelope) (string, error) {
	exec, err := executor(ctx, tx, w)
	if err != nil {
		return "", err
	}
	return w.Write(ctx, exec, env)
}

// WriteAll writes several events in tx with one statement and returns their IDs in
// order; see [outbox.Writer.WriteAll]. Errors are those of [Write].
func WriteAll(ctx context.Context, tx *sqlx.Tx, w *outbox.Writer, envs []outbox.Envelope) ([]string, error) {
	exec, err := executor(ctx, tx, w)
	if err != nil {
		return nil, err
	}
	return w.WriteAll(ctx, exec, envs)
}

func executor(ctx context.Context, tx *sqlx.Tx, w *outbox.Writer) (outbox.Executor, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil *outbox.Writer", outbox.ErrInvalidArgument)
	}
	return Executor(ctx, tx)
}
