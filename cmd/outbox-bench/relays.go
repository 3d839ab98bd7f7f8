package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	outboxkafka "github.com/outboxkit/outbox/adapters/kafka"
	outboxnats "github.com/outboxkit/outbox/adapters/nats"
	outbox "github.com/outboxkit/outbox/core"
)

// relayListener starts the broker of workload w (w1n: a nats-server with JetStream in
// this process, file storage in a temporary directory; w1k: franz-go's kfake cluster,
// also in this process) and returns the relay to it and the function that stops both.
// For any other workload it returns nil: the no-op listener.
func relayListener(ctx context.Context, w string) (outbox.Listener, func(), error) {
	switch w {
	case "w1n":
		return natsRelay(ctx)
	case "w1k":
		return kafkaRelay()
	}
	return nil, func() {}, nil
}

func natsRelay(ctx context.Context) (outbox.Listener, func(), error) {
	dir, err := os.MkdirTemp("", "outbox-bench-nats-")
	if err != nil {
		return nil, nil, err
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ns.Start()
	stop := func() { ns.Shutdown(); ns.WaitForShutdown(); os.RemoveAll(dir) }
	if !ns.ReadyForConnections(10 * time.Second) {
		stop()
		return nil, nil, fmt.Errorf("nats-server did not start")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		stop()
		return nil, nil, err
	}
	stopAll := func() { nc.Close(); stop() }
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"outbox.>"}})
	}
	if err != nil {
		stopAll()
		return nil, nil, err
	}
	relay, err := outboxnats.New(js, outboxnats.Config{})
	if err != nil {
		stopAll()
		return nil, nil, err
	}
	return relay, stopAll, nil
}

func kafkaRelay() (outbox.Listener, func(), error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, aggregateType))
	if err != nil {
		return nil, nil, err
	}
	// No linger, as docs/kafka.md recommends for the relay: it waits for each record's
	// acknowledgement, so franz-go's default 10 ms linger is 10 ms of every attempt
	// (W1k reached 0.14 x W1 with it, 0.86 x without, on SQLite).
	client, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	stop := func() { client.Close(); c.Close() }
	relay, err := outboxkafka.New(client, outboxkafka.Config{})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return relay, stop, nil
}
