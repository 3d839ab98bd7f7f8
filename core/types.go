package outbox

import "github.com/outboxkit/outbox/core/outboxtype"

// The types an event, its status and the inspection of the table are made of. They are
// declared in package [outboxtype], which the storage layer shares; these names are the
// same types.
type (
	// Event is an event as stored, handed to listeners and to inspection.
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
	// ConfigError reports an invalid config value. It matches ErrInvalidConfig.
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
	AuditPause     = outboxtype.AuditPause
	AuditResume    = outboxtype.AuditResume
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

// The extension points an adapter implements (docs/modules.md); see package [outboxtype].
type (
	// Metrics receives measurements; it must be fast and safe for concurrent use.
	Metrics = outboxtype.Metrics
	// NopMetrics is the default Metrics: it does nothing.
	NopMetrics = outboxtype.NopMetrics
	// DispatchInfo describes one finished delivery attempt to Metrics.
	DispatchInfo = outboxtype.DispatchInfo
	// Path is how an event reached the dispatcher: PathHot or PathCold.
	Path = outboxtype.Path
	// Outcome is what an attempt led to (see [Listener]).
	Outcome = outboxtype.Outcome
	// ClaimEvent is what happened to claims in MultiNode mode.
	ClaimEvent = outboxtype.ClaimEvent
	// Interceptor runs around every delivery (adapters/otel's tracing).
	Interceptor = outboxtype.Interceptor
	// InterceptorFuncs adapts functions to Interceptor.
	InterceptorFuncs = outboxtype.InterceptorFuncs
	// Notifier wakes pollers across processes (adapters/pgnotify).
	Notifier = outboxtype.Notifier
)

// The values of [Path], [Outcome] and [ClaimEvent].
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
