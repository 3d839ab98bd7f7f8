package outboxtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

func event(id string, created time.Time) outbox.Event {
	return outbox.Event{ID: id, Type: "T", AggregateType: outbox.GlobalAggregateType,
		Payload: json.RawMessage(`{}`), CreatedAt: created, AvailableAt: created}
}

func TestMemoryStoreHelpers(t *testing.T) {
	t.Parallel()
	s := outboxtest.NewMemoryStore()
	base := time.Date(2030, 1, 1, 0, 0, 0, 999, time.FixedZone("X", 3600))
	retry := event("b", base)
	retry.Status, retry.Attempts, retry.LastError = outbox.StatusRetry, 4, "boom"
	s.Put(retry, event("a", base.Add(time.Second)))

	got, ok := s.Event("b")
	if !ok || got.Status != outbox.StatusRetry || got.Attempts != 4 || got.LastError != "boom" {
		t.Fatalf("Event(b) = %+v, %v; want the row as put", got, ok)
	}
	if got.CreatedAt.Location() != time.UTC || got.CreatedAt.Nanosecond() != 0 {
		t.Errorf("CreatedAt %v, want UTC truncated to microseconds", got.CreatedAt)
	}
	if _, ok := s.Event("missing"); ok {
		t.Error("Event(missing) reported a row")
	}
	var ids []string
	for _, e := range s.Events() {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(ids, []string{"b", "a"}) {
		t.Errorf("Events order %v, want oldest first", ids)
	}

	// Copies: changing what was returned does not change the store.
	got.Payload[0] = 'X'
	if e, _ := s.Event("b"); string(e.Payload) != `{}` {
		t.Errorf("payload changed through a returned copy: %s", e.Payload)
	}

	decodeErr := errors.New("bad headers")
	if !s.Corrupt("a", decodeErr) || s.Corrupt("missing", decodeErr) {
		t.Fatal("Corrupt reported the wrong rows")
	}
	b, err := s.Pending(context.Background(), storage.PendingParams{Now: base.Add(time.Hour), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Events) != 1 || b.Events[0].ID != "b" || len(b.Undecodable) != 1 ||
		b.Undecodable[0].EventID != "a" || !errors.Is(b.Undecodable[0], decodeErr) {
		t.Errorf("Pending = %+v, want b decoded and a undecodable", b)
	}
	if _, err := s.Get(context.Background(), "a"); !errors.Is(err, decodeErr) {
		t.Errorf("Get(corrupt) = %v, want the decode error", err)
	}
}

func TestRecordingListener(t *testing.T) {
	t.Parallel()
	var l outboxtest.RecordingListener
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b", "c"} {
		wg.Go(func() {
			if err := l.Handle(context.Background(), &outbox.Event{ID: id}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := l.IDs()
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) || l.Count() != 3 || len(l.Events()) != 3 {
		t.Fatalf("recorded %v", got)
	}
	l.Reset()
	fail := errors.New("fail")
	l.Func = func(context.Context, *outbox.Event) error { return fail }
	if err := l.Handle(context.Background(), &outbox.Event{ID: "d"}); !errors.Is(err, fail) {
		t.Fatalf("Handle = %v, want Func's error", err)
	}
	if got := l.IDs(); !slices.Equal(got, []string{"d"}) {
		t.Errorf("after Reset: %v", got)
	}
}
