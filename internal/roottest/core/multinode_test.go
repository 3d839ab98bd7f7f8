package outbox_test

// Multi-node tests on real databases: claims, fencing, clock skew, the hot path against
// other nodes' pollers, and business writers against claiming pollers. The multi-process
// test is in multiprocess_test.go.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// serverBackends are the backends with a database server: the tests of concurrency
// between connections and processes run on them.
var serverBackends = backends[1:]

// forEachServerBackend runs fn as a parallel subtest per database server.
func forEachServerBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range serverBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// claimTable is a migrated, empty outbox table with a store on it.
type claimTable struct {
	db    *sql.DB
	b     backend
	table string
	store sqlTestStore
}

func newClaimTable(t *testing.T, b backend) *claimTable {
	t.Helper()
	db, table := b.open(t)
	if err := outbox.MigrateTable(t.Context(), db, b.dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s, err := outbox.NewSQLStore(db, b.dialect, outbox.SQLStoreConfig{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return &claimTable{db: db, b: b, table: table, store: s.(sqlTestStore)}
}

// seed inserts n due events created an hour ago, with IDs prefix00000…, and returns the IDs.
func (c *claimTable) seed(t *testing.T, prefix string, n int) []string {
	t.Helper()
	created := time.Now().Add(-time.Hour)
	ids := make([]string, n)
	events := make([]outbox.Event, n)
	for i := range events {
		ids[i] = fmt.Sprintf("%s%05d", prefix, i)
		events[i] = outbox.Event{ID: ids[i], Type: "Ping", AggregateType: "Thing", Payload: json.RawMessage(`{}`),
			CreatedAt: created.Add(time.Duration(i) * time.Microsecond), AvailableAt: created}
	}
	if _, err := c.store.Insert(t.Context(), c.db, storage.InsertParams{Events: events}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return ids
}

// node builds an Outbox in MultiNode mode on the table with listener l for Thing/Ping
// events, starts it and stops it at cleanup.
func (c *claimTable) node(t *testing.T, cfg outbox.Config, l outbox.Listener) *outbox.Outbox {
	t.Helper()
	cfg.Mode, cfg.Dialect, cfg.Table = outbox.MultiNode, c.b.dialect, c.table
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	ob, err := outbox.New(c.db, cfg)
	if err != nil {
		t.Fatalf("new node: %v", err)
	}
	if err := ob.Register("Thing", "Ping", l); err != nil {
		t.Fatal(err)
	}
	if err := ob.Start(t.Context()); err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return ob
}

var ping = outbox.Envelope{Type: "Ping", AggregateType: "Thing", Payload: json.RawMessage(`{}`)}

// writeVia writes one Ping event in its own transaction through w and returns its ID.
func writeVia(ctx context.Context, db *sql.DB, w *outbox.Writer) (string, error) {
	var id string
	err := outbox.RunInTx(ctx, db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		id, err = w.Write(ctx, tx, ping)
		return err
	})
	return id, err
}

func TestClaimTwoClaimersSameRows(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		ids := c.seed(t, "row-", 1000)
		ctx := t.Context()
		var (
			mu      sync.Mutex
			owner   = map[string]string{}
			batches [2]int
			errs    []error
			wg      sync.WaitGroup
		)
		for n := range 2 {
			wg.Go(func() {
				rnd := rand.New(rand.NewPCG(uint64(n), 7))
				for i := 0; ; i++ {
					limit := 1 + rnd.IntN(64)
					token := fmt.Sprintf("claimer%d/%d", n, i)
					batch, err := c.store.Claim(ctx, storage.ClaimParams{Token: token, TTL: time.Hour, Limit: limit})
					mu.Lock()
					if err == nil && len(batch.Events) > limit {
						err = fmt.Errorf("%s: batch of %d exceeds the limit %d", token, len(batch.Events), limit)
					}
					for _, e := range batch.Events {
						if prev, dup := owner[e.ID]; dup && err == nil {
							err = fmt.Errorf("%s claimed by %s and %s", e.ID, prev, token)
						}
						owner[e.ID] = token
						if e.LockedBy != token && err == nil {
							err = fmt.Errorf("%s: LockedBy %q, want %q", e.ID, e.LockedBy, token)
						}
					}
					if err != nil {
						errs = append(errs, err)
					}
					batches[n]++
					mu.Unlock()
					if err != nil || len(batch.Events) == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if len(owner) != len(ids) {
			t.Fatalf("%d rows claimed, want %d", len(owner), len(ids))
		}
		t.Logf("claim batches per claimer: %v", batches)

		// Every claim is live for an hour: nothing is left to claim.
		if b, err := c.store.Claim(ctx, storage.ClaimParams{Token: "late/1", TTL: time.Hour, Limit: 10}); err != nil || len(b.Events) != 0 {
			t.Fatalf("claim over live claims = %d events, %v", len(b.Events), err)
		}
		// An expired claim is taken again; the live ones are not.
		expiring := c.seed(t, "exp-", 10)
		if b, err := c.store.Claim(ctx, storage.ClaimParams{Token: "dead-node/1", TTL: 200 * time.Millisecond, Limit: 100}); err != nil || len(b.Events) != 10 {
			t.Fatalf("short claim = %d events, %v", len(b.Events), err)
		}
		time.Sleep(500 * time.Millisecond)
		b2, err := c.store.Claim(ctx, storage.ClaimParams{Token: "heir/1", TTL: time.Hour, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range b2.Events {
			got = append(got, e.ID)
		}
		if strings.Join(got, ",") != strings.Join(expiring, ",") {
			t.Fatalf("after expiry claimed %v, want %v", got, expiring)
		}
	})
}

func TestMultiNodeFencing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		// TTL = 2 × (ListenerTimeout + StatusTimeout): A's hot path renews its claim
		// (rather than releasing it) when its worker starts late on a loaded machine,
		// and a status update is not cut off by load (a 2 s TTL with 1 s + 0.5 s was).
		const ttl = 8 * time.Second
		c := newClaimTable(t, b)
		timing := outbox.Config{ClaimTTL: ttl, ListenerTimeout: 2 * time.Second, StatusTimeout: 2 * time.Second, SkipRecent: -1}
		aStarted, releaseA := make(chan struct{}), make(chan struct{})
		var aCalls, bCalls atomic.Int32
		var bCalledAt atomic.Pointer[time.Time]

		// Node A's listener outlives its context and the claim: think of a stuck call.
		sinkA := newLogSink()
		cfgA := timing
		cfgA.PollInterval, cfgA.NodeID, cfgA.Logger = time.Hour, "node-a", sinkA.logger()
		a := c.node(t, cfgA, outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			if aCalls.Add(1) == 1 {
				close(aStarted)
			}
			select {
			case <-releaseA:
			case <-time.After(ttl + time.Minute): // a failed test's cleanup
			}
			return nil
		}))
		cfgB := timing
		cfgB.PollInterval, cfgB.NodeID = 50*time.Millisecond, "node-b"
		c.node(t, cfgB, outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			now := time.Now()
			bCalledAt.Store(&now)
			bCalls.Add(1)
			return outbox.Defer(time.Hour) // B's outcome: deferred, NEW and unclaimed
		}))

		written := time.Now()
		id, err := writeVia(t.Context(), c.db, a.Writer())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-aStarted:
		case <-time.After(time.Minute):
			t.Fatalf("A's listener was not called within a minute (B called %d times)", bCalls.Load())
		}
		if e, _ := c.store.Get(t.Context(), id); !strings.HasPrefix(e.LockedBy, "node-a/") {
			t.Fatalf("while A delivers, locked_by = %q, want A's pre-claim", e.LockedBy)
		}
		eventually(t, "B's outcome", func() bool {
			e, err := c.store.Get(t.Context(), id)
			return err == nil && bCalls.Load() == 1 && e.LockedBy == "" && e.AvailableAt.After(time.Now().Add(30*time.Minute))
		})
		// Fencing, not speed: B may not deliver before A's claim expired (load only
		// makes B later). written is taken before the claim's transaction began.
		if took := bCalledAt.Load().Sub(written); took < ttl-100*time.Millisecond {
			t.Fatalf("B delivered %s after the write, before A's claim (TTL %s) expired", took, ttl)
		}
		before, _ := c.store.Get(t.Context(), id)

		close(releaseA)
		eventually(t, "A's fenced update", func() bool { return len(sinkA.find(slog.LevelWarn, "claim was lost")) == 1 })
		after, err := c.store.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != outbox.StatusNew || !after.AvailableAt.Equal(before.AvailableAt) || after.LockedBy != "" || !after.DoneAt.IsZero() {
			t.Fatalf("A's late outcome changed B's: before %+v, after %+v", before, after)
		}
		warn := sinkA.find(slog.LevelWarn, "claim was lost")[0]
		if warn.attrs["event_id"] != id || !strings.HasPrefix(warn.attrs["claim"], "node-a/") || warn.attrs["op"] != "mark done" {
			t.Fatalf("lost-claim log %+v", warn.attrs)
		}
		if aCalls.Load() != 1 || bCalls.Load() != 1 {
			t.Fatalf("A delivered %d times, B %d times", aCalls.Load(), bCalls.Load())
		}
	})
}

