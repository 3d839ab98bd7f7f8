package outboxgorm

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	outbox "github.com/outboxkit/outbox/core"
)

// Transaction runs fn in a transaction on db, like db.WithContext(ctx).Transaction(fn,
// opts...), and fires the outbox's callbacks when it ends: events written with [Write]
// through fn's tx reach the dispatcher only after the outermost commit succeeds, and
// never when the transaction rolls back.
//
// GORM commits when fn returns nil and rolls back when fn returns an error or panics (the
// panic reaches the caller after the rollback) or when the commit fails; the error is
// fn's or the commit's. A commit whose outcome is unknown (a lost connection) counts as
// failed; if it did commit, the poller delivers the events.
//
// When db is already in a transaction, Transaction creates a savepoint instead (GORM's
// nested transaction): rolling it back discards the events written inside it, and the
// outer transaction's events are still delivered after its commit. opts apply to an
// outermost transaction only. Inside a plain GORM transaction (not begun by Transaction)
// the events are committed with it and delivered by the poller.
//
// Transaction returns an error matching [outbox.ErrInvalidArgument] when db or fn is nil.
func Transaction(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error, opts ...*sql.TxOptions) error {
	if db == nil || db.Statement == nil {
		return fmt.Errorf("%w: nil *gorm.DB", outbox.ErrInvalidArgument)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil transaction function", outbox.ErrInvalidArgument)
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
