package outbox_test

// A subscription's MaxConcurrency and RateLimit across MultiNode nodes: each bounds one
// Outbox (a process), not the table (docs/listeners.md, "Fair delivery";
// docs/multinode.md).

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// limitsTiming is the nodes' configuration in the limits tests: eager pollers, and
// claims that outlive the whole test, so that no claim expires and nothing is
// redelivered for want of time.
var limitsTiming = outbox.Config{ClaimTTL: 2 * time.Minute, ListenerTimeout: 30 * time.Second,
	StatusTimeout: 10 * time.Second, SkipRecent: -1, PollInterval: 20 * time.Millisecond, Workers: 4}

// subscribedNode builds an Outbox in MultiNode mode on the table with subscription s,
// starts it and stops it at cleanup.
func (c *claimTable) subscribedNode(t *testing.T, name string, s outbox.Subscription) *outbox.Outbox {
	t.Helper()
	cfg := limitsTiming
	cfg.Mode, cfg.Dialect, cfg.Table, cfg.NodeID, cfg.Logger = outbox.MultiNode, c.b.dialect, c.table, name, discardLogger()
	ob, err := outbox.New(c.db, cfg)
	if err != nil {
		t.Fatalf("new node %s: %v", name, err)
	}
	if err := ob.Subscribe(s); err != nil {
		t.Fatal(err)
	}
	if err := ob.Start(t.Context()); err != nil {
		t.Fatalf("start node %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := ob.Stop(ctx); err != nil {
			t.Errorf("stop node %s: %v", name, err)
		}
	})
	return ob
}

// writeLimited writes n Ping events in one transaction through w and returns their IDs.
func writeLimited(t *testing.T, c *claimTable, w *outbox.Writer, n int) []string {
	t.Helper()
	envs := make([]outbox.Envelope, n)
	for i := range envs {
		envs[i] = ping
	}
	var ids []string
	err := outbox.RunInTx(t.Context(), c.db, func(ctx context.Context, tx *outbox.Tx) error {
		var err error
		ids, err = w.WriteAll(ctx, tx, envs)
		return err
	})
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return ids
}

// writeToBothNodes writes perNode events through each node's writer (its hot path:
// pre-claimed by that node) and cold events through a WriterOnly writer (no hot path:
// claimed by the first poller of either node), and returns every ID.
func writeToBothNodes(t *testing.T, c *claimTable, nodes []*outbox.Outbox, perNode, cold int) []string {
	t.Helper()
	plain, err := outbox.New(c.db, outbox.Config{Mode: outbox.WriterOnly, Dialect: c.b.dialect, Table: c.table,
		PurgeInterval: -1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ob := range nodes {
		ids = append(ids, writeLimited(t, c, ob.Writer(), perNode)...)
	}
	return append(ids, writeLimited(t, c, plain.Writer(), cold)...)
}

// TestLimitsPerProcessInMultiNode: two MultiNode nodes on one table with the same
// subscription. Each node holds to the subscription's MaxConcurrency and RateLimit on
// its own, and the two together exceed a node's bound: the limits are per process, not
// global through the database.
func TestLimitsPerProcessInMultiNode(t *testing.T) {
	t.Parallel()
	t.Run("MaxConcurrency", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, testMaxConcurrencyPerNode)
	})
	t.Run("RateLimit", func(t *testing.T) {
		t.Parallel()
		forEachBackend(t, testRateLimitPerNode)
	})
}

