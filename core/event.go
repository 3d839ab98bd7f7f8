package outbox

import (
	"time"
)

// GlobalAggregateType is the aggregate type of an envelope that has none.
const GlobalAggregateType = "__GLOBAL__"

// Envelope is an event to write: only Type and Payload are required, and [Writer.Write]
// validates every field before any SQL runs.
type Envelope struct {
	// ID is the event ID, at most MaxIDLen bytes; empty gets a new ULID. Writing an ID that
	// exists is a no-op.
	ID string
	// Type is the event type. Required, at most MaxTypeLen bytes.
	Type string
	// AggregateType routes the event with Type (MaxAggregateTypeLen); GlobalAggregateType if "".
	AggregateType string
	// AggregateID identifies the entity the event is about. At most MaxAggregateIDLen bytes.
	AggregateID string
	// TenantID is pass-through metadata. At most MaxTenantIDLen bytes.
	TenantID string
	// Payload is the body: valid JSON as []byte or json.RawMessage, else (a string too) encoded
	// with Config.Codec.
	Payload any
	// Headers is string metadata, at most MaxHeadersBytes; keys must not be empty.
	Headers map[string]string
	// OccurredAt is when the event happened, its Event.CreatedAt, which orders delivery.
	// Defaults to the write's time.
	OccurredAt time.Time
	// AvailableAt delays delivery until then (or the write, if later), not before
	// OccurredAt nor with DeliverAfter; it skips the hot path.
	AvailableAt time.Time
	// DeliverAfter delays delivery by this long after OccurredAt (≥ 0, not with AvailableAt).
	DeliverAfter time.Duration
	// OrderKey orders the event: one at a time per key, in commit order (MaxOrderKeyLen).
	OrderKey string
}
