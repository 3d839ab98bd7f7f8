// Package storage is the storage layer of the outbox: the interface a backend
// implements ([Store]), the optional capabilities the outbox finds by type assertion,
// and their parameters and results. It is to the outbox what database/sql/driver is to
// database/sql: a user who writes, listens, inspects and replays events never imports
// it; an implementer of a backend, or a test that drives one, does.
//
// Import path: github.com/outboxkit/outbox/core/storage (package storage). It imports
// only the standard library and the shared types of package outboxtype.
//
// # What a backend implements
//
// [Store] is the delivery core: insert through the caller's transaction, read the due
// rows, record outcomes (fenced, see Store), purge. The capabilities add what the
// features need, and the outbox works without each one it does not use:
//
//	ClaimStore                      MultiNode mode (New rejects a store without it there)
//	OrderStore                      per-key FIFO (Envelope.OrderKey)
//	FanOutStore                     one delivery per listener when several match an event
//	DeadStore, DiscardStore         listing, counting, replaying, deleting, discarding
//	EventStore, EventCountStore     the lists and bounded counts of every status (admin)
//	AuditStore, AuditedStore        the audit trail, and changes recorded with it
//	StatsStore                      counts per status for metrics
//	LeaseStore                      the dispatch lease of SingleNode and MultiNode processes
//	ConnectionChecker               Start's check of the connection and the table
//
// Every parameter type has a Validate method: a store calls it first and returns its
// error, which matches outboxtype.ErrInvalidArgument, before any I/O. Package
// github.com/outboxkit/outbox/core/storetest is the conformance suite a backend must
// pass; package outbox's NewSQLStore is the SQL implementation for PostgreSQL,
// MySQL/MariaDB and SQLite, and package outboxtest has an in-memory one for tests.
package storage
