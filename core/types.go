package outbox

import "github.com/outboxkit/outbox/core/outboxtype"

// The types an event, its status and the inspection of the table are made of. They are
// declared in package [outboxtype], which the storage layer shares; these names are the
// same types.
type (
	// Event is an event as stored, handed to a listener and returned by inspection.
	Event = outboxtype.Event
	// Status is an event's state in the table.
	Status = outboxtype.Status
	// Executor runs SQL: *sql.DB, *sql.Tx, *sql.Conn and *Tx satisfy it.
	Executor = outboxtype.Executor
	// RowError reports a row that could not be decoded or read.
	RowError = outboxtype.RowError
	// Cursor is a keyset position in a list.
	Cursor = outboxtype.Cursor
	// DeadFilter selects DEAD events.
	DeadFilter = outboxtype.DeadFilter
	// EventFilter narrows the lists of events.
	EventFilter = outboxtype.EventFilter
	// Stats summarises the table.
	Stats = outboxtype.Stats
	// TypeCount is the number of events of one status and event type.
	TypeCount = outboxtype.TypeCount
	// EventCount is a count bounded by MaxCountRows.
	EventCount = outboxtype.EventCount
	// GroupCount is a count per aggregate type, event type and listener.
	GroupCount = outboxtype.GroupCount
	// EventCounts is the answer of a bounded count.
	EventCounts = outboxtype.EventCounts
	// BlockedKeys counts the order keys held by a RETRY or DEAD event.
	BlockedKeys = outboxtype.BlockedKeys
	// AuditEntry is one row of the audit trail.
	AuditEntry = outboxtype.AuditEntry
	// AuditError is the error of a change whose audit entry could not be written.
	AuditError = outboxtype.AuditError
	// ConfigError reports an invalid configuration value. It matches ErrInvalidConfig.
	ConfigError = outboxtype.ConfigError
)

// The statuses of an event (see [outboxtype.Status]).
const (
	StatusNew       = outboxtype.StatusNew
	StatusDone      = outboxtype.StatusDone
	StatusRetry     = outboxtype.StatusRetry
	StatusDead      = outboxtype.StatusDead
	StatusWaiting   = outboxtype.StatusWaiting
	StatusFallback  = outboxtype.StatusFallback
	StatusDiscarded = outboxtype.StatusDiscarded
)

// The actions of the audit trail.
const (
	AuditReplay    = outboxtype.AuditReplay
	AuditReplayAll = outboxtype.AuditReplayAll
	AuditDelete    = outboxtype.AuditDelete
	AuditDiscard   = outboxtype.AuditDiscard
)

// Limits on stored fields, in bytes (see [outboxtype.MaxIDLen]).
const (
	MaxIDLen            = outboxtype.MaxIDLen
	MaxTypeLen          = outboxtype.MaxTypeLen
	MaxAggregateTypeLen = outboxtype.MaxAggregateTypeLen
	MaxAggregateIDLen   = outboxtype.MaxAggregateIDLen
	MaxTenantIDLen      = outboxtype.MaxTenantIDLen
	MaxOrderKeyLen      = outboxtype.MaxOrderKeyLen
	MaxListenerLen      = outboxtype.MaxListenerLen
	MaxClaimTokenLen    = outboxtype.MaxClaimTokenLen
	MaxLastErrorLen     = outboxtype.MaxLastErrorLen
	MaxHeadersBytes     = outboxtype.MaxHeadersBytes
	MaxErrorSearchLen   = outboxtype.MaxErrorSearchLen
)
