package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// orderChecker is a listener that checks per-key FIFO: no two attempts of one key
// overlap, and the first successful deliveries of a key follow its OrderSeq (commit
// order) without gaps. fail decides an attempt's error.
type orderChecker struct {
	mu        sync.Mutex
	running   map[string]bool
	delivered map[string][]int64 // first successful delivery per event, by key
	done      map[string]bool    // event IDs delivered successfully
	attempts  map[string]int
	overlaps  []string
	fail      func(e *outbox.Event, attempt int) error
}

func newOrderChecker(fail func(e *outbox.Event, attempt int) error) *orderChecker {
	return &orderChecker{running: map[string]bool{}, delivered: map[string][]int64{}, done: map[string]bool{},
		attempts: map[string]int{}, fail: fail}
}

func (c *orderChecker) Handle(_ context.Context, e *outbox.Event) error {
	c.mu.Lock()
	if c.running[e.OrderKey] {
		c.overlaps = append(c.overlaps, e.OrderKey+"/"+e.ID)
	}
	c.running[e.OrderKey] = true
	c.attempts[e.ID]++
	attempt := c.attempts[e.ID]
	c.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) // let overlaps show
	var err error
	if c.fail != nil {
		err = c.fail(e, attempt)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[e.OrderKey] = false
	if err == nil && !c.done[e.ID] {
		c.done[e.ID] = true
		c.delivered[e.OrderKey] = append(c.delivered[e.OrderKey], e.OrderSeq)
	}
	return err
}

func (c *orderChecker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.done)
}

// startOrdered starts an outbox with cfg on b whose Account/Changed listener is an
// orderChecker failing attempts as fail says.
func startOrdered(t *testing.T, b backend, cfg outbox.Config, fail func(e *outbox.Event, attempt int) error) (*acceptanceBundle, *orderChecker) {
	t.Helper()
	a := setupOutbox(t, b, cfg)
	c := newOrderChecker(fail)
	if err := a.ob.Register("Account", "Changed", c); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	return a, c
}

// check fails t unless every key's deliveries are 1, 2, … n in order and no attempts
// overlapped.
func (c *orderChecker) check(t *testing.T, want map[string]int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.overlaps) > 0 {
		t.Fatalf("attempts of one key overlapped: %v", c.overlaps)
	}
	for key, n := range want {
		got := c.delivered[key]
		if len(got) != n {
			t.Fatalf("key %s: %d events delivered, want %d", key, len(got), n)
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("key %s: deliveries in order %v, want 1..%d", key, got, n)
			}
		}
	}
}

// TestOrderedDeliveryKeepsKeyOrder writes ordered events from concurrent transactions
// (several per key at once) while the whole worker pool delivers, with transient
// failures retried: each key's events are delivered one at a time, in commit order.
func TestOrderedDeliveryKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := startOrdered(t, b, outbox.Config{OrderByAggregate: true, PollInterval: 20 * time.Millisecond,
			Retry: outbox.RetryPolicyFunc(func(int) time.Duration { return 5 * time.Millisecond })},
			func(e *outbox.Event, attempt int) error {
				if e.OrderSeq%4 == 2 && attempt < 3 {
					return errors.New("transient")
				}
				return nil
			})
		const keys, writers, perWriter = 6, 4, 30
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					env := outbox.Envelope{Type: "Changed", AggregateType: "Account",
						AggregateID: fmt.Sprint("acct-", (w+i)%keys), Payload: i}
					if _, err := a.placeOrder(context.Background(), fmt.Sprintf("o-%d-%d", w, i), env, nil); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		eventually(t, "every event delivered", func() bool { return c.count() == writers*perWriter })
		want := map[string]int{}
		for k := range keys {
			want[fmt.Sprint("Account:acct-", k)] = writers * perWriter / keys
		}
		c.check(t, want)
		// A key with nothing before its event hands it over after the commit: some of
		// the events took the hot path (the others waited for their key).
		if c := a.metrics.counts(); c.hotEnqueued == 0 {
			t.Fatalf("no ordered event took the hot path: %+v", c)
		}
		eventually(t, "every row DONE", func() bool {
			st, err := a.ob.Events().Stats(context.Background())
			return err == nil && st.Counts[outbox.StatusDone] == writers*perWriter
		})
	})
}

