package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// pollClock is a store that records when each poll cycle's first query ran.
type pollClock struct {
	*outboxtest.MemoryStore
	mu    sync.Mutex
	times []time.Time
}

func (s *pollClock) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.mu.Unlock()
	return s.MemoryStore.Pending(ctx, p)
}

// gaps returns the time between consecutive queries, from start.
func (s *pollClock) gaps(start time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	prev := start
	for _, t := range s.times {
		out = append(out, t.Sub(prev))
		prev = t
	}
	return out
}

func startOutbox(t *testing.T, cfg outbox.Config, routes map[string]outbox.Listener) *outbox.Outbox {
	t.Helper()
	cfg.Logger = discardLogger()
	cfg.PurgeInterval = -1
	ob, err := outbox.New(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for typ, l := range routes {
		if err := ob.Register("", typ, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := ob.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ob.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return ob
}

func TestPollerBacksOffWhenIdle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &pollClock{MemoryStore: outboxtest.NewMemoryStore()}
		l := &outboxtest.RecordingListener{}
		start := time.Now()
		startOutbox(t, outbox.Config{Store: store, PollInterval: time.Second, PollMaxInterval: 8 * time.Second},
			map[string]outbox.Listener{"Thing": l})
		time.Sleep(30*time.Second + time.Millisecond)
		synctest.Wait()
		s := time.Second
		want := []time.Duration{0, 2 * s, 4 * s, 8 * s, 8 * s, 8 * s} // at 0, 2, 6, 14, 22, 30
		if got := store.gaps(start); !slices.Equal(got, want) {
			t.Fatalf("idle poll gaps %v, want %v (doubling from PollInterval up to PollMaxInterval)", got, want)
		}
		// A cycle that finds an event returns to PollInterval.
		old := newEvent("found", "Thing")
		old.CreatedAt = old.CreatedAt.Add(-time.Minute)
		store.Put(old)
		time.Sleep(8 * time.Second) // the next idle cycle, at 38 s, finds it
		synctest.Wait()
		if got := l.IDs(); !slices.Equal(got, []string{"found"}) {
			t.Fatalf("delivered %v", got)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		gaps := store.gaps(start)
		// at 38 s (found it), 39 s (PollInterval again), 41 s (idle: doubling again)
		if got, want := gaps[len(gaps)-3:], []time.Duration{8 * s, s, 2 * s}; !slices.Equal(got, want) {
			t.Fatalf("gaps around the busy cycle %v, want them to end with %v", gaps, want)
		}
	})
}

// While the hot path delivers events, the poller keeps PollInterval though its reads
// find nothing: each delivered event leaves a dead index entry for the next read to
// walk (on PostgreSQL), so reads far apart each walk more of them. Once the hot path is
// quiet, the wait doubles again.
func TestPollerKeepsItsIntervalWhileTheHotPathDelivers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store, l, start, ob := startPollIntervalOutbox(t)
		time.Sleep(14*time.Second + time.Millisecond) // idle: cycles at 0, 2, 6, 14
		synctest.Wait()
		// An event a second through the hot path, from 14.5 s to 21.5 s.
		time.Sleep(500 * time.Millisecond)
		for range 8 {
			writeCommitted(t, ob, 1)
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if got := len(l.IDs()); got != 8 {
			t.Fatalf("%d events delivered, want 8", got)
		}
		time.Sleep(20 * time.Second) // quiet again
		synctest.Wait()
		s := time.Second
		// Idle to 14 s; the cycle at 14 s found nothing and the hot path had delivered
		// nothing, so the next waits 8 s, to 22 s; the hot path delivered meanwhile:
		// 1 s to 23 s; then nothing: 2, 4, 8 s (25, 29, 37).
		want := []time.Duration{0, 2 * s, 4 * s, 8 * s, 8 * s, s, 2 * s, 4 * s, 8 * s}
		if got := store.gaps(start); !slices.Equal(got, want) {
			t.Fatalf("poll gaps %v, want %v", got, want)
		}
	})
}

