package outboxkafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	outbox "github.com/outboxkit/outbox/core"
)

// Relay is an [outbox.Listener] that produces each event it handles to Kafka and
// succeeds once the broker has acknowledged the record. Create it with [New]. It is
// safe for concurrent use: register one Relay for as many routes as you like.
type Relay struct {
	client *kgo.Client
	cfg    Config
}

var _ outbox.BatchListener = (*Relay)(nil)

// New returns a Relay that produces with client, which the caller keeps: close it
// after [outbox.Outbox.Stop]. New does no I/O.
//
// New returns an [*outbox.ConfigError] (matching outbox.ErrInvalidConfig) when client
// is nil or its producer settings break the relay's guarantees: acks other than
// kgo.AllISRAcks() (kgo.RequiredAcks), idempotent writes disabled
// (kgo.DisableIdempotentWrite), a transactional ID (kgo.TransactionalID: the relay
// produces outside transactions), kgo.ManualFlushing (nothing would flush the
// records) or kgo.DefaultProduceTopicAlways (it would override [Config.Topic]).
func New(client *kgo.Client, cfg Config) (*Relay, error) {
	if client == nil {
		return nil, &outbox.ConfigError{Field: "client", Reason: "is nil"}
	}
	if err := checkClient(client); err != nil {
		return nil, err
	}
	return &Relay{client: client, cfg: cfg.withDefaults()}, nil
}

// checkClient checks the producer settings of client that the relay depends on, as far
// as franz-go reports them (Client.OptValue).
func checkClient(client *kgo.Client) error {
	if v := client.OptValues(kgo.TransactionalID); len(v) == 2 { // the ID, and whether it is set
		if set, _ := v[1].(bool); set {
			return &outbox.ConfigError{Field: "kgo.TransactionalID",
				Reason: fmt.Sprintf("is set (%q); the relay produces outside transactions, give it a client without one", v[0])}
		}
	}
	if acks, ok := client.OptValue(kgo.RequiredAcks).(kgo.Acks); !ok || acks != kgo.AllISRAcks() {
		return &outbox.ConfigError{Field: "kgo.RequiredAcks",
			Reason: "is not kgo.AllISRAcks(); the relay needs acks from all in-sync replicas (franz-go's default)"}
	}
	if disabled, ok := client.OptValue(kgo.DisableIdempotentWrite).(bool); !ok || disabled {
		return &outbox.ConfigError{Field: "kgo.DisableIdempotentWrite",
			Reason: "is set; the relay needs the idempotent producer (franz-go's default), which keeps its own retries from writing a record twice"}
	}
	if manual, ok := client.OptValue(kgo.ManualFlushing).(bool); !ok || manual {
		return &outbox.ConfigError{Field: "kgo.ManualFlushing",
			Reason: "is set; the relay waits for each record's acknowledgement and never calls Flush"}
	}
	if always, ok := client.OptValue(kgo.DefaultProduceTopicAlways).(bool); !ok || always {
		return &outbox.ConfigError{Field: "kgo.DefaultProduceTopicAlways",
			Reason: "is set; it would send every event to the default topic instead of Config.Topic's"}
	}
	return nil
}

// Handle produces e to Kafka and returns nil once the broker has acknowledged the
// record (acks from all in-sync replicas), so the outbox marks e DONE only then.
// ctx, the listener's context, bounds the wait.
//
// The record's value is e.Payload, its key [Config.Key]'s and its topic
// [Config.Topic]'s; its headers are e.Headers sorted by key, then the outbox-* headers
// ([HeaderEventID] and the others), then what [Config.Propagate] sets; each key
// appears once, where it was first set, with the value set last.
//
// Every error is a [*ProduceError]. A failure no retry can fix (an empty topic, an
// event without a payload, a record the broker refuses as too large or invalid, an
// invalid topic name) is permanent and matches [outbox.ErrUnrecoverable]; the others
// (broker unavailable, authorization, the context ending first) are retried by the
// outbox's retry policy. When ctx ends first the record may still reach Kafka later:
// the client keeps it until the broker answers, so the retry may write it twice.
func (r *Relay) Handle(ctx context.Context, e *outbox.Event) error {
	p := r.produce(ctx, e)
	return p.wait(ctx)
}

