package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// The dispatch lease's timing, with a lease kept in memory by the bubble's clock (the
// SQL store's statements run on the three databases in internal/roottest/core, and two
// OS processes there too).

// memLease is a table's dispatch lease kept in memory, with the rules of the SQL
// store's statements; the bubble's clock plays the database's.
type memLease struct {
	mu    sync.Mutex
	cur   storage.Lease // Holder "" until first taken
	fail  error         // AcquireLease fails with it while set
	calls int           // AcquireLease calls
}

// leaseStore is one process's view of a table: a shared MemoryStore and a shared lease.
type leaseStore struct {
	*outboxtest.MemoryStore
	lease *memLease
}

func (s leaseStore) AcquireLease(_ context.Context, p storage.LeaseParams) (storage.Lease, error) {
	if err := p.Validate(); err != nil {
		return storage.Lease{}, err
	}
	l := s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.fail != nil {
		return storage.Lease{}, l.fail
	}
	now := time.Now()
	holds := func(c storage.Lease) bool {
		if p.Shared {
			return c.Shared
		}
		return !c.Shared && c.Holder == p.Holder
	}
	if l.cur.Holder == "" || l.cur.ExpiresAt.Before(now) || holds(l.cur) {
		exp := now.Add(p.TTL)
		if p.Shared && holds(l.cur) && l.cur.ExpiresAt.After(exp) {
			exp = l.cur.ExpiresAt
		}
		l.cur = storage.Lease{Holder: p.Holder, Shared: p.Shared, ExpiresAt: exp}
	}
	out := l.cur
	out.Held = out.ExpiresAt.After(now) && holds(out)
	return out, nil
}

func (s leaseStore) ReleaseLease(_ context.Context, holder string) error {
	l := s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur.Holder == holder && !l.cur.Shared {
		l.cur.ExpiresAt = time.Now().Add(-time.Second)
	}
	return nil
}

func (l *memLease) get() storage.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

func (l *memLease) setFail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// leaseProc is one process on the shared table: an Outbox, its logs and its deliveries.
type leaseProc struct {
	ob   *outbox.Outbox
	logs *logSink
	got  *deliveries
}

// startLeaseProc builds and starts an Outbox of cfg on store and stops it at cleanup.
func startLeaseProc(t *testing.T, store leaseStore, cfg outbox.Config) *leaseProc {
	t.Helper()
	p := &leaseProc{logs: newLogSink(), got: newDeliveries(nil)}
	cfg.Store, cfg.Logger = store, p.logs.logger()
	cfg.PollInterval, cfg.PollMaxInterval, cfg.SkipRecent = time.Second, -1, -1
	ob, err := outbox.New(nil, cfg)
	mustOK(t, err)
	mustOK(t, ob.Register("", "Ping", p.got))
	mustOK(t, ob.Start(t.Context()))
	p.ob = ob
	t.Cleanup(func() { _ = ob.Stop(context.Background()) })
	return p
}

// putPing stores a due Ping event, as another process's committed write would.
func putPing(store leaseStore, id string) {
	at := time.Now().Add(-time.Minute)
	store.Put(outbox.Event{ID: id, Type: "Ping", AggregateType: outbox.GlobalAggregateType, Payload: json.RawMessage(`{}`),
		Status: outbox.StatusNew, CreatedAt: at, AvailableAt: time.Now()}) // written a minute ago (past SkipRecent), due from its commit
}

func newLeaseStore() leaseStore {
	return leaseStore{MemoryStore: outboxtest.NewMemoryStore(), lease: new(memLease)}
}

