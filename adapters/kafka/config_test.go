package outboxkafka_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	outboxkafka "github.com/outboxkit/outbox/adapters/kafka"
	outbox "github.com/outboxkit/outbox/core"
)

// TestNew checks that New takes a client with franz-go's producer defaults and rejects
// the settings that break the relay's guarantees with an *outbox.ConfigError.
func TestNew(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t)
	for _, tc := range []struct {
		name  string
		opts  []kgo.Opt // nil: no client at all
		field string    // "" means New succeeds
	}{
		{name: "NilClient", field: "client"},
		{name: "Defaults", opts: []kgo.Opt{}},
		{name: "ExplicitSafeSettings", opts: []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("fallback")}},
		{name: "IdempotenceDisabled", opts: []kgo.Opt{kgo.DisableIdempotentWrite()}, field: "kgo.DisableIdempotentWrite"},
		{name: "LeaderAck", opts: []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())}, field: "kgo.RequiredAcks"},
		{name: "NoAck", opts: []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.NoAck())}, field: "kgo.RequiredAcks"},
		{name: "Transactional", opts: []kgo.Opt{kgo.TransactionalID("tx-1")}, field: "kgo.TransactionalID"},
		{name: "ManualFlushing", opts: []kgo.Opt{kgo.ManualFlushing()}, field: "kgo.ManualFlushing"},
		{name: "DefaultProduceTopicAlways", opts: []kgo.Opt{kgo.DefaultProduceTopic("all"), kgo.DefaultProduceTopicAlways()},
			field: "kgo.DefaultProduceTopicAlways"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var client *kgo.Client
			if tc.opts != nil {
				client = newClient(t, cluster, tc.opts...)
			}
			relay, err := outboxkafka.New(client, outboxkafka.Config{})
			if tc.field == "" {
				if err != nil || relay == nil {
					t.Fatalf("New: %v, %v; want a relay", relay, err)
				}
				return
			}
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, outbox.ErrInvalidConfig) || relay != nil {
				t.Fatalf("New: %v, %v; want an *outbox.ConfigError for %s", relay, err, tc.field)
			}
			t.Log(err)
		})
	}
}

// TestDefaults checks the default topic and key of events.
func TestDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		event outbox.Event
		topic string
		key   []byte // nil: no key
	}{
		{"OrderKey", outbox.Event{AggregateType: "Order", AggregateID: "o-1", OrderKey: "customer/c-1"}, "Order", []byte("customer/c-1")},
		{"AggregateID", outbox.Event{AggregateType: "Order", AggregateID: "o-1"}, "Order", []byte("o-1")},
		{"Neither", outbox.Event{AggregateType: outbox.GlobalAggregateType}, outbox.GlobalAggregateType, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := outboxkafka.DefaultTopic(&tc.event); got != tc.topic {
				t.Errorf("DefaultTopic = %q, want %q", got, tc.topic)
			}
			got := outboxkafka.DefaultKey(&tc.event)
			if (got == nil) != (tc.key == nil) || string(got) != string(tc.key) {
				t.Errorf("DefaultKey = %q (nil %v), want %q (nil %v)", got, got == nil, tc.key, tc.key == nil)
			}
		})
	}
}
