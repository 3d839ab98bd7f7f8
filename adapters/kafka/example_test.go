package outboxkafka_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	outboxkafka "github.com/outboxkit/outbox/adapters/kafka"
	outbox "github.com/outboxkit/outbox/core"
)

// Example relays the events of the "Order" aggregate to the Kafka topic "Order",
// keyed by the order's ID. The broker is kfake, franz-go's in-process Kafka cluster,
// so the example runs anywhere; point kgo.SeedBrokers at your brokers instead.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.SeedTopics(3, "Order")) // in-process, for the example
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	// franz-go's producer defaults are what the relay needs: acks from all in-sync
	// replicas and the idempotent producer.
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0)) // the relay waits for each ack
	if err != nil {
		panic(err)
	}
	defer client.Close() // after ob.Stop
	relay, err := outboxkafka.New(client, outboxkafka.Config{})
	if err != nil {
		panic(err)
	}

	dir, err := os.MkdirTemp("", "outboxkafka-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // SQLite has one writer: let them queue in Go
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		panic(err)
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		panic(err)
	}
	if err := ob.Register("Order", "OrderPlaced", relay); err != nil {
		panic(err)
	}
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Stop(context.WithoutCancel(ctx))

	err = outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		// ... insert the order itself in tx ...
		_, err := ob.Writer().Write(ctx, tx, outbox.Envelope{
			Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1",
			Payload: map[string]int{"total_cents": 1999},
		})
		return err
	})
	if err != nil {
		panic(err)
	}

	// A consumer reads the record back.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("Order"))
	if err != nil {
		panic(err)
	}
	defer consumer.Close()
	for {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			panic(ctx.Err())
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		r := fetches.Records()[0]
		var names []string
		for _, h := range r.Headers {
			names = append(names, h.Key)
		}
		fmt.Printf("topic %s, key %s, value %s\n", r.Topic, r.Key, r.Value)
		fmt.Println("headers:", strings.Join(names, " "))
		return
	}
	// Output:
	// topic Order, key o-1, value {"total_cents":1999}
	// headers: outbox-event-id outbox-event-type outbox-aggregate-type outbox-aggregate-id outbox-created-at
}

// ExampleConfig routes events to topics of your naming, keys them by tenant, and gives
// the relay a delivery policy of its own: at most 5 attempts of 10 seconds each.
func ExampleConfig() {
	var (
		ob     *outbox.Outbox // from outbox.New
		client *kgo.Client    // from kgo.NewClient, with franz-go's producer defaults
	)
	relay, err := outboxkafka.New(client, outboxkafka.Config{
		Topic: func(e *outbox.Event) string {
			return "shop." + strings.ToLower(e.AggregateType) + "-events" // "shop.order-events"
		},
		Key: func(e *outbox.Event) []byte {
			return []byte(e.TenantID) // a tenant's events share one partition
		},
	})
	if err != nil {
		panic(err)
	}
	err = ob.Subscribe(outbox.Subscription{
		Name:          "kafka-orders",
		AggregateType: "Order",
		EventType:     "OrderPlaced",
		Listener:      relay,
		MaxAttempts:   5,
		Timeout:       10 * time.Second, // bounds each produce, acknowledgement included
	})
	if err != nil {
		panic(err)
	}
}