func TestMultiNodeClockSkew(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		skewed := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
		// The normal node's listener holds each event 1.5 s, far inside ListenerTimeout
		// and ClaimTTL even when a loaded machine stretches it (with a 4 s TTL and a 2 s
		// listener timeout, a stretched hold timed out and the event was redelivered).
		const hold = 1500 * time.Millisecond
		timing := outbox.Config{ClaimTTL: 30 * time.Second, ListenerTimeout: 10 * time.Second,
			StatusTimeout: 5 * time.Second, SkipRecent: -1, PollInterval: 20 * time.Millisecond}
		type delivery struct {
			node string
			at   time.Time
		}
		var mu sync.Mutex
		got := map[string][]delivery{}
		listener := func(node string, hold time.Duration) outbox.Listener {
			return outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
				mu.Lock()
				got[e.ID] = append(got[e.ID], delivery{node, time.Now()})
				mu.Unlock()
				time.Sleep(hold)
				return nil
			})
		}
		deliveriesOf := func(id string) []delivery {
			mu.Lock()
			defer mu.Unlock()
			return append([]delivery(nil), got[id]...)
		}
		done := func(id string) bool {
			e, err := c.store.Get(t.Context(), id)
			return err == nil && e.Status == outbox.StatusDone
		}

		// Live claims: a normal node delivers slowly (1.5 s of its 30 s claim) while nodes
		// 10 minutes ahead and behind poll every 20 ms. By their own clocks the claim is
		// long expired (ahead) or far from it (behind); by the database clock it is live.
		const skew = 10 * time.Minute
		cfg := timing
		cfg.NodeID, cfg.PollInterval = "normal", time.Hour
		normal := c.node(t, cfg, listener("normal", hold))
		nodes := map[string]*outbox.Outbox{}
		for name, d := range map[string]time.Duration{"ahead": skew, "behind": -skew} {
			cfg := timing
			cfg.NodeID, cfg.Now = name, skewed(d)
			nodes[name] = c.node(t, cfg, listener(name, 0))
		}
		var ids []string
		for range 3 {
			id, err := writeVia(t.Context(), c.db, normal.Writer())
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			eventually(t, "delivery by the normal node", func() bool { return done(id) })
			if d := deliveriesOf(id); len(d) != 1 || d[0].node != "normal" {
				t.Fatalf("%s delivered %+v; want once, by the normal node", id, d)
			}
		}

		// Expired claims: a claim of a node that died expires after 1 s by the database
		// clock. Each skewed node, polling alone, takes it over within the TTL plus a poll
		// interval, and not before the TTL.
		const ghostTTL = time.Second
		for _, name := range []string{"behind", "ahead"} {
			for other, ob := range nodes {
				if other != name {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					if err := ob.Stop(ctx); err != nil {
						t.Fatal(err)
					}
					cancel()
				} else if err := ob.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			e := outbox.Event{ID: "ghost-" + name, Type: "Ping", AggregateType: "Thing", Payload: json.RawMessage(`{}`),
				CreatedAt: time.Now().Add(-time.Minute), LockedBy: "dead-node/" + name}
			inserted := time.Now()
			if _, err := c.store.Insert(t.Context(), c.db, storage.InsertParams{Events: []outbox.Event{e}, ClaimTTL: ghostTTL}); err != nil {
				t.Fatal(err)
			}
			eventually(t, name+" takes over the expired claim", func() bool { return done(e.ID) })
			d := deliveriesOf(e.ID)
			if len(d) != 1 || d[0].node != name {
				t.Fatalf("%s delivered %+v; want once, by %s", e.ID, d, name)
			}
			// Not before the TTL (minus SQLite's millisecond truncation): fencing, which
			// load cannot break (a node ahead that trusted its own clock would take it at
			// once). And not after the skew: a node 10 minutes behind that trusted its
			// own clock would wait 10 minutes, so TTL + poll interval + 25 s of slack for
			// a loaded machine under -race tells the two apart; the long tier
			// (OUTBOX_TEST_LONG=1, an idle machine) allows 3 s.
			lag := d[0].at.Sub(inserted)
			slack := 25 * time.Second
			if longTier() {
				slack = 3 * time.Second
			}
			if late := ghostTTL + timing.PollInterval + slack; lag < ghostTTL-10*time.Millisecond || lag > late {
				t.Fatalf("%s took over %s after the insert; want within [%s, %s] (clock skew %s)", name, lag, ghostTTL, late, skew)
			}
			t.Logf("%s (clock %s) took over an expired claim %s after the insert (TTL %s)", name,
				map[string]string{"behind": "-10m", "ahead": "+10m"}[name], lag.Round(time.Millisecond), ghostTTL)
		}
	})
}

