// Package pgnotify wakes the dispatching processes of an outbox with PostgreSQL's
// LISTEN/NOTIFY: it implements [outbox.Notifier] with github.com/jackc/pgx/v5.
//
// Import it as
//
//	import "github.com/outboxkit/outbox/adapters/pgnotify"
//
// # What it gives
//
// A process delivers the events it commits itself through its hot path at once. Events
// it does not deliver wait for a poller: an event written by a WriterOnly process, an
// event that a full hot queue dropped in MultiNode mode (another node may take it), and
// a replayed DEAD event. With a [Notifier] in [outbox.Config.Notifier] of every process
// that shares the table, such an event reaches a dispatching process in milliseconds
// instead of at that process's next poll: the writing process sends a notification, and
// every dispatching process that listens reads every due row at once.
//
// A notification carries no payload: it only says "events may be due", and the poller
// reads the table. Notifications that arrive together wake the poller once. A lost
// notification costs latency only: the poller still finds the event at its next cycle.
//
// # Wiring
//
// Give every process that shares the table (writers and dispatchers) a Notifier on the
// same channel; stop the outbox before closing the Notifier:
//
//	n, err := pgnotify.New(pgnotify.Config{DSN: dsn}) // connects nothing yet
//	...
//	defer n.Close() // after ob.Stop: Stop sends the last writes' notification
//	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.Postgres, Notifier: n})
//	...
//	if err := ob.Start(ctx); err != nil { ... }
//	defer ob.Stop(context.WithoutCancel(ctx))
//
// The channel defaults to the default table's name, [outbox.DefaultTable]. With another
// [outbox.Config.Table], set [Config.Channel] (to the table's name, say) in every process
// of that table; use one channel per table.
//
// # Connections
//
// A Notifier holds one connection for [Notifier.Notify], opened on the first
// notification, and each running [Notifier.Listen] holds one more (an outbox in a
// dispatching mode runs one). Unless the DSN sets application_name, they show in
// pg_stat_activity as "outbox-pgnotify-notify" and "outbox-pgnotify-listen". When the
// listening connection breaks (a server restart, a failover, an idle-session timeout),
// the outbox logs it, polls for what it may have missed and listens again after a
// back-off.
//
// # Poolers
//
// NOTIFY works through any pooler, but LISTEN needs a session of its own: behind a pooler
// in transaction mode (PgBouncer's default) the server connection that ran LISTEN goes
// back to the pool, and notifications never reach the listener. Point [Config.ListenDSN]
// at the server itself, or at a pooler in session mode, and keep [Config.DSN] on the
// pooler. When no session-mode connection can be had, run without a Notifier: nothing is
// lost, the pollers deliver every event at [outbox.Config.PollInterval], backing off to
// [outbox.Config.PollMaxInterval] while they find nothing.
//
// # Cost for business transactions
//
// The notification is sent after the commit, on the Notifier's own connection, outside
// the business transaction. That matters: PostgreSQL serialises the commits of all
// transactions that issued a NOTIFY (they take one global lock while committing), so a
// NOTIFY inside business transactions would queue every such commit behind the others.
// Sent afterwards, it adds no lock to business commits. The outbox sends at most one
// notification at a time per process and coalesces the signals that arrive meanwhile.
package pgnotify
