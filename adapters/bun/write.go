package outboxbun

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
)

// Executor returns the [outbox.Executor] to pass to [outbox.Writer.Write] or
// [outbox.Writer.WriteAll] for a write in tx.
//
// When tx is the tx [RunInTx] passed to fn and ctx is fn's context (or derived from it),
// the executor runs SQL on tx's *sql.Tx and registers the writer's callbacks with
// RunInTx, so committed events take the hot path. For any other bun.Tx (db.RunInTx,
// db.BeginTx, bun's own savepoints) it is the bare *sql.Tx: events are committed with tx
// and delivered by the poller. A zero bun.Tx returns [outbox.ErrNoTransaction].
func Executor(ctx context.Context, tx bun.Tx) (outbox.Executor, error) {
	if tx.Tx == nil {
		return nil, outbox.ErrNoTransaction
	}
	if cb := callbacksFor(ctx, tx); cb != nil {
		return adapterkit.Join(tx.Tx, cb), nil
	}
	return tx.Tx, nil
}

// Write writes one event with w in the transaction tx and returns its ID, or "" when a
// writer hook suppressed it. See [WriteAll].
func Write(ctx context.Context, tx bun.Tx, w *outbox.Writer, env outbox.Envelope) (string, error) {
	exec, err := executor(ctx, tx, w)
	if err != nil {
		return "", err
	}
	return w.Write(ctx, exec, env)
}

// WriteAll writes a batch of events with w in the transaction tx, with one INSERT, and
// returns their IDs in order (none when a writer hook suppressed the batch). Pass the ctx
// and tx [RunInTx] gave fn for the hot path; see [Executor] for other transactions.
//
// Errors: an error matching [outbox.ErrInvalidArgument] for a nil w;
// [outbox.ErrNoTransaction] for a zero bun.Tx; otherwise those of
// [outbox.Writer.WriteAll]. Nothing is inserted when an error is returned.
func WriteAll(ctx context.Context, tx bun.Tx, w *outbox.Writer, envs []outbox.Envelope) ([]string, error) {
	exec, err := executor(ctx, tx, w)
	if err != nil {
		return nil, err
	}
	return w.WriteAll(ctx, exec, envs)
}

func executor(ctx context.Context, tx bun.Tx, w *outbox.Writer) (outbox.Executor, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil *outbox.Writer", outbox.ErrInvalidArgument)
	}
	return Executor(ctx, tx)
}