// TestMultiNodeHotPathNotRacedByPollers: events written through one node's hot path are
// delivered by that node only, however eagerly the other nodes poll. It runs on the
// database servers: on SQLite every claim and status update is a write that queues for
// the one write lock, and three nodes polling every 10 ms beside nine writers starve
// status updates into their timeout (a fault, after which redelivery is correct).
func TestMultiNodeHotPathNotRacedByPollers(t *testing.T) {
	t.Parallel()
	forEachServerBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		// Pollers as eager as they can be: every 10 ms, no SkipRecent.
		timing := outbox.Config{ClaimTTL: 10 * time.Second, ListenerTimeout: 2 * time.Second,
			StatusTimeout: 3 * time.Second, SkipRecent: -1, PollInterval: 10 * time.Millisecond}
		var mu sync.Mutex
		by := map[string][]string{}
		listener := func(node string) outbox.Listener {
			return outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
				mu.Lock()
				by[e.ID] = append(by[e.ID], node)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				return nil
			})
		}
		sinks := map[string]*logSink{}
		var writers []*outbox.Outbox
		for _, name := range []string{"n1", "n2", "n3"} {
			cfg := timing
			sinks[name] = newLogSink()
			cfg.NodeID, cfg.Logger = name, sinks[name].logger()
			writers = append(writers, c.node(t, cfg, listener(name)))
		}
		const perWriter, goroutines = 40, 3
		var wg sync.WaitGroup
		var mu2 sync.Mutex
		writtenBy := map[string]string{}
		errs := make(chan error, goroutines*len(writers))
		for i, ob := range writers {
			for range goroutines {
				wg.Go(func() {
					for range perWriter {
						id, err := writeVia(t.Context(), c.db, ob.Writer())
						if err != nil {
							errs <- err
							return
						}
						mu2.Lock()
						writtenBy[id] = fmt.Sprintf("n%d", i+1)
						mu2.Unlock()
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		eventually(t, "every event delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(by) == len(writtenBy)
		})
		waitAllDone(t, c, len(writtenBy), timing.ClaimTTL)
		mu.Lock()
		defer mu.Unlock()
		for id, nodes := range by {
			if len(nodes) != 1 || nodes[0] != writtenBy[id] {
				t.Errorf("%s written by %s, delivered by %v", id, writtenBy[id], nodes)
			}
		}
		for name, s := range sinks {
			for _, r := range append(s.atLevel(slog.LevelWarn), s.atLevel(slog.LevelError)...) {
				t.Errorf("%s logged %s: %s %v", name, r.level, r.msg, r.attrs)
			}
		}
	})
}

// waitAllDone waits until the table holds n rows, all DONE, as long as rows keep
// becoming DONE: it fails when none did for twice the nodes' claimTTL. An event
// pre-claimed for a hot queue that filled up before the commit waits for its claim to
// expire, and is then claimed by a poll and delivered within ListenerTimeout +
// StatusTimeout, less than another claimTTL; a backlog drains at the machine's pace.
func waitAllDone(t *testing.T, c *claimTable, n int, claimTTL time.Duration) {
	t.Helper()
	var st outbox.Stats
	var err error
	if werr := waitProgress(fmt.Sprintf("%d rows DONE", n), 2*claimTTL, func() (bool, int64) {
		st, err = c.store.Stats(t.Context())
		if err != nil {
			return false, -1
		}
		return st.Counts[outbox.StatusDone] == int64(n) &&
			st.Counts[outbox.StatusNew]+st.Counts[outbox.StatusRetry]+st.Counts[outbox.StatusDead] == 0, st.Counts[outbox.StatusDone]
	}); werr != nil {
		t.Fatalf("%v: %+v, %v", werr, st.Counts, err)
	}
}

// longTier reports whether the long tier runs (OUTBOX_TEST_LONG=1): meant for an idle
// machine, it adds tight wall-clock bounds (how promptly an expired claim is taken
// over) to the property checks of every run, whose own bounds are derived from the
// configuration with slack for a loaded machine under -race.
func longTier() bool { return os.Getenv("OUTBOX_TEST_LONG") == "1" }

// soakDuration is how long the writers-vs-claimers test runs: OUTBOX_TEST_SOAK (a Go
// duration) when set, 30 s with OUTBOX_TEST_LONG=1, 2 s with -short, else 10 s.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("OUTBOX_TEST_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("OUTBOX_TEST_SOAK=%q: want a positive Go duration such as 30s", v)
		}
		return d
	}
	switch {
	case longTier():
		return 30 * time.Second
	case testing.Short():
		return 2 * time.Second
	default:
		return 10 * time.Second
	}
}

