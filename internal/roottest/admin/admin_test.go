package outboxadmin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/admintest"
)

// TestAPI runs the shared conformance suite on a plain ServeMux, under a prefix with
// http.StripPrefix and at the root.
func TestAPI(t *testing.T) {
	t.Parallel()
	for name, prefix := range map[string]string{"prefix": "/outbox/admin", "root": ""} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			admintest.Run(t, admintest.ServeMux(prefix))
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	events := eventsOver(t, outboxtest.NewMemoryStore())
	quiet := slog.New(slog.DiscardHandler)
	cases := []struct {
		name   string
		events outboxadmin.Source
		opts   outboxadmin.Options
		field  string
	}{
		{"nil events", nil, outboxadmin.Options{Authorize: outboxadmin.AllowAll()}, "events"},
		{"typed nil events", (*outbox.Events)(nil), outboxadmin.Options{Authorize: outboxadmin.AllowAll()}, "events"},
		{"empty bearer token", events, outboxadmin.Options{Authorize: outboxadmin.BearerToken("")}, "Authorize"},
		{"bearer token with a space", events, outboxadmin.Options{Authorize: outboxadmin.BearerToken("a b")}, "Authorize"},
		{"bearer token with a newline", events, outboxadmin.Options{Authorize: outboxadmin.BearerToken("ab\n")}, "Authorize"},
		{"bearer token not ASCII", events, outboxadmin.Options{Authorize: outboxadmin.BearerToken("jeton-é")}, "Authorize"},
		{"nil AuthorizerFunc", events, outboxadmin.Options{Authorize: outboxadmin.AuthorizerFunc(nil)}, "Authorize"},
		{"negative batch", events, outboxadmin.Options{Authorize: outboxadmin.AllowAll(), ReplayBatchSize: -1}, "ReplayBatchSize"},
		{"origin with a path", events, outboxadmin.Options{Authorize: outboxadmin.AllowAll(), TrustedOrigins: []string{"https://a.example/x"}}, "TrustedOrigins"},
		{"origin without scheme", events, outboxadmin.Options{Authorize: outboxadmin.AllowAll(), TrustedOrigins: []string{"a.example"}}, "TrustedOrigins"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.opts.Logger = quiet
			h, err := outboxadmin.New(c.events, c.opts)
			var ce *outbox.ConfigError
			if h != nil || !errors.As(err, &ce) || !errors.Is(err, outbox.ErrInvalidConfig) || ce.Field != c.field {
				t.Fatalf("New = %v, %v; want a *outbox.ConfigError for %s", h, err, c.field)
			}
		})
	}
	for _, opts := range []outboxadmin.Options{
		{},
		{Authorize: outboxadmin.BearerToken("x")},
		{Authorize: outboxadmin.AuthorizerFunc(func(*http.Request) bool { return false })},
		{Authorize: outboxadmin.AllowAll(), ReplayBatchSize: 1, TrustedOrigins: []string{"https://ops.example:8443"}},
	} {
		opts.Logger = quiet
		if _, err := outboxadmin.New(events, opts); err != nil {
			t.Errorf("New(%+v) = %v", opts, err)
		}
	}
}

// tenantEvents is a Source as the admin's doc suggests writing one: it embeds
// *outbox.Events and overrides what it restricts.
type tenantEvents struct {
	*outbox.Events
	got, replayed []string
}

func (e *tenantEvents) Get(ctx context.Context, id string) (outbox.Event, error) {
	e.got = append(e.got, id)
	if !strings.HasPrefix(id, "tenant-a-") {
		return outbox.Event{}, fmt.Errorf("event %s of another tenant: %w", id, outbox.ErrNotFound)
	}
	return e.Events.Get(ctx, id)
}

func (e *tenantEvents) Replay(_ context.Context, id string) error {
	e.replayed = append(e.replayed, id)
	return fmt.Errorf("replay %s: %w", id, outbox.ErrNotDead)
}

// TestNewTakesAWrappedSource: the admin calls the Source it was given, so a wrapper that
// embeds *outbox.Events decides what its overrides decide, and the rest reaches the
// events it embeds.
func TestNewTakesAWrappedSource(t *testing.T) {
	t.Parallel()
	src := &tenantEvents{Events: eventsOver(t, outboxtest.NewMemoryStore())}
	h, err := outboxadmin.New(src, outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "/"+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, id := range []string{"tenant-b-1", "tenant-a-1"} {
		if rec := do(http.MethodGet, "api/events/"+id, ""); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", id, rec.Code, rec.Body)
		}
	}
	if len(src.got) != 2 {
		t.Errorf("the override's Get was called with %v, want both IDs", src.got)
	}
	if rec := do(http.MethodPost, "api/dead-events/tenant-a-2/replay", "{}"); rec.Code != http.StatusConflict || len(src.replayed) != 1 || src.replayed[0] != "tenant-a-2" {
		t.Errorf("POST replay: %d %s, override called with %v; want the override's 409", rec.Code, rec.Body, src.replayed)
	}
	if rec := do(http.MethodGet, "api/overview", ""); rec.Code != http.StatusOK {
		t.Errorf("GET overview through the embedded events: %d %s", rec.Code, rec.Body)
	}
}

// eventsOver returns the events of a writer-only outbox over store.
func eventsOver(t testing.TB, store storage.Store) *outbox.Events {
	t.Helper()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ob.Events()
}

