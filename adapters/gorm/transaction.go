package outboxgorm

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	outbox "github.com/outboxkit/outbox/core"
)

// Transaction runs fn in a transaction on db, begun with opts, and commits it when fn
// returns nil. When fn returns an error or panics, it rolls back and returns fn's error
// or re-raises the panic. fn must not commit or roll back tx itself. It is
// db.WithContext(ctx).Transaction(fn, opts...) with the outbox's callbacks wired in, and
// takes its arguments in the order GORM's method does.
//
// Events written with [Write] or [WriteAll] through fn's tx (or any *gorm.DB derived
// from it) are handed to the dispatcher after the outermost commit succeeds, and never
// after a rollback or a failed commit. A commit whose outcome is unknown (a lost
// connection) counts as failed; if it did commit, the poller delivers the events.
//
// When db is already in a transaction, Transaction creates a savepoint instead (GORM's
// nested transaction; opts is ignored). When fn fails or panics, the savepoint is
// rolled back and the events written inside it are forgotten; the enclosing
// transaction's own events are still dispatched after the outermost commit. Inside a
// plain GORM transaction (not begun by Transaction) the events are committed with it
// and delivered by the poller.
//
// Errors: fn's error; the error of GORM's begin or commit (for a savepoint, of SAVEPOINT);
// or an error matching [outbox.ErrInvalidArgument] for a nil fn or a nil or zero
// *gorm.DB.
func Transaction(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error, opts ...*sql.TxOptions) error {
	if db == nil || db.Statement == nil {
		return fmt.Errorf("%w: nil *gorm.DB", outbox.ErrInvalidArgument)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil fn", outbox.ErrInvalidArgument)
	}
	db = db.WithContext(ctx)
	if _, ok := db.Statement.ConnPool.(gorm.TxCommitter); ok {
		// Nested: GORM sets a savepoint through the pool of the enclosing transaction,
		// which tracks it when the enclosing transaction is one of ours.
		return db.Transaction(fn, opts...)
	}
	parent := db.Statement.ConnPool
	return db.Transaction(func(tx *gorm.DB) error {
		// tx is the *gorm.DB that GORM commits or rolls back: with the pool replaced, its
		// Commit and Rollback run the callbacks. A pool that is not a gorm.Tx (a custom
		// ConnPoolBeginner's) is left alone: its events are delivered by the poller.
		if inner, ok := tx.Statement.ConnPool.(gorm.Tx); ok {
			tx.Statement.ConnPool = newTxPool(inner, parent)
		}
		return fn(tx)
	}, opts...)
}
