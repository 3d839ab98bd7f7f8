package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

func TestDispatcherDefaultConstants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"DefaultWorkers", outbox.DefaultWorkers, 4},
		{"DefaultHotQueueSize", outbox.DefaultHotQueueSize, 1000},
		{"DefaultColdQueueSize", outbox.DefaultColdQueueSize, 1000},
		{"DefaultMaxAttempts", outbox.DefaultMaxAttempts, 10},
		{"DefaultRetryBase", outbox.DefaultRetryBase, 200 * time.Millisecond},
		{"DefaultRetryMax", outbox.DefaultRetryMax, 60 * time.Second},
		{"DefaultListenerTimeout", outbox.DefaultListenerTimeout, 30 * time.Second},
		{"DefaultStatusTimeout", outbox.DefaultStatusTimeout, 10 * time.Second},
		{"DefaultPollInterval", outbox.DefaultPollInterval, 5 * time.Second},
		{"DefaultPollBatchSize", outbox.DefaultPollBatchSize, 100},
		{"DefaultSkipRecent", outbox.DefaultSkipRecent, time.Second},
		{"DefaultQueryTimeout", outbox.DefaultQueryTimeout, 10 * time.Second},
		{"DefaultPurgeInterval", outbox.DefaultPurgeInterval, time.Hour},
		{"DefaultRetention", outbox.DefaultRetention, 7 * 24 * time.Hour},
		{"DefaultPurgeBatchSize", outbox.DefaultPurgeBatchSize, 500},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestNewDispatcherValidates(t *testing.T) {
	t.Parallel()
	store := outboxtest.NewMemoryStore()
	reg := outbox.NewRegistry()
	tests := []struct {
		name      string
		store     storage.Store
		reg       *outbox.Registry
		cfg       outbox.DispatcherConfig
		wantField string // "" means valid
	}{
		{name: "zero value", store: store, reg: reg},
		{name: "disabled values", store: store, reg: reg, cfg: outbox.DispatcherConfig{
			HotQueueSize: -1, MaxAttempts: -1, ListenerTimeout: -1, StatusTimeout: -1,
		}},
		{name: "explicit values", store: store, reg: reg, cfg: outbox.DispatcherConfig{
			Workers: 1, HotQueueSize: 1, ColdQueueSize: 1, MaxAttempts: 1,
			ListenerTimeout: time.Nanosecond, StatusTimeout: time.Nanosecond,
			Interceptors: []outbox.Interceptor{outbox.InterceptorFuncs{}},
		}},
		{name: "nil store", reg: reg, wantField: "Store"},
		{name: "nil registry", store: store, wantField: "Registry"},
		{name: "negative workers", store: store, reg: reg, cfg: outbox.DispatcherConfig{Workers: -1}, wantField: "Workers"},
		{name: "hot queue below -1", store: store, reg: reg, cfg: outbox.DispatcherConfig{HotQueueSize: -2}, wantField: "HotQueueSize"},
		{name: "negative cold queue", store: store, reg: reg, cfg: outbox.DispatcherConfig{ColdQueueSize: -1}, wantField: "ColdQueueSize"},
		{name: "max attempts below -1", store: store, reg: reg, cfg: outbox.DispatcherConfig{MaxAttempts: -2}, wantField: "MaxAttempts"},
		{name: "negative listener timeout", store: store, reg: reg, cfg: outbox.DispatcherConfig{ListenerTimeout: -time.Second}, wantField: "ListenerTimeout"},
		{name: "negative status timeout", store: store, reg: reg, cfg: outbox.DispatcherConfig{StatusTimeout: -2}, wantField: "StatusTimeout"},
		{name: "negative claim ttl", store: store, reg: reg, cfg: outbox.DispatcherConfig{ClaimTTL: -time.Second}, wantField: "ClaimTTL"},
		{name: "nil interceptor", store: store, reg: reg, cfg: outbox.DispatcherConfig{
			Interceptors: []outbox.Interceptor{outbox.InterceptorFuncs{}, nil},
		}, wantField: "Interceptors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := outbox.NewDispatcher(tt.store, tt.reg, tt.cfg)
			if tt.wantField == "" {
				if err != nil || d == nil {
					t.Fatalf("NewDispatcher = %v, %v; want a dispatcher", d, err)
				}
				return
			}
			var ce *outbox.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.wantField || !errors.Is(err, outbox.ErrInvalidConfig) {
				t.Fatalf("NewDispatcher error = %v, want ConfigError on %s", err, tt.wantField)
			}
		})
	}
}