// testMaxConcurrencyPerNode: MaxConcurrency 1 on each of two nodes with 4 workers, and a
// listener that runs until the test lets it return, one attempt at a time. The check
// counts attempts, not time: no node ever has two attempts running, while each has
// events queued, idle workers and its lane reported limited; the two nodes run two
// attempts at once; every event is delivered.
func testMaxConcurrencyPerNode(t *testing.T, b backend) {
	c := newClaimTable(t, b)
	const maxConc = 1
	var (
		running, most [2]atomic.Int32 // per node: attempts running now, and the most at once
		both, mostAll atomic.Int32    // both nodes
		mu            sync.Mutex
		delivered     = map[string]int{} // attempts that returned nil, by event ID
		started       = make(chan int, 64)
		release       = make(chan struct{}) // one send lets one running attempt return
		abort         = make(chan struct{}) // closed at cleanup: every attempt returns
	)
	raise := func(m *atomic.Int32, v int32) {
		for {
			old := m.Load()
			if v <= old || m.CompareAndSwap(old, v) {
				return
			}
		}
	}
	listener := func(n int) outbox.Listener {
		return outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			raise(&most[n], running[n].Add(1))
			raise(&mostAll, both.Add(1))
			select {
			case started <- n:
			default:
			}
			defer func() {
				running[n].Add(-1)
				both.Add(-1)
			}()
			select {
			case <-release:
			case <-abort:
				return fmt.Errorf("test over")
			case <-ctx.Done():
				return ctx.Err()
			}
			mu.Lock()
			delivered[e.ID]++
			mu.Unlock()
			return nil
		})
	}
	var nodes []*outbox.Outbox
	for n := range 2 {
		nodes = append(nodes, c.subscribedNode(t, fmt.Sprintf("node%d", n), outbox.Subscription{
			Name: "limited", AggregateType: "Thing", EventType: "Ping", Listener: listener(n), MaxConcurrency: maxConc}))
	}
	t.Cleanup(func() { close(abort) }) // before the nodes stop (cleanups run last first)

	// 8 events on each node's hot path and 4 for the pollers: 20.
	ids := writeToBothNodes(t, c, nodes, 8, 4)

	// Nothing returns until released: with a bound of one per node, the first two
	// attempts are one on each node.
	var first []int
	for range 2 {
		select {
		case n := <-started:
			first = append(first, n)
		case <-time.After(time.Minute):
			t.Fatalf("attempts started: %v; want one on each node within a minute", first)
		}
	}
	if first[0] == first[1] {
		t.Fatalf("the first two attempts both ran on node%d, none returned: MaxConcurrency %d did not hold", first[0], maxConc)
	}
	// Each node holds its one attempt and has more events queued than it runs, with
	// three idle workers: the limit, reported as such, is what holds them back.
	load := func(ob *outbox.Outbox) outbox.SubscriptionLoad {
		loads, err := ob.Events().Subscriptions(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range loads {
			if l.Listener == "limited" {
				return l
			}
		}
		return outbox.SubscriptionLoad{}
	}
	eventually(t, "both nodes running one attempt each, with events queued and limited", func() bool {
		for _, ob := range nodes {
			if l := load(ob); l.Running != maxConc || l.Queued == 0 || !l.Limited {
				return false
			}
		}
		return true
	})
	if n := both.Load(); n != 2*maxConc {
		t.Fatalf("%d attempts running on the two nodes, want %d", n, 2*maxConc)
	}

	// Let the attempts return one at a time until every event was delivered; each node
	// takes its next event as its attempt returns.
	deliveredAll := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if delivered[id] == 0 {
				return false
			}
		}
		return true
	}
	releases, lastRelease := 0, time.Now()
	for !deliveredAll() {
		select {
		case release <- struct{}{}:
			releases, lastRelease = releases+1, time.Now()
		case <-time.After(10 * time.Millisecond): // the last attempt is recording its delivery
			if time.Since(lastRelease) > time.Minute {
				t.Fatalf("no attempt to release for a minute after %d releases, and not every event delivered", releases)
			}
		}
	}
	waitAllDone(t, c, len(ids), limitsTiming.ClaimTTL)

	for n := range most {
		if m := most[n].Load(); m > maxConc {
			t.Errorf("node%d ran %d attempts at once; MaxConcurrency is %d", n, m, maxConc)
		}
	}
	if m := mostAll.Load(); m != 2*maxConc {
		t.Errorf("the two nodes ran at most %d attempts at once, want %d (the bound is per node)", m, 2*maxConc)
	}
	mu.Lock()
	dups := 0
	for _, k := range delivered {
		dups += k - 1
	}
	mu.Unlock()
	t.Logf("%d events, %d attempts released, %d duplicate deliveries; most at once per node %d/%d, on both %d",
		len(ids), releases, dups, most[0].Load(), most[1].Load(), mostAll.Load())
}