// TestOrderedDeadEventHoldsItsKey: under the default DeadKeyWaits a DEAD event holds the
// later events of its key, not other keys; replayed, it is delivered first and the key
// moves on. Under DeadKeySkips the key moves past it.
func TestOrderedDeadEventHoldsItsKey(t *testing.T) {
	t.Parallel()
	for _, policy := range []outbox.DeadKeyPolicy{outbox.DeadKeyWaits, outbox.DeadKeySkips} {
		t.Run(fmt.Sprint(int(policy)), func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, b backend) {
				a, c := startOrdered(t, b, outbox.Config{DeadKeyPolicy: policy, PollInterval: 20 * time.Millisecond},
					func(e *outbox.Event, attempt int) error {
						if e.OrderKey == "poison" && e.OrderSeq == 1 && attempt == 1 {
							return fmt.Errorf("bad payload: %w", outbox.ErrUnrecoverable)
						}
						return nil
					})
				write := func(id, key string) string {
					t.Helper()
					env := outbox.Envelope{Type: "Changed", AggregateType: "Account", OrderKey: key, Payload: id}
					eid, err := a.placeOrder(context.Background(), id, env, nil)
					if err != nil {
						t.Fatal(err)
					}
					return eid
				}
				p1, p2, p3 := write("p1", "poison"), write("p2", "poison"), write("p3", "poison")
				eventually(t, "p1 DEAD", func() bool { return a.event(t, p1).Status == outbox.StatusDead })
				for i := range 5 {
					write(fmt.Sprint("h", i), "healthy")
				}
				eventually(t, "the other key delivered", func() bool { return c.count() >= 5 })
				if policy == outbox.DeadKeyWaits {
					for _, id := range []string{p2, p3} {
						if s := a.event(t, id).Status; s != outbox.StatusWaiting {
							t.Fatalf("%s is %s behind a DEAD event, want WAITING", id, s)
						}
					}
				} else {
					// The key moves on past the DEAD p1; only then is p1 replayed (a
					// replay while p3 still waited would put p1 back ahead of it).
					eventually(t, "p2 and p3 delivered past the DEAD p1", func() bool { return c.count() == 7 })
				}
				if err := a.ob.Events().Replay(context.Background(), p1); err != nil {
					t.Fatal(err)
				}
				eventually(t, "every event delivered", func() bool { return c.count() == 8 })
				if policy == outbox.DeadKeyWaits {
					c.check(t, map[string]int{"poison": 3, "healthy": 5})
					return
				}
				// Skipped, then replayed: p1 goes after the events that passed it.
				c.mu.Lock()
				got := c.delivered["poison"]
				c.mu.Unlock()
				if fmt.Sprint(got) != "[2 3 1]" {
					t.Fatalf("poison delivered in order %v, want [2 3 1]", got)
				}
			})
		})
	}
}

