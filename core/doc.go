// Package outbox is a transactional outbox for database/sql: business code writes an
// event in the same transaction as its business rows, and the event is delivered to a
// listener after the transaction commits — never lost, never delivered for a transaction
// that rolled back, and visible and replayable when it fails.
//
// Import path: github.com/outboxkit/outbox/core (package outbox). It imports only the
// standard library; bring your own driver (modernc.org/sqlite, pgx's stdlib or
// github.com/go-sql-driver/mysql).
//
// # Writing
//
// [Writer.Write] and [Writer.WriteAll] validate envelopes (an [*EnvelopeError] before any
// SQL runs), assign monotonic IDs ([NewID]) and insert the batch with one statement through
// the caller's transaction. A write outside a transaction fails with [ErrNoTransaction].
// [RunInTx] and [BeginTx] give a [*Tx] that runs after-commit callbacks only after a
// successful commit; through it, committed events take the hot path. Events written
// through a plain *sql.Tx are committed the same way and delivered by the poller.
//
// # Delivering
//
// A [Dispatcher] runs the [Listener] registered in a [Registry] for each event's
// (aggregate type, event type) on a pool of workers fed by two bounded queues: the hot
// queue, filled right after commit by [Dispatcher.WriterHook], and the cold queue, filled
// by the [Poller] from the table. The listener's outcome moves the row to DONE, back to
// NEW (deferred), to RETRY with backoff ([RetryPolicy]) or to DEAD. Delivery is at least
// once: listeners deduplicate by [Event.ID]. A [Purger] deletes old DONE and DEAD rows, and
// [DeadEvents] lists and replays DEAD ones.
//
// # Wiring
//
// [New] builds all of it over one table from a [Config], in one of four modes: [SingleNode]
// (one dispatching process), [MultiNode] (several, with claim locking), [Ordered]
// (per-aggregate FIFO) and [WriterOnly]. Start it with [Outbox.Start] and stop it with
// [Outbox.Stop], which drains within its context.
//
// # Several nodes
//
// In [MultiNode] mode every poller claims the rows it reads ([Store.Claim]: FOR UPDATE
// SKIP LOCKED on PostgreSQL and MySQL/MariaDB) with a fresh token and a TTL measured by
// the database clock, the writer pre-claims the events it hands to its own hot path, and
// every outcome update is fenced by the claim's token, so a node whose claim expired and
// was taken over records nothing. See [MultiNode] and [Config.ClaimTTL].
//
// # Storage
//
// A [Store] persists events. [NewSQLStore] implements it for a [Dialect] ([Postgres],
// [MySQL] or [SQLite]) over a validated, quoted table name; [Migrate] creates the table,
// and [Migrations] ships the same DDL for migration tools. Open SQLite with [SQLiteDSN]
// and MySQL with [MySQLDSNParams] in the DSN.
//
// # Observability
//
// Logs go to the [log/slog] logger in each config. Measurements go to a [Metrics]
// implementation; the default, [NopMetrics], does nothing.
package outbox