// testRateLimitPerNode: RateLimit 50 and RateBurst 5 on each of two nodes, 60 events.
// Only upper bounds are checked, as a token bucket gives them: a node takes an event
// only with a token, it had at most RateBurst tokens when the events were written (at
// w, its bucket full and no event taken before) and gains RateLimit a second after, so
// at each of its attempts' starts t it has started at most RateBurst + RateLimit × (t −
// w) attempts (+1 for rounding). An attempt starts after its token was taken, both by
// the monotonic clock. The count starts at w, not at a node's first start: a worker
// that the machine delays between taking the first token and starting its attempt
// would make a count from the first start exceed the bound with no fault in the
// limit. How fast the nodes go is not checked: the machine is shared.
func testRateLimitPerNode(t *testing.T, b backend) {
	c := newClaimTable(t, b)
	const (
		rate  = 50.0
		burst = 5
	)
	var (
		mu        sync.Mutex
		starts    [2][]time.Time
		delivered = map[string]int{}
	)
	listener := func(n int) outbox.Listener {
		return outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			now := time.Now()
			mu.Lock()
			starts[n] = append(starts[n], now)
			delivered[e.ID]++
			mu.Unlock()
			return nil
		})
	}
	var nodes []*outbox.Outbox
	for n := range 2 {
		nodes = append(nodes, c.subscribedNode(t, fmt.Sprintf("node%d", n), outbox.Subscription{
			Name: "limited", AggregateType: "Thing", EventType: "Ping", Listener: listener(n),
			RateLimit: rate, RateBurst: burst}))
	}

	w := time.Now() // before the first event exists: every token is taken after
	ids := writeToBothNodes(t, c, nodes, 25, 10)
	waitAllDone(t, c, len(ids), limitsTiming.ClaimTTL)

	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if delivered[id] == 0 {
			t.Errorf("%s was never delivered", id)
		}
	}
	dups := 0
	for _, k := range delivered {
		dups += k - 1
	}
	var last time.Time
	for n, ss := range starts {
		slices.SortFunc(ss, func(a, b time.Time) int { return a.Compare(b) })
		headroom := float64(len(ids))
		for k, at := range ss {
			bound := burst + rate*at.Sub(w).Seconds() + 1
			headroom = min(headroom, bound-float64(k+1))
			if float64(k+1) > bound {
				t.Errorf("node%d started %d attempts %s after the write began; RateLimit %v and RateBurst %d allow %.1f",
					n, k+1, at.Sub(w).Round(time.Millisecond), rate, burst, bound)
				break // the first excess says it
			}
		}
		if len(ss) > 0 {
			if ss[len(ss)-1].After(last) {
				last = ss[len(ss)-1]
			}
			t.Logf("node%d: %d attempts, the first %s after the write began, the last %s (%.0f/s after the first); "+
				"closest to the bound: %.2f attempts below it",
				n, len(ss), ss[0].Sub(w).Round(time.Millisecond), ss[len(ss)-1].Sub(w).Round(time.Millisecond),
				float64(len(ss)-1)/max(ss[len(ss)-1].Sub(ss[0]).Seconds(), 1e-3), headroom)
		}
	}
	// Not checked (a lower bound on speed): per process, the two nodes together may go
	// up to twice one node's rate.
	t.Logf("%d events, %d duplicate deliveries, both nodes together %.0f/s (one node's RateLimit: %v/s)",
		len(ids), dups, float64(len(ids))/last.Sub(w).Seconds(), rate)
}
