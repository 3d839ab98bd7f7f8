// Package outbox is a transactional outbox for database/sql: business code writes an
// event in the same transaction as its business rows, and the event is delivered to a
// listener after the transaction commits — never lost, never delivered for a transaction
// that rolled back, and visible and replayable when it fails. Delivery is at least once:
// listeners deduplicate by [Event.ID].
//
// Import path: github.com/outboxkit/outbox/core (package outbox). It imports only the
// standard library; bring your own driver (modernc.org/sqlite, pgx's stdlib or
// github.com/go-sql-driver/mysql; open them with [SQLiteDSN] and [MySQLDSNParams]).
//
// # Use
//
// [New] builds everything over one table from a [Config], in a [Mode]: [SingleNode],
// [MultiNode] or [WriterOnly] (docs/modes.md, docs/multinode.md). Create the table with
// [Migrate] or the files of [Migrations]. Register listeners with [Outbox.Register] or
// [Outbox.Subscribe], start with [Outbox.Start], write with [Outbox.Writer] inside a
// transaction from [RunInTx] or [BeginTx], and stop with [Outbox.Stop]. [Outbox.Events]
// lists, counts, replays and discards events. New and the Outbox methods are the only way
// in; package outboxtest drives a poll or a purge from a test. The guides are in docs/:
// how-it-works.md, ordering.md, modes.md, multinode.md, listeners.md, configuration.md
// (every [Config] field), databases.md, operations.md, and ARCHITECTURE.md (the
// packages and one event's path through them).
package outbox