// TestLeaseSecondSingleNodeStandsBy: of two SingleNode processes with the defaults on
// one table, the second stands by: it delivers nothing, logs one WARN when it begins
// and one ERROR naming MultiNode after 4 × DefaultLeaseTTL, while the first renews its
// lease every third of the TTL so that it never lapses. When the first stops, the
// second takes over within a sixth of the TTL.
func TestLeaseSecondSingleNodeStandsBy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ttl = outbox.DefaultLeaseTTL
		store := newLeaseStore()
		a := startLeaseProc(t, store, outbox.Config{})
		b := startLeaseProc(t, store, outbox.Config{})
		if !a.ob.Dispatching() || b.ob.Dispatching() {
			t.Fatalf("Dispatching: first %v, second %v; want true, false", a.ob.Dispatching(), b.ob.Dispatching())
		}
		holder := store.lease.get().Holder
		warns := b.logs.find(slog.LevelWarn, "another process holds this table's dispatch lease")
		if len(warns) != 1 || warns[0].attrs["holder"] != holder || warns[0].attrs["holder_mode"] != "SingleNode" ||
			!strings.Contains(warns[0].msg, "Mode: MultiNode") {
			t.Fatalf("standby WARN lines %+v, want one naming holder %s and Mode: MultiNode", warns, holder)
		}

		// Events are delivered by the holder alone, and its lease never lapses: at every
		// second up to 4 × TTL, at least 2/3 of the TTL is left.
		for i := range 4*int(ttl/time.Second) - 1 {
			if i%10 == 0 {
				putPing(store, fmt.Sprintf("e%03d", i))
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if l := store.lease.get(); l.Holder != holder || time.Until(l.ExpiresAt) < ttl*2/3-time.Second {
				t.Fatalf("after %d s the lease is %+v, want held by %s with 2/3 of %s left", i+1, l, holder, ttl)
			}
		}
		if a.got.total() != 12 || b.got.total() != 0 {
			t.Errorf("deliveries: holder %d, standby %d; want 12, 0", a.got.total(), b.got.total())
		}
		if n := len(b.logs.find(slog.LevelError, "still standing by")); n != 0 {
			t.Errorf("%d ERROR lines before 4 × LeaseTTL, want 0", n)
		}
		time.Sleep(ttl / 6)
		synctest.Wait()
		errs := b.logs.atLevel(slog.LevelError)
		if len(errs) != 1 || !strings.Contains(errs[0].msg, "still standing by") || !strings.Contains(errs[0].msg, "Mode: MultiNode") {
			t.Fatalf("ERROR lines after 4 × LeaseTTL: %+v, want one naming Mode: MultiNode", errs)
		}
		if n := len(a.logs.atLevel(slog.LevelWarn)) + len(a.logs.atLevel(slog.LevelError)); n != 0 {
			t.Errorf("the holder logged %d WARN or ERROR lines, want none", n)
		}

		// A graceful stop releases the lease; the standby takes it at its next attempt.
		mustOK(t, a.ob.Stop(t.Context()))
		if l := store.lease.get(); !l.ExpiresAt.Before(time.Now()) {
			t.Fatalf("after a graceful stop the lease expires at %s, want released", l.ExpiresAt)
		}
		time.Sleep(ttl / 6)
		synctest.Wait()
		if !b.ob.Dispatching() || len(b.logs.find(slog.LevelInfo, "took this table's dispatch lease")) != 1 {
			t.Fatalf("a sixth of the TTL after the holder stopped: standby dispatching %v, want true with one INFO line", b.ob.Dispatching())
		}
		putPing(store, "after")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if b.got.of("after") != 1 || a.got.of("after") != 0 {
			t.Errorf("the event written after the handover was delivered %d times by the new holder, %d by the old", b.got.of("after"), a.got.of("after"))
		}
		if n := len(b.logs.find(slog.LevelError, "")); n != 1 {
			t.Errorf("%d ERROR lines in all, want the one", n)
		}
	})
}

// TestLeaseRenewalFailureStopsDelivery: a holder whose renewals fail stops delivering
// when two thirds of the TTL passed since its last renewal, before the lease can
// expire, with one ERROR, and delivers again once a renewal succeeds.
func TestLeaseRenewalFailureStopsDelivery(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ttl = 30 * time.Second
		store := newLeaseStore()
		a := startLeaseProc(t, store, outbox.Config{LeaseTTL: ttl})
		start := time.Now()
		store.lease.setFail(errors.New("connection refused"))
		time.Sleep(ttl*2/3 - time.Second)
		synctest.Wait()
		if !a.ob.Dispatching() {
			t.Fatalf("stopped delivering %s after the last renewal, before 2/3 of the TTL", time.Since(start))
		}
		if n := len(a.logs.find(slog.LevelWarn, "renewal failed")); n == 0 {
			t.Errorf("no WARN for the failed renewals")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if a.ob.Dispatching() {
			t.Fatalf("still delivering 2/3 of the TTL after the last renewal")
		}
		if l := store.lease.get(); !time.Now().Before(l.ExpiresAt) {
			t.Fatalf("delivery stopped at %s, not before the lease expired at %s", time.Now(), l.ExpiresAt)
		}
		if errs := a.logs.atLevel(slog.LevelError); len(errs) != 1 || !strings.Contains(errs[0].msg, "could not renew") {
			t.Fatalf("ERROR lines %+v, want one", errs)
		}
		putPing(store, "during")
		store.lease.setFail(nil)
		time.Sleep(ttl / 6)
		synctest.Wait()
		if !a.ob.Dispatching() {
			t.Fatalf("not delivering a sixth of the TTL after the database came back")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if a.got.of("during") != 1 {
			t.Errorf("the event written while it stood by was delivered %d times, want 1", a.got.of("during"))
		}
	})
}

