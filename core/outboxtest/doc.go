// Package outboxtest has helpers for testing code that uses the outbox: an in-memory
// [storage.Store] and a listener that records what it receives.
//
// Import path: github.com/outboxkit/outbox/core/outboxtest (package outboxtest). Like the
// core, it imports only the standard library and the outbox's own packages, so it can
// be used from any test.
//
// # In-memory store
//
// [NewMemoryStore] returns a concurrency-safe [storage.Store] that follows the Store
// contract, including the fences on status updates. It is fast and deterministic, which
// makes it a good fit for tests of listeners, dispatchers and pollers, including tests
// that run under testing/synctest. It does not take part in SQL transactions: Insert
// applies at once, whatever executor it is given.
//
// # Recording listener
//
// [RecordingListener] records every event it handles and can delegate to a function, to
// make a listener fail, defer or block.
package outboxtest
