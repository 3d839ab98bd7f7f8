package admintest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// runFailures covers errors of the store behind outbox.Events and of Options.Redact,
// and redaction itself.
func runFailures(t *testing.T, mount Mount) {
	tests := []struct {
		name string
		fn   func(t *testing.T, mount Mount)
	}{
		{"StoreErrorsAreGeneric500s", testStoreErrors},
		{"TypedErrors", testTypedErrors},
		{"Unsupported", testUnsupported},
		{"Redact", testRedact},
		{"RedactPanics", testRedactPanics},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, mount)
		})
	}
}

// failingStore is a store whose every method the admin reaches fails with err: the
// optional interfaces of lists, bounded counts, discards, stats, the audit trail and
// pauses included, so that each call of outbox.Events gets as far as the store.
type failingStore struct {
	storage.Store // nil: the admin never writes, claims or purges
	err           error
}

// failingEvents returns the events of a writer-only outbox over a failingStore.
func failingEvents(t *testing.T, err error) *outbox.Events {
	return eventsOver(t, failingStore{err: err})
}

// eventsOver returns the events of a writer-only outbox over store.
func eventsOver(t *testing.T, store storage.Store) *outbox.Events {
	t.Helper()
	ob, err := outbox.New(nil, outbox.Config{Mode: outbox.WriterOnly, Store: store, PurgeInterval: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return ob.Events()
}

func (f failingStore) Get(context.Context, string) (outbox.Event, error) {
	return outbox.Event{}, f.err
}
func (f failingStore) ListDead(context.Context, storage.ListDeadParams) ([]outbox.Event, error) {
	return nil, f.err
}
func (f failingStore) CountDead(context.Context, outbox.DeadFilter) (int64, error) { return 0, f.err }
func (f failingStore) Replay(context.Context, storage.ReplayParams) (int64, error) { return 0, f.err }
func (f failingStore) DeleteDead(context.Context, []string) (int64, error)         { return 0, f.err }
func (f failingStore) Discard(context.Context, []string, time.Time) (int64, error) { return 0, f.err }
func (f failingStore) Stats(context.Context) (outbox.Stats, error)                 { return outbox.Stats{}, f.err }
func (f failingStore) CountByType(context.Context) ([]outbox.TypeCount, error)     { return nil, f.err }
func (f failingStore) RecordAudit(context.Context, outbox.AuditEntry) error        { return f.err }
func (f failingStore) CountBlockedKeys(context.Context, int) (outbox.BlockedKeys, error) {
	return outbox.BlockedKeys{}, f.err
}
func (f failingStore) ListEvents(context.Context, storage.ListEventsParams) ([]outbox.Event, outbox.Cursor, error) {
	return nil, outbox.Cursor{}, f.err
}
func (f failingStore) CountEvents(context.Context, storage.CountEventsParams) (outbox.EventCounts, error) {
	return outbox.EventCounts{}, f.err
}
func (f failingStore) ListAudit(context.Context, storage.ListAuditParams) ([]outbox.AuditEntry, error) {
	return nil, f.err
}
func (f failingStore) ChangeAudited(context.Context, storage.AuditedChangeParams) (int64, error) {
	return 0, f.err
}
func (f failingStore) Paused(context.Context) ([]outbox.Pause, error) { return nil, f.err }
func (f failingStore) SetPaused(context.Context, storage.SetPausedParams) (bool, error) {
	return false, f.err
}
func (f failingStore) Pin(context.Context, storage.PinParams) (int64, error) { return 0, f.err }

// apiRoutes lists one request per API route: method, path, body.
func apiRoutes() [][3]string {
	var out [][3]string
	for _, r := range routesFor("01ARZ3NDEKTSV4RRFFQ69G5FAV") {
		if strings.HasPrefix(r[1], "api/") && r[1] != "api/no-such-route" {
			out = append(out, r)
		}
	}
	return out
}

func testStoreErrors(t *testing.T, mount Mount) {
	const secret = `pq: column "secret_column" does not exist (SQLSTATE 42703) at SELECT secret_column FROM outbox_event`
	e := mountHandler(t, mount, nil, failingEvents(t, fmt.Errorf("outbox: list dead events: %w", errors.New(secret))), nil)
	for _, r := range apiRoutes() {
		res := e.c.do(t, e.c.request(t, r[0], r[1], r[2]))
		got := res.wantError(t, http.StatusInternalServerError, "internal")
		for _, leak := range []string{"secret_column", "SELECT", "pq:", "SQLSTATE", "goroutine", ".go:"} {
			if strings.Contains(string(res.body), leak) {
				t.Errorf("%s /%s: the 500 leaks %q: %s", r[0], r[1], leak, res.body)
			}
		}
		if got.Message != "internal error" {
			t.Errorf("%s /%s: message %q", r[0], r[1], got.Message)
		}
	}
	if e.logs.find("ERROR", "secret_column") == "" {
		t.Error("the real error was not logged")
	}
}

func testTypedErrors(t *testing.T, mount Mount) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("outbox: get event x: %w", outbox.ErrNotFound), http.StatusNotFound, "not_found"},
		{fmt.Errorf("outbox: replay event x (status DONE): %w", outbox.ErrNotDead), http.StatusConflict, "not_dead"},
		{fmt.Errorf("%w: dead filter: SELECT internals", outbox.ErrInvalidArgument), http.StatusBadRequest, "invalid_argument"},
	}
	for _, c := range cases {
		e := mountHandler(t, mount, nil, failingEvents(t, c.err), nil)
		for _, r := range [][3]string{
			{http.MethodGet, "api/dead-events/01ARZ3NDEKTSV4RRFFQ69G5FAV", ""},
			{http.MethodPost, "api/dead-events/01ARZ3NDEKTSV4RRFFQ69G5FAV/replay", "{}"},
		} {
			res := e.c.do(t, e.c.request(t, r[0], r[1], r[2]))
			res.wantError(t, c.status, c.code)
			if strings.Contains(string(res.body), "internals") {
				t.Errorf("%s /%s: the core's message leaks: %s", r[0], r[1], res.body)
			}
		}
	}
}

