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
		store     outbox.Store
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
		if got := b.d.ColdCapacity(); got != outbox.DefaultColdQueueSize {
			t.Errorf("ColdCapacity = %d, want %d", got, outbox.DefaultColdQueueSize)
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
	result := func(r outbox.Result, err error) outbox.Listener {
		return outbox.ResultListenerFunc(func(context.Context, *outbox.Event) (outbox.Result, error) { return r, err })
	}
	tests := []outcomeCase{
		{name: "nil", listener: fail(nil), wantStatus: outbox.StatusDone, wantOutcome: outbox.OutcomeSuccess},
		{name: "Done result", listener: result(outbox.Done(), nil), attempts: 2,
			wantStatus: outbox.StatusDone, wantAttempts: 2, wantOutcome: outbox.OutcomeSuccess},
		{name: "RetryAfter result does not count", listener: result(outbox.RetryAfter(5*time.Second), nil), attempts: 2,
			wantStatus: outbox.StatusNew, wantAttempts: 2, wantAvailable: 5 * time.Second, wantOutcome: outbox.OutcomeDeferred},
		{name: "RetryAfter negative is now", listener: result(outbox.RetryAfter(-time.Second), nil),
			wantStatus: outbox.StatusNew, wantOutcome: outbox.OutcomeDeferred},
		{name: "Dead result", listener: result(outbox.Dead("poison message"), nil),
			wantStatus: outbox.StatusDead, wantAttempts: 1, wantLastError: "poison message", wantOutcome: outbox.OutcomeDead},
		{name: "ErrUnrecoverable", listener: fail(fmt.Errorf("bad input: %w", outbox.ErrUnrecoverable)),
			wantStatus: outbox.StatusDead, wantAttempts: 1, wantLastError: "bad input: outbox: unrecoverable", wantOutcome: outbox.OutcomeDead},
		{name: "RetryAfterError counts", listener: fail(fmt.Errorf("wrapped: %w", &outbox.RetryAfterError{Delay: 7 * time.Second, Err: errors.New("rate limited")})),
			wantStatus: outbox.StatusRetry, wantAttempts: 1, wantAvailable: 7 * time.Second, wantLastError: "rate limited", wantOutcome: outbox.OutcomeFailure},
		{name: "RetryAfterError at MaxAttempts", listener: fail(&outbox.RetryAfterError{Delay: time.Second}), attempts: 2,
			wantStatus: outbox.StatusDead, wantAttempts: 3, wantLastError: "retry after 1s", wantOutcome: outbox.OutcomeDead},
		{name: "error", listener: fail(errors.New("broker down")),
			wantStatus: outbox.StatusRetry, wantAttempts: 1, wantAvailable: retryDelay, wantLastError: "broker down", wantOutcome: outbox.OutcomeFailure},
		{name: "error at MaxAttempts", listener: fail(errors.New("broker down")), attempts: 2,
			wantStatus: outbox.StatusDead, wantAttempts: 3, wantLastError: "broker down", wantOutcome: outbox.OutcomeDead},
		{name: "panic", listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { panic("kaboom") }),
			wantStatus: outbox.StatusRetry, wantAttempts: 1, wantAvailable: retryDelay, wantLastError: "panic: kaboom", wantOutcome: outbox.OutcomeFailure},
		{name: "result ignored with error", listener: result(outbox.Dead("ignored"), errors.New("real error")),
			wantStatus: outbox.StatusRetry, wantAttempts: 1, wantAvailable: retryDelay, wantLastError: "real error", wantOutcome: outbox.OutcomeFailure},
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
			return &outbox.RetryAfterError{Delay: 4 * time.Second, Err: fmt.Errorf("boom %d", n)}
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
		b.listen(t, "Thing", outbox.ResultListenerFunc(func(context.Context, *outbox.Event) (outbox.Result, error) {
			if calls.Add(1) <= 3 {
				return outbox.RetryAfter(2 * time.Second), nil
			}
			return outbox.Done(), nil
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

func TestDispatcherDrainsHotAndColdTwoToOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		g := newGate()
		b.listen(t, "Gate", g)
		var (
			mu    sync.Mutex
			order []string
		)
		b.listen(t, "Thing", outbox.ListenerFunc(func(_ context.Context, e *outbox.Event) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, e.ID[:1])
			return nil
		}))
		b.write(t, newEvent("gate", "Gate"))
		synctest.Wait() // the only worker is busy
		for i := range 12 {
			b.d.EnqueueHot(newEvent(fmt.Sprintf("h%02d", i), "Thing"))
			b.d.EnqueueCold(newEvent(fmt.Sprintf("c%02d", i), "Thing"))
		}
		g.open()
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		// While both queues have work, every window of three takes two hot and one cold.
		got := strings.Join(order[:18], "")
		for i := 0; i+3 <= 18; i += 3 {
			w := got[i : i+3]
			if strings.Count(w, "h") != 2 || strings.Count(w, "c") != 1 {
				t.Fatalf("delivery order %s: window %q is not 2 hot : 1 cold", got, w)
			}
		}
		if rest := strings.Join(order[18:], ""); rest != "cccccc" {
			t.Errorf("after the hot queue emptied: %q, want the 6 remaining cold events", rest)
		}
	})
}

func TestDispatcherDedupesInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 2})
		g := newGate()
		b.listen(t, "Thing", g)
		e := newEvent("e1", "Thing")
		queued := newEvent("e2", "Thing")
		b.write(t, e)
		synctest.Wait() // e1 running
		if b.d.EnqueueHot(e) || b.d.EnqueueCold(e) {
			t.Fatal("a running event was accepted again")
		}
		b.store.Put(queued)
		if !b.d.EnqueueCold(queued) {
			t.Fatal("EnqueueCold refused a new event")
		}
		synctest.Wait() // e2 running on the second worker
		if b.d.EnqueueCold(queued) || b.d.EnqueueHot(queued) {
			t.Fatal("a queued event was accepted again")
		}
		g.open()
		synctest.Wait()
		if got := g.delivered(); !slices.Equal(got, []string{"e1", "e2"}) {
			t.Fatalf("deliveries = %v, want each event once", got)
		}
	})
}

func TestDispatcherTombstones(t *testing.T) {
	t.Parallel()
	t.Run("DONE refuses cold enqueues for a minute", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			e := newEvent("e1", "Thing")
			b.write(t, e)
			synctest.Wait()
			if b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold accepted an event that just finished")
			}
			time.Sleep(time.Minute - time.Nanosecond)
			if b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold accepted the event before the tombstone expired")
			}
			time.Sleep(time.Nanosecond)
			if !b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold refused the event after the tombstone expired")
			}
			synctest.Wait()
			if l.Count() != 2 {
				t.Fatalf("deliveries = %d, want 2", l.Count())
			}
		})
	})
	t.Run("RETRY refuses cold enqueues until due", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{Retry: fixedDelay(2 * time.Second)})
			b.listen(t, "Thing", outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return errors.New("no") }))
			e := newEvent("e1", "Thing")
			b.write(t, e)
			synctest.Wait()
			time.Sleep(2*time.Second - time.Nanosecond)
			if b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold accepted a retry before it was due")
			}
			time.Sleep(time.Nanosecond)
			if !b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold refused a due retry")
			}
			synctest.Wait()
		})
	})
	t.Run("poll racing a completion does not deliver twice", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			e := newEvent("e1", "Thing")
			if err := b.store.Insert(t.Context(), nil, []outbox.Event{e}); err != nil {
				t.Fatal(err)
			}
			// The poller reads the row, then stalls before queueing it.
			read, resume := make(chan struct{}), make(chan struct{})
			b.store.afterPending = func(outbox.PendingBatch) {
				close(read)
				<-resume
			}
			p := newPoller(t, b, outbox.PollerConfig{SkipRecent: -1})
			polled := make(chan int)
			go func() {
				n, err := p.Poll(t.Context())
				if err != nil {
					t.Errorf("Poll: %v", err)
				}
				polled <- n
			}()
			<-read
			// Meanwhile the hot path delivers the event and marks it DONE.
			if err := b.d.WriterHook().AfterCommit(t.Context(), []outbox.Event{e}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if got := b.row(t, "e1"); got.Status != outbox.StatusDone {
				t.Fatalf("status %s, want DONE", got.Status)
			}
			close(resume)
			if n := <-polled; n != 0 {
				t.Errorf("Poll queued %d events, want 0", n)
			}
			synctest.Wait()
			if l.Count() != 1 {
				t.Fatalf("deliveries = %d, want 1", l.Count())
			}
		})
	})
}