func TestDispatcherZeroConfigDefaults(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		// One read takes at most the cold queue but the tenth no one subscription may take.
		if got, want := b.d.ColdCapacity(), outbox.DefaultColdQueueSize-outbox.DefaultColdQueueSize/10; got != want {
			t.Errorf("ColdCapacity = %d, want %d", got, want)
		}

		// Workers: DefaultWorkers deliveries run at once; the rest wait in the hot queue.
		g := newGate()
		b.listen(t, "Block", g)
		for i := range outbox.DefaultWorkers + 2 {
			b.write(t, newEvent(fmt.Sprintf("blk-%d", i), "Block"))
		}
		synctest.Wait()
		if got := len(g.delivered()); got != outbox.DefaultWorkers {
			t.Errorf("concurrent deliveries = %d, want %d", got, outbox.DefaultWorkers)
		}
		// HotQueueSize: the hot queue holds DefaultHotQueueSize events.
		if hot, _ := b.d.QueueDepths(); hot != 2 {
			t.Fatalf("hot depth = %d, want 2", hot)
		}
		for i := range outbox.DefaultHotQueueSize - 2 {
			if !b.d.EnqueueHot(newEvent(fmt.Sprintf("fill-%d", i), "Block")) {
				t.Fatalf("EnqueueHot %d refused before the queue is full", i)
			}
		}
		if b.d.EnqueueHot(newEvent("one-too-many", "Block")) {
			t.Fatal("EnqueueHot accepted an event beyond DefaultHotQueueSize")
		}
		g.open()
		synctest.Wait()

		// ListenerTimeout, MaxAttempts and Retry.
		start := time.Now()
		var (
			mu       sync.Mutex
			deadline time.Time
		)
		b.listen(t, "Fail", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			deadline, _ = ctx.Deadline()
			return errors.New("boom")
		}))
		last, before := newEvent("last", "Fail"), newEvent("before-last", "Fail")
		last.Attempts, before.Attempts = outbox.DefaultMaxAttempts-1, outbox.DefaultMaxAttempts-2
		b.store.Put(last, before)
		b.d.EnqueueCold(last)
		b.d.EnqueueCold(before)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if got := deadline.Sub(start); got != outbox.DefaultListenerTimeout {
			t.Errorf("listener deadline in %s, want %s", got, outbox.DefaultListenerTimeout)
		}
		if got := b.row(t, "last"); got.Status != outbox.StatusDead || got.Attempts != outbox.DefaultMaxAttempts {
			t.Errorf("last attempt: status %s attempts %d, want DEAD %d", got.Status, got.Attempts, outbox.DefaultMaxAttempts)
		}
		got := b.row(t, "before-last")
		if got.Status != outbox.StatusRetry {
			t.Errorf("before last attempt: status %s, want RETRY", got.Status)
		}
		// Default backoff after 9 failures: 200ms·2^8 = 51.2s, jittered into [25.6s, 76.8s).
		if delay := got.AvailableAt.Sub(start); delay < 25600*time.Millisecond || delay >= 76800*time.Millisecond {
			t.Errorf("retry delay %s, want in [25.6s, 76.8s)", delay)
		}
	})
}

// outcomeCase is one row of the DESIGN §5 outcome table.
type outcomeCase struct {
	name     string
	listener outbox.Listener // nil: no listener registered
	attempts int             // attempts already recorded on the row

	wantStatus    outbox.Status
	wantAttempts  int
	wantAvailable time.Duration // from now; checked for NEW and RETRY
	wantLastError string        // substring; "" expects the row's old last error
	wantOutcome   outbox.Outcome
}

