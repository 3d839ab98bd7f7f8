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

// The extension points an adapter implements: metrics (adapters/prometheus,
// adapters/otel), interceptors around each delivery (adapters/otel's tracing) and a
// notifier that wakes pollers (adapters/pgnotify). See package [outboxtype].
type (
	Metrics          = outboxtype.Metrics
	NopMetrics       = outboxtype.NopMetrics
	DispatchInfo     = outboxtype.DispatchInfo
	Path             = outboxtype.Path
	Outcome          = outboxtype.Outcome
	ClaimEvent       = outboxtype.ClaimEvent
	Interceptor      = outboxtype.Interceptor
	InterceptorFuncs = outboxtype.InterceptorFuncs
	Notifier         = outboxtype.Notifier
)

// The values of the extension points' vocabulary: how an event reached the dispatcher,
// what an attempt led to (the words of [Listener]'s table and of the statuses), and what
// happened to a claim.
const (
	PathHot         = outboxtype.PathHot
	PathCold        = outboxtype.PathCold
	OutcomeDone     = outboxtype.OutcomeDone
	OutcomeRetry    = outboxtype.OutcomeRetry
	OutcomeDead     = outboxtype.OutcomeDead
	OutcomeDeferred = outboxtype.OutcomeDeferred
	OutcomeFallback = outboxtype.OutcomeFallback
	ClaimTaken      = outboxtype.ClaimTaken
	ClaimRenewed    = outboxtype.ClaimRenewed
	ClaimLost       = outboxtype.ClaimLost
	ClaimExpired    = outboxtype.ClaimExpired
	ClaimReleased   = outboxtype.ClaimReleased
	ClaimTakenOver  = outboxtype.ClaimTakenOver
)
