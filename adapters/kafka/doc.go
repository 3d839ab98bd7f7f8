// Package outboxkafka relays outbox events to Kafka: its [Relay] is an
// [outbox.Listener] that produces each event it handles as one record, with
// github.com/twmb/franz-go, and succeeds once the broker has acknowledged the record.
//
// Import it as
//
//	import outboxkafka "github.com/outboxkit/outbox/adapters/kafka"
//
// (the folder is kafka, the package outboxkafka, so it never shadows another kafka
// package).
//
// # What it gives
//
// Register a Relay for the events to publish, like any listener:
//
//	client, err := kgo.NewClient(kgo.SeedBrokers("kafka-1:9092", "kafka-2:9092"))
//	...
//	defer client.Close() // after ob.Stop
//	relay, err := outboxkafka.New(client, outboxkafka.Config{})
//	...
//	err = ob.Register("Order", "OrderPlaced", relay)
//
// Each event becomes one record:
//
//   - topic: [Config.Topic]'s, by default the aggregate type ("Order");
//   - key: [Config.Key]'s, by default the order key, else the aggregate ID, so the
//     events of one key or one aggregate share a partition;
//   - value: the payload, the JSON text as stored;
//   - headers: the event's headers sorted by key, then [HeaderEventID],
//     [HeaderEventType], [HeaderAggregateType], [HeaderAggregateID], [HeaderTenantID],
//     [HeaderOrderKey] (the last three when set) and [HeaderCreatedAt], then those
//     [Config.Propagate] sets. Each key appears once, where it was first set, with the
//     value set last.
//
// # Guarantees
//
// An event is DONE only after the broker acknowledged its record with acks from all
// in-sync replicas: [New] rejects a client whose producer settings could lose it (acks
// other than all, idempotent writes disabled). Delivery into Kafka is at least once,
// not exactly once. franz-go's idempotent producer deduplicates its own retries of a
// request, but when an attempt fails after the record was sent (the listener's
// timeout ends before the acknowledgement arrives, the process stops or crashes before
// the outcome is recorded), the outbox's retry produces a new record and the topic
// holds the event twice; the record of an attempt that timed out can even land after
// the event went DEAD. Consumers deduplicate by the [HeaderEventID] header.
//
// Order per key holds when the outbox delivers the key's events in order, that is for
// events with an [outbox.Envelope.OrderKey] (or [outbox.Config.OrderByAggregate]): the
// outbox hands over a key's next event only once the previous one is DONE, so after
// its record was acknowledged, and the record key keeps them in one partition. A
// duplicate may follow later, but the first copy of each event comes in order, so a
// consumer that skips event IDs it has seen sees the key's events in commit order.
// Adding partitions to a topic moves keys, and a partitioner that ignores keys (the
// client's default hashes them as Kafka's Java client does) spreads them.
//
// # Errors
//
// [Relay.Handle] waits for the acknowledgement as long as the listener's context
// allows ([outbox.Config.ListenerTimeout], or the [outbox.Subscription]'s Timeout). A
// failure is returned as a [*ProduceError] and retried with the outbox's retry policy:
// a broker that is down or refuses, an unknown topic, a context that ended first. A
// failure that no retry can fix matches [outbox.ErrUnrecoverable] and makes the event
// DEAD at once: an empty topic ([ErrEmptyTopic]), an event without a payload
// ([ErrNoPayload]), and the broker's MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
// INVALID_RECORD and INVALID_TOPIC_EXCEPTION.
//
// # Trace context
//
// [Config.Propagate] adds headers from the attempt's context right before the record
// is produced: give it the function of package outboxotel (or your own) to carry the
// trace context of the delivery's span to the consumers. This package does not depend
// on OpenTelemetry.
//
// docs/kafka.md has the details. The tests run against kfake, franz-go's in-process
// Kafka cluster, and a real outbox on SQLite.
package outboxkafka