func TestDispatcherOutcomes(t *testing.T) {
	t.Parallel()
	const retryDelay = 3 * time.Second
	fail := func(err error) outbox.Listener {
		return outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return err })
	}
	tests := []outcomeCase{
		{name: "nil", listener: fail(nil), wantStatus: outbox.StatusDone, wantOutcome: outbox.OutcomeDone},
		{name: "nil keeps the attempts", listener: fail(nil), attempts: 2,
			wantStatus: outbox.StatusDone, wantAttempts: 2, wantOutcome: outbox.OutcomeDone},
		{name: "Defer does not count", listener: fail(outbox.Defer(5 * time.Second)), attempts: 2,
			wantStatus: outbox.StatusNew, wantAttempts: 2, wantAvailable: 5 * time.Second, wantOutcome: outbox.OutcomeDeferred},
		// A listener that wraps the error of Defer or Dead keeps the same outcomes: a
		// deferral still counts no attempt.
		{name: "Defer wrapped does not count", listener: fail(fmt.Errorf("not yet: %w", outbox.Defer(5*time.Second))), attempts: 2,
			wantStatus: outbox.StatusNew, wantAttempts: 2, wantAvailable: 5 * time.Second, wantOutcome: outbox.OutcomeDeferred},
		{name: "Dead wrapped", listener: fail(fmt.Errorf("wrapped: %w", outbox.Dead(errors.New("poison message")))),
			wantStatus: outbox.StatusDead, wantAttempts: 1, wantLastError: "poison message", wantOutcome: outbox.OutcomeDead},
		{name: "Defer negative is now", listener: fail(outbox.Defer(-time.Second)),
			wantStatus: outbox.StatusNew, wantOutcome: outbox.OutcomeDeferred},
		{name: "Dead", listener: fail(outbox.Dead(errors.New("poison message"))),
			wantStatus: outbox.StatusDead, wantAttempts: 1, wantLastError: "poison message", wantOutcome: outbox.OutcomeDead},
		{name: "ErrUnrecoverable", listener: fail(fmt.Errorf("bad input: %w", outbox.ErrUnrecoverable)),
			wantStatus: outbox.StatusDead, wantAttempts: 1, wantLastError: "bad input: outbox: unrecoverable", wantOutcome: outbox.OutcomeDead},
		{name: "RetryAfterError counts", listener: fail(fmt.Errorf("wrapped: %w", outbox.RetryAfter(errors.New("rate limited"), 7*time.Second))),
			wantStatus: outbox.StatusRetry, wantAttempts: 1, wantAvailable: 7 * time.Second, wantLastError: "rate limited", wantOutcome: outbox.OutcomeRetry},
		{name: "RetryAfterError at MaxAttempts", listener: fail(outbox.RetryAfter(nil, time.Second)), attempts: 2,
			wantStatus: outbox.StatusDead, wantAttempts: 3, wantLastError: "retry after 1s", wantOutcome: outbox.OutcomeDead},
		{name: "error", listener: fail(errors.New("broker down")),
			wantStatus: outbox.StatusRetry, wantAttempts: 1, wantAvailable: retryDelay, wantLastError: "broker down", wantOutcome: outbox.OutcomeRetry},
		{name: "error at MaxAttempts", listener: fail(errors.New("broker down")), attempts: 2,
			wantStatus: outbox.StatusDead, wantAttempts: 3, wantLastError: "broker down", wantOutcome: outbox.OutcomeDead},
		{name: "panic", listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { panic("kaboom") }),
			wantStatus: outbox.StatusRetry, wantAttempts: 1, wantAvailable: retryDelay, wantLastError: "panic: kaboom", wantOutcome: outbox.OutcomeRetry},
		{name: "no listener", listener: nil,
			wantStatus: outbox.StatusDead, wantLastError: "no listener for event", wantOutcome: outbox.OutcomeDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { testOutcome(t, tt, retryDelay) })
		})
	}
}

