// Package outboxgorm lets an [outbox.Writer] join a GORM transaction, so that events are
// written atomically with the business rows and handed to the dispatcher right after the
// transaction commits.
//
// Import path: github.com/outboxkit/outbox/adapters/gorm (package outboxgorm).
//
// # Transactions
//
// Run the business code in [Transaction] and write events with [Write] or [WriteAll]
// through the *gorm.DB it passes to fn:
//
//	err := outboxgorm.Transaction(ctx, gdb, func(tx *gorm.DB) error {
//		if err := tx.Create(&order).Error; err != nil {
//			return err
//		}
//		_, err := outboxgorm.Write(tx, ob.Writer(), env)
//		return err
//	})
//
// [Write] and [WriteAll] return the IDs of the events they wrote, as the writer does.
// They take no context: like GORM's own statements they run in tx's
// (tx.WithContext(ctx)), which [Transaction] sets from its ctx.
//
// GORM has no after-commit hook; [Transaction] adds one. Events reach the dispatcher only
// after the outermost commit succeeds, and never when the transaction rolls back (fn
// returned an error or panicked, or the commit failed). Every *gorm.DB derived from tx
// (tx.Where, tx.Session, tx.WithContext, tx.Model…) stays in the transaction, and tx.DB()
// still returns the *sql.DB.
//
// # Nested transactions and savepoints
//
// A nested [Transaction], GORM's own tx.Transaction and tx.SavePoint / tx.RollbackTo
// create savepoints. When a savepoint is rolled back, the events written after it are
// rolled back with it and never delivered; the rest of the transaction's events are
// delivered after the outermost commit. Savepoints written as SQL (tx.Exec("SAVEPOINT
// sp1"), "ROLLBACK TO SAVEPOINT sp1", "RELEASE SAVEPOINT sp1") are recognised too.
//
// # Prepared statements
//
// Both gorm.Config{PrepareStmt: true} and tx.Session(&gorm.Session{PrepareStmt: true})
// work inside [Transaction]. Savepoint statements always run unprepared, as GORM runs them
// (MySQL refuses to prepare them).
//
// # Plain GORM transactions
//
// [Write] also accepts a transaction that did not come from [Transaction], such as the tx
// of db.Transaction or db.Begin. Its events are committed atomically just the same, but
// nothing tells the dispatcher when the transaction commits: the poller delivers them on
// its next cycle (Config.PollInterval), and the writer notes this once at debug level.
// Outside any transaction [Write], [WriteAll] and [Executor] fail with
// [outbox.ErrNoTransaction], and nothing is inserted.
package outboxgorm