// HandleBatch produces the batch's records at once, each as Handle does with its item's
// context (its span, and its own deadline, which ends no later than ctx's), then waits
// for each acknowledgement: the client sends the records of one partition together
// (one produce request per broker while the previous is in flight), instead of one
// record per round trip. Each event gets its own error, as from Handle. The outbox
// calls it for the events of one subscription queued together, up to
// [outbox.Subscription.BatchSize].
func (r *Relay) HandleBatch(_ context.Context, batch []outbox.BatchItem) []error {
	pending := make([]produced, len(batch))
	for i, it := range batch {
		pending[i] = r.produce(it.Ctx, it.Event)
	}
	errs := make([]error, len(batch))
	for i, it := range batch {
		errs[i] = pending[i].wait(it.Ctx)
	}
	return errs
}

// produced is one record handed to the client, or the error that kept it from being
// produced.
type produced struct {
	r     *Relay
	e     *outbox.Event
	topic string
	err   error      // set: nothing was produced
	acked chan error // the promise's answer
}

// produce checks e and hands its record to the client.
func (r *Relay) produce(ctx context.Context, e *outbox.Event) produced {
	topic := r.cfg.Topic(e)
	p := produced{r: r, e: e, topic: topic}
	switch {
	case topic == "":
		p.err = &ProduceError{EventID: e.ID, Permanent: true, Err: ErrEmptyTopic}
	case len(e.Payload) == 0:
		p.err = &ProduceError{EventID: e.ID, Topic: topic, Permanent: true, Err: ErrNoPayload}
	case ctx.Err() != nil:
		p.err = r.unacknowledged(ctx, e, topic)
	}
	if p.err != nil {
		return p
	}
	rec := &kgo.Record{
		Topic:   topic,
		Key:     r.cfg.Key(e),
		Value:   e.Payload,
		Headers: r.headers(ctx, e),
	}
	p.acked = make(chan error, 1) // the promise must not block, and may run after we return
	r.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { p.acked <- err })
	return p
}

// wait returns p's outcome once the broker answered, or an error when ctx ends first.
func (p produced) wait(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	select {
	case err := <-p.acked:
		return p.r.result(p.e, p.topic, err)
	case <-ctx.Done():
		select {
		case err := <-p.acked: // answered as the context ended: the answer counts
			return p.r.result(p.e, p.topic, err)
		default:
			return p.r.unacknowledged(ctx, p.e, p.topic)
		}
	}
}

// result turns the outcome of producing e into Handle's error.
func (r *Relay) result(e *outbox.Event, topic string, err error) error {
	if err == nil {
		return nil
	}
	return &ProduceError{EventID: e.ID, Topic: topic, Permanent: permanent(err), Err: err}
}

// unacknowledged is Handle's error when ctx ended before the broker acknowledged e.
func (r *Relay) unacknowledged(ctx context.Context, e *outbox.Event, topic string) error {
	return &ProduceError{EventID: e.ID, Topic: topic,
		Err: fmt.Errorf("no acknowledgement before the listener's context ended: %w", context.Cause(ctx))}
}

// headers returns the record headers of e: its own sorted by key, the outbox-* ones,
// then Propagate's, one per key where it was first set, with the value set last.
func (r *Relay) headers(ctx context.Context, e *outbox.Event) []kgo.RecordHeader {
	hs := headerSet{at: make(map[string]int, len(e.Headers)+7)}
	hs.list = make([]kgo.RecordHeader, 0, len(e.Headers)+7)
	for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
		hs.set(k, e.Headers[k])
	}
	hs.set(HeaderEventID, e.ID)
	hs.set(HeaderEventType, e.Type)
	hs.set(HeaderAggregateType, e.AggregateType)
	hs.setNonEmpty(HeaderAggregateID, e.AggregateID)
	hs.setNonEmpty(HeaderTenantID, e.TenantID)
	hs.setNonEmpty(HeaderOrderKey, e.OrderKey)
	hs.set(HeaderCreatedAt, e.CreatedAt.UTC().Format(time.RFC3339Nano))
	if r.cfg.Propagate != nil {
		r.cfg.Propagate(ctx, hs.set)
	}
	return hs.list
}

// headerSet is an ordered list of record headers with one entry per key.
type headerSet struct {
	list []kgo.RecordHeader
	at   map[string]int // key -> index in list
}

// set adds the header key, or replaces its value if it is there already. An empty key
// is ignored.
func (s *headerSet) set(key, value string) {
	if key == "" {
		return
	}
	if i, ok := s.at[key]; ok {
		s.list[i].Value = []byte(value)
		return
	}
	s.at[key] = len(s.list)
	s.list = append(s.list, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// setNonEmpty calls set unless value is empty.
func (s *headerSet) setNonEmpty(key, value string) {
	if value != "" {
		s.set(key, value)
	}
}