func testOutcome(t *testing.T, tt outcomeCase, retryDelay time.Duration) {
	b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: 3, Retry: fixedDelay(retryDelay)})
	if tt.listener != nil {
		b.listen(t, "Thing", tt.listener)
	}
	now := time.Now().UTC()
	e := newEvent("evt-1", "Thing")
	e.Status, e.Attempts = outbox.StatusRetry, tt.attempts
	if tt.attempts > 0 {
		e.LastError = "previous failure"
	}
	b.store.Put(e)
	if !b.d.EnqueueCold(e) {
		t.Fatal("EnqueueCold refused the event")
	}
	synctest.Wait()

	got := b.row(t, e.ID)
	if got.Status != tt.wantStatus || got.Attempts != tt.wantAttempts {
		t.Errorf("row: status %s attempts %d, want %s %d", got.Status, got.Attempts, tt.wantStatus, tt.wantAttempts)
	}
	switch {
	case tt.wantLastError == "" && got.LastError != e.LastError:
		t.Errorf("last_error = %q, want it unchanged (%q)", got.LastError, e.LastError)
	case !strings.Contains(got.LastError, tt.wantLastError):
		t.Errorf("last_error = %q, want it to contain %q", got.LastError, tt.wantLastError)
	}
	if tt.wantStatus == outbox.StatusNew || tt.wantStatus == outbox.StatusRetry {
		if want := now.Add(tt.wantAvailable); !got.AvailableAt.Equal(want) {
			t.Errorf("available_at = %s, want %s", got.AvailableAt, want)
		}
	}
	if tt.wantStatus == outbox.StatusDone && !got.DoneAt.Equal(now) {
		t.Errorf("done_at = %s, want %s", got.DoneAt, now)
	}
	ds := b.metrics.dispatches()
	if len(ds) != 1 || ds[0].Outcome != tt.wantOutcome || ds[0].Path != outbox.PathCold || ds[0].EventType != "Thing" ||
		ds[0].AggregateType != outbox.GlobalAggregateType {
		t.Errorf("Dispatched = %+v, want one %s on the cold path", ds, tt.wantOutcome)
	}
	deadLogs := b.logs.find(slog.LevelError, "moved to dead")
	if wantDead := tt.wantStatus == outbox.StatusDead; wantDead != (len(deadLogs) == 1) {
		t.Errorf("error logs for DEAD = %d, want dead=%v", len(deadLogs), wantDead)
	}
}

func TestDispatcherPanicLogsStackStoresMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		b.listen(t, "Thing", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { panic(errors.New("nil map")) }))
		b.write(t, newEvent("p1", "Thing"))
		synctest.Wait()
		if got := b.row(t, "p1"); got.LastError != "panic: nil map" || strings.Contains(got.LastError, "goroutine") {
			t.Errorf("last_error = %q, want only the panic message", got.LastError)
		}
		logs := b.logs.find(slog.LevelError, "listener panicked")
		if len(logs) != 1 || !strings.Contains(logs[0].attrs["stack"], "goroutine") || logs[0].attrs["component"] != "dispatcher" {
			t.Fatalf("panic logs = %+v, want one with a stack and component=dispatcher", logs)
		}
	})
}

// TestDispatcherRetriesUntilDead runs the whole loop (dispatcher and poller): attempts
// 1 and 2 are retried after the backoff, attempt 3 moves the event to DEAD.
func TestDispatcherRetriesUntilDead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fail  func(n int) error
		delay time.Duration // between attempts
		last  string
	}{
		{name: "error", fail: func(n int) error { return fmt.Errorf("boom %d", n) }, delay: 10 * time.Second, last: "boom 3"},
		{name: "panic", fail: func(n int) error { panic(fmt.Sprintf("boom %d", n)) }, delay: 10 * time.Second, last: "panic: boom 3"},
		{name: "RetryAfterError", fail: func(n int) error {
			return outbox.RetryAfter(fmt.Errorf("boom %d", n), 4*time.Second)
		}, delay: 4 * time.Second, last: "retry after 4s: boom 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: 3, Retry: fixedDelay(10 * time.Second)})
				var calls atomic.Int32
				b.listen(t, "Thing", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
					return tt.fail(int(calls.Add(1)))
				}))
				startPoller(t, b, outbox.PollerConfig{Interval: time.Second, SkipRecent: -1})
				start := time.Now()
				b.write(t, newEvent("e1", "Thing"))
				synctest.Wait()
				for attempt := 1; attempt <= 2; attempt++ {
					got := b.row(t, "e1")
					if got.Status != outbox.StatusRetry || got.Attempts != attempt {
						t.Fatalf("after attempt %d: status %s attempts %d, want RETRY %d", attempt, got.Status, got.Attempts, attempt)
					}
					if want := start.Add(time.Duration(attempt) * tt.delay); !got.AvailableAt.Equal(want.UTC()) {
						t.Fatalf("after attempt %d: available_at %s, want %s", attempt, got.AvailableAt, want)
					}
					time.Sleep(time.Until(got.AvailableAt))
					synctest.Wait()
				}
				got := b.row(t, "e1")
				if got.Status != outbox.StatusDead || got.Attempts != 3 || got.LastError != tt.last {
					t.Fatalf("after attempt 3: %s attempts %d last_error %q, want DEAD 3 %q", got.Status, got.Attempts, got.LastError, tt.last)
				}
				time.Sleep(time.Hour)
				synctest.Wait()
				if n := calls.Load(); n != 3 {
					t.Errorf("listener called %d times, want 3", n)
				}
			})
		})
	}
}

