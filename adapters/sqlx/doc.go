// Package outboxsqlx lets an [outbox.Writer] join a github.com/jmoiron/sqlx transaction.
//
// Import it as
//
//	import outboxsqlx "github.com/outboxkit/outbox/adapters/sqlx"
//
// The package is named outboxsqlx so that it never shadows sqlx itself.
//
// # Writing events
//
// [RunInTx] is sqlx's BeginTxx, Commit and Rollback in one call, with the outbox's
// after-commit callbacks wired in. Inside it, write business rows with the usual sqlx
// methods and events with [Write] or [WriteAll]:
//
//	err := outboxsqlx.RunInTx(ctx, db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
//		if _, err := tx.NamedExecContext(ctx, `INSERT INTO orders (id, total) VALUES (:id, :total)`, order); err != nil {
//			return err
//		}
//		_, err := outboxsqlx.Write(ctx, tx, ob.Writer(), outbox.Envelope{
//			Type: "OrderPlaced", AggregateType: "Order", AggregateID: order.ID, Payload: order,
//		})
//		return err
//	})
//
// The event row is inserted in the same transaction as the order. When RunInTx commits,
// the event goes straight to the in-process dispatcher (the hot path); when it rolls
// back, because fn returned an error or panicked, or because the commit failed, the event
// is gone with the order and nothing is dispatched.
//
// The outbox's SQL runs on the *sqlx.Tx's own ExecContext, which sqlx passes to
// database/sql unchanged: the outbox's dialects emit the driver's native placeholders,
// so no Rebind is involved.
//
// [Write], [WriteAll] and [Executor] need a transaction: a nil *sqlx.Tx fails with
// [outbox.ErrNoTransaction], and nothing is inserted.
//
// # Transactions from elsewhere
//
// [Write] recognises the transaction by the ctx RunInTx passed to fn and the *sqlx.Tx
// itself. An event written through a *sqlx.Tx that RunInTx did not start (db.BeginTxx or
// db.Beginx, committed by hand) is still inserted atomically with the transaction, but
// nothing tells the outbox when that transaction commits: the poller delivers it on its
// next cycle instead of the hot path. The writer logs this once at debug level. It is
// never lost.
//
// sqlx has no nested transactions. A RunInTx inside another starts a second, separate
// transaction, as BeginTxx would. Savepoints issued by hand with ExecContext are
// invisible to the outbox: do not write events between a SAVEPOINT and a ROLLBACK TO it
// inside RunInTx, or they would be dispatched although the rollback removed them.
package outboxsqlx
