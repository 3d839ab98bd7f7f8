package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// TestOrderedKeysHeldMetric: Metrics.KeysHeld follows the ordered events a process
// holds: up to one per key while their listeners run, back to 0 once their outcomes
// are written. Unordered events are not counted.
func TestOrderedKeysHeldMetric(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{PollInterval: 20 * time.Millisecond})
		release := make(chan struct{})
		running := make(chan string, 16)
		l := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			running <- e.ID
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err := a.ob.Register("Account", "Changed", l); err != nil {
			t.Fatal(err)
		}
		a.start(t)
		last := func() int {
			h := a.metrics.held()
			if len(h) == 0 {
				return 0
			}
			return h[len(h)-1]
		}
		// Two events of key k0 (the second waits for the first), one of k1, one of k2,
		// and one unordered event.
		for i, key := range []string{"k0", "k0", "k1", "k2", ""} {
			env := outbox.Envelope{Type: "Changed", AggregateType: "Account", AggregateID: "a", OrderKey: key, Payload: i}
			if _, err := a.placeOrder(context.Background(), fmt.Sprint("o-", i), env, nil); err != nil {
				t.Fatal(err)
			}
		}
		for range 4 { // the heads of the three keys and the unordered event
			select {
			case <-running:
			case <-time.After(30 * time.Second):
				t.Fatal("listeners did not start")
			}
		}
		eventually(t, "three keys held", func() bool { return last() == 3 })
		close(release)
		eventually(t, "every event delivered and nothing held", func() bool {
			st, err := a.ob.Events().Stats(context.Background())
			return err == nil && st.Counts[outbox.StatusDone] == 5 && last() == 0
		})
		if h := a.metrics.held(); slices.Max(h) > 3 {
			t.Fatalf("KeysHeld reported %v: more than the three keys", h)
		}
	})
}

// TestClaimTakeOverMetric: events claimed by a node that died (its claim left to
// expire) are taken over by a live node's poller, which counts them as
// ClaimTakenOver, besides ClaimTaken. SQLite's claim cannot tell a take-over: 0 there.
func TestClaimTakeOverMetric(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		a := setupOutbox(t, b, outbox.Config{Mode: outbox.MultiNode, NodeID: "live", ClaimTTL: time.Minute,
			PollInterval: 20 * time.Millisecond, SkipRecent: -1})
		var delivered []string
		done := make(chan string, 16)
		if err := a.ob.Register("Account", "Changed", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			done <- e.ID
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		// Written before any dispatcher runs: no pre-claim, the rows are unclaimed.
		const n = 3
		for i := range n {
			env := outbox.Envelope{Type: "Changed", AggregateType: "Account", AggregateID: fmt.Sprint("a", i), Payload: i}
			if _, err := a.placeOrder(context.Background(), fmt.Sprint("o-", i), env, nil); err != nil {
				t.Fatal(err)
			}
		}
		store, err := outbox.NewSQLStore(a.db, a.dialect, outbox.SQLStoreConfig{Table: a.table})
		if err != nil {
			t.Fatal(err)
		}
		if a.dialect == outbox.SQLite {
			// SQLite's clock ('now') has millisecond resolution and the rows' times
			// microseconds: a row written in the claim's millisecond is not due yet.
			quoted := `"` + strings.ReplaceAll(a.table, ".", `"."`) + `"`
			eventually(t, "SQLite's clock past the rows' times", func() bool {
				var young int
				err := a.db.QueryRow("SELECT COUNT(*) FROM " + quoted +
					" WHERE available_at > strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')").Scan(&young)
				return err == nil && young == 0
			})
		}
		// The dead node claims them for a second and never comes back.
		claimed, err := store.(storage.ClaimStore).Claim(context.Background(),
			storage.ClaimParams{Token: "dead/1", TTL: time.Second, Limit: 10})
		if err != nil || len(claimed.Events) != n || claimed.TakenOver != 0 {
			t.Fatalf("dead node's claim: %d events, %d taken over, %v; want %d, 0", len(claimed.Events), claimed.TakenOver, err, n)
		}
		a.start(t)
		for range n {
			select {
			case id := <-done:
				delivered = append(delivered, id)
			case <-time.After(30 * time.Second):
				t.Fatalf("delivered %v, want %d events once the dead claim expired", delivered, n)
			}
		}
		want := n
		if b.dialect == outbox.SQLite {
			want = 0
		}
		// The poller reports its claims after queueing their events, which the workers
		// may deliver first: wait for the report (take-overs are reported before).
		eventually(t, "the claims reported", func() bool { return a.metrics.claims(outbox.ClaimTaken) >= n })
		if got := a.metrics.claims(outbox.ClaimTakenOver); got != want {
			t.Fatalf("ClaimTakenOver counted %d, want %d", got, want)
		}
	})
}
