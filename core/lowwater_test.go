package outbox_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// pendingReads records when the poller read and from where.
type pendingReads struct {
	*outboxtest.MemoryStore
	mu    sync.Mutex
	reads []pendingRead
}

type pendingRead struct {
	at    time.Time
	after outbox.Cursor
}

func (s *pendingReads) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	s.mu.Lock()
	s.reads = append(s.reads, pendingRead{at: time.Now(), after: p.After})
	s.mu.Unlock()
	return s.MemoryStore.Pending(ctx, p)
}

// lowWaterOutbox is an outbox over a pendingReads store, polling every second without
// a hot path, whose one subscription records when each event was delivered.
type lowWaterOutbox struct {
	ob    *outbox.Outbox
	store *pendingReads
	mu    sync.Mutex
	at    map[string]time.Time
}

func newLowWaterOutbox(t *testing.T) *lowWaterOutbox {
	t.Helper()
	o := &lowWaterOutbox{store: &pendingReads{MemoryStore: outboxtest.NewMemoryStore()}, at: map[string]time.Time{}}
	var err error
	o.ob, err = outbox.New(nil, outbox.Config{Store: o.store, Logger: discardLogger(), PurgeInterval: -1, HotQueueSize: -1,
		PollInterval: time.Second, PollMaxInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.ob.Subscribe(outbox.Subscription{Name: "S", EventType: "T", Listener: outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
		o.mu.Lock()
		o.at[e.ID] = time.Now()
		o.mu.Unlock()
		return nil
	})}); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *lowWaterOutbox) start(t *testing.T) {
	t.Helper()
	if err := o.ob.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.ob.Stop(context.Background()) })
}

// putOld stores a row written and due an hour ago, as a late commit or a process that
// was down leaves one.
func (o *lowWaterOutbox) putOld(id string) outbox.Event {
	e := newEvent(id, "T")
	e.CreatedAt = e.CreatedAt.Add(-time.Hour)
	e.AvailableAt = e.CreatedAt
	o.store.Put(e)
	return e
}

func (o *lowWaterOutbox) deliveredAt(id string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.at[id]
	return at, ok
}

func (s *pendingReads) since(t time.Time) []pendingRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pendingRead
	for _, r := range s.reads {
		if !r.at.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// TestPollerReadsFromALowWaterMark: a SingleNode poller's cycles start at the low-water
// mark (core/internal/poll/lowwater.go), the due time before which nothing is pending,
// instead of walking the pending index from its head past the entries of delivered
// rows; it reads from the head once a minute. A row written now is read by the next
// cycle; a row the mark does not cover (written an hour ago, committed now) is read by
// the next read from the head, within a minute.
func TestPollerReadsFromALowWaterMark(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := newLowWaterOutbox(t)
		store, deliveredAt := o.store, o.deliveredAt
		old := o.putOld("old")
		start := time.Now()
		o.start(t)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if _, ok := deliveredAt("old"); !ok {
			t.Fatal("the row written before the start was not delivered")
		}
		reads := store.since(start)
		if len(reads) < 4 || !reads[0].after.IsZero() {
			t.Fatalf("reads %+v: want the first from the head and one a second after it", reads)
		}
		for i, r := range reads[1:] {
			// The mark: the due time of the first row the cycle before found, or that
			// cycle's start less SkipRecent (1 s) and the margin (10 s).
			want := reads[i].at.Add(-11 * time.Second)
			if i == 0 {
				want = old.AvailableAt.Truncate(time.Microsecond)
			}
			if !r.after.AvailableAt.Equal(want) || !r.after.CreatedAt.IsZero() || r.after.ID != "" {
				t.Fatalf("read %d, %v after the start, started after %+v, want from the due time %v", i+1, r.at.Sub(start), r.after, want)
			}
		}

		// Written an hour ago, committed now: behind the mark. And one written now.
		o.putOld("late")
		store.Put(newEvent("fresh", "T"))
		put := time.Now()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if at, ok := deliveredAt("fresh"); !ok || at.Sub(put) > 3*time.Second {
			t.Fatalf("the row written now: delivered %v after it (%v), want within SkipRecent and a poll", at.Sub(put), ok)
		}
		at, ok := deliveredAt("late")
		if !ok || at.Sub(start) > time.Minute+2*time.Second {
			t.Fatalf("the row behind the mark: delivered %v after the start (%v), want by the read from the head a minute after the first",
				at.Sub(start), ok)
		}
		var heads []time.Duration
		for _, r := range store.since(start) {
			if r.after.IsZero() {
				heads = append(heads, r.at.Sub(start))
			}
		}
		if len(heads) != 2 || heads[1] < time.Minute || heads[1] > time.Minute+2*time.Second {
			t.Fatalf("reads from the head at %v after the start, want 0 and one a minute later", heads)
		}
	})
}

