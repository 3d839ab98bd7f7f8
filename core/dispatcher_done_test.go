package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// batchStore is a MemoryStore whose MarkDone records its calls, can be held until
// released, and can fail.
type batchStore struct {
	*outboxtest.MemoryStore
	hold chan struct{}                        // when set, MarkDone waits for it to be closed
	fail func(p storage.MarkDoneParams) error // when set and non-nil for p, MarkDone fails

	mu    sync.Mutex
	calls []storage.MarkDoneParams
}

func newBatchStore() *batchStore { return &batchStore{MemoryStore: outboxtest.NewMemoryStore()} }

func (s *batchStore) MarkDone(ctx context.Context, p storage.MarkDoneParams) (int64, error) {
	s.mu.Lock()
	s.calls = append(s.calls, storage.MarkDoneParams{IDs: slices.Clone(p.IDs), DoneAt: p.DoneAt, Token: p.Token,
		Tokens: slices.Clone(p.Tokens)})
	hold, fail := s.hold, s.fail
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if fail != nil {
		if err := fail(p); err != nil {
			return 0, err
		}
	}
	return s.MemoryStore.MarkDone(ctx, p)
}

// idCalls returns the IDs of every MarkDone call so far.
func (s *batchStore) idCalls() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]string, len(s.calls))
	for i, c := range s.calls {
		out[i] = c.IDs
	}
	return out
}

// sortedCalls returns the MarkDone calls as "token:id,id,…" with each call's IDs sorted,
// in sorted order: the workers hand their outcomes over in no fixed order. A call with
// Tokens is "token:id,token:id,…", its pairs sorted.
func (s *batchStore) sortedCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.calls))
	for i, c := range s.calls {
		if c.Tokens != nil {
			pairs := make([]string, len(c.IDs))
			for j := range c.IDs {
				pairs[j] = c.Tokens[j] + ":" + c.IDs[j]
			}
			slices.Sort(pairs)
			out[i] = strings.Join(pairs, ",")
			continue
		}
		ids := slices.Sorted(slices.Values(c.IDs))
		out[i] = c.Token + ":" + strings.Join(ids, ",")
	}
	slices.Sort(out)
	return out
}

type batchBundle struct {
	store   *batchStore
	d       *outbox.Dispatcher
	metrics *countingMetrics
	logs    *logSink
	rec     *outboxtest.RecordingListener
}

