package outboxgorm

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	outbox "github.com/outboxkit/outbox/core"
)

// Executor returns the [outbox.Executor] to pass to [outbox.Writer.Write] or
// [outbox.Writer.WriteAll] for a write in tx.
//
// When tx is the tx [Transaction] passed to fn, or a *gorm.DB derived from it, the
// executor runs SQL on the transaction and registers the writer's callbacks with
// Transaction, so committed events take the hot path. For any other GORM transaction
// (db.Transaction, db.Begin) it is the bare transaction: events are committed with tx
// and delivered by the poller. Prepared-statement wrappers (*gorm.PreparedStmtTX) are
// looked through. A nil tx, or one that is not in a transaction, returns
// [outbox.ErrNoTransaction].
func Executor(tx *gorm.DB) (outbox.Executor, error) {
	if tx == nil || tx.Statement == nil {
		return nil, outbox.ErrNoTransaction
	}
	pool, ok := tx.Statement.ConnPool.(gorm.TxCommitter)
	if !ok || pool == nil {
		return nil, outbox.ErrNoTransaction
	}
	if t, ok := pool.(gorm.Tx); ok {
		pool = unprepared(t)
	}
	exec, ok := pool.(outbox.Executor)
	if !ok {
		return nil, outbox.ErrNoTransaction
	}
	return exec, nil
}

// Write writes one event with w in the transaction tx and returns its ID, or "" when a
// writer hook suppressed it. See [WriteAll].
func Write(tx *gorm.DB, w *outbox.Writer, env outbox.Envelope) (string, error) {
	exec, err := executor(tx, w)
	if err != nil {
		return "", err
	}
	return w.Write(contextOf(tx), exec, env)
}

// WriteAll writes a batch of events with w in the transaction tx, with one INSERT, and
// returns their IDs in order (none when a writer hook suppressed the batch). Pass the tx
// [Transaction] gave fn, or a *gorm.DB derived from it, for the hot path; see [Executor]
// for other transactions. The write runs in tx's context (tx.Statement.Context, set with
// WithContext), as GORM's own statements do.
//
// Errors: an error matching [outbox.ErrInvalidArgument] for a nil w;
// [outbox.ErrNoTransaction] for a nil tx or one that is not in a transaction; otherwise
// those of [outbox.Writer.WriteAll]. Nothing is inserted when an error is returned.
func WriteAll(tx *gorm.DB, w *outbox.Writer, envs []outbox.Envelope) ([]string, error) {
	exec, err := executor(tx, w)
	if err != nil {
		return nil, err
	}
	return w.WriteAll(contextOf(tx), exec, envs)
}

func executor(tx *gorm.DB, w *outbox.Writer) (outbox.Executor, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil *outbox.Writer", outbox.ErrInvalidArgument)
	}
	return Executor(tx)
}

// contextOf returns the context of tx's statements. executor has checked tx.
func contextOf(tx *gorm.DB) context.Context {
	if ctx := tx.Statement.Context; ctx != nil {
		return ctx
	}
	return context.Background()
}