// TestOrderedLateCommitWaits: a transaction that writes a key while another that wrote
// it is still open waits for it at its Write, so the earlier-started transaction's
// event cannot commit after, and be delivered after, a later one of the same key.
func TestOrderedLateCommitWaits(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := startOrdered(t, b, outbox.Config{PollInterval: 20 * time.Millisecond}, nil)
		ctx := context.Background()
		env := func(p string) outbox.Envelope {
			return outbox.Envelope{Type: "Changed", AggregateType: "Account", OrderKey: "K", Payload: p}
		}
		release := make(chan struct{})
		firstWrote := make(chan struct{})
		var first, second string
		var wg sync.WaitGroup
		wg.Go(func() {
			err := outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
				var err error
				if first, err = a.ob.Writer().Write(ctx, tx, env("first")); err != nil {
					return err
				}
				close(firstWrote)
				<-release // a long business transaction
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
		<-firstWrote
		secondDone := make(chan error, 1)
		go func() {
			secondDone <- outbox.RunInTx(ctx, a.db, func(ctx context.Context, tx *outbox.Tx) error {
				var err error
				second, err = a.ob.Writer().Write(ctx, tx, env("second"))
				return err
			})
		}()
		select {
		case err := <-secondDone:
			t.Fatalf("the second transaction committed key K while the first was open (err %v)", err)
		case <-time.After(300 * time.Millisecond):
		}
		close(release)
		wg.Wait()
		if err := <-secondDone; err != nil {
			t.Fatal(err)
		}
		eventually(t, "both delivered", func() bool { return c.count() == 2 })
		c.check(t, map[string]int{"K": 2})
		if e1, e2 := a.event(t, first), a.event(t, second); e1.OrderSeq != 1 || e2.OrderSeq != 2 {
			t.Fatalf("OrderSeq %d, %d; want 1, 2", e1.OrderSeq, e2.OrderSeq)
		}
	})
}

