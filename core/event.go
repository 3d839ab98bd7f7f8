package outbox

import (
	"encoding/json"
	"time"
)

// GlobalAggregateType is the aggregate type of an event whose [Envelope.AggregateType] is empty.
const GlobalAggregateType = "__GLOBAL__"

// Status is the delivery state of an event row. The numeric values are stored in the
// status column and never change.
type Status int

// The statuses of an event row.
const (
	StatusNew     Status = 0 // waiting for its first delivery, or put back by a deferral or replay
	StatusDone    Status = 1 // the listener succeeded; terminal
	StatusRetry   Status = 2 // the last delivery failed; due again at AvailableAt
	StatusDead    Status = 3 // not delivered again unless replayed
	StatusWaiting Status = 4 // ordered, behind an earlier event of its key; NEW once it is first
	// StatusFallback: the listener failed for good and its [Subscription.Fallback]
	// handled the event; terminal, purged like DONE and DEAD, and it lets its order key
	// move on like DONE.
	StatusFallback Status = 5
	// StatusDiscarded: an operator discarded the event ([Events.Discard]); final,
	// never delivered, kept until the purge (as DEAD rows are) and releasing its order key.
	StatusDiscarded Status = 6
)

// String returns the status name: "NEW", "DONE", "RETRY", "DEAD", "WAITING",
// "FALLBACK" or "DISCARDED".
func (s Status) String() string {
	switch s {
	case StatusNew:
		return "NEW"
	case StatusDone:
		return "DONE"
	case StatusRetry:
		return "RETRY"
	case StatusDead:
		return "DEAD"
	case StatusWaiting:
		return "WAITING"
	case StatusFallback:
		return "FALLBACK"
	case StatusDiscarded:
		return "DISCARDED"
	default:
		return "UNKNOWN"
	}
}

// Event is one stored outbox row, as listeners, [Events] and stores see it.
// Times are in UTC. A listener must not modify the event it is given.
type Event struct {
	// ID is the event's unique identifier: a ULID unless the writer's caller set one.
	ID string
	// Type is the event type, for example "OrderPlaced".
	Type string
	// AggregateType names the kind of entity the event is about. It is never empty:
	// events written without one carry GlobalAggregateType.
	AggregateType string
	// AggregateID identifies the entity. Optional.
	AggregateID string
	// TenantID is pass-through metadata. Optional.
	TenantID string
	// Payload is the event body, a valid JSON document, marshalled once at write time.
	Payload json.RawMessage
	// Headers is string metadata. Nil when the event has none.
	Headers map[string]string
	// Status is the row's delivery state.
	Status Status
	// Attempts counts failed deliveries (deferrals do not count).
	Attempts int
	// LastError is the last failure's reason (at most MaxLastErrorLen bytes).
	LastError string
	// CreatedAt is when the event occurred ([Envelope.OccurredAt]).
	CreatedAt time.Time
	// AvailableAt is the earliest time the event may be delivered.
	AvailableAt time.Time
	// DoneAt is when the row became DONE, DEAD or FALLBACK; zero while it is pending.
	DoneAt time.Time
	// FirstAttemptAt is when the first failed attempt was recorded (by the database
	// clock); zero if none has failed, or since a replay.
	FirstAttemptAt time.Time
	// OrderKey is the key of an ordered event ([Envelope.OrderKey]), or "".
	OrderKey string
	// OrderSeq is an ordered event's place in its key (commit order), or 0.
	OrderSeq int64
	// LockedBy is the claim token ("<node ID>/<ULID>") in [MultiNode] mode, or "".
	LockedBy string
	// LockedUntil is when the claim expires: the database's value from a store, this
	// node's conservative estimate (comparable with time.Now) in the copy a listener gets.
	LockedUntil time.Time
	// Listener names the subscription this row is for, or "". A fan-out delivery (one
	// row per listener of an event that has several, docs/listeners.md) has it from its
	// insert and goes to that listener alone; any other row gets it when its listener
	// fails for good (DEAD or FALLBACK), so that a replay re-runs that listener only.
	Listener string
}

// Envelope is what business code writes: an event before it is stored. Only Type and
// Payload are required. [Writer.Write] validates every field before any SQL runs.
type Envelope struct {
	// ID is the event ID. Leave it empty to get a monotonic ULID; when set it must be at
	// most MaxIDLen bytes. Writing an ID that exists is a no-op ([Writer.WriteAll]):
	// use a request's idempotency key to make its retries safe.
	ID string
	// Type is the event type. Required, at most MaxTypeLen bytes.
	Type string
	// AggregateType routes the event together with Type. Defaults to GlobalAggregateType.
	// At most MaxAggregateTypeLen bytes.
	AggregateType string
	// AggregateID identifies the entity the event is about. At most MaxAggregateIDLen bytes.
	AggregateID string
	// TenantID is pass-through metadata. At most MaxTenantIDLen bytes.
	TenantID string
	// Payload is the event body. A []byte or json.RawMessage is taken as JSON text and
	// must be valid JSON; any other value (including a string) is marshalled with
	// encoding/json. The encoded payload must not exceed the writer's MaxPayloadBytes.
	Payload any
	// Headers is string metadata. Keys must not be empty.
	Headers map[string]string
	// OccurredAt is when the event happened; it becomes Event.CreatedAt and orders
	// delivery. Defaults to the time of the write.
	OccurredAt time.Time
	// AvailableAt delays delivery until this time. It must not be before OccurredAt and
	// cannot be combined with DeliverAfter. A delayed event skips the hot path.
	AvailableAt time.Time
	// DeliverAfter delays delivery by this long after OccurredAt. It must not be negative
	// and cannot be combined with AvailableAt.
	DeliverAfter time.Duration
	// OrderKey orders the event: a key's events are delivered one at a time, in commit
	// order (docs/ordering.md). Empty: unordered, unless Config.OrderByAggregate gives
	// it AggregateType + ":" + AggregateID. At most MaxOrderKeyLen bytes.
	OrderKey string
}