// statsOnly is a store that counts per status (Stats) but neither lists the events of
// every status nor counts with a bound: the overview falls back to Stats and
// CountByType, which it cannot answer.
type statsOnly struct{ storage.Store }

func (s statsOnly) Stats(ctx context.Context) (outbox.Stats, error) {
	return s.Store.(storage.StatsStore).Stats(ctx)
}

// testUnsupported: a store without lists of every status or an audit trail gets 501
// from their routes, and an overview without by_type.
func testUnsupported(t *testing.T, mount Mount) {
	e := mountHandler(t, mount, nil, failingEvents(t, fmt.Errorf("outbox: store X does not implement EventStore: %w", errors.ErrUnsupported)), nil)
	for _, r := range [][3]string{
		{http.MethodGet, "api/events?status=dead", ""},
		{http.MethodGet, "api/audit", ""},
		{http.MethodPost, "api/events/replay", `{"ids":["a"]}`},
	} {
		res := e.c.do(t, e.c.request(t, r[0], r[1], r[2]))
		if res.wantError(t, http.StatusNotImplemented, "unsupported"); strings.Contains(string(res.body), "store X") {
			t.Errorf("%s /%s: the core's message leaks: %s", r[0], r[1], res.body)
		}
	}
	fx := NewFixture(t, FixtureOptions{})
	fx.SeedDead(t, Seed{})
	e = mountHandler(t, mount, fx, eventsOver(t, statsOnly{fx.Outbox.Store()}), nil)
	res := e.c.get(t, "api/overview")
	var o fullOverviewBody
	res.decode(t, http.StatusOK, &o)
	if o.Counts["DEAD"] != 1 || o.ByType != nil || !strings.Contains(string(res.body), `"by_type":null`) {
		t.Errorf("overview without counts per type: %s", res.body)
	}
}

func testRedact(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, func(o *outboxadmin.Options) {
		o.Redact = func(ev *outbox.Event) {
			delete(ev.Headers, "authorization")
			ev.AggregateID = "[redacted]"
			if ev.Type == TypeOrderShipped {
				ev.Payload = []byte(`not JSON`) // Redact may break it; it is sent as a string
				return
			}
			ev.Payload = []byte(`{"card":"****"}`)
		}
	})
	ids := e.fx.SeedDead(t,
		Seed{AggregateID: "customer-42", Headers: map[string]string{"authorization": "Bearer s3cret", "trace": "t1"},
			Payload: map[string]string{"card": "4111111111111111"}},
		Seed{Type: TypeOrderShipped, Payload: map[string]string{"card": "4111111111111111"}},
	)
	var ev eventBody
	res := e.c.get(t, "api/dead-events/"+ids[0])
	res.decode(t, http.StatusOK, &ev)
	if ev.AggregateID != "[redacted]" || ev.Headers["trace"] != "t1" || len(ev.Headers) != 1 {
		t.Errorf("redacted event = %+v", ev)
	}
	if p, _ := ev.Payload.(map[string]any); p["card"] != "****" {
		t.Errorf("redacted payload = %v", ev.Payload)
	}
	e.c.get(t, "api/dead-events/"+ids[1]).decode(t, http.StatusOK, &ev)
	if ev.Payload != "not JSON" {
		t.Errorf("payload left invalid by Redact = %#v, want the JSON string \"not JSON\"", ev.Payload)
	}
	list := e.c.get(t, "api/dead-events")
	for _, secret := range []string{"4111111111111111", "s3cret", "customer-42"} {
		if strings.Contains(string(res.body)+string(list.body), secret) {
			t.Errorf("a response holds %q despite Redact", secret)
		}
	}
	// The stored event is unchanged.
	stored, err := e.fx.Outbox.Events().Get(context.Background(), ids[0])
	if err != nil || stored.AggregateID != "customer-42" || stored.Headers["authorization"] == "" {
		t.Errorf("stored event changed by Redact: %+v, %v", stored, err)
	}
}

func testRedactPanics(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, func(o *outboxadmin.Options) {
		o.Redact = func(*outbox.Event) { panic("redact bug at secret.go:12") }
	})
	id := e.fx.SeedDead(t, Seed{})[0]
	for _, p := range []string{"api/dead-events/" + id, "api/dead-events"} {
		res := e.c.get(t, p)
		res.wantError(t, http.StatusInternalServerError, "internal")
		if strings.Contains(string(res.body), "secret.go") {
			t.Errorf("GET /%s leaks the panic: %s", p, res.body)
		}
	}
	if e.logs.find("ERROR", "panic", "secret.go") == "" {
		t.Error("the panic was not logged")
	}
}