// While the hot path delivers more than 1,000 events an interval, the cycles come as
// often as it takes the hot path to deliver about 1,000 (at most ten an interval), so that
// no read meets many more delivered events' dead index entries; once the hot path is
// quiet, the idle back-off starts from PollInterval again.
func TestPollerReadsMoreOftenAtAHighHotRate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store, l, start, ob := startPollIntervalOutbox(t)
		// 2,000 events a second through the hot path, from 0.5 s to 4.5 s.
		time.Sleep(500 * time.Millisecond)
		written := 0
		for range 400 {
			writeCommitted(t, ob, 20)
			written += 20
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(20 * time.Second) // quiet again
		synctest.Wait()
		if got := len(l.IDs()); got != written {
			t.Fatalf("%d events delivered, want %d", got, written)
		}
		// The cycle at 0 found nothing: the next at 2 s; from there every 0.5 s or so
		// (1,000 events at 2,000/s) to the end of the writes at 4.5 s and one more
		// while the last were delivered, then 2, 4, 8 s as after a cycle at 1 s.
		gaps := store.gaps(start)
		s := time.Second
		if len(gaps) < 2 || gaps[0] != 0 || gaps[1] != 2*s {
			t.Fatalf("poll gaps %v: the first two are not 0 and 2 s", gaps)
		}
		tail := []time.Duration{2 * s, 4 * s, 8 * s}
		if len(gaps) < 2+4+len(tail) || !slices.Equal(gaps[len(gaps)-len(tail):], tail) {
			t.Fatalf("poll gaps %v: fewer than four under load, or not ending in %v", gaps, tail)
		}
		hot := gaps[2 : len(gaps)-len(tail)]
		at := 2 * s
		for _, g := range hot {
			at += g
			if g < s/10 || g > 800*time.Millisecond {
				t.Fatalf("poll gaps %v: %v at %v, outside [100 ms, 800 ms] under 2,000 events/s", gaps, g, at)
			}
		}
		if at < 4500*time.Millisecond {
			t.Fatalf("poll gaps %v: the last short one at %v, before the writes ended", gaps, at)
		}
	})
}

// startPollIntervalOutbox starts an outbox over a pollClock store with PollInterval 1 s
// and PollMaxInterval 8 s and a recording listener for Thing, and returns them with the
// time it started.
func startPollIntervalOutbox(t *testing.T) (*pollClock, *outboxtest.RecordingListener, time.Time, *outbox.Outbox) {
	t.Helper()
	store := &pollClock{MemoryStore: outboxtest.NewMemoryStore()}
	l := &outboxtest.RecordingListener{}
	start := time.Now()
	ob := startOutbox(t, outbox.Config{Store: store, PollInterval: time.Second, PollMaxInterval: 8 * time.Second},
		map[string]outbox.Listener{"Thing": l})
	return store, l, start, ob
}

// writeCommitted writes n events of type Thing in one transaction that commits, so
// that they take the hot path.
func writeCommitted(t *testing.T, ob *outbox.Outbox, n int) {
	t.Helper()
	var tx adapterkit.Callbacks
	envs := make([]outbox.Envelope, n)
	for i := range envs {
		envs[i] = outbox.Envelope{Type: "Thing", Payload: json.RawMessage(`{}`)}
	}
	if _, err := ob.Writer().WriteAll(t.Context(), adapterkit.Join(nil, &tx), envs); err != nil {
		t.Fatal(err)
	}
	tx.Committed()
}

func TestPollerMaxIntervalMinusOneKeepsTheInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &pollClock{MemoryStore: outboxtest.NewMemoryStore()}
		start := time.Now()
		startOutbox(t, outbox.Config{Store: store, PollInterval: time.Second, PollMaxInterval: -1}, nil)
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		s := time.Second
		if got, want := store.gaps(start), []time.Duration{0, s, s, s}; !slices.Equal(got, want) {
			t.Fatalf("poll gaps %v, want %v", got, want)
		}
	})
	if _, err := outbox.New(nil, outbox.Config{Store: outboxtest.NewMemoryStore(), PollInterval: time.Minute, PollMaxInterval: time.Second}); err == nil {
		t.Fatal("PollMaxInterval below PollInterval accepted")
	}
}

// A retry this process scheduled is read when it falls due, not at the next tick, also
// when the event is younger than SkipRecent.
func TestPollerWakesWhenARetryFallsDue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := outboxtest.NewMemoryStore()
		var (
			mu       sync.Mutex
			attempts []time.Time
		)
		l := outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, time.Now())
			if len(attempts) < 3 {
				return errors.New("transient")
			}
			return nil
		})
		retry := outbox.RetryPolicyFunc(func(attempt int) time.Duration { return time.Duration(attempt) * 300 * time.Millisecond })
		ob := startOutbox(t, outbox.Config{Store: store, PollInterval: time.Hour, Retry: retry},
			map[string]outbox.Listener{"Thing": l})
		var tx adapterkit.Callbacks
		id, err := ob.Writer().Write(t.Context(), adapterkit.Join(nil, &tx), outbox.Envelope{Type: "Thing", Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		tx.Committed() // the first attempt takes the hot path
		time.Sleep(2 * time.Second)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(attempts)
		mu.Unlock()
		if len(got) != 3 {
			t.Fatalf("%d attempts in 2 s with PollInterval 1h, want 3 (the retries at 0.3 s and 0.6 s)", len(got))
		}
		for i, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
			if gap := got[i+1].Sub(got[i]); gap < want || gap > want+10*time.Millisecond {
				t.Errorf("retry %d came %v after the failure, want %v (+ up to 10 ms)", i+1, gap, want)
			}
		}
		if e, err := store.Get(t.Context(), id); err != nil || e.Status != outbox.StatusDone {
			t.Fatalf("event %+v, %v; want DONE", e, err)
		}
	})
}

