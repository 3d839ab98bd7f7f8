package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The peers are the libraries a user would pick instead of this one, measured end to
// end like w1: o.producers goroutines, o.w1Tx business transactions of the business
// INSERT and one event, the clock stopping when every event reached its in-process
// consumer and the peer recorded it as done in the database. Each runs at the settings
// its documentation recommends; they are dependencies of this bench's module only, so
// no user of the library gets them in a module graph.

// Module paths of the peers, for their versions in the report.
const (
	riverModule        = "github.com/riverqueue/river"
	watermillModule    = "github.com/ThreeDotsLabs/watermill"
	watermillSQLModule = "github.com/ThreeDotsLabs/watermill-sql/v4"
)

// peerUnsupported says why peer w does not run on database kind, or "" when it does (or
// w is not a peer).
func peerUnsupported(w, kind string) string {
	switch {
	case w == "river" && kind != "postgres":
		return "River runs on PostgreSQL only (its riverpgxv5 driver, the one its documentation recommends)"
	case w == "watermill" && kind == "sqlite":
		return "Watermill SQL supports PostgreSQL and MySQL only (SQLite is another module, watermill-sqlite, not measured)"
	}
	return ""
}

// moduleVersion is the version of module path in this binary, or "(unknown version)".
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				if m.Replace != nil {
					m = m.Replace
				}
				return m.Version
			}
		}
	}
	return "(unknown version)"
}

// dropAfter runs drop, a DROP statement that removes what a workload created, once the
// workload is over, so that the workloads after it run beside no table of its.
func dropAfter(t *target, drop string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := t.db.ExecContext(ctx, drop); err != nil {
		progress("%s: %v", drop, err)
	}
}

// peerStall is how long a peer may deliver nothing, once its producers are done,
// before the events it has not delivered count as lost: longer than Watermill's ack
// deadline (30 s), after which a message not acknowledged would come again, and than
// every poll interval of the peers' defaults (1 s).
const peerStall = 35 * time.Second

// doneCounter counts the events a peer's consumer received and closes all at n.
type doneCounter struct {
	n    int64
	base time.Time
	got  atomic.Int64
	last atomic.Int64 // nanoseconds from base to the latest event
	all  chan struct{}
}

func newDoneCounter(n int) *doneCounter {
	return &doneCounter{n: int64(n), base: time.Now(), all: make(chan struct{})}
}

func (c *doneCounter) add() {
	c.last.Store(int64(time.Since(c.base)))
	if c.got.Add(1) == c.n {
		close(c.all)
	}
}

// wait waits until n events were received, and returns 0. When none arrives for stall
// (counted from the call at the earliest), it gives up and returns how many never did,
// and the time the latest one arrived.
func (c *doneCounter) wait(ctx context.Context, stall time.Duration) (lost int64, lastAt time.Time, err error) {
	called := time.Since(c.base)
	tick := time.NewTicker(min(stall/10, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-c.all:
			return 0, time.Time{}, nil
		case <-ctx.Done():
			return 0, time.Time{}, fmt.Errorf("waiting for deliveries: %d of %d received: %w", c.got.Load(), c.n, ctx.Err())
		case <-tick.C:
			last := max(time.Duration(c.last.Load()), called)
			if time.Since(c.base)-last >= stall {
				if got := c.got.Load(); got < c.n {
					return c.n - got, c.base.Add(time.Duration(c.last.Load())), nil
				}
			}
		}
	}
}

// lostSample is the sample of a peer that delivered only part of its n events: the
// events that arrived, over the time from start to the latest of them, and the others
// counted as lost.
func lostSample(n int, lost int64, start, lastAt time.Time, written time.Duration) sample {
	progress("%d of %d events never reached the consumer: no delivery for %s", lost, n, peerStall)
	return sample{events: n - int(lost), txs: n, lost: lost, writeSeconds: written.Seconds(), seconds: lastAt.Sub(start).Seconds()}
}

