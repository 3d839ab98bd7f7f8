package outboxadmin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/fuzztally"
)

// FuzzAdminRequest sends arbitrary requests (method, path, query, content type, body)
// through the whole admin handler over an in-memory store holding DEAD events. Any
// input must be answered without a panic, with a JSON body for the API, and a bad
// request must be refused with a 4xx: a 500 would mean the parsers let through
// something the core rejects. Seeds are in testdata/fuzz; plain `go test` replays them.
func FuzzAdminRequest(f *testing.F) {
	f.Add(uint8(0), "/api/dead-events", "limit=2&event_type=T", "", []byte(nil))
	f.Add(uint8(0), "/api/dead-events/count", "by=event_type", "", []byte(nil))
	f.Add(uint8(0), "/api/dead-events/e1", "", "", []byte(nil))
	f.Add(uint8(1), "/api/dead-events/e1/replay", "", "application/json", []byte(`{}`))
	f.Add(uint8(1), "/api/dead-events/replay", "", "application/json; charset=utf-8", []byte(`{"event_type":"T"}`))
	f.Add(uint8(1), "/api/dead-events/replay", "", "application/json", []byte(`{"event_type":"T","x":1}`))
	f.Add(uint8(1), "/api/dead-events/replay", "", "application/json", []byte(`{"event_type":1}`))
	f.Add(uint8(1), "/api/dead-events/replay", "", "application/json", []byte(`{} {}`))
	f.Add(uint8(1), "/api/dead-events/replay", "a=1", "text/plain", []byte(`{}`))
	f.Add(uint8(1), "/api/dead-events/replay", "", "application/json", []byte("{\"event_type\":\"\xff\"}"))
	f.Add(uint8(2), "/api/overview", "", "", []byte(nil))
	f.Add(uint8(0), "/api/events", "status=dead&error=x%25_&from=2026-01-01T00:00:00Z&newest=1&limit=2", "", []byte(nil))
	f.Add(uint8(0), "/api/events", "status=done&aggregate_id=a&to=2026-01-03T00:00:00%2B01:00", "", []byte(nil))
	f.Add(uint8(0), "/api/events/e2", "", "", []byte(nil))
	f.Add(uint8(0), "/api/events", "status=waiting&order_key=K&newest=1&limit=1&after=IzF8ZTE", "", []byte(nil))
	f.Add(uint8(1), "/api/events/replay", "", "application/json", []byte(`{"ids":["e1","e1","zz"]}`))
	f.Add(uint8(1), "/api/events/discard", "", "application/json", []byte(`{"ids":[]}`))
	f.Add(uint8(1), "/api/events/delete", "", "application/json", []byte(`{"ids":["e3"],"x":1}`))
	f.Add(uint8(0), "/api/audit", "limit=1&before=01J", "", []byte(nil))
	f.Add(uint8(0), "/api/subscriptions", "", "", []byte(nil))
	f.Add(uint8(1), "/api/subscriptions/pause", "", "application/json", []byte(`{"listener":"A/T","reason":"r"}`))
	f.Add(uint8(1), "/api/subscriptions/pause", "", "application/json", []byte("{\"listener\":\"\xff\"}"))
	f.Add(uint8(1), "/api/subscriptions/resume", "", "application/json", []byte(`{"listener":"A/T","reason":"r"}`))
	f.Fuzz(func(t *testing.T, method uint8, path, rawQuery, contentType string, body []byte) {
		store := outboxtest.NewMemoryStore()
		ctx := context.Background()
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for _, id := range []string{"e1", "e2", "e3"} {
			e := outbox.Event{ID: id, Type: "T", AggregateType: "A", Payload: json.RawMessage(`{}`), CreatedAt: now, AvailableAt: now}
			if _, err := store.Insert(ctx, nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.MarkDead(ctx, storage.MarkDeadParams{ID: id, DeadAt: now, Reason: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		h, err := outboxadmin.New(eventsOver(t, store), outboxadmin.Options{
			Authorize: outboxadmin.BearerToken("tok"),
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		m := [...]string{http.MethodGet, http.MethodPost, http.MethodGet, http.MethodPut, http.MethodDelete}[int(method)%5]
		r := httptest.NewRequest(m, "/", bytes.NewReader(body))
		r.URL.Path, r.URL.RawPath, r.URL.RawQuery = "/"+strings.TrimPrefix(path, "/"), "", rawQuery
		r.Header.Set("Authorization", "Bearer tok")
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fuzztally.Record(w.Code >= 400)
		if w.Code >= 500 {
			t.Fatalf("%s %s?%s (%q, %q): %d %s", m, path, rawQuery, contentType, body, w.Code, w.Body)
		}
		if strings.HasPrefix(r.URL.Path, "/api/") && w.Code != http.StatusMovedPermanently && w.Code != http.StatusTemporaryRedirect {
			if !json.Valid(w.Body.Bytes()) || !utf8.Valid(w.Body.Bytes()) {
				t.Fatalf("%s %s?%s: %d with a body that is not JSON: %q", m, path, rawQuery, w.Code, w.Body)
			}
		}
	})
}