func TestDispatcherStatusUpdateFailures(t *testing.T) {
	t.Parallel()
	t.Run("failed update is logged and left for the poller", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			b.store.markDoneErr = errors.New("connection reset")
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			e := newEvent("e1", "Thing")
			b.write(t, e)
			synctest.Wait()
			logs := b.logs.find(slog.LevelError, "status update failed")
			if len(logs) != 1 || !strings.Contains(logs[0].attrs["error"], "mark done: connection reset") {
				t.Fatalf("error logs = %+v, want one wrapping the store error", logs)
			}
			if got := b.row(t, "e1"); got.Status != outbox.StatusNew {
				t.Fatalf("status %s, want NEW", got.Status)
			}
			// No tombstone: the poller may deliver it again at once.
			if !b.d.EnqueueCold(e) {
				t.Fatal("EnqueueCold refused an event whose outcome was not written")
			}
			synctest.Wait()
		})
	})
	t.Run("fenced update that changed nothing is a warning", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			b.store.markDoneZero = true
			b.listen(t, "Thing", &outboxtest.RecordingListener{})
			b.write(t, newEvent("e1", "Thing"))
			synctest.Wait()
			if logs := b.logs.find(slog.LevelWarn, "changed no row"); len(logs) != 1 {
				t.Fatalf("warn logs = %+v, want one", logs)
			}
		})
	})
}

func TestDispatcherMetricsLatency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		b.listen(t, "Thing", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
			time.Sleep(3 * time.Second)
			return nil
		}))
		// Hot: latency from enqueue. The second event waits 3s behind the first.
		b.write(t, newEvent("h1", "Thing"), newEvent("h2", "Thing"))
		synctest.Wait()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		// Cold: latency from max(CreatedAt, AvailableAt).
		cold := newEvent("c1", "Thing")
		cold.CreatedAt = time.Now().Add(-time.Minute)
		cold.AvailableAt = time.Now().Add(-5 * time.Second)
		b.store.Put(cold)
		b.d.EnqueueCold(cold)
		synctest.Wait()
		time.Sleep(3 * time.Second)
		synctest.Wait()

		type lat struct {
			path              outbox.Path
			latency, duration time.Duration
		}
		var got []lat
		for _, d := range b.metrics.dispatches() {
			got = append(got, lat{d.Path, d.Latency, d.Duration})
		}
		want := []lat{
			{outbox.PathHot, 0, 3 * time.Second},
			{outbox.PathHot, 3 * time.Second, 3 * time.Second},
			{outbox.PathCold, 5 * time.Second, 3 * time.Second},
		}
		if !slices.Equal(got, want) {
			t.Errorf("dispatches = %+v, want %+v", got, want)
		}
		if hot, cold := b.d.QueueDepths(); hot != 0 || cold != 0 {
			t.Errorf("QueueDepths = %d, %d, want 0, 0", hot, cold)
		}
		b.metrics.mu.Lock()
		defer b.metrics.mu.Unlock()
		if b.metrics.depthCalls == 0 || b.metrics.lastDepths != [2]int{0, 0} {
			t.Errorf("QueueDepths metric: %d calls, last %v; want calls ending at 0, 0", b.metrics.depthCalls, b.metrics.lastDepths)
		}
	})
}