// waitQuery polls done every millisecond until it reports true.
func waitQuery(ctx context.Context, what string, done func(ctx context.Context) (bool, error)) error {
	for {
		ok, err := done(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// riverArgs is the River job: the benchmark's payload, JSON-encoded by River.
type riverArgs struct {
	orderPlaced
}

func (riverArgs) Kind() string { return "order_placed" }

// riverWorker is the no-op worker: it counts the job and returns.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	done *doneCounter
}

func (w *riverWorker) Work(context.Context, *river.Job[riverArgs]) error {
	w.done.add()
	return nil
}

// riverSchema is the schema River's tables go into: dropped and migrated again in
// every round, dropped at the end (see target.close).
func (t *target) riverSchema() string { return t.schema + "_river" }

// runRiver is the River peer: a pgx pool of the bench's pool size, River's tables
// migrated by rivermigrate into a schema of their own, a client with the default queue
// at o.riverWorkers workers (River's documentation configures 100) and every other
// setting at its default; each business transaction inserts its job with InsertTx.
// The clock stops when every job reached the worker and River marked it completed.
func runRiver(ctx context.Context, o options, t *target) (sample, error) {
	schema := t.riverSchema()
	drop := "DROP SCHEMA IF EXISTS " + t.quoteIdent(schema) + " CASCADE"
	if _, err := t.db.ExecContext(ctx, drop); err != nil {
		return sample{}, fmt.Errorf("drop River's schema: %w", err)
	}
	if _, err := t.db.ExecContext(ctx, "CREATE SCHEMA "+t.quoteIdent(schema)); err != nil {
		return sample{}, fmt.Errorf("create River's schema: %w", err)
	}
	defer dropAfter(t, drop) // runs last: after the client stopped and the pool closed
	cfg, err := pgxpool.ParseConfig(t.dsn)
	if err != nil {
		return sample{}, err
	}
	if t.pool > 0 {
		cfg.MaxConns = int32(t.pool)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return sample{}, err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return sample{}, err
	}
	// Open the pool's connections now, as the bench's own pool has them open from the
	// workloads before: the measured phase opens none.
	conns := make([]*pgxpool.Conn, 0, t.pool)
	var acquireErr error
	for range t.pool {
		c, err := pool.Acquire(ctx)
		if err != nil {
			acquireErr = err // the others are released first, or pool.Close would wait for them
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if acquireErr != nil {
		return sample{}, fmt.Errorf("open River's pool: %w", acquireErr)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: o.logger()})
	if err != nil {
		return sample{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return sample{}, fmt.Errorf("run River's migrations: %w", err)
	}

	n := o.w1Tx
	done := newDoneCounter(n)
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &riverWorker{done: done}); err != nil {
		return sample{}, err
	}
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.riverWorkers}},
		Workers: workers,
		Schema:  schema,
		Logger:  o.logger(),
	})
	if err != nil {
		return sample{}, err
	}
	if err := client.Start(ctx); err != nil {
		return sample{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			progress("stop River's client: %v", err)
		}
	}()

	insert := t.insertOrderSQL()
	start := time.Now()
	err = produce(ctx, o.producers, n, func(ctx context.Context, i int) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
		id := "o-" + strconv.Itoa(i)
		if _, err := tx.Exec(ctx, insert, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(time.Now())); err != nil {
			return err
		}
		if _, err := client.InsertTx(ctx, tx, riverArgs{o.payload(id, i)}, nil); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return sample{}, err
	}
	written := time.Since(start)
	lost, lastAt, err := done.wait(ctx, peerStall)
	if err != nil {
		return sample{}, err
	}
	if lost > 0 {
		return lostSample(n, lost, start, lastAt, written), nil
	}
	count := "SELECT COUNT(*) FROM " + t.quoteIdent(schema+".river_job") + " WHERE state = 'completed'"
	err = waitQuery(ctx, "River's completed jobs", func(ctx context.Context) (bool, error) {
		var got int64
		err := pool.QueryRow(ctx, count).Scan(&got)
		return got >= int64(n), err
	})
	if err != nil {
		return sample{}, err
	}
	return sample{events: n, txs: n, writeSeconds: written.Seconds(), seconds: time.Since(start).Seconds()}, nil
}

// Watermill's topics: the SQL topic the forwarder reads (its outbox table) and the
// GoChannel topic it forwards to.
const (
	watermillOutboxTopic = "bench_outbox"
	watermillTopic       = "order_placed"
)

// watermillAdapters returns the default schema and offsets adapters of kind (those
// Watermill's documentation names), with their tables in the run's schema. On
// PostgreSQL, done reports whether the consumer group acknowledged the last message in
// the order the subscriber reads them (transaction ID, then offset); on MySQL, whether
// it acknowledged the highest offset.
func watermillAdapters(t *target) (schema wsql.SchemaAdapter, offsets wsql.OffsetsAdapter, tables []string, done string) {
	messages := t.quoteIdent(t.qualify("watermill_" + watermillOutboxTopic))
	acks := t.quoteIdent(t.qualify("watermill_offsets_" + watermillOutboxTopic))
	messagesName := func(string) string { return messages }
	acksName := func(string) string { return acks }
	tables = []string{messages, acks}
	if t.kind == "postgres" {
		return wsql.DefaultPostgreSQLSchema{GenerateMessagesTableName: messagesName},
			wsql.DefaultPostgreSQLOffsetsAdapter{GenerateMessagesOffsetsTableName: acksName}, tables,
			`SELECT COALESCE((SELECT o.offset_acked FROM ` + acks + ` o WHERE o.consumer_group = '') =
				(SELECT m."offset" FROM ` + messages + ` m ORDER BY m.transaction_id DESC, m."offset" DESC LIMIT 1), false)`
	}
	return wsql.DefaultMySQLSchema{GenerateMessagesTableName: messagesName},
		wsql.DefaultMySQLOffsetsAdapter{GenerateMessagesOffsetsTableName: acksName}, tables,
		"SELECT COALESCE((SELECT o.offset_acked FROM " + acks + " o WHERE o.consumer_group = '') >= " +
			"(SELECT MAX(m.`offset`) FROM " + messages + " m), false)"
}