func TestDispatcherRetryAfterNeverCountsAttempts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// MaxAttempts 1: any counted failure would be final.
		b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: 1})
		var calls atomic.Int32
		b.listen(t, "Thing", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			if calls.Add(1) <= 3 {
				return outbox.Defer(2 * time.Second)
			}
			return nil
		}))
		startPoller(t, b, outbox.PollerConfig{Interval: time.Second, SkipRecent: -1})
		b.write(t, newEvent("e1", "Thing"))
		time.Sleep(time.Minute)
		synctest.Wait()
		got := b.row(t, "e1")
		if got.Status != outbox.StatusDone || got.Attempts != 0 || calls.Load() != 4 {
			t.Fatalf("status %s attempts %d calls %d, want DONE 0 4", got.Status, got.Attempts, calls.Load())
		}
	})
}

func TestDispatcherUnlimitedAttempts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{MaxAttempts: -1, Retry: fixedDelay(time.Second)})
		b.listen(t, "Thing", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return errors.New("no") }))
		e := newEvent("e1", "Thing")
		e.Attempts = 1_000_000
		b.store.Put(e)
		b.d.EnqueueCold(e)
		synctest.Wait()
		if got := b.row(t, "e1"); got.Status != outbox.StatusRetry || got.Attempts != 1_000_001 {
			t.Fatalf("status %s attempts %d, want RETRY 1000001", got.Status, got.Attempts)
		}
	})
}

// recordingInterceptor appends "before <name>" and "after <name>: <err>" to a shared log.
type recordingInterceptor struct {
	name      string
	log       *[]string
	mu        *sync.Mutex
	beforeErr error
	afterErr  error
	panicIn   string // "before" or "after"
}

type ctxKey string

func (r recordingInterceptor) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, s)
}

func (r recordingInterceptor) Before(ctx context.Context, e *outbox.Event) (context.Context, error) {
	r.record("before " + r.name)
	if r.panicIn == "before" {
		panic("before " + r.name)
	}
	if r.beforeErr != nil {
		return ctx, r.beforeErr
	}
	return context.WithValue(ctx, ctxKey(r.name), r.name), nil
}

func (r recordingInterceptor) After(ctx context.Context, e *outbox.Event, err error) error {
	r.record(fmt.Sprintf("after %s (own ctx %v): %v", r.name, ctx.Value(ctxKey(r.name)) == r.name, err))
	if r.panicIn == "after" {
		panic("after " + r.name)
	}
	return r.afterErr
}