// setupBatchDispatcher starts a dispatcher over a batchStore with a recording listener
// for "Thing" events; cleanup stops it. Call it inside the synctest bubble.
func setupBatchDispatcher(t *testing.T, store *batchStore, cfg outbox.DispatcherConfig) *batchBundle {
	t.Helper()
	b := &batchBundle{store: store, metrics: &countingMetrics{}, logs: newLogSink(), rec: &outboxtest.RecordingListener{}}
	reg := outbox.NewRegistry()
	if err := reg.Register("", "Thing", b.rec); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics, cfg.Logger = b.metrics, b.logs.logger()
	d, err := outbox.NewDispatcher(store, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	b.d = d
	return b
}

// put stores due events e1..en (created now) and returns them.
func (b *batchBundle) put(n int) []outbox.Event {
	events := make([]outbox.Event, n)
	for i := range events {
		events[i] = newEvent(fmt.Sprintf("e%d", i+1), "Thing")
	}
	b.store.Put(events...)
	return events
}

func (b *batchBundle) status(t *testing.T, id string) outbox.Status {
	t.Helper()
	e, ok := b.store.Event(id)
	if !ok {
		t.Fatalf("no row %s", id)
	}
	return e.Status
}

func TestDispatcherBatchesDoneUpdates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newBatchStore()
		store.hold = make(chan struct{})
		b := setupBatchDispatcher(t, store, outbox.DispatcherConfig{Workers: 4})
		// A poll read open throughout: the stale copies below were read before the
		// outcomes were written.
		defer b.d.BeginRead()()
		events := b.put(5)
		// e1 is delivered alone and its DONE update is held; the other four are
		// delivered meanwhile and wait for the recorder.
		if !b.d.EnqueueHot(events[0]) {
			t.Fatal("EnqueueHot refused e1")
		}
		synctest.Wait()
		for _, e := range events[1:] {
			if !b.d.EnqueueHot(e) {
				t.Fatalf("EnqueueHot refused %s", e.ID)
			}
		}
		synctest.Wait()
		if got := b.rec.Count(); got != 5 {
			t.Fatalf("listener ran %d times, want 5 while the first DONE update is held", got)
		}
		// Nothing is acknowledged before its batch's update succeeded: no metrics, rows
		// pending, and the events still in flight (the poller cannot queue them again).
		if got := len(b.metrics.dispatches()); got != 0 {
			t.Errorf("Dispatched reported %d events before any update finished", got)
		}
		for _, e := range events {
			if st := b.status(t, e.ID); st != outbox.StatusNew {
				t.Errorf("%s is %s before its update finished", e.ID, st)
			}
			if b.d.EnqueueCold(e) {
				t.Errorf("EnqueueCold accepted %s while its outcome is being written", e.ID)
			}
		}
		close(store.hold)
		synctest.Wait()
		if got, want := store.sortedCalls(), []string{":e1", ":e2,e3,e4,e5"}; !slices.Equal(got, want) {
			t.Errorf("MarkDone calls = %v, want %v (one statement for the four that waited)", got, want)
		}
		for _, e := range events {
			if st := b.status(t, e.ID); st != outbox.StatusDone {
				t.Errorf("%s is %s, want DONE", e.ID, st)
			}
			// Settled: a stale copy read before the update is refused.
			if b.d.EnqueueCold(e) {
				t.Errorf("EnqueueCold accepted a stale copy of %s", e.ID)
			}
		}
		ds := b.metrics.dispatches()
		if len(ds) != 5 {
			t.Fatalf("Dispatched %d times, want 5", len(ds))
		}
		for _, d := range ds {
			if d.Outcome != outbox.OutcomeDone || d.Path != outbox.PathHot {
				t.Errorf("Dispatched %+v, want a hot success", d)
			}
		}
	})
}

