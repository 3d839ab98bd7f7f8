// Package outbox is a transactional outbox for database/sql: business code writes an
// event in the same transaction as its business rows, and the event is delivered to a
// listener after the transaction commits — never lost, never delivered for a transaction
// that rolled back, and visible and replayable when it fails.
//
// Import path: github.com/outboxkit/outbox/core (package outbox). It imports only the
// standard library; bring your own driver (modernc.org/sqlite, pgx's stdlib or
// github.com/go-sql-driver/mysql).
//
// # Building and running
//
// [New] builds everything over one table from a [Config], in one of three modes:
// [SingleNode] (one dispatching process), [MultiNode] (several, with claim locking) and
// [WriterOnly]. In every mode, the events of one key ([Envelope.OrderKey]) are delivered
// one at a time in commit order (docs/ordering.md). Register listeners with
// [Outbox.Register], start with [Outbox.Start], write with [Outbox.Writer] and stop with
// [Outbox.Stop], which drains within its context. New and the Outbox methods are the
// only way in; tests drive a poll or a purge with the functions of package outboxtest.
//
// # Writing
//
// [Writer.Write] and [Writer.WriteAll] validate envelopes (an [*EnvelopeError] before any
// SQL runs), assign monotonic IDs ([NewID]) and insert the batch with one statement through
// the caller's transaction. A write outside a transaction fails with [ErrNoTransaction].
// [RunInTx] and [BeginTx] give a [*Tx] that runs after-commit callbacks only after a
// successful commit; through it, committed events take the hot path. Events written
// through a plain *sql.Tx are committed the same way but delivered by the poller, which
// the writer logs at WARN ([Writer.WriteAll]).
// ORM adapters are built on package adapterkit.
//
// # Delivering
//
// Right after commit each event is handed to a bounded in-process queue (the hot path,
// no database read); a poller reads the table for what the hot path missed (a full
// queue, a crash, retries, replays) and feeds a second queue (the cold path). It polls
// every PollInterval, backing off to PollMaxInterval while it finds nothing, and at once
// when the hot path drops events, a retry this process scheduled falls due, a replay, or
// a [Notifier] wakes it. Workers take two hot events for every cold one, run the [Listener] subscribed
// to the event's (aggregate type, event type) under ListenerTimeout, and write the
// outcome (see [Listener] for the table): DONE, back to NEW (deferred), RETRY with
// backoff ([RetryPolicy]) or DEAD. An event is queued at most once until its outcome is
// written, and after that a copy read before the outcome (by a poll still enqueueing, or
// a hot hand-off still running) is refused, so a race does not deliver it twice. No database
// connection is held while a listener runs; DONE outcomes are written in batches. Stop
// refuses new events, drains the queues within its context, and leaves everything
// undelivered in the table. Delivery is at least once: listeners deduplicate by
// [Event.ID]. Old finished rows are purged, and [Events] lists and replays DEAD
// ones.
//
// An event whose route matches several subscriptions (fan-out; [AnyType] routes match
// every type) is split when a worker takes it: one transaction makes it DONE and inserts
// one delivery row per subscription ([DeliveryID], [Event.Listener]), and each delivery
// then has its own attempts, retries, DEAD state and replay (docs/listeners.md).
//
// # Several nodes
//
// In [MultiNode] mode every poller claims the rows it reads with a fresh token and a TTL
// measured by the database clock, the writer pre-claims the events it hands to its own
// hot path, and every outcome update is fenced by the claim's token, so a node whose
// claim expired and was taken over records nothing. See [Config.ClaimTTL].
//
// Processes deliver only while they hold the table's dispatch lease, kept in the
// database ([LeaseStore]): a SingleNode process alone, MultiNode ones together. A second
// SingleNode process (a second replica, or the new pod of a rolling update) still starts
// but stands by, writing and not delivering, until the lease is free, rather than fail
// and stall the update; if that lasts, it logs an ERROR naming the fix (docs/modes.md).
//
// # Storage
//
// The table is reached through a [storage.Store]: [NewSQLStore] is the one for a
// [Dialect] ([Postgres], [MySQL] or [SQLite]), which [New] builds from the Config.
// Package storage holds the interface a backend implements and its optional
// capabilities, and package storetest the conformance suite it passes; a user of the
// outbox needs neither. [Migrate] creates the table, and [Migrations] ships the same
// DDL for migration tools. docs/ARCHITECTURE.md shows the packages and one event's path
// through them.
// Open SQLite with [SQLiteDSN] and MySQL with [MySQLDSNParams] in the DSN.
//
// # Observability
//
// Logs go to Config.Logger ([log/slog]): one INFO line at Start and at Stop, WARN for
// each failed attempt and anything degraded, ERROR for DEAD events and failed statements,
// the rest at DEBUG. Metrics go to a [Metrics]; the default, [NopMetrics], does nothing.
package outbox