// TestLeaseLostStopsAtOnce: a holder that finds another process holding its lease (it
// expired unrenewed, and the other took it) stops delivering at once with one ERROR, and
// stands by.
func TestLeaseLostStopsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ttl = 30 * time.Second
		store := newLeaseStore()
		a := startLeaseProc(t, store, outbox.Config{LeaseTTL: ttl})
		store.lease.mu.Lock()
		store.lease.cur = storage.Lease{Holder: "intruder", ExpiresAt: time.Now().Add(time.Hour)}
		store.lease.mu.Unlock()
		time.Sleep(ttl / 3)
		synctest.Wait()
		if a.ob.Dispatching() {
			t.Fatalf("still delivering after its renewal found the lease taken")
		}
		errs := a.logs.atLevel(slog.LevelError)
		if len(errs) != 1 || !strings.Contains(errs[0].msg, "lost") || errs[0].attrs["holder"] != "intruder" {
			t.Fatalf("ERROR lines %+v, want one naming the new holder", errs)
		}
		putPing(store, "e1")
		time.Sleep(ttl)
		synctest.Wait()
		if a.got.total() != 0 {
			t.Errorf("delivered %d events while another process held the lease", a.got.total())
		}
	})
}

// TestLeaseHardStopLeavesLease: a stop whose deadline passes while a listener runs leaves
// the lease to expire (the abandoned attempt may still run), so a new process takes
// over only after the TTL; a graceful stop released it in the test above.
func TestLeaseHardStopLeavesLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ttl = 30 * time.Second
		store := newLeaseStore()
		a := startLeaseProc(t, store, outbox.Config{LeaseTTL: ttl})
		block := make(chan struct{})
		mustOK(t, a.ob.Register("", "Slow", outbox.ListenerFunc(func(ctx context.Context, _ *outbox.Event) error {
			<-block
			return nil
		})))
		at := time.Now().Add(-time.Minute)
		store.Put(outbox.Event{ID: "slow", Type: "Slow", AggregateType: outbox.GlobalAggregateType, Payload: json.RawMessage(`{}`),
			Status: outbox.StatusNew, CreatedAt: at, AvailableAt: time.Now()}) // written a minute ago (past SkipRecent), due from its commit
		time.Sleep(2 * time.Second)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if err := a.ob.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want a hard stop", err)
		}
		cancel()
		close(block)
		stopped := time.Now()
		expires := store.lease.get().ExpiresAt
		if !expires.After(stopped) {
			t.Fatalf("the lease expires at %s, want left to expire after the stop at %s", expires, stopped)
		}
		b := startLeaseProc(t, store, outbox.Config{LeaseTTL: ttl})
		if b.ob.Dispatching() {
			t.Fatalf("a new process delivers beside the lease left by a hard stop")
		}
		time.Sleep(time.Until(expires) + ttl/6 + time.Millisecond)
		synctest.Wait()
		if !b.ob.Dispatching() {
			t.Fatalf("the new process does not deliver a sixth of the TTL after the lease expired")
		}
	})
}

