package outbox_test

//lint:file-ignore U1000 internal/roottest/core holds a copy of this file, and each uses a part of it

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// countingMetrics is a Metrics that records every call.
type countingMetrics struct {
	mu             sync.Mutex
	hotEnqueued    int
	hotDropped     int
	delayedSkipped int
	coldEnqueued   int
	dispatched     []outbox.DispatchInfo
	depthCalls     int
	lastDepths     [2]int
	lags           []time.Duration
	stuckReports   []int
	claimCounts    map[outbox.ClaimEvent]int
	heldReports    []int
}

var _ outbox.Metrics = (*countingMetrics)(nil)

func (m *countingMetrics) HotEnqueued()    { m.mu.Lock(); m.hotEnqueued++; m.mu.Unlock() }
func (m *countingMetrics) HotDropped()     { m.mu.Lock(); m.hotDropped++; m.mu.Unlock() }
func (m *countingMetrics) DelayedSkipped() { m.mu.Lock(); m.delayedSkipped++; m.mu.Unlock() }
func (m *countingMetrics) ColdEnqueued()   { m.mu.Lock(); m.coldEnqueued++; m.mu.Unlock() }

func (m *countingMetrics) Dispatched(info outbox.DispatchInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dispatched = append(m.dispatched, info)
}

func (m *countingMetrics) QueueDepths(hot, cold int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.depthCalls++
	m.lastDepths = [2]int{hot, cold}
}

func (m *countingMetrics) OldestPendingLag(lag time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lags = append(m.lags, lag)
}

func (m *countingMetrics) StuckAttempts(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stuckReports = append(m.stuckReports, n)
}

func (m *countingMetrics) Claims(event outbox.ClaimEvent, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claimCounts == nil {
		m.claimCounts = map[outbox.ClaimEvent]int{}
	}
	m.claimCounts[event] += n
}

func (m *countingMetrics) KeysHeld(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heldReports = append(m.heldReports, n)
}

// held returns every KeysHeld report so far.
func (m *countingMetrics) held() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.heldReports...)
}

func (m *countingMetrics) claims(event outbox.ClaimEvent) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claimCounts[event]
}

func (m *countingMetrics) stuck() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.stuckReports...)
}

type metricCounts struct{ hotEnqueued, hotDropped, delayedSkipped, coldEnqueued int }

func (m *countingMetrics) counts() metricCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return metricCounts{m.hotEnqueued, m.hotDropped, m.delayedSkipped, m.coldEnqueued}
}

func (m *countingMetrics) dispatches() []outbox.DispatchInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.dispatched)
}

func (m *countingMetrics) lagReports() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lags)
}

// logSink is a slog.Handler that keeps every record.
type logSink struct {
	mu      *sync.Mutex
	records *[]logRecord
	attrs   []slog.Attr
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogSink() *logSink { return &logSink{mu: new(sync.Mutex), records: new([]logRecord)} }

func (h *logSink) logger() *slog.Logger { return slog.New(h) }

func (h *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (h *logSink) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, rec)
	return nil
}

func (h *logSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logSink{mu: h.mu, records: h.records, attrs: append(slices.Clone(h.attrs), attrs...)}
}

func (h *logSink) WithGroup(string) slog.Handler { return h }

// find returns the records at level whose message contains msg.
func (h *logSink) find(level slog.Level, msg string) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range *h.records {
		if r.level == level && strings.Contains(r.msg, msg) {
			out = append(out, r)
		}
	}
	return out
}

func (h *logSink) atLevel(level slog.Level) []logRecord {
	return h.find(level, "")
}

// faultStore wraps a MemoryStore to count calls and inject failures. Set its fields
// before the code under test runs.
type faultStore struct {
	*outboxtest.MemoryStore

	beforePending func(ctx context.Context, p storage.PendingParams) error
	afterPending  func(b storage.PendingBatch)
	markDoneErr   error
	markDoneZero  bool
	purgeErr      func(ctx context.Context, call int) error

	mu            sync.Mutex
	pendingLimits []int
	pendingAfter  []string // the cursor's ID of each Pending call
	purgeCalls    int
	markDeadCalls int
	fanOuts       []int // the events of each FanOut call
}

func newFaultStore() *faultStore { return &faultStore{MemoryStore: outboxtest.NewMemoryStore()} }

func (s *faultStore) Pending(ctx context.Context, p storage.PendingParams) (storage.PendingBatch, error) {
	s.mu.Lock()
	s.pendingLimits = append(s.pendingLimits, p.Limit)
	s.pendingAfter = append(s.pendingAfter, p.After.ID)
	s.mu.Unlock()
	if s.beforePending != nil {
		if err := s.beforePending(ctx, p); err != nil {
			return storage.PendingBatch{}, err
		}
	}
	b, err := s.MemoryStore.Pending(ctx, p)
	if err == nil && s.afterPending != nil {
		s.afterPending(b)
	}
	return b, err
}

func (s *faultStore) MarkDone(ctx context.Context, p storage.MarkDoneParams) (int64, error) {
	if s.markDoneErr != nil {
		return 0, s.markDoneErr
	}
	if s.markDoneZero {
		return 0, nil
	}
	return s.MemoryStore.MarkDone(ctx, p)
}

func (s *faultStore) MarkDead(ctx context.Context, p storage.MarkDeadParams) (int64, error) {
	s.mu.Lock()
	s.markDeadCalls++
	s.mu.Unlock()
	return s.MemoryStore.MarkDead(ctx, p)
}

func (s *faultStore) FanOut(ctx context.Context, p storage.FanOutParams) (storage.FanOutResult, error) {
	s.mu.Lock()
	s.fanOuts = append(s.fanOuts, len(p.Events))
	s.mu.Unlock()
	return s.MemoryStore.FanOut(ctx, p)
}

func (s *faultStore) fanOutCalls() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fanOuts)
}

func (s *faultStore) Purge(ctx context.Context, p storage.PurgeParams) (int64, error) {
	s.mu.Lock()
	s.purgeCalls++
	call := s.purgeCalls
	s.mu.Unlock()
	if s.purgeErr != nil {
		if err := s.purgeErr(ctx, call); err != nil {
			return 0, err
		}
	}
	return s.MemoryStore.Purge(ctx, p)
}

func (s *faultStore) limits() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pendingLimits)
}

func (s *faultStore) cursors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pendingAfter)
}

func (s *faultStore) purges() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.purgeCalls
}

// newEvent returns a due event of type typ created now.
func newEvent(id, typ string) outbox.Event {
	now := time.Now().UTC()
	return outbox.Event{
		ID:            id,
		Type:          typ,
		AggregateType: outbox.GlobalAggregateType,
		Payload:       json.RawMessage(`{"n":1}`),
		CreatedAt:     now,
		AvailableAt:   now,
	}
}

// gate is a listener that blocks until released, counting deliveries.
type gate struct {
	release chan struct{}
	mu      sync.Mutex
	ids     []string
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) Handle(ctx context.Context, e *outbox.Event) error {
	g.mu.Lock()
	g.ids = append(g.ids, e.ID)
	g.mu.Unlock()
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) open() { close(g.release) }

func (g *gate) delivered() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ids)
}

func fixedDelay(d time.Duration) outbox.RetryPolicy {
	return outbox.RetryPolicyFunc(func(int) time.Duration { return d })
}
