// Package outboxtype holds the types that the outbox package shares with its storage
// layer (package storage) and its adapters: an event as stored ([Event]) and its
// [Status], the filters, cursors and counts of inspection, the audit trail's entries,
// the limits on stored fields, the errors a store returns, and the extension points an
// adapter implements ([Metrics], [Interceptor], [Notifier]) with their vocabulary
// ([Path], [Outcome], [ClaimEvent]).
//
// Import path: github.com/outboxkit/outbox/core/outboxtype (package outboxtype). It
// imports only the standard library.
//
// Package outbox declares each of these under the same name (outbox.Event is
// outboxtype.Event, outbox.ErrNotFound is outboxtype.ErrNotFound), so a user of the
// outbox does not import this package; a backend, which implements package storage's
// interfaces without importing package outbox, does.
package outboxtype