func TestDispatcherInterceptors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		interceptors func(log *[]string, mu *sync.Mutex) []outbox.Interceptor
		want         []string
		wantStatus   outbox.Status
		wantError    string
		wantWarns    int
	}{
		{
			name: "order, context and swallowed After failures",
			interceptors: func(log *[]string, mu *sync.Mutex) []outbox.Interceptor {
				return []outbox.Interceptor{
					recordingInterceptor{name: "a", log: log, mu: mu, afterErr: errors.New("after a failed")},
					recordingInterceptor{name: "b", log: log, mu: mu, panicIn: "after"},
					recordingInterceptor{name: "c", log: log, mu: mu},
				}
			},
			want: []string{
				"before a", "before b", "before c", "listener sees a b c",
				"after c (own ctx true): <nil>", "after b (own ctx true): <nil>", "after a (own ctx true): <nil>",
			},
			wantStatus: outbox.StatusDone,
			wantWarns:  2,
		},
		{
			name: "Before error short-circuits",
			interceptors: func(log *[]string, mu *sync.Mutex) []outbox.Interceptor {
				return []outbox.Interceptor{
					recordingInterceptor{name: "a", log: log, mu: mu},
					recordingInterceptor{name: "b", log: log, mu: mu, beforeErr: errors.New("no token")},
					recordingInterceptor{name: "c", log: log, mu: mu},
				}
			},
			want:       []string{"before a", "before b", "after a (own ctx true): interceptor before: no token"},
			wantStatus: outbox.StatusRetry,
			wantError:  "interceptor before: no token",
		},
		{
			name: "Before panic short-circuits",
			interceptors: func(log *[]string, mu *sync.Mutex) []outbox.Interceptor {
				return []outbox.Interceptor{
					recordingInterceptor{name: "a", log: log, mu: mu, panicIn: "before"},
					recordingInterceptor{name: "b", log: log, mu: mu},
				}
			},
			want:       []string{"before a"},
			wantStatus: outbox.StatusRetry,
			wantError:  "panic: before a",
		},
		{
			name: "Before unrecoverable is DEAD",
			interceptors: func(log *[]string, mu *sync.Mutex) []outbox.Interceptor {
				return []outbox.Interceptor{
					recordingInterceptor{name: "a", log: log, mu: mu, beforeErr: outbox.ErrUnrecoverable},
				}
			},
			want:       []string{"before a"},
			wantStatus: outbox.StatusDead,
			wantError:  "interceptor before: outbox: unrecoverable",
		},
		{
			name: "InterceptorFuncs with nil functions",
			interceptors: func(log *[]string, mu *sync.Mutex) []outbox.Interceptor {
				return []outbox.Interceptor{outbox.InterceptorFuncs{}}
			},
			want:       []string{"listener sees   "},
			wantStatus: outbox.StatusDone,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var (
					mu  sync.Mutex
					log []string
				)
				b := setupDispatcher(t, outbox.DispatcherConfig{Interceptors: tt.interceptors(&log, &mu)})
				b.listen(t, "Thing", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
					mu.Lock()
					defer mu.Unlock()
					seen := fmt.Sprintf("listener sees %v %v %v", ctx.Value(ctxKey("a")), ctx.Value(ctxKey("b")), ctx.Value(ctxKey("c")))
					log = append(log, strings.ReplaceAll(seen, "<nil>", ""))
					return nil
				}))
				b.write(t, newEvent("e1", "Thing"))
				synctest.Wait()
				mu.Lock()
				got := slices.Clone(log)
				mu.Unlock()
				if !slices.Equal(got, tt.want) {
					t.Errorf("calls:\n got %q\nwant %q", got, tt.want)
				}
				row := b.row(t, "e1")
				if row.Status != tt.wantStatus || row.LastError != tt.wantError {
					t.Errorf("row: %s %q, want %s %q", row.Status, row.LastError, tt.wantStatus, tt.wantError)
				}
				if warns := b.logs.find(slog.LevelWarn, "interceptor After failed"); len(warns) != tt.wantWarns {
					t.Errorf("After warnings = %d, want %d", len(warns), tt.wantWarns)
				}
			})
		})
	}
}

func TestDispatcherListenerTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{ListenerTimeout: 2 * time.Second, Retry: fixedDelay(time.Minute)})
		var took time.Duration
		b.listen(t, "Slow", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			start := time.Now()
			<-ctx.Done()
			took = time.Since(start)
			return ctx.Err()
		}))
		b.write(t, newEvent("e1", "Slow"))
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if took != 2*time.Second {
			t.Errorf("listener context cancelled after %s, want 2s", took)
		}
		if got := b.row(t, "e1"); got.Status != outbox.StatusRetry || got.LastError != context.DeadlineExceeded.Error() {
			t.Errorf("row: %s %q, want RETRY %q", got.Status, got.LastError, context.DeadlineExceeded)
		}
		if ds := b.metrics.dispatches(); len(ds) != 1 || ds[0].Duration != 2*time.Second {
			t.Errorf("Dispatched = %+v, want one with Duration 2s", ds)
		}
	})
}

func TestDispatcherNoListenerTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{ListenerTimeout: -1})
		b.listen(t, "Thing", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			if _, ok := ctx.Deadline(); ok {
				return errors.New("listener context has a deadline")
			}
			return nil
		}))
		b.write(t, newEvent("e1", "Thing"))
		synctest.Wait()
		if got := b.row(t, "e1"); got.Status != outbox.StatusDone {
			t.Errorf("row: %s %q, want DONE", got.Status, got.LastError)
		}
	})
}
