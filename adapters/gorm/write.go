package outboxgorm

import (
	"context"
	"fmt"

	outbox "github.com/outboxkit/outbox/core"
	"gorm.io/gorm"
)

// Write writes one event in tx's transaction with w, in the context of tx
// (tx.Statement.Context). Use the tx passed to the function of [Transaction], or any
// *gorm.DB derived from it, so that the event reaches the dispatcher right after the
// commit; through a plain GORM transaction (db.Transaction, db.Begin) it is committed the
// same way and delivered by the poller.
//
// Write returns [outbox.ErrNoTransaction] when tx is not in a transaction (nothing is
// inserted), an error matching [outbox.ErrInvalidArgument] when w is nil, and otherwise
// the error of [outbox.Writer.Write]. Use [Executor] with w.Write to get the event's ID.
func Write(tx *gorm.DB, w *outbox.Writer, env outbox.Envelope) error {
	exec, err := executorFor(tx, w)
	if err != nil {
		return err
	}
	_, err = w.Write(contextOf(tx), exec, env)
	return err
}

// WriteAll writes a batch of events with one INSERT in tx's transaction with w, as
// [Write] does for one; it returns the same errors, those of [outbox.Writer.WriteAll].
func WriteAll(tx *gorm.DB, w *outbox.Writer, envs ...outbox.Envelope) error {
	exec, err := executorFor(tx, w)
	if err != nil {
		return err
	}
	_, err = w.WriteAll(contextOf(tx), exec, envs)
	return err
}

// Executor returns the transaction behind tx as an [outbox.Executor] to pass to
// [outbox.Writer.Write] or [outbox.Writer.WriteAll], for callers who want the event IDs.
// Inside [Transaction] it also implements [adapterkit.Registrar], so committed events take the
// hot path; inside a plain GORM transaction it is the bare transaction, whose events the
// poller delivers. Prepared-statement wrappers (*gorm.PreparedStmtTX) are looked through.
//
// Executor returns [outbox.ErrNoTransaction] when tx is nil or not in a transaction.
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

func executorFor(tx *gorm.DB, w *outbox.Writer) (outbox.Executor, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil *outbox.Writer", outbox.ErrInvalidArgument)
	}
	return Executor(tx)
}

// contextOf returns the context of tx's statements.
func contextOf(tx *gorm.DB) context.Context {
	if ctx := tx.Statement.Context; ctx != nil {
		return ctx
	}
	return context.Background()
}
