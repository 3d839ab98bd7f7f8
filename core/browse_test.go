package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
)

// deadOver returns the Events of a WriterOnly outbox over store.
func deadOver(t *testing.T, store storage.Store) *outbox.Events {
	t.Helper()
	ob, err := outbox.New(nil, outbox.Config{Store: store, Mode: outbox.WriterOnly, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return ob.Events()
}

// putEvents stores events of status st with the given IDs.
func putEvents(store *outboxtest.MemoryStore, st outbox.Status, ids ...string) {
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range ids {
		e := outbox.Event{ID: id, Type: "T", AggregateType: "A", Payload: []byte(`{}`), Status: st,
			CreatedAt: t0.Add(time.Duration(i) * time.Second), AvailableAt: t0, LastError: "boom"}
		if st == outbox.StatusDead {
			e.DoneAt = t0.Add(time.Hour)
		}
		store.Put(e)
	}
}

// TestEveryChangeIsAudited: each change of Events leaves one audit entry with the
// actor of its context, the action, the target and how many events it changed; a
// change that fails leaves none.
func TestEveryChangeIsAudited(t *testing.T) {
	store := outboxtest.NewMemoryStore()
	dead := deadOver(t, store)
	putEvents(store, outbox.StatusDead, "d1", "d2", "d3", "d4", "d5")
	putEvents(store, outbox.StatusNew, "n1")
	ctx := outbox.WithActor(t.Context(), "alice")
	if err := dead.Replay(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	if err := dead.Replay(ctx, "n1"); !errors.Is(err, outbox.ErrNotDead) {
		t.Fatalf("replay of a NEW event = %v", err)
	}
	if n, err := dead.ReplayIDs(ctx, []string{"d2", "d3", "n1", "missing", "d2"}); err != nil || n != 2 {
		t.Fatalf("ReplayIDs = %d, %v; want 2", n, err)
	}
	if n, err := dead.DiscardIDs(t.Context(), []string{"d4", "n1"}); err != nil || n != 2 {
		t.Fatalf("DiscardIDs = %d, %v; want 2", n, err)
	}
	if n, err := dead.DeleteIDs(outbox.WithActor(t.Context(), "bad\xff\x00actor"), []string{"d5"}); err != nil || n != 1 {
		t.Fatalf("DeleteIDs = %d, %v; want 1", n, err)
	}
	if n, err := dead.ReplayAll(ctx, outbox.DeadFilter{EventType: "T"}, 0); err != nil || n != 0 {
		t.Fatalf("ReplayAll = %d, %v; want 0", n, err)
	}
	for _, bad := range [][]string{nil, {""}, make([]string, outbox.MaxBulkIDs+1)} {
		if _, err := dead.ReplayIDs(ctx, bad); !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Fatalf("ReplayIDs(%d IDs) = %v, want ErrInvalidArgument", len(bad), err)
		}
	}
	page, err := dead.Audit(t.Context(), outbox.AuditQuery{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Entries {
		got = append(got, fmt.Sprint(e.Actor, " ", e.Action, " ", e.Target, " ", e.Count))
	}
	want := []string{"alice replay-all event_type=T 0", "bad\uFFFD\uFFFDactor delete d5 1", "unknown discard d4,n1 2"}
	if strings.Join(got, "|") != strings.Join(want, "|") || page.Next == "" {
		t.Fatalf("audit page 1 = %q (next %q), want %q", got, page.Next, want)
	}
	page, err = dead.Audit(t.Context(), outbox.AuditQuery{Before: page.Next})
	if err != nil || len(page.Entries) != 2 || page.Next != "" ||
		page.Entries[0].Target != "d2,d3,n1,missing" || page.Entries[0].Count != 2 || page.Entries[1].Target != "d1" {
		t.Fatalf("audit page 2 = %+v, %v", page, err)
	}
}

// TestEventsPages: Events clamps its limit, turns the store's answer into pages with a
// cursor, and marks a page cut by the scan bound partial.
func TestEventsPages(t *testing.T) {
	store := outboxtest.NewMemoryStore()
	dead := deadOver(t, store)
	putEvents(store, outbox.StatusNew, "a", "b", "c")
	page, err := dead.List(t.Context(), outbox.EventQuery{Status: outbox.StatusNew, Limit: 2})
	if err != nil || len(page.Events) != 2 || page.Next.ID != "b" || page.Partial {
		t.Fatalf("page 1 = %+v, %v", page, err)
	}
	page, err = dead.List(t.Context(), outbox.EventQuery{Status: outbox.StatusNew, Limit: 2, After: page.Next})
	if err != nil || len(page.Events) != 1 || page.Events[0].ID != "c" || !page.Next.IsZero() {
		t.Fatalf("page 2 = %+v, %v", page, err)
	}
	for _, q := range []outbox.EventQuery{{Limit: -1}, {Limit: outbox.MaxPageSize + 1}, {Status: 42},
		{EventFilter: outbox.EventFilter{ErrorContains: strings.Repeat("x", outbox.MaxErrorSearchLen+1)}},
		{EventFilter: outbox.EventFilter{From: time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{EventFilter: outbox.EventFilter{To: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}} {
		if _, err := dead.List(t.Context(), q); !errors.Is(err, outbox.ErrInvalidArgument) {
			t.Fatalf("Events(%+v) = %v, want ErrInvalidArgument", q, err)
		}
	}
	// A store that stops at its scan bound: the page is partial and goes on from there.
	stop := outbox.Cursor{CreatedAt: time.Unix(5, 0), ID: "x"}
	dead = deadOver(t, stoppingStore{store, stop})
	page, err = dead.List(t.Context(), outbox.EventQuery{Status: outbox.StatusNew, EventFilter: outbox.EventFilter{EventType: "T"}})
	if err != nil || !page.Partial || page.Next != stop {
		t.Fatalf("page cut by the scan bound = %+v, %v", page, err)
	}
}

// stoppingStore answers every list with no event and a stop cursor.
type stoppingStore struct {
	*outboxtest.MemoryStore
	stop outbox.Cursor
}

func (s stoppingStore) ListEvents(context.Context, storage.ListEventsParams) ([]outbox.Event, outbox.Cursor, error) {
	return nil, s.stop, nil
}

// TestAuditFailureIsReported: on a store that cannot record a change with its entry in
// one transaction (no AuditedStore), a change whose entry cannot be written is made, and
// the call returns an *AuditError that counts the unrecorded events.
func TestAuditFailureIsReported(t *testing.T) {
	store := failingAudit{outboxtest.NewMemoryStore()}
	if _, ok := storage.Store(store).(storage.AuditedStore); ok {
		t.Fatal("the memory store implements AuditedStore: this test needs a store that does not")
	}
	putEvents(store.MemoryStore, outbox.StatusDead, "d1", "d2", "d3")
	dead := deadOver(t, store)
	err := dead.Replay(t.Context(), "d1")
	var ae *outbox.AuditError
	if !errors.As(err, &ae) || ae.Unrecorded != 1 || ae.Action != outbox.AuditReplay || !errors.Is(err, errAuditDown) ||
		!strings.Contains(err.Error(), "1 events were changed and are not recorded") {
		t.Fatalf("Replay with the audit trail down = %v", err)
	}
	if e, _ := store.Get(t.Context(), "d1"); e.Status != outbox.StatusNew {
		t.Fatalf("d1 is %s, want NEW: the replay is made", e.Status)
	}
	n, err := dead.ReplayAll(t.Context(), outbox.DeadFilter{}, 1)
	if !errors.As(err, &ae) || n != 2 || ae.Unrecorded != 2 || ae.Action != outbox.AuditReplayAll {
		t.Fatalf("ReplayAll with the audit trail down = %d, %v", n, err)
	}
}

var errAuditDown = errors.New("audit table unreachable")

// failingAudit is a memory store whose audit writes fail.
type failingAudit struct{ *outboxtest.MemoryStore }

func (failingAudit) RecordAudit(context.Context, outbox.AuditEntry) error { return errAuditDown }