// TestOrderedDeadEventHoldsItsKeyInTheAPI: a DEAD ordered event with WAITING events
// behind it shows its key and place in the list, and the overview counts the WAITING
// events and the blocked key; a replay moves the key on.
func TestOrderedDeadEventHoldsItsKeyInTheAPI(t *testing.T) {
	t.Parallel()
	_, ob, created := deadOrderedKey(t)
	ctx := t.Context()
	h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, v any) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatal(err)
		}
	}
	var overview struct {
		Counts          map[string]int64 `json:"counts"`
		BlockedKeys     int64            `json:"blocked_keys"`
		OldestBlockedAt *time.Time       `json:"oldest_blocked_at"`
	}
	get("api/overview", &overview)
	if overview.Counts["WAITING"] != 2 || overview.Counts["DEAD"] != 1 || overview.BlockedKeys != 1 ||
		overview.OldestBlockedAt == nil || !overview.OldestBlockedAt.Equal(created) {
		t.Fatalf("overview %+v", overview)
	}
	var list struct {
		Events []struct {
			ID       string `json:"id"`
			OrderKey string `json:"order_key"`
			OrderSeq int64  `json:"order_seq"`
		} `json:"events"`
	}
	get("api/dead-events", &list)
	if len(list.Events) != 1 || list.Events[0].ID != "e0" || list.Events[0].OrderKey != "Account:42" || list.Events[0].OrderSeq != 1 {
		t.Fatalf("dead events %+v", list.Events)
	}
	// The events behind it: its key's WAITING list, in the key's order, a page at a time.
	var page struct {
		Events []struct {
			ID       string `json:"id"`
			OrderSeq int64  `json:"order_seq"`
		} `json:"events"`
		Next string `json:"next"`
	}
	var behind []string
	for after := ""; ; {
		get("api/events?status=waiting&order_key=Account%3A42&limit=1"+after, &page)
		for _, e := range page.Events {
			behind = append(behind, fmt.Sprint(e.ID, "#", e.OrderSeq))
		}
		if page.Next == "" || len(behind) > 5 {
			break
		}
		after = "&after=" + page.Next
	}
	if strings.Join(behind, ",") != "e1#2,e2#3" {
		t.Fatalf("WAITING events of Account:42, a page each: %v; want e1#2,e2#3", behind)
	}
	get("api/events?status=waiting&order_key=Account%3A7", &page)
	if len(page.Events) != 0 {
		t.Fatalf("WAITING events of a key with none: %+v", page.Events)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/events?status=done&order_key=Account%3A42", nil))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "order_key") {
		t.Fatalf("DONE events by order key: %d %s; want a 400 naming order_key", rec.Code, rec.Body)
	}
	if err := ob.Events().Replay(ctx, "e0"); err != nil {
		t.Fatal(err)
	}
	get("api/overview", &overview)
	if overview.BlockedKeys != 0 || overview.Counts["NEW"] != 1 || overview.Counts["WAITING"] != 2 {
		t.Fatalf("overview after the replay %+v", overview)
	}
}

// deadOrderedKey returns a memory store holding three events of the order key
// "Account:42", created an hour ago: e0 DEAD, e1 and e2 WAITING behind it, and a
// WriterOnly Outbox over it (whose replays and deletes promote at once).
func deadOrderedKey(t *testing.T) (*outboxtest.MemoryStore, *outbox.Outbox, time.Time) {
	t.Helper()
	store := outboxtest.NewMemoryStore()
	ctx := t.Context()
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	var events []outbox.Event
	for i := range 3 {
		events = append(events, outbox.Event{ID: fmt.Sprint("e", i), Type: "Changed", AggregateType: "Account",
			Payload: json.RawMessage(`{"n":1}`), CreatedAt: created, AvailableAt: created, OrderKey: "Account:42"})
	}
	if _, err := store.Insert(ctx, nil, storage.InsertParams{Events: events}); err != nil {
		t.Fatal(err)
	}
	if e, ok := store.Event("e0"); !ok || e.Status != outbox.StatusNew {
		t.Fatalf("e0 = %+v; want NEW, the first of its key", e)
	}
	if _, err := store.MarkDead(ctx, storage.MarkDeadParams{ID: "e0", DeadAt: time.Now(), Reason: "poison", CountAttempt: true}); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return store, ob, created
}

// TestSubscriptionsRoute: GET /api/subscriptions lists every registered subscription of
// the serving process with its limits and load (zero in a writer-only process).
func TestSubscriptionsRoute(t *testing.T) {
	t.Parallel()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: outboxtest.NewMemoryStore(), PurgeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []outbox.Subscription{
		{Name: "mailer", EventType: "OrderPlaced", Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil }), MaxConcurrency: 2, RateLimit: 5},
		{Name: "audit", EventType: "OrderPlaced", Listener: outbox.ListenerFunc(func(context.Context, *outbox.Event) error { return nil })},
	} {
		if err := ob.Subscribe(s); err != nil {
			t.Fatal(err)
		}
	}
	h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/subscriptions", nil))
	want := `{"subscriptions":[{"listener":"audit","queued":0,"running":0,"max_concurrency":0,"rate_limit":0,"limited":false,"paused":false,"pause":null,"registered":true},` +
		`{"listener":"mailer","queued":0,"running":0,"max_concurrency":2,"rate_limit":5,"limited":false,"paused":false,"pause":null,"registered":true}],` +
		`"pause_supported":true}`
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("GET /api/subscriptions: %d %s, want 200 %s", rec.Code, rec.Body, want)
	}
}
