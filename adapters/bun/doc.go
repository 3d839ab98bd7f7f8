// Package outboxbun lets an [outbox.Writer] join a bun transaction
// (github.com/uptrace/bun), so that an event is committed atomically with the business
// rows and handed to the dispatcher right after the commit.
//
// Import path: github.com/outboxkit/outbox/adapters/bun (package outboxbun).
//
// # Writing
//
// Run the business transaction with [RunInTx] and write through the bun.Tx it passes to
// fn, with fn's context:
//
//	err := outboxbun.RunInTx(ctx, db, nil, func(ctx context.Context, tx bun.Tx) error {
//		if _, err := tx.NewInsert().Model(&order).Exec(ctx); err != nil {
//			return err
//		}
//		_, err := outboxbun.Write(ctx, tx, ob.Writer(), env)
//		return err
//	})
//
// [RunInTx] commits when fn returns nil and rolls back when fn returns an error or
// panics. Events written through it take the hot path: they are handed to the dispatcher
// only after the outermost commit succeeds, and never when the transaction rolls back.
// The outbox SQL runs on the *sql.Tx inside the bun.Tx (bun's own ExecContext would
// rewrite its placeholders).
//
// [Write], [WriteAll] and [Executor] need a transaction: a zero bun.Tx fails with
// [outbox.ErrNoTransaction], and nothing is inserted. A *bun.DB or a bun.Conn cannot be
// passed at all.
//
// # Nesting
//
// Calling [RunInTx] with the bun.Tx of an enclosing [RunInTx] (and fn's context) creates
// a savepoint. When the nested fn fails or panics, the savepoint is rolled back and the
// events written inside it are neither committed nor dispatched; the enclosing
// transaction's own events still are once it commits.
//
// # Transactions without hooks
//
// An event written through a bun transaction that [RunInTx] did not begin at that level
// is still committed atomically with the business rows, but its commit is not observed:
// the poller delivers it, and the writer logs this once at debug level. That covers
// bun's own db.RunInTx and db.BeginTx, bun's own savepoints (tx.RunInTx, tx.BeginTx,
// also inside [RunInTx]), and [RunInTx] called with such a transaction or with a
// bun.IDB other than *bun.DB and bun.Conn.
//
// The hot path is chosen by the exact bun.Tx value: only the one [RunInTx] passed to fn,
// together with fn's context. A savepoint that bun makes shares the *sql.Tx but is
// another value, so its events are never published for a savepoint that then rolls
// back; and the context bun's tx.RunInTx passes to its own fn carries no hooks.
//
// One case stays out of reach. While a savepoint that bun made is open (tx.BeginTx, or
// tx.RunInTx whose fn ignores the context bun passes it), an event written through the
// enclosing bun.Tx with the enclosing fn's context takes the hot path. If bun then
// rolls that savepoint back, the event's row is rolled back with it, but the event is
// still delivered after the outer commit. Nest with [RunInTx], not with tx.RunInTx or
// tx.BeginTx, whenever the nested code writes events.
package outboxbun