// runWatermill is the Watermill peer: Watermill SQL's default schema and offsets
// adapter of the database, on the bench's pool; in each business transaction a
// Watermill SQL publisher on that transaction, wrapped by the forwarder's publisher,
// publishes the event; the forwarder reads the SQL topic and forwards every event to a
// GoChannel pub/sub, whose subscriber acknowledges it. Every setting is at its
// default. The clock stops when every event reached the GoChannel subscriber and the
// forwarder's subscriber recorded the last one acknowledged in its offsets table.
func runWatermill(ctx context.Context, o options, t *target) (sample, error) {
	schema, offsets, tables, doneQuery := watermillAdapters(t)
	for _, table := range tables {
		if _, err := t.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			return sample{}, fmt.Errorf("drop %s: %w", table, err)
		}
		defer dropAfter(t, "DROP TABLE IF EXISTS "+table) // runs last, after the forwarder stopped
	}
	logger := watermill.NewSlogLogger(o.logger())
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(t.db), wsql.SubscriberConfig{
		SchemaAdapter:    schema,
		OffsetsAdapter:   offsets,
		InitializeSchema: true,
	}, logger)
	if err != nil {
		return sample{}, err
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize(watermillOutboxTopic); err != nil {
		return sample{}, fmt.Errorf("create Watermill's tables: %w", err)
	}

	n := o.w1Tx
	done := newDoneCounter(n)
	pubSub := gochannel.NewGoChannel(gochannel.Config{}, logger)
	defer pubSub.Close() // Close is idempotent: also closed below, before the consumer's end
	consumed, err := pubSub.Subscribe(ctx, watermillTopic)
	if err != nil {
		return sample{}, err
	}
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for msg := range consumed {
			msg.Ack()
			done.add()
		}
	}()
	fwd, err := forwarder.NewForwarder(sub, pubSub, logger, forwarder.Config{ForwarderTopic: watermillOutboxTopic})
	if err != nil {
		return sample{}, err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- fwd.Run(context.WithoutCancel(ctx)) }()
	defer func() {
		if err := fwd.Close(); err != nil {
			progress("close Watermill's forwarder: %v", err)
		}
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			progress("Watermill's forwarder: %v", err)
		}
		pubSub.Close()
		<-consumerDone
	}()
	select {
	case <-fwd.Running():
	case err := <-runErr:
		runErr <- err // for the deferred function
		return sample{}, fmt.Errorf("start Watermill's forwarder: %w", err)
	case <-ctx.Done():
		return sample{}, ctx.Err()
	}

	insert := t.insertOrderSQL()
	start := time.Now()
	err = produce(ctx, o.producers, n, func(ctx context.Context, i int) error {
		tx, err := t.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }() // a no-op after Commit
		id := "o-" + strconv.Itoa(i)
		if _, err := tx.ExecContext(ctx, insert, id, "customer-"+strconv.Itoa(i%100), int64(i), t.orderTime(time.Now())); err != nil {
			return err
		}
		payload, err := json.Marshal(o.payload(id, i))
		if err != nil {
			return err
		}
		sqlPub, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: schema}, logger)
		if err != nil {
			return err
		}
		pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: watermillOutboxTopic})
		if err := pub.Publish(watermillTopic, message.NewMessage(watermill.NewULID(), payload)); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return sample{}, err
	}
	written := time.Since(start)
	lost, lastAt, err := done.wait(ctx, peerStall)
	if err != nil {
		return sample{}, err
	}
	if lost > 0 { // the forwarder acknowledged past them (seen on MariaDB 10.11)
		return lostSample(n, lost, start, lastAt, written), nil
	}
	err = waitQuery(ctx, "Watermill's acknowledged offset", func(ctx context.Context) (bool, error) {
		var ok bool
		err := t.db.QueryRowContext(ctx, doneQuery).Scan(&ok)
		return ok, err
	})
	if err != nil {
		return sample{}, err
	}
	return sample{events: n, txs: n, writeSeconds: written.Seconds(), seconds: time.Since(start).Seconds()}, nil
}
