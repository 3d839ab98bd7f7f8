// Package outboxtype holds the types that the outbox package and its storage layer
// (package storage) share: an event as stored ([Event]) and its [Status], the filters,
// cursors and counts of inspection, the audit trail's entries, the limits on stored
// fields and the errors a store returns.
//
// Import path: github.com/outboxkit/outbox/core/outboxtype (package outboxtype). It
// imports only the standard library.
//
// Package outbox declares each of these under the same name (outbox.Event is
// outboxtype.Event, outbox.ErrNotFound is outboxtype.ErrNotFound), so a user of the
// outbox does not import this package; a backend, which implements package storage's
// interfaces without importing package outbox, does.
package outboxtype