// TestDispatcherBatchesClaimedEventsFencedRowByRow: the DONE outcomes of claimed events
// (MultiNode) under several claim tokens are written with one statement that fences each
// row by its own token, so a row whose claim this node lost is left alone and keeps no
// tombstone; a lone claimed event is written with the per-event fenced update.
func TestDispatcherBatchesClaimedEventsFencedRowByRow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newBatchStore()
		// The window gathers the four outcomes into one batch.
		b := setupBatchDispatcher(t, store, outbox.DispatcherConfig{Workers: 4, DoneBatchWindow: 10 * time.Millisecond})
		until := time.Now().Add(time.Hour)
		claimed := func(id, token string) outbox.Event {
			e := newEvent(id, "Thing")
			e.LockedBy, e.LockedUntil = token, until
			return e
		}
		// The store holds e2 under another node's claim: this node's claim on it was
		// lost. e1, e3 and e4 are still claimed by the tokens this node holds.
		rows := []outbox.Event{claimed("e1", "node-a/1"), claimed("e2", "node-b/9"),
			claimed("e3", "node-a/1"), claimed("e4", "node-a/2"), claimed("e5", "node-a/3")}
		for _, r := range rows {
			if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{r}, ClaimTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range []outbox.Event{claimed("e1", "node-a/1"), claimed("e2", "node-a/1"), claimed("e3", "node-a/1"), claimed("e4", "node-a/2")} {
			if !b.d.EnqueueCold(e) {
				t.Fatalf("EnqueueCold refused %s", e.ID)
			}
		}
		time.Sleep(time.Second) // past the window
		synctest.Wait()
		want := []string{"node-a/1:e1,node-a/1:e2,node-a/1:e3,node-a/2:e4"}
		if got := store.sortedCalls(); !slices.Equal(got, want) {
			t.Errorf("MarkDone calls = %v, want %v (one, each ID with its claim token)", got, want)
		}
		for id, want := range map[string]outbox.Status{"e1": outbox.StatusDone, "e2": outbox.StatusNew,
			"e3": outbox.StatusDone, "e4": outbox.StatusDone} {
			if st := b.status(t, id); st != want {
				t.Errorf("%s is %s, want %s", id, st, want)
			}
		}
		if e, _ := store.Event("e2"); e.LockedBy != "node-b/9" {
			t.Errorf("e2 claimed by %q, want the other node's claim untouched", e.LockedBy)
		}
		logs := b.logs.find(slog.LevelWarn, "changed no row")
		if len(logs) != 1 || logs[0].attrs["unchanged"] != "1" {
			t.Errorf("warn logs = %+v, want one for the lost claim", logs)
		}
		if n := len(b.metrics.dispatches()); n != 4 {
			t.Errorf("%d outcomes reported, want 4", n)
		}
		// The lost claim left no tombstone: when this node claims e2 again (after the
		// other node's claim expired), it delivers it.
		if !b.d.EnqueueCold(claimed("e2", "node-a/3")) {
			t.Error("EnqueueCold refused e2 under a new claim after its lost claim")
		}
		time.Sleep(time.Second) // past the window
		synctest.Wait()
		if !b.d.EnqueueCold(claimed("e5", "node-a/3")) {
			t.Fatal("EnqueueCold refused e5")
		}
		time.Sleep(time.Second) // past the window
		synctest.Wait()
		want = append(want, "node-a/3:e5")
		if got := store.sortedCalls(); !slices.Equal(got[:1], want[:1]) || len(got) != 3 || got[2] != "node-a/3:e5" {
			t.Errorf("MarkDone calls = %v, want the batch, then e2 and e5 each with its own fenced update", got)
		}
		if st := b.status(t, "e5"); st != outbox.StatusDone {
			t.Errorf("e5 is %s, want DONE", st)
		}
	})
}

func TestDispatcherStopFlushesDoneBatches(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newBatchStore()
		store.hold = make(chan struct{})
		b := setupBatchDispatcher(t, store, outbox.DispatcherConfig{Workers: 2})
		events := b.put(4)
		for _, e := range events {
			if !b.d.EnqueueHot(e) {
				t.Fatalf("EnqueueHot refused %s", e.ID)
			}
		}
		synctest.Wait()
		stopped := make(chan error, 1)
		go func() { stopped <- b.d.Stop(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) while DONE updates were still to be written", err)
		default:
		}
		time.Sleep(time.Second)
		close(store.hold)
		if err := <-stopped; err != nil {
			t.Fatalf("Stop = %v", err)
		}
		for _, e := range events {
			if st := b.status(t, e.ID); st != outbox.StatusDone {
				t.Errorf("%s is %s after Stop, want DONE", e.ID, st)
			}
		}
		if got := len(b.metrics.dispatches()); got != 4 {
			t.Errorf("Dispatched %d times, want 4", got)
		}
	})
}

