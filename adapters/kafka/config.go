package outboxkafka

import (
	"context"

	outbox "github.com/outboxkit/outbox/core"
)

// The headers the relay puts on every record, after the event's own headers. A header
// that is not set is left out: the aggregate ID, tenant ID and order key only appear
// when the event has one. Other outbox relays (NATS) use the same names.
const (
	HeaderEventID       = "outbox-event-id"       // Event.ID: deduplicate by it
	HeaderEventType     = "outbox-event-type"     // Event.Type
	HeaderAggregateType = "outbox-aggregate-type" // Event.AggregateType (never empty)
	HeaderAggregateID   = "outbox-aggregate-id"   // Event.AggregateID, when set
	HeaderTenantID      = "outbox-tenant-id"      // Event.TenantID, when set
	HeaderOrderKey      = "outbox-order-key"      // Event.OrderKey, when set
	HeaderCreatedAt     = "outbox-created-at"     // Event.CreatedAt, RFC 3339 with nanoseconds, UTC
)

// Config configures a [Relay]. The zero value is ready to use.
type Config struct {
	// Topic names the Kafka topic of an event. It must return a topic name Kafka
	// accepts (letters, digits, '.', '_' and '-'; at most 249 bytes). An empty result
	// is a permanent failure: the event goes DEAD at once. It is called once per
	// attempt and must be safe for concurrent use. Defaults to [DefaultTopic], the
	// event's aggregate type ("Order"), which sends events written without an
	// aggregate type to [outbox.GlobalAggregateType] ("__GLOBAL__").
	Topic func(e *outbox.Event) string
	// Key returns the record key, which picks the partition: the events of one key
	// land in one partition, in the order they were produced. nil produces a record
	// without a key (the client's partitioner spreads those). It must be safe for
	// concurrent use. Defaults to [DefaultKey]: the order key, else the aggregate ID.
	Key func(e *outbox.Event) []byte
	// Propagate, when set, adds headers from the attempt's context, such as the trace
	// context of the span an interceptor started: it is called last, right before the
	// record is produced, with the listener's context, and each set(key, value) adds a
	// header or replaces the value of a header already set (an event header or an
	// outbox-* header); an empty key is ignored. set must not be called after
	// Propagate returns. Package outboxotel provides a function of this signature.
	// Defaults to none.
	Propagate func(ctx context.Context, set func(key, value string))
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Topic == nil {
		c.Topic = DefaultTopic
	}
	if c.Key == nil {
		c.Key = DefaultKey
	}
	return c
}

// DefaultTopic is the default [Config.Topic]: the event's aggregate type, so that the
// events of "Order" go to the topic "Order". Events written without an aggregate type
// carry [outbox.GlobalAggregateType] ("__GLOBAL__").
func DefaultTopic(e *outbox.Event) string { return e.AggregateType }

// DefaultKey is the default [Config.Key]: the event's order key when it has one, else
// its aggregate ID, else nil (no key). The events of one order key, or of one
// aggregate, share a partition, so Kafka keeps the order in which the outbox
// delivers them.
func DefaultKey(e *outbox.Event) []byte {
	switch {
	case e.OrderKey != "":
		return []byte(e.OrderKey)
	case e.AggregateID != "":
		return []byte(e.AggregateID)
	default:
		return nil
	}
}
