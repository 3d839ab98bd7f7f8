package outboxkafka_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	outboxkafka "github.com/outboxkit/outbox/adapters/kafka"
	outbox "github.com/outboxkit/outbox/core"
)

// waitTimeout bounds every wait of these tests. It only turns a hang into a failure;
// it is not a claim about how fast anything is.
const waitTimeout = 30 * time.Second

// testPartitions is the partition count of the tests' topics: more than one, so that a
// key that did not pick the partition would show in the order.
const testPartitions = 3

// testBundle is a kfake cluster (an in-process Kafka), a producing client for the
// relay, and an outbox on a fresh SQLite database.
type testBundle struct {
	cluster *kfake.Cluster
	client  *kgo.Client
	db      *sql.DB
	ob      *outbox.Outbox
}

// setupOpts shape a test's bundle.
type setupOpts struct {
	topics []string      // created with testPartitions partitions each
	kfake  []kfake.Opt   // more cluster options
	outbox outbox.Config // Dialect is set by setup; the Logger defaults to discarding
}

// setup starts a kfake cluster and builds an outbox (the test registers its listeners,
// then calls start); both are stopped when the test ends, the outbox first.
func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	cluster := newCluster(t, append([]kfake.Opt{kfake.SeedTopics(testPartitions, o.topics...)}, o.kfake...)...)
	client := newClient(t, cluster)
	db := newSQLiteDB(t)
	db.SetMaxOpenConns(1) // SQLite has one writer: let them queue in Go, as the outbox advises
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := outbox.Migrate(ctx, db, outbox.SQLite); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	cfg := o.outbox
	cfg.Dialect = outbox.SQLite
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		t.Fatalf("outbox.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("outbox Stop: %v", err)
		}
	})
	return &testBundle{cluster: cluster, client: client, db: db, ob: ob}
}

// newCluster starts a one-broker kfake cluster, closed when the test ends.
func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// newClient returns a client of cluster with franz-go's defaults plus opts, closed
// when the test ends.
func newClient(t *testing.T, cluster *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(client.Close)
	return client
}

// relay returns a Relay on the bundle's client.
func (b *testBundle) relay(t *testing.T, cfg outboxkafka.Config) *outboxkafka.Relay {
	t.Helper()
	r, err := outboxkafka.New(b.client, cfg)
	if err != nil {
		t.Fatalf("outboxkafka.New: %v", err)
	}
	return r
}

// start starts the outbox.
func (b *testBundle) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := b.ob.Start(ctx); err != nil {
		t.Fatalf("outbox Start: %v", err)
	}
}

// write writes env in a transaction of its own and returns the event's ID.
func (b *testBundle) write(t *testing.T, env outbox.Envelope) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var id string
	err := outbox.RunInTx(ctx, b.db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = b.ob.Writer().Write(ctx, tx, env)
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return id
}

// event returns the stored event id, whatever its status.
func (b *testBundle) event(t *testing.T, id string) outbox.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	e, err := b.ob.Events().Get(ctx, id)
	if err != nil {
		t.Fatalf("get event %s: %v", id, err)
	}
	return e
}

// waitEvent polls the stored event id until cond holds, and returns it; it fails the
// test when waitTimeout passes first.
func (b *testBundle) waitEvent(t *testing.T, id, what string, cond func(outbox.Event) bool) outbox.Event {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		e := b.event(t, id)
		if cond(e) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s: waited %v for %s; last seen %s, attempts %d, last error %q",
				id, waitTimeout, what, e.Status, e.Attempts, e.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus waits until the stored event id has status s, and returns it.
func (b *testBundle) waitStatus(t *testing.T, id string, s outbox.Status) outbox.Event {
	t.Helper()
	return b.waitEvent(t, id, s.String(), func(e outbox.Event) bool { return e.Status == s })
}

// consume reads the topics from the start until it has seen every event of ids (by
// the outbox-event-id header), and returns everything it read, in the order of each
// partition. It fails the test when waitTimeout passes first.
func consume(t *testing.T, cluster *kfake.Cluster, topics []string, ids ...string) []*kgo.Record {
	t.Helper()
	consumer := newClient(t, cluster,
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var recs []*kgo.Record
	for len(want) > 0 {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records in %v, still missing events %v", len(recs), waitTimeout, keys(want))
		}
		for _, err := range fetches.Errors() {
			t.Logf("fetch %s/%d: %v", err.Topic, err.Partition, err.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			delete(want, header(r, outboxkafka.HeaderEventID))
		})
	}
	return recs
}

// header returns the value of the record header key, or "".
func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// mustJSON marshals v.
func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newSQLiteDB opens a new SQLite database file in the test's temp dir and closes it
// when the test ends.
func newSQLiteDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "outbox.db")))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close sqlite: %v", err)
		}
	})
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("ping sqlite: %v", err)
	}
	return db
}