// TestPollFromATestReadsFromTheOldestRow: outboxtest.Poll, a test's cycle, reads from
// the oldest row whatever the running poller's low-water mark, so a row written with an
// old due time after the mark was set is found by it at once.
func TestPollFromATestReadsFromTheOldestRow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		o := newLowWaterOutbox(t)
		o.start(t)
		time.Sleep(3 * time.Second) // the running poller has a mark
		synctest.Wait()
		o.putOld("late")
		start := time.Now()
		if n, err := outboxtest.Poll(t.Context(), o.ob); err != nil || n != 1 {
			t.Fatalf("Poll = %d, %v; want the row behind the mark", n, err)
		}
		synctest.Wait()
		if _, ok := o.deliveredAt("late"); !ok {
			t.Fatal("the row behind the mark was not delivered")
		}
		reads := o.store.since(start)
		if !slices.ContainsFunc(reads, func(r pendingRead) bool { return r.after.IsZero() }) {
			t.Fatalf("reads %+v: want Poll's from the oldest row", reads)
		}
	})
}

// claimReads records when the poller claimed and from which due time.
type claimReads struct {
	*outboxtest.MemoryStore
	mu    sync.Mutex
	reads []pendingRead // after holds only DueFrom, as AvailableAt
}

func (s *claimReads) Claim(ctx context.Context, p storage.ClaimParams) (storage.PendingBatch, error) {
	s.mu.Lock()
	s.reads = append(s.reads, pendingRead{at: time.Now(), after: outbox.Cursor{AvailableAt: p.DueFrom}})
	s.mu.Unlock()
	return s.MemoryStore.Claim(ctx, p)
}

// TestClaimsStartAtALowWaterMark: MultiNode claims start at the low-water mark too
// (storage.ClaimParams.DueFrom), and claim from the head every 10 s, so that a row
// another node held, whose claim expires behind the mark (the node died), is claimed
// within 10 s of its expiry.
func TestClaimsStartAtALowWaterMark(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &claimReads{MemoryStore: outboxtest.NewMemoryStore()}
		var mu sync.Mutex
		delivered := map[string]time.Time{}
		ob, err := outbox.New(nil, outbox.Config{Store: store, Logger: discardLogger(), PurgeInterval: -1, HotQueueSize: -1,
			Mode: outbox.MultiNode, ClaimTTL: time.Minute, NodeID: "a", PollInterval: time.Second, PollMaxInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Subscribe(outbox.Subscription{Name: "S", EventType: "T", Listener: outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			mu.Lock()
			delivered[e.ID] = time.Now()
			mu.Unlock()
			return nil
		})}); err != nil {
			t.Fatal(err)
		}
		// Written an hour ago and claimed by a node that died: its claim ends in 30 s.
		held := newEvent("held", "T")
		held.CreatedAt = held.CreatedAt.Add(-time.Hour)
		held.AvailableAt = held.CreatedAt
		held.LockedBy, held.LockedUntil = "b/1", time.Now().Add(30*time.Second)
		store.Put(held)
		start := time.Now()
		if err := ob.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ob.Stop(context.Background()) })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		store.mu.Lock()
		reads := slices.Clone(store.reads)
		store.mu.Unlock()
		if len(reads) < 3 || !reads[0].after.IsZero() {
			t.Fatalf("claims %+v: want the first from the head and later ones from a mark", reads)
		}
		for i, r := range reads[1:] {
			if want := reads[i].at.Add(-11 * time.Second); !r.after.AvailableAt.Equal(want) {
				t.Fatalf("claim %d, %v after the start, from %v; want from %v", i+1, r.at.Sub(start), r.after.AvailableAt, want)
			}
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		at, ok := delivered["held"]
		mu.Unlock()
		if !ok || at.Sub(start) > 30*time.Second+claimHeadEvery+2*time.Second {
			t.Fatalf("the expired claim behind the mark: delivered %v after the start (%v), want within 10 s of its expiry", at.Sub(start), ok)
		}
		var heads []time.Duration
		store.mu.Lock()
		for _, r := range store.reads {
			if r.after.IsZero() {
				heads = append(heads, r.at.Sub(start))
			}
		}
		store.mu.Unlock()
		for i := 1; i < len(heads); i++ {
			if d := heads[i] - heads[i-1]; d < claimHeadEvery || d > claimHeadEvery+2*time.Second {
				t.Fatalf("claims from the head at %v after the start: want one every %v", heads, claimHeadEvery)
			}
		}
		if len(heads) < 6 {
			t.Fatalf("claims from the head at %v after the start: want one every %v", heads, claimHeadEvery)
		}
	})
}

// claimHeadEvery is how often MultiNode claims start at the head (lowwater.go).
const claimHeadEvery = 10 * time.Second