// TestOrderedMultiNodeKeepsKeyOrder: three MultiNode outboxes (nodes) on one table
// deliver ordered events written by all of them and by a WriterOnly writer, with
// transient failures: no two attempts of a key overlap across the nodes, and each key
// is delivered in commit order. One node stops in the middle; the others carry on.
func TestOrderedMultiNodeKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	forEachServerBackend(t, func(t *testing.T, b backend) {
		c := newClaimTable(t, b)
		check := newOrderChecker(func(e *outbox.Event, attempt int) error {
			if e.OrderSeq%3 == 1 && attempt == 1 {
				return errors.New("transient")
			}
			return nil
		})
		cfg := outbox.Config{ClaimTTL: 2 * time.Minute, PollInterval: 20 * time.Millisecond, OrderByAggregate: true,
			Retry: outbox.RetryPolicyFunc(func(int) time.Duration { return 5 * time.Millisecond })}
		nodes := []*outbox.Outbox{c.node(t, cfg, check), c.node(t, cfg, check), c.node(t, cfg, check)}
		writerOnly, err := outbox.New(c.db, outbox.Config{Mode: outbox.WriterOnly, Dialect: b.dialect, Table: c.table,
			OrderByAggregate: true, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		writers := []*outbox.Writer{nodes[0].Writer(), nodes[1].Writer(), nodes[2].Writer(), writerOnly.Writer()}
		const keys, perWriter = 8, 40
		var wg sync.WaitGroup
		errs := make(chan error, len(writers))
		for w, wr := range writers {
			wg.Go(func() {
				for i := range perWriter {
					env := outbox.Envelope{Type: "Ping", AggregateType: "Thing", AggregateID: fmt.Sprint((w*7 + i) % keys), Payload: i}
					err := outbox.RunInTx(context.Background(), c.db, func(ctx context.Context, tx *outbox.Tx) error {
						_, err := wr.Write(ctx, tx, env)
						return err
					})
					if err != nil {
						errs <- err
						return
					}
					if w == 0 && i == perWriter/2 {
						ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
						if err := nodes[2].Stop(ctx); err != nil { // a node leaves
							errs <- err
						}
						cancel()
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		total := len(writers) * perWriter
		// Delivered at the machine's pace; stuck when no event was delivered for
		// twice ClaimTTL (a stopped node's claims expire, and another node delivers).
		if err := waitProgress("ordered events delivered", 2*cfg.ClaimTTL, func() (bool, int64) {
			n := check.count()
			return n >= total, int64(n)
		}); err != nil {
			t.Fatalf("%v: %d of %d events delivered; rows not DONE:\n%s", err, check.count(), total, unfinishedRows(t, c))
		}
		waitAllDone(t, c, total, cfg.ClaimTTL)
		want := map[string]int{}
		for k := range keys {
			want[fmt.Sprint("Thing:", k)] = total / keys
		}
		check.check(t, want)
	})
}

// TestOrderedEventWrittenWithoutHooksIsSwept: an ordered event written through a bare
// *sql.Tx (no after-commit hooks, so nobody promotes it at commit) is promoted by the
// poller's sweep and delivered.
func TestOrderedEventWrittenWithoutHooksIsSwept(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := startOrdered(t, b, outbox.Config{PollInterval: 20 * time.Millisecond}, nil)
		tx, err := a.db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := a.ob.Writer().Write(context.Background(), tx, outbox.Envelope{Type: "Changed", AggregateType: "Account",
				OrderKey: "bare", Payload: i}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "swept and delivered", func() bool { return c.count() == 3 })
		c.check(t, map[string]int{"bare": 3})
	})
}

// unfinishedRows lists the rows of the table that are not DONE, for a failure message.
func unfinishedRows(t *testing.T, c *claimTable) string {
	rows, err := c.db.QueryContext(context.Background(), "SELECT event_id, status, order_key, order_seq, attempts, "+
		"COALESCE(locked_by, ''), locked_until FROM "+quoteTable(c.b.dialect, c.table)+" WHERE status <> 1 ORDER BY order_key, order_seq")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		var id, key, lockedBy string
		var status, attempts int
		var seq int64
		var until any
		if err := rows.Scan(&id, &status, &key, &seq, &attempts, &lockedBy, &until); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&sb, "%s status %d key %s seq %d attempts %d locked_by %q until %v\n", id, status, key, seq, attempts, lockedBy, until)
	}
	return sb.String()
}

// TestOrderedDeletedDeadEventFreesItsKey: under DeadKeyWaits, deleting the DEAD event
// that holds a key (Events.Delete) lets the key's later events go, in order, and it
// is never delivered. Delete refuses an event that is not DEAD, and a missing one.
func TestOrderedDeletedDeadEventFreesItsKey(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := startOrdered(t, b, outbox.Config{PollInterval: 20 * time.Millisecond},
			func(e *outbox.Event, attempt int) error {
				if e.OrderSeq == 1 {
					return fmt.Errorf("bad payload: %w", outbox.ErrUnrecoverable)
				}
				return nil
			})
		var ids []string
		for i := range 3 {
			env := outbox.Envelope{Type: "Changed", AggregateType: "Account", OrderKey: "k", Payload: i}
			id, err := a.placeOrder(context.Background(), fmt.Sprint("o", i), env, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		eventually(t, "the head DEAD", func() bool { return a.event(t, ids[0]).Status == outbox.StatusDead })
		if s := a.event(t, ids[1]).Status; s != outbox.StatusWaiting {
			t.Fatalf("event behind the DEAD head is %s, want WAITING", s)
		}
		ctx := context.Background()
		if err := a.ob.Events().Delete(ctx, ids[1]); !errors.Is(err, outbox.ErrNotDead) {
			t.Fatalf("Delete of a WAITING event: %v, want ErrNotDead", err)
		}
		if err := a.ob.Events().Delete(ctx, "missing"); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("Delete of a missing event: %v, want ErrNotFound", err)
		}
		if err := a.ob.Events().Delete(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := a.ob.Events().Get(ctx, ids[0]); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("Get of the deleted event: %v, want ErrNotFound", err)
		}
		eventually(t, "the key's other events delivered", func() bool { return c.count() == 2 })
		c.mu.Lock()
		got := fmt.Sprint(c.delivered["k"])
		c.mu.Unlock()
		if got != "[2 3]" {
			t.Fatalf("delivered %s, want [2 3] (the deleted event never)", got)
		}
	})
}

// TestOrderedDiscardedEventFreesItsKey: discarding the DEAD head of a key keeps its row,
// DISCARDED, and the key's later events are delivered at once; discarding a WAITING
// event skips it too. A finished event cannot be discarded.
func TestOrderedDiscardedEventFreesItsKey(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a, c := startOrdered(t, b, outbox.Config{PollInterval: 20 * time.Millisecond},
			func(e *outbox.Event, attempt int) error {
				if e.OrderSeq == 1 {
					return fmt.Errorf("bad payload: %w", outbox.ErrUnrecoverable)
				}
				return nil
			})
		var ids []string
		for i := range 4 {
			env := outbox.Envelope{Type: "Changed", AggregateType: "Account", OrderKey: "k", Payload: i}
			id, err := a.placeOrder(context.Background(), fmt.Sprint("o", i), env, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		eventually(t, "the head DEAD", func() bool { return a.event(t, ids[0]).Status == outbox.StatusDead })
		ctx := context.Background()
		if err := a.ob.Events().Discard(ctx, ids[2]); err != nil { // WAITING behind the head
			t.Fatal(err)
		}
		if err := a.ob.Events().Discard(ctx, "missing"); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("Discard of a missing event: %v, want ErrNotFound", err)
		}
		if err := a.ob.Events().Discard(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		if e := a.event(t, ids[0]); e.Status != outbox.StatusDiscarded || e.DoneAt.IsZero() {
			t.Fatalf("the discarded head: %s, done at %v; want DISCARDED, kept", e.Status, e.DoneAt)
		}
		eventually(t, "the key's other events delivered", func() bool { return c.count() == 2 })
		c.mu.Lock()
		got := fmt.Sprint(c.delivered["k"])
		c.mu.Unlock()
		if got != "[2 4]" {
			t.Fatalf("delivered %s, want [2 4] (the discarded events never)", got)
		}
		eventually(t, "stats to count 2 DISCARDED and 2 DONE", func() bool {
			st, err := a.ob.Events().Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return st.Counts[outbox.StatusDiscarded] == 2 && st.Counts[outbox.StatusDone] == 2
		})
		if err := a.ob.Events().Discard(ctx, ids[1]); !errors.Is(err, outbox.ErrFinished) {
			t.Fatalf("Discard of a DONE event: %v, want ErrFinished", err)
		}
	})
}

// TestOrderedLimitedSubscriptionKeepsKeyOrder: a subscription limited to two workers
// and 200 events per second delivers each key's events one at a time, in commit order,
// while an unlimited subscription of another event type, written between them, is
// delivered too.
func TestOrderedLimitedSubscriptionKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{OrderByAggregate: true, PollInterval: 20 * time.Millisecond})
		c := newOrderChecker(nil)
		other := newDeliveries(nil)
		for _, s := range []outbox.Subscription{
			{Name: "limited", AggregateType: "Account", EventType: "Changed", Listener: c, MaxConcurrency: 2, RateLimit: 200, RateBurst: 5},
			{Name: "other", AggregateType: "Order", EventType: "Placed", Listener: other},
		} {
			if err := a.ob.Subscribe(s); err != nil {
				t.Fatal(err)
			}
		}
		a.start(t)
		const keys, writers, perWriter = 5, 3, 20
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					env := outbox.Envelope{Type: "Changed", AggregateType: "Account",
						AggregateID: fmt.Sprint("acct-", (w+i)%keys), Payload: i}
					if _, err := a.placeOrder(context.Background(), fmt.Sprintf("o-%d-%d", w, i), env, nil); err != nil {
						errs <- err
						return
					}
					placed := outbox.Envelope{Type: "Placed", AggregateType: "Order", Payload: i}
					if _, err := a.placeOrder(context.Background(), fmt.Sprintf("p-%d-%d", w, i), placed, nil); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		eventually(t, "every event delivered", func() bool { return c.count() == writers*perWriter && other.total() == writers*perWriter })
		want := map[string]int{}
		for k := range keys {
			want[fmt.Sprint("Account:acct-", k)] = writers * perWriter / keys
		}
		c.check(t, want)
	})
}