func TestWriterHookHotPath(t *testing.T) {
	t.Parallel()
	t.Run("full queue drops without blocking", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1, HotQueueSize: 2})
			g := newGate()
			b.listen(t, "Thing", g)
			b.write(t, newEvent("running", "Thing"))
			synctest.Wait()
			events := []outbox.Event{newEvent("a", "Thing"), newEvent("b", "Thing"), newEvent("c", "Thing"), newEvent("d", "Thing")}
			if err := b.d.WriterHook().AfterCommit(t.Context(), events); err != nil {
				t.Fatalf("AfterCommit = %v, want nil", err)
			}
			if got, want := b.metrics.counts(), (metricCounts{hotEnqueued: 3, hotDropped: 2}); got != want {
				t.Errorf("metrics = %+v, want %+v", got, want)
			}
			if logs := b.logs.find(slog.LevelWarn, "left for the poller"); len(logs) != 1 || logs[0].attrs["dropped"] != "2" {
				t.Errorf("warn logs = %+v, want one reporting 2 dropped", logs)
			}
			g.open()
			synctest.Wait()
			if got := g.delivered(); !slices.Equal(got, []string{"running", "a", "b"}) {
				t.Errorf("delivered %v, want running, a, b", got)
			}
		})
	})
	t.Run("delayed events skip the hot path", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{})
			l := &outboxtest.RecordingListener{}
			b.listen(t, "Thing", l)
			later := newEvent("later", "Thing")
			later.AvailableAt = later.AvailableAt.Add(time.Minute)
			b.write(t, later, newEvent("now", "Thing"))
			synctest.Wait()
			if got, want := b.metrics.counts(), (metricCounts{hotEnqueued: 1, delayedSkipped: 1}); got != want {
				t.Errorf("metrics = %+v, want %+v", got, want)
			}
			if got := l.IDs(); !slices.Equal(got, []string{"now"}) {
				t.Errorf("delivered %v, want only the due event", got)
			}
		})
	})
	t.Run("stopped dispatcher drops", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			d, err := outbox.NewDispatcher(outboxtest.NewMemoryStore(), outbox.NewRegistry(), outbox.DispatcherConfig{
				Metrics: &countingMetrics{}, Logger: newLogSink().logger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.WriterHook().AfterCommit(t.Context(), []outbox.Event{newEvent("e1", "Thing")}); err != nil {
				t.Fatalf("AfterCommit before Start = %v", err)
			}
			if d.ColdCapacity() != 0 || d.EnqueueCold(newEvent("e2", "Thing")) {
				t.Error("a dispatcher that is not running accepts events")
			}
		})
	})
	t.Run("disabled hot path does nothing", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setupDispatcher(t, outbox.DispatcherConfig{HotQueueSize: -1})
			b.listen(t, "Thing", &outboxtest.RecordingListener{})
			b.write(t, newEvent("e1", "Thing"))
			synctest.Wait()
			if got := b.metrics.counts(); got != (metricCounts{}) {
				t.Errorf("metrics = %+v, want none", got)
			}
			if b.d.EnqueueHot(newEvent("e2", "Thing")) {
				t.Error("EnqueueHot accepted an event with the hot path disabled")
			}
			if got := b.row(t, "e1"); got.Status != outbox.StatusNew {
				t.Errorf("status %s, want NEW (left for the poller)", got.Status)
			}
		})
	})
}

func TestDispatcherStopDrainsQueues(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		b.listen(t, "Thing", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
			time.Sleep(time.Second)
			return nil
		}))
		for i := range 3 {
			b.write(t, newEvent(fmt.Sprintf("h%d", i), "Thing"))
			cold := newEvent(fmt.Sprintf("c%d", i), "Thing")
			b.store.Put(cold)
			b.d.EnqueueCold(cold)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if err := b.d.Stop(ctx); err != nil {
			t.Fatalf("Stop = %v, want nil", err)
		}
		if took := time.Since(start); took != 6*time.Second {
			t.Errorf("Stop took %s, want 6s (six deliveries)", took)
		}
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusDone {
				t.Errorf("%s: status %s, want DONE", e.ID, e.Status)
			}
		}
		if b.d.EnqueueHot(newEvent("late", "Thing")) {
			t.Error("a stopped dispatcher accepted an event")
		}
	})
}

func TestDispatcherStopDeadlineLeavesEventsPending(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		g := newGate() // only returns when its context is cancelled
		b.listen(t, "Thing", g)
		for i := range 3 {
			b.write(t, newEvent(fmt.Sprintf("e%d", i), "Thing"))
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if err := b.d.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v, want DeadlineExceeded", err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("Stop took %s, want 1s", took)
		}
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusNew || e.Attempts != 0 || e.LastError != "" {
				t.Errorf("%s: %s attempts %d %q, want untouched NEW", e.ID, e.Status, e.Attempts, e.LastError)
			}
		}
		if got := g.delivered(); !slices.Equal(got, []string{"e0"}) {
			t.Errorf("delivered %v, want only the running one", got)
		}
		if len(b.metrics.dispatches()) != 0 {
			t.Error("an interrupted delivery was reported as dispatched")
		}
		if hot, cold := b.d.QueueDepths(); hot != 0 || cold != 0 {
			t.Errorf("QueueDepths after stop = %d, %d, want 0, 0", hot, cold)
		}

		// Restarted, the dispatcher has forgotten the interrupted and queued events.
		if err := b.d.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		g.open()
		for _, e := range b.store.Events() {
			if !b.d.EnqueueCold(e) {
				t.Errorf("after restart, EnqueueCold(%s) refused", e.ID)
			}
		}
		synctest.Wait()
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusDone {
				t.Errorf("%s: %s, want DONE after restart", e.ID, e.Status)
			}
		}
	})
}

func TestDispatcherStopWithExpiredContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{Workers: 1})
		g := newGate()
		b.listen(t, "Thing", g)
		for i := range 3 {
			b.write(t, newEvent(fmt.Sprintf("e%d", i), "Thing"))
		}
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.d.Stop(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Stop = %v, want context.Canceled", err)
		}
		for _, e := range b.store.Events() {
			if e.Status != outbox.StatusNew {
				t.Errorf("%s: status %s, want NEW", e.ID, e.Status)
			}
		}
		if logs := b.logs.find(slog.LevelWarn, "stop deadline passed"); len(logs) != 1 {
			t.Errorf("warn logs = %+v, want one about the hard stop", logs)
		}
	})
}

func TestDispatcherStartStopIdempotent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		logs := newLogSink()
		d, err := outbox.NewDispatcher(outboxtest.NewMemoryStore(), outbox.NewRegistry(), outbox.DispatcherConfig{Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Stop(t.Context()); err != nil {
			t.Fatalf("Stop before Start = %v", err)
		}
		for range 2 {
			if err := d.Start(t.Context()); err != nil {
				t.Fatalf("Start = %v", err)
			}
		}
		for range 2 {
			if err := d.Stop(t.Context()); err != nil {
				t.Fatalf("Stop = %v", err)
			}
		}
		if n := len(logs.find(slog.LevelInfo, "dispatcher started")); n != 1 {
			t.Errorf("started logs = %d, want 1", n)
		}
		if n := len(logs.find(slog.LevelInfo, "dispatcher stopped")); n != 1 {
			t.Errorf("stopped logs = %d, want 1", n)
		}
	})
}

func TestDispatcherStartIgnoresStartContextCancellation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupDispatcher(t, outbox.DispatcherConfig{})
		l := &outboxtest.RecordingListener{}
		b.listen(t, "Thing", l)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if err := b.d.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		time.Sleep(2 * time.Second)
		b.write(t, newEvent("e1", "Thing"))
		synctest.Wait()
		if l.Count() != 1 {
			t.Fatal("the dispatcher stopped when its start context ended")
		}
	})
}

func TestDispatcherStartStopStress(t *testing.T) {
	t.Parallel()
	store := outboxtest.NewMemoryStore()
	reg := outbox.NewRegistry()
	var delivered atomic.Int64
	if err := reg.Register("", "Thing", outbox.ListenerFunc(func(ctx context.Context, e *outbox.Event) error {
		delivered.Add(1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{Workers: 3, HotQueueSize: 8, ColdQueueSize: 8, Logger: newLogSink().logger()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				e := newEvent(fmt.Sprintf("g%d-%d", g, i), "Thing")
				if err := store.Insert(context.Background(), nil, []outbox.Event{e}); err != nil {
					t.Error(err)
					return
				}
				switch (g + i) % 4 {
				case 0:
					if err := d.Start(context.Background()); err != nil {
						t.Error(err)
					}
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond)
					if err := d.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Error(err)
					}
					cancel()
				case 2:
					_ = d.WriterHook().AfterCommit(context.Background(), []outbox.Event{e})
				default:
					d.EnqueueCold(e)
					_ = d.ColdCapacity()
					_, _ = d.QueueDepths()
				}
			}
		})
	}
	wg.Wait()
	if err := d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hot, cold := d.QueueDepths(); hot != 0 || cold != 0 {
		t.Errorf("QueueDepths after Stop = %d, %d", hot, cold)
	}
	for _, e := range store.Events() {
		if e.Status != outbox.StatusNew && e.Status != outbox.StatusDone {
			t.Errorf("%s: status %s", e.ID, e.Status)
		}
	}
	t.Logf("%d deliveries", delivered.Load())
}