// TestLeaseModesDoNotMix: MultiNode processes stand by beside a SingleNode holder and
// share the lease after it; a SingleNode process stands by beside them until their
// shared lease expires (they do not release it: one cannot know it is the last).
func TestLeaseModesDoNotMix(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ttl = 30 * time.Second
		multi := func(id string) outbox.Config {
			return outbox.Config{Mode: outbox.MultiNode, ClaimTTL: time.Minute, NodeID: id, LeaseTTL: ttl}
		}
		store := newLeaseStore()
		single := startLeaseProc(t, store, outbox.Config{LeaseTTL: ttl})
		m1 := startLeaseProc(t, store, multi("m1"))
		if m1.ob.Dispatching() {
			t.Fatal("a MultiNode process delivers beside a SingleNode holder")
		}
		if w := m1.logs.find(slog.LevelWarn, "dispatch lease"); len(w) != 1 || !strings.Contains(w[0].msg, "A SingleNode process dispatches") {
			t.Fatalf("MultiNode standby WARN lines %+v, want one naming the SingleNode process", w)
		}
		mustOK(t, single.ob.Stop(t.Context()))
		time.Sleep(ttl / 6)
		synctest.Wait()
		m2 := startLeaseProc(t, store, multi("m2"))
		if !m1.ob.Dispatching() || !m2.ob.Dispatching() {
			t.Fatalf("MultiNode processes after the SingleNode one stopped: dispatching %v, %v; want both", m1.ob.Dispatching(), m2.ob.Dispatching())
		}
		late := startLeaseProc(t, store, outbox.Config{LeaseTTL: ttl})
		if late.ob.Dispatching() {
			t.Fatal("a SingleNode process delivers beside MultiNode ones")
		}
		if w := late.logs.find(slog.LevelWarn, "dispatch lease"); len(w) != 1 || !strings.Contains(w[0].msg, "MultiNode processes dispatch") {
			t.Fatalf("SingleNode standby WARN lines %+v, want one naming the MultiNode processes", w)
		}
		mustOK(t, m1.ob.Stop(t.Context()))
		time.Sleep(ttl / 2)
		synctest.Wait()
		if late.ob.Dispatching() {
			t.Fatal("the SingleNode process took the lease while a MultiNode process still renews it")
		}
		mustOK(t, m2.ob.Stop(t.Context()))
		expires := store.lease.get().ExpiresAt
		time.Sleep(time.Until(expires) + ttl/6 + time.Millisecond)
		synctest.Wait()
		if !late.ob.Dispatching() {
			t.Fatal("the SingleNode process does not deliver after the MultiNode lease expired")
		}
	})
}

// TestLeaseOffOrUnsupported: LeaseTTL -1 never touches the lease, and a store whose
// table has no lease table runs without one after a WARN; both deliver.
func TestLeaseOffOrUnsupported(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newLeaseStore()
		off := startLeaseProc(t, store, outbox.Config{LeaseTTL: -1})
		if !off.ob.Dispatching() || store.lease.calls != 0 {
			t.Errorf("LeaseTTL -1: dispatching %v after %d lease calls, want true after none", off.ob.Dispatching(), store.lease.calls)
		}
		store.lease.setFail(fmt.Errorf("no lease table: %w", errors.ErrUnsupported))
		old := startLeaseProc(t, newLeaseStoreSharing(store), outbox.Config{})
		if !old.ob.Dispatching() || len(old.logs.find(slog.LevelWarn, "no dispatch lease")) != 1 {
			t.Errorf("a table without the lease: dispatching %v, want true with one WARN", old.ob.Dispatching())
		}
	})
}

// newLeaseStoreSharing is a second process's view of s's table.
func newLeaseStoreSharing(s leaseStore) leaseStore {
	return leaseStore{MemoryStore: s.MemoryStore, lease: s.lease}
}

func TestLeaseConfig(t *testing.T) {
	t.Parallel()
	store := newLeaseStore()
	for _, tc := range []struct {
		cfg   outbox.Config
		field string // "" when valid
	}{
		{outbox.Config{}, ""},
		{outbox.Config{LeaseTTL: -1}, ""},
		{outbox.Config{LeaseTTL: time.Second}, ""},
		{outbox.Config{LeaseTTL: 999 * time.Millisecond}, "LeaseTTL"},
		{outbox.Config{LeaseTTL: -2}, "LeaseTTL"},
		{outbox.Config{Mode: outbox.WriterOnly, LeaseTTL: time.Minute}, "LeaseTTL"},
		{outbox.Config{Mode: outbox.MultiNode, ClaimTTL: time.Minute, LeaseTTL: time.Minute}, ""},
	} {
		tc.cfg.Store = store
		_, err := outbox.New(nil, tc.cfg)
		var ce *outbox.ConfigError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.cfg.LeaseTTL, err)
		case tc.field != "" && (!errors.As(err, &ce) || ce.Field != tc.field):
			t.Errorf("mode %s, LeaseTTL %s: %v, want a ConfigError on %s", tc.cfg.Mode, tc.cfg.LeaseTTL, err, tc.field)
		}
	}
	for _, p := range []storage.LeaseParams{
		{TTL: time.Second},
		{Holder: strings.Repeat("h", outbox.MaxClaimTokenLen+1), TTL: time.Second},
		{Holder: "h"},
	} {
		if err := p.Validate(); !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidArgument", p, err)
		}
	}
}
