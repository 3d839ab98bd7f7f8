package outbox_test

import (
	"context"
	"testing"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// The components behind New, driven on their own (export_test.go names them).

// dispatchBundle is a dispatcher over a faultStore with recording metrics and logs.
type dispatchBundle struct {
	store   *faultStore
	reg     *outbox.Registry
	metrics *countingMetrics
	logs    *logSink
	d       *outbox.Dispatcher
}

// setupDispatcher returns a started dispatcher; cleanup stops it. Inside a synctest
// bubble, call it from the bubble.
func setupDispatcher(t *testing.T, cfg outbox.DispatcherConfig) *dispatchBundle {
	t.Helper()
	b := &dispatchBundle{
		store:   newFaultStore(),
		reg:     outbox.NewRegistry(),
		metrics: &countingMetrics{},
		logs:    newLogSink(),
	}
	cfg.Metrics = b.metrics
	cfg.Logger = b.logs.logger()
	d, err := outbox.NewDispatcher(b.store, b.reg, cfg)
	if err != nil {
		t.Fatalf("NewDispatcher: %v", err)
	}
	b.d = d
	if err := d.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return b
}

// listen registers l for events of type typ on the global aggregate.
func (b *dispatchBundle) listen(t *testing.T, typ string, l outbox.Listener) {
	t.Helper()
	if err := b.reg.Register("", typ, l); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

// write stores events and hands them to the hot path, as a committed write would:
// with a read open from before the rows are visible until the hot path has them, as
// the Writer holds one from before the commit (this store commits at the INSERT), so that a poller that reads the rows first and delivers them leaves a
// tombstone that refuses the hot copies.
func (b *dispatchBundle) write(t *testing.T, events ...outbox.Event) {
	t.Helper()
	defer b.d.BeginRead()()
	if _, err := b.store.Insert(t.Context(), nil, storage.InsertParams{Events: events}); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	if err := b.d.WriterHook().AfterCommit(t.Context(), events); err != nil {
		t.Fatalf("AfterCommit: %v", err)
	}
}

// row returns the stored row.
func (b *dispatchBundle) row(t *testing.T, id string) outbox.Event {
	t.Helper()
	e, ok := b.store.Event(id)
	if !ok {
		t.Fatalf("event %s not in store", id)
	}
	return e
}

// newPoller returns a stopped poller feeding b's dispatcher, sharing its logs and metrics.
func newPoller(t *testing.T, b *dispatchBundle, cfg outbox.PollerConfig) *outbox.Poller {
	t.Helper()
	cfg.Logger = b.logs.logger()
	cfg.Metrics = b.metrics
	p, err := outbox.NewPoller(b.store, b.d, cfg)
	if err != nil {
		t.Fatalf("NewPoller: %v", err)
	}
	return p
}

// startPoller starts a poller; cleanup stops it (before the dispatcher).
func startPoller(t *testing.T, b *dispatchBundle, cfg outbox.PollerConfig) *outbox.Poller {
	t.Helper()
	p := newPoller(t, b, cfg)
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("poller Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("poller Stop: %v", err)
		}
	})
	return p
}
