package outbox_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/adapterkit"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// The micro-benchmarks of the dispatch and write paths against the in-memory store:
// what the library itself costs per event, without a database. Run them with
//
//	go test -run '^$' -bench 'Dispatcher|Writer' -benchmem ./core/

// BenchmarkDispatcherThroughput hands b.N committed events to the hot path of a
// dispatcher over a MemoryStore and waits until a no-op listener has handled every one
// and its outcome is recorded. Allocations are per event, the whole dispatch included.
func BenchmarkDispatcherThroughput(b *testing.B) {
	for _, workers := range []int{1, 4} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			benchmarkDispatcher(b, workers)
		})
	}
}

func benchmarkDispatcher(b *testing.B, workers int) {
	store := outboxtest.NewMemoryStore()
	events := make([]outbox.Event, b.N)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range events {
		events[i] = outbox.Event{ID: outbox.NewID(), Type: "OrderPlaced", AggregateType: "Order",
			Payload: []byte(`{"n":1}`), CreatedAt: now, AvailableAt: now}
	}
	store.Put(events...)
	reg := outbox.NewRegistry()
	var handled atomic.Int64
	all := make(chan struct{})
	if err := reg.Register("Order", "OrderPlaced", outbox.ListenerFunc(func(context.Context, *outbox.Event) error {
		return nil
	})); err != nil {
		b.Fatal(err)
	}
	m := &doneMetrics{n: int64(b.N), done: &handled, all: all}
	d, err := outbox.NewDispatcher(store, reg, outbox.DispatcherConfig{
		Workers: workers, HotQueueSize: 1024, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Stop(ctx) })
	b.ReportAllocs()
	b.ResetTimer()
	for i := range events {
		for !d.EnqueueHot(events[i]) {
			runtime.Gosched() // queue full: let the workers catch up
		}
	}
	<-all
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// doneMetrics closes all when n deliveries have finished.
type doneMetrics struct {
	outbox.NopMetrics
	n    int64
	done *atomic.Int64
	all  chan struct{}
}

func (m *doneMetrics) Dispatched(outbox.DispatchInfo) {
	if m.done.Add(1) == m.n {
		close(m.all)
	}
}

// BenchmarkWriterWrite measures Writer.Write and WriteAll into a MemoryStore through a
// transaction with after-commit hooks (the hot-path hook is not installed): the
// library's CPU cost per write on top of the INSERT itself.
func BenchmarkWriterWrite(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run("events="+strconv.Itoa(n), func(b *testing.B) {
			w, err := outbox.NewWriter(outboxtest.NewMemoryStore(), outbox.WriterConfig{
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				b.Fatal(err)
			}
			envs := make([]outbox.Envelope, n)
			for i := range envs {
				envs[i] = outbox.Envelope{Type: "OrderPlaced", AggregateType: "Order", AggregateID: strconv.Itoa(i),
					Payload: map[string]any{"order_id": "o-" + strconv.Itoa(i), "amount": i}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				tx := adapterkit.Join(nil, new(adapterkit.Callbacks))
				if _, err := w.WriteAll(ctx, tx, envs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}
