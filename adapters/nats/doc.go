// Package outboxnats publishes outbox events to NATS JetStream with
// github.com/nats-io/nats.go: a [Relay] is an [outbox.Listener] that publishes each
// event it is given and succeeds once JetStream has stored it.
//
// Import it as
//
//	import outboxnats "github.com/outboxkit/outbox/adapters/nats"
//
// # What it gives
//
// Register a Relay for the routes to publish, as any listener. Each event becomes one
// message: its payload (the stored JSON text) as data, on the subject [Config.Subject]
// returns ("outbox.<aggregate type>.<event type>" by default, see [DefaultSubject]),
// with the event's own headers, the outbox-* headers ([HeaderEventID] and the others),
// the trace context [Config.Propagate] adds, and Nats-Msg-Id set to the event ID.
// Events of one order key ([outbox.Envelope.OrderKey]) are published one at a time,
// each after the previous one's PubAck, so a stream stores them in commit order.
//
// # Guarantee
//
// [Relay.Handle] returns nil only after JetStream's PubAck, so the outbox marks an
// event DONE only once a stream has stored it; until then the outbox redelivers it, so
// nothing committed is lost. A redelivery publishes the same Nats-Msg-Id, and JetStream
// drops a message whose ID it stored within the stream's duplicate window
// (StreamConfig.Duplicates, 2 minutes by default): an attempt whose PubAck was lost, or
// that timed out while nats.go still sent its message later, costs no second message.
// Delivery into the stream is thus effectively once within the duplicate window, and at
// least once beyond it: a redelivery that comes later than the window after the first
// stored copy is a second message. The outbox redelivers after a failed attempt (the
// retry delay: up to 90 seconds with the default policy, plus the 30-second listener
// timeout), at the next start after a crash or a hard stop, and in MultiNode mode after
// a claim expired. Size the window above the longest of these you expect (10 minutes
// is a sound start; the server keeps every ID of the window in memory), or let
// consumers deduplicate by the outbox-event-id header, as at-least-once consumers do.
//
// The window drops any message whose ID it holds, whoever published it: event IDs must
// be unique among everything that publishes to the stream. The outbox's ULIDs are;
// IDs you set yourself ([outbox.Envelope.ID], an idempotency key, say) could repeat
// across two tables or services that share a stream, and the later message would be
// dropped as a duplicate.
//
// A PubAck means what the stream's storage means: with one replica it has the message
// in its file (flushed to disk every sync_interval, 2 minutes by default, unless
// sync_interval is "always"); with three replicas a quorum has it.
//
// # Errors
//
// Handle returns an error for the outbox to retry when the publish fails for a reason
// that may pass: a timeout (the listener's context bounds each publish), a lost
// connection, no stream bound to the subject (jetstream.ErrNoStreamResponse: a stream
// may be created later), a full stream that discards new messages, or any other server
// error. Errors that no retry can fix wrap [outbox.ErrUnrecoverable], so the event goes
// DEAD after one attempt (replay it once fixed): [ErrInvalidSubject], [ErrInvalidHeader]
// and [ErrMessageTooLarge].
//
// Give the connection nats.MaxReconnects(-1): by default nats.go gives up after 60
// reconnection attempts (about two minutes), and every publish on a closed connection
// fails until the process restarts.
//
// # Example
//
//	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
//	...
//	defer nc.Close() // after ob.Stop
//	js, err := jetstream.New(nc)
//	...
//	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
//		Name: "OUTBOX", Subjects: []string{"outbox.>"}, Duplicates: 10 * time.Minute,
//	})
//	...
//	relay, err := outboxnats.New(js, outboxnats.Config{})
//	...
//	err = ob.Register("Order", "OrderPlaced", relay)
//
// docs/nats.md in the repository has the details.
package outboxnats