// A cycle that starts after a retry fell due reads it, however young, whatever started
// the cycle. Here the retry falls due before the poller starts, so the first cycle of
// the start (not the due timer) is the one that must read it; before the fix that
// cycle forgot the due time and skipped the young row, and nothing read it until the
// next tick (up to PollMaxInterval later).
func TestPollerReadsARetryThatFellDueBeforeTheCycle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Retry: outbox.FixedBackoff{Wait: 100 * time.Millisecond}})
		var calls atomic.Int32
		b.listen(t, "Thing", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			if calls.Add(1) == 1 {
				return errors.New("transient")
			}
			return nil
		}))
		b.write(t, newEvent("e1", "Thing")) // the hot path fails it: a retry due in 100 ms
		synctest.Wait()
		if got := b.row(t, "e1").Status; got != outbox.StatusRetry {
			t.Fatalf("status after the first attempt %v, want RETRY", got)
		}
		time.Sleep(200 * time.Millisecond) // due now, still younger than SkipRecent
		startPoller(t, b, outbox.PollerConfig{Interval: time.Hour, SkipRecent: time.Hour})
		synctest.Wait()
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d attempts, want 2: the poller's first cycle, after the due time, must read the retry", n)
		}
		if got := b.row(t, "e1").Status; got != outbox.StatusDone {
			t.Fatalf("status %v, want DONE", got)
		}
	})
}

// bus is an in-process Notifier: every Notify wakes every Listen.
type bus struct {
	mu        sync.Mutex
	listeners map[chan struct{}]struct{}
	notifies  int
	listenErr error // returned once by the next Listen
	listens   int
}

func newBus() *bus { return &bus{listeners: make(map[chan struct{}]struct{})} }

func (b *bus) Notify(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notifies++
	for ch := range b.listeners {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

func (b *bus) Listen(ctx context.Context, wake func()) error {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	b.listens++
	if err := b.listenErr; err != nil {
		b.listenErr = nil
		b.mu.Unlock()
		return err
	}
	b.listeners[ch] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.listeners, ch)
		b.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
			wake()
		}
	}
}

func (b *bus) counts() (notifies, listens int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.notifies, b.listens
}

// A WriterOnly process notifies after commit and a dispatching one, polling once an
// hour, delivers at once; a replay notifies too. A failed Listen is retried.
func TestNotifierWakesDispatchersOfOtherProcesses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := outboxtest.NewMemoryStore()
		b := newBus()
		b.listenErr = errors.New("connection refused")
		var dead sync.Once
		l := &outboxtest.RecordingListener{Func: func(ctx context.Context, e *outbox.Event) error {
			fail := false
			if e.Type == "Poison" {
				dead.Do(func() { fail = true })
			}
			if fail {
				return errors.New("permanent")
			}
			return nil
		}}
		startOutbox(t, outbox.Config{Store: store, PollInterval: time.Hour, MaxAttempts: 1, Notifier: b},
			map[string]outbox.Listener{"Thing": l, "Poison": l})
		writer := startOutbox(t, outbox.Config{Store: store, Mode: outbox.WriterOnly, Notifier: b}, nil)
		time.Sleep(time.Second) // the dispatcher's Listen failed once and is back
		synctest.Wait()
		if _, listens := b.counts(); listens != 2 {
			t.Fatalf("Listen ran %d times, want 2 (once failed, then again after the back-off)", listens)
		}

		write := func(typ string) string {
			var tx adapterkit.Callbacks
			id, err := writer.Writer().Write(t.Context(), adapterkit.Join(nil, &tx), outbox.Envelope{Type: typ, Payload: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			tx.Committed()
			return id
		}
		write("Thing")
		poison := write("Poison")
		synctest.Wait()
		if got := l.Count(); got != 2 {
			t.Fatalf("%d deliveries after the WriterOnly commits, want 2 (PollInterval is an hour)", got)
		}
		if e, _ := store.Get(t.Context(), poison); e.Status != outbox.StatusDead {
			t.Fatalf("poison event %s, want DEAD", e.Status)
		}
		if err := writer.Events().Replay(t.Context(), poison); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(outbox.DefaultDoneBatchWindow) // the DONE outcome's batch
		synctest.Wait()
		if e, _ := store.Get(t.Context(), poison); e.Status != outbox.StatusDone || l.Count() != 3 {
			t.Fatalf("after the replay: %s, %d deliveries; want DONE, 3", e.Status, l.Count())
		}
	})
}

