package outbox

import (
	"time"
)

// GlobalAggregateType is the aggregate type of an event whose [Envelope.AggregateType] is empty.
const GlobalAggregateType = "__GLOBAL__"

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