// TestMultiNodeWritersVsClaimers runs business transactions (a business row and events,
// under the database's default isolation level) from 16 goroutines while 4 claiming
// nodes poll every 20 ms without SkipRecent, so that claims constantly meet uncommitted
// inserts. No business transaction may fail.
func TestMultiNodeWritersVsClaimers(t *testing.T) {
	t.Parallel()
	soak := soakDuration(t)
	forEachServerBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		orders := strings.TrimSuffix(c.table, outbox.DefaultTable) + "orders"
		if _, err := c.db.Exec(`CREATE TABLE ` + orders + ` (id VARCHAR(64) PRIMARY KEY, note VARCHAR(64))`); err != nil {
			t.Fatal(err)
		}
		// 16 writers and 4 nodes share one pool here. Generous timeouts: under -race
		// beside the rest of the suite on a 2-core CI machine a status update has been
		// seen to wait more than 5 s (for the pool and the loaded server), which the
		// dispatcher survives (the events are left for the poller) but logs as an error,
		// and this test fails on any error.
		c.db.SetMaxOpenConns(80)
		timing := outbox.Config{ClaimTTL: 40 * time.Second, ListenerTimeout: 3 * time.Second, StatusTimeout: 20 * time.Second,
			SkipRecent: -1, PollInterval: 20 * time.Millisecond, PollBatchSize: 50}
		var mu sync.Mutex
		delivered := map[string]int{}
		listener := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			mu.Lock()
			delivered[e.ID]++
			mu.Unlock()
			return nil
		})
		var nodes []*outbox.Outbox
		var sinks []*logSink
		for i := range 4 {
			cfg := timing
			sink := newLogSink()
			cfg.NodeID, cfg.Logger = fmt.Sprintf("node%d", i), sink.logger()
			nodes = append(nodes, c.node(t, cfg, listener))
			sinks = append(sinks, sink)
		}
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			for i, s := range sinks {
				for _, r := range s.atLevel(slog.LevelWarn) {
					t.Logf("node%d: %s %v", i, r.msg, r.attrs)
				}
			}
		})
		// A writer that pre-claims nothing (no hot path): its events are left to the
		// claiming pollers, which meet them while they are being inserted.
		plain, err := outbox.New(c.db, outbox.Config{Mode: outbox.WriterOnly, Dialect: c.b.dialect, Table: c.table,
			PurgeInterval: -1, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}

		ph := ph1(c.b.dialect)
		second := "?"
		if c.b.dialect == outbox.Postgres {
			second = "$2"
		}
		insertOrder := `INSERT INTO ` + orders + ` (id, note) VALUES (` + ph + `, ` + second + `)`
		deadline := time.Now().Add(soak)
		var (
			txs, events atomic.Int64
			errMu       sync.Mutex
			txErrs      []error
			wg          sync.WaitGroup
		)
		for w := range 16 {
			wg.Go(func() {
				rnd := rand.New(rand.NewPCG(uint64(w), 16))
				for i := 0; time.Now().Before(deadline); i++ {
					writer := plain.Writer()
					if w%2 == 0 {
						writer = nodes[w/2%len(nodes)].Writer() // hot path, pre-claimed
					}
					n := 1 + rnd.IntN(3)
					err := outbox.RunInTx(t.Context(), c.db, func(ctx context.Context, tx *outbox.Tx) error {
						if _, err := tx.ExecContext(ctx, insertOrder, fmt.Sprintf("w%02d-%06d", w, i), "x"); err != nil {
							return err
						}
						envs := make([]outbox.Envelope, n)
						for j := range envs {
							envs[j] = ping
						}
						_, err := writer.WriteAll(ctx, tx, envs)
						return err
					})
					if err != nil {
						errMu.Lock()
						txErrs = append(txErrs, err)
						errMu.Unlock()
						continue
					}
					txs.Add(1)
					events.Add(int64(n))
				}
			})
		}
		wg.Wait()
		if len(txErrs) > 0 {
			t.Fatalf("%d business transactions failed; first: %v", len(txErrs), txErrs[0])
		}
		total := int(events.Load())
		waitAllDone(t, c, total, timing.ClaimTTL)
		mu.Lock()
		dups := 0
		for _, n := range delivered {
			dups += n - 1
		}
		lost := total - len(delivered)
		mu.Unlock()
		t.Logf("%s: %d business transactions, %d events in %s; 0 transaction errors, %d lost, %d duplicate deliveries",
			b.name, txs.Load(), total, soak, lost, dups)
		// Warnings report load (a full hot queue, a renewed claim); errors would be
		// failed claims or status updates.
		warnings := map[string]int{}
		for i, s := range sinks {
			for _, r := range s.atLevel(slog.LevelWarn) {
				warnings[r.msg]++
			}
			for _, r := range s.atLevel(slog.LevelError) {
				t.Errorf("node%d logged an error: %s %v", i, r.msg, r.attrs)
			}
		}
		if len(warnings) > 0 {
			t.Logf("warnings: %v", warnings)
		}
		if lost != 0 || dups != 0 {
			t.Fatalf("%d events lost, %d duplicate deliveries", lost, dups)
		}

	})
}
