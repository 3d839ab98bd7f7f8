// Package outbox is a transactional outbox for database/sql.
//
// Import path: github.com/outboxkit/outbox/core (package outbox). It imports only the
// standard library.
package outbox