func TestDispatcherDoneBatchFailureFallsBackPerEvent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newBatchStore()
		store.hold = make(chan struct{})
		b := setupBatchDispatcher(t, store, outbox.DispatcherConfig{Workers: 4})
		defer b.d.BeginRead()() // a poll read open throughout, as in the test above
		events := b.put(4)
		// A batch statement fails; so does e3's own statement.
		store.fail = func(p storage.MarkDoneParams) error {
			if len(p.IDs) > 1 || p.IDs[0] == "e3" {
				return errors.New("connection reset")
			}
			return nil
		}
		if !b.d.EnqueueHot(events[0]) {
			t.Fatal("EnqueueHot refused e1")
		}
		synctest.Wait()
		for _, e := range events[1:] {
			if !b.d.EnqueueHot(e) {
				t.Fatalf("EnqueueHot refused %s", e.ID)
			}
		}
		synctest.Wait()
		close(store.hold)
		synctest.Wait()
		want := []string{":e1", ":e2", ":e2,e3,e4", ":e3", ":e4"}
		if got := store.sortedCalls(); !slices.Equal(got, want) {
			t.Errorf("MarkDone calls = %v, want %v", got, want)
		}
		for id, want := range map[string]outbox.Status{"e1": outbox.StatusDone, "e2": outbox.StatusDone,
			"e3": outbox.StatusNew, "e4": outbox.StatusDone} {
			if st := b.status(t, id); st != want {
				t.Errorf("%s is %s, want %s", id, st, want)
			}
		}
		if logs := b.logs.find(slog.LevelWarn, "batched status update failed"); len(logs) != 1 || logs[0].attrs["events"] != "3" {
			t.Errorf("warn logs = %+v, want one for the failed batch of 3", logs)
		}
		if logs := b.logs.find(slog.LevelError, "status update failed"); len(logs) != 1 || logs[0].attrs["event_id"] != "e3" {
			t.Errorf("error logs = %+v, want one for e3", logs)
		}
		// e3's outcome is unknown: not settled, so the poller may queue it again now.
		if !b.d.EnqueueCold(events[2]) {
			t.Error("EnqueueCold refused e3, whose DONE update failed")
		}
		if b.d.EnqueueCold(events[3]) {
			t.Error("EnqueueCold accepted a stale copy of e4, whose DONE update succeeded")
		}
		synctest.Wait()
	})
}

func TestDispatcherDoneBatchTimeoutLeavesTheRestPending(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newBatchStore()
		store.hold = make(chan struct{}) // never closed: every statement times out
		b := setupBatchDispatcher(t, store, outbox.DispatcherConfig{Workers: 4, StatusTimeout: time.Second})
		events := b.put(4)
		if !b.d.EnqueueHot(events[0]) {
			t.Fatal("EnqueueHot refused e1")
		}
		synctest.Wait()
		for _, e := range events[1:] {
			if !b.d.EnqueueHot(e) {
				t.Fatalf("EnqueueHot refused %s", e.ID)
			}
		}
		synctest.Wait()
		time.Sleep(time.Hour)
		synctest.Wait()
		// e1 alone (1s), the batch of three (1s), then the first of them alone (1s): the
		// database is unresponsive, so the other two are left for the poller untried.
		calls := store.idCalls()
		if len(calls) != 3 || !slices.Equal(calls[0], []string{"e1"}) || len(calls[1]) != 3 ||
			len(calls[2]) != 1 || calls[2][0] != calls[1][0] {
			t.Errorf("MarkDone calls = %v, want [e1], the batch of three, then its first event alone", calls)
		}
		for _, e := range events {
			if st := b.status(t, e.ID); st != outbox.StatusNew {
				t.Errorf("%s is %s, want NEW", e.ID, st)
			}
			if !b.d.EnqueueCold(e) {
				t.Errorf("EnqueueCold refused %s, whose outcome was not written", e.ID)
			}
		}
		if logs := b.logs.find(slog.LevelError, "events left for the poller"); len(logs) != 1 {
			t.Errorf("error logs = %+v, want one for the events not tried", logs)
		}
		if got := len(b.metrics.dispatches()); got != 4 {
			t.Errorf("Dispatched %d times, want 4", got)
		}
		close(store.hold)
		synctest.Wait()
	})
}

func TestDispatcherDoneBatchWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newBatchStore()
		b := setupBatchDispatcher(t, store, outbox.DispatcherConfig{Workers: 2, DoneBatchWindow: 10 * time.Millisecond})
		events := b.put(3)
		start := time.Now()
		if !b.d.EnqueueHot(events[0]) {
			t.Fatal("EnqueueHot refused e1")
		}
		time.Sleep(5 * time.Millisecond)
		if !b.d.EnqueueHot(events[1]) {
			t.Fatal("EnqueueHot refused e2")
		}
		synctest.Wait()
		if got := b.rec.Count(); got != 2 {
			t.Fatalf("listener ran %d times, want 2: the window delays no delivery", got)
		}
		if calls := store.idCalls(); len(calls) != 0 {
			t.Fatalf("MarkDone called %v within the window", calls)
		}
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		if got, want := store.sortedCalls(), []string{":e1,e2"}; !slices.Equal(got, want) {
			t.Errorf("MarkDone calls = %v, want %v: one statement for the window", got, want)
		}
		if st := b.status(t, "e2"); st != outbox.StatusDone {
			t.Errorf("e2 is %s after the window, want DONE", st)
		}
		if took := time.Since(start); took != 10*time.Millisecond {
			t.Errorf("batch written after %s, want the 10ms window", took)
		}
		// Stop does not wait for a window: it writes what it holds at once.
		if !b.d.EnqueueHot(events[2]) {
			t.Fatal("EnqueueHot refused e3")
		}
		synctest.Wait()
		stopAt := time.Now()
		if err := b.d.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st := b.status(t, "e3"); st != outbox.StatusDone {
			t.Errorf("e3 is %s after Stop, want DONE", st)
		}
		if took := time.Since(stopAt); took > 10*time.Millisecond {
			t.Errorf("Stop took %s", took)
		}
	})
}

func TestDispatcherDoneBatchWindowValidation(t *testing.T) {
	t.Parallel()
	_, err := outbox.NewDispatcher(outboxtest.NewMemoryStore(), outbox.NewRegistry(), outbox.DispatcherConfig{DoneBatchWindow: -time.Millisecond})
	var ce *outbox.ConfigError
	if !errors.As(err, &ce) || ce.Field != "DoneBatchWindow" {
		t.Fatalf("NewDispatcher error = %v, want a ConfigError on DoneBatchWindow", err)
	}
}

// Config.DoneBatchWindow: by default a delivered event's DONE waits DefaultDoneBatchWindow
// for more outcomes to share its statement; -1 writes it at once; below -1 is refused.
func TestConfigDoneBatchWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		window time.Duration
		wait   time.Duration // until DONE
	}{
		{"default", 0, outbox.DefaultDoneBatchWindow},
		{"none", -1, 0},
		{"5ms", 5 * time.Millisecond, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				store := outboxtest.NewMemoryStore()
				l := &outboxtest.RecordingListener{}
				ob := startOutbox(t, outbox.Config{Store: store, PollInterval: time.Hour, DoneBatchWindow: tc.window},
					map[string]outbox.Listener{"Thing": l})
				var tx adapterkit.Callbacks
				id, err := ob.Writer().Write(t.Context(), adapterkit.Join(nil, &tx), outbox.Envelope{Type: "Thing", Payload: json.RawMessage(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				tx.Committed()
				synctest.Wait()
				for {
					e, err := store.Get(t.Context(), id)
					if err != nil {
						t.Fatal(err)
					}
					if e.Status == outbox.StatusDone {
						break
					}
					time.Sleep(time.Millisecond)
					synctest.Wait()
				}
				if got := time.Since(start); got != tc.wait {
					t.Fatalf("DONE %v after the delivery, want %v", got, tc.wait)
				}
				if n := len(l.IDs()); n != 1 {
					t.Fatalf("%d deliveries", n)
				}
			})
		})
	}
	_, err := outbox.New(nil, outbox.Config{Store: outboxtest.NewMemoryStore(), DoneBatchWindow: -2})
	if ce := (*outbox.ConfigError)(nil); !errors.As(err, &ce) || ce.Field != "DoneBatchWindow" {
		t.Fatalf("DoneBatchWindow -2: %v, want a *ConfigError on DoneBatchWindow", err)
	}
}