// The notification of the last writes before Stop is still sent.
func TestNotifierSendsThePendingNotificationAtStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		block := make(chan struct{})
		slow := &slowNotifier{bus: b, block: block}
		ob, err := outbox.New(nil, outbox.Config{Store: outboxtest.NewMemoryStore(), Mode: outbox.WriterOnly,
			Notifier: slow, PurgeInterval: -1, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the first Notify blocks; the second signal waits behind it
			var tx adapterkit.Callbacks
			if _, err := ob.Writer().Write(t.Context(), adapterkit.Join(nil, &tx), outbox.Envelope{Type: "Thing", Payload: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			tx.Committed()
			synctest.Wait()
		}
		stopped := make(chan error)
		go func() { stopped <- ob.Stop(context.Background()) }()
		synctest.Wait()
		close(block)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if n, _ := b.counts(); n != 2 {
			t.Fatalf("%d notifications, want 2: the one pending at Stop is sent", n)
		}
	})
}

type slowNotifier struct {
	*bus
	block chan struct{}
	once  sync.Once
}

func (s *slowNotifier) Notify(ctx context.Context) error {
	s.once.Do(func() { <-s.block })
	return s.bus.Notify(ctx)
}

// In MultiNode mode an event that the writer pre-claimed for the hot path, but that the
// hot queue refused at commit (it filled up in between), has its claim released at
// once and is delivered by a poller, instead of waiting ClaimTTL for the claim to expire.
func TestRefusedPreClaimedEventIsNotHeldForClaimTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := outboxtest.NewMemoryStore()
		release := make(chan struct{})
		var lastAt atomic.Int64 // when the last delivery ran, in Unix nanoseconds
		l := &outboxtest.RecordingListener{Func: func(ctx context.Context, e *outbox.Event) error {
			if e.Type == "Blocker" {
				<-release
			}
			lastAt.Store(time.Now().UnixNano())
			return nil
		}}
		ob := startOutbox(t, outbox.Config{Store: store, Mode: outbox.MultiNode, ClaimTTL: time.Hour,
			Workers: 1, HotQueueSize: 1, PollInterval: time.Hour},
			map[string]outbox.Listener{"Blocker": l, "Thing": l})
		write := func(typ string) (string, *adapterkit.Callbacks) {
			tx := new(adapterkit.Callbacks)
			id, err := ob.Writer().Write(t.Context(), adapterkit.Join(nil, tx), outbox.Envelope{Type: typ, Payload: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			return id, tx
		}
		_, tx := write("Blocker")
		tx.Committed()
		synctest.Wait() // the one worker is blocked in the listener; the hot queue is empty
		queued, tx1 := write("Thing")
		refused, tx2 := write("Thing") // both pre-claimed: the queue had room at write time
		for _, id := range []string{queued, refused} {
			if e, _ := store.Get(t.Context(), id); e.LockedBy == "" {
				t.Fatalf("%s was not pre-claimed", id)
			}
		}
		tx1.Committed() // fills the hot queue
		tx2.Committed() // refused
		synctest.Wait()
		start := time.Now()
		close(release)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := l.IDs(); !slices.Contains(got, refused) || !slices.Contains(got, queued) {
			t.Fatalf("delivered %v; want the refused event %s delivered within a second (ClaimTTL is an hour)", got, refused)
		}
		// The memory store's claims are released by expiring a microsecond later, and the
		// poller wakes when they have (the SQL store clears them at once).
		if took := time.Unix(0, lastAt.Load()).Sub(start); took > 10*time.Millisecond {
			t.Errorf("the refused event waited %s, want at most 10 ms", took)
		}
		if e, _ := store.Get(t.Context(), refused); e.Status != outbox.StatusDone {
			t.Fatalf("refused event %s, want DONE", e.Status)
		}
	})
}

// A commit that reported an error may have stored its events anyway (the
// acknowledgement was lost): in MultiNode mode their pre-claims are released, so they
// are delivered at once instead of after ClaimTTL. (The memory store applies an insert
// at once, as such a commit did.)
func TestPreClaimsOfAFailedCommitAreReleased(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := outboxtest.NewMemoryStore()
		l := &outboxtest.RecordingListener{}
		ob := startOutbox(t, outbox.Config{Store: store, Mode: outbox.MultiNode, ClaimTTL: time.Hour, PollInterval: time.Hour},
			map[string]outbox.Listener{"Thing": l})
		tx := new(adapterkit.Callbacks)
		id, err := ob.Writer().Write(t.Context(), adapterkit.Join(nil, tx), outbox.Envelope{Type: "Thing", Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := store.Get(t.Context(), id); e.LockedBy == "" {
			t.Fatal("not pre-claimed")
		}
		tx.RolledBack() // COMMIT failed; the row is there
		time.Sleep(time.Second)
		synctest.Wait()
		if got := l.IDs(); !slices.Equal(got, []string{id}) {
			t.Fatalf("delivered %v within a second, want %s (ClaimTTL is an hour)", got, id)
		}
	})
}
