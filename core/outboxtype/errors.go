package outboxtype

import (
	"errors"

	"github.com/outboxkit/outbox/core/internal/check"
)

// Errors that a store returns, and [github.com/outboxkit/outbox/core] with it under the same names.
var (
	// ErrNoTransaction is returned by [Writer.Write] when the executor is not inside a
	// transaction. Nothing is inserted.
	ErrNoTransaction = errors.New("outbox: executor is not inside a transaction")
	// ErrNotFound is returned when no event has the given ID.
	ErrNotFound = errors.New("outbox: event not found")
	// ErrInvalidArgument is wrapped by errors for bad arguments to a call, such as a page
	// limit out of range, or store parameters that fail their Validate method. Nothing
	// runs in that case.
	ErrInvalidArgument = check.ErrInvalidArgument
	// ErrTxDone is returned by [Writer.Write] through a transaction that has already
	// committed or rolled back (it also matches the driver's sql.ErrTxDone).
	ErrTxDone = errors.New("outbox: transaction has already ended")
	// ErrEventTooLarge is returned by a write whose event the database server would
	// refuse as one statement: on MySQL/MariaDB, a row that needs more than the server's
	// max_allowed_packet. The write is refused before any SQL, so the caller's
	// transaction stays usable; the error names the setting and the sizes.
	ErrEventTooLarge = errors.New("outbox: event too large for the database server")
	// ErrUnreadableRow is wrapped by the reason of a row that the database stores but
	// cannot return, for example a PostgreSQL jsonb payload whose numbers write out to
	// more than a gigabyte. The poller moves such a row to DEAD, with this reason, the
	// server's error and the stored sizes, so that it cannot stop the other rows.
	ErrUnreadableRow = errors.New("outbox: the database cannot return the row")
	// ErrInvalidConfig is matched (errors.Is) by every [ConfigError].
	ErrInvalidConfig = errors.New("outbox: invalid config")
)

// ConfigError reports an invalid configuration value. It matches ErrInvalidConfig.
type ConfigError struct {
	// Field is the configuration field, for example "Workers".
	Field string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return "outbox: invalid config: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
