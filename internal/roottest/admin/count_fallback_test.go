package outboxadmin_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtest"
)

// TestCountsWithoutBoundedCounts: outbox.Events whose store cannot count with a bound
// (errors.ErrUnsupported) gets the overview from Stats and CountByType and the Dead
// tab's count from CountDead and pages of ListDead, exact, as before.
func TestCountsWithoutBoundedCounts(t *testing.T) {
	t.Parallel()
	store := outboxtest.NewMemoryStore()
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, typ := range []string{"A", "A", "B"} {
		store.Put(outbox.Event{ID: fmt.Sprint("d", i), Type: typ, AggregateType: "Thing", Listener: "mail", Payload: []byte(`{}`),
			Status: outbox.StatusDead, CreatedAt: t0.Add(time.Duration(i) * time.Second), AvailableAt: t0, DoneAt: t0.Add(time.Hour)})
	}
	h, err := outboxadmin.New(eventsOver(t, store), outboxadmin.Options{Authorize: outboxadmin.AllowAll(),
		Logger: slog.New(slog.DiscardHandler)})
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
	var count struct {
		Count   int64 `json:"count"`
		AtLeast bool  `json:"at_least"`
		ByType  []struct {
			EventType string `json:"event_type"`
			Count     int64  `json:"count"`
		} `json:"by_type"`
		ByListener []struct {
			Listener string `json:"listener"`
			Count    int64  `json:"count"`
		} `json:"by_listener"`
	}
	get("api/dead-events/count?by=type,listener", &count)
	if count.Count != 3 || count.AtLeast || fmt.Sprint(count.ByType) != "[{A 2} {B 1}]" || fmt.Sprint(count.ByListener) != "[{mail 3}]" {
		t.Fatalf("count %+v", count)
	}
	var overview struct {
		Counts  map[string]int64 `json:"counts"`
		AtLeast map[string]bool  `json:"at_least"`
		ByType  []struct {
			Status, EventType string
			Count             int64
		} `json:"by_type"`
	}
	get("api/overview", &overview)
	if overview.Counts["DEAD"] != 3 || len(overview.AtLeast) != 0 || len(overview.ByType) != 2 {
		t.Fatalf("overview %+v", overview)
	}
}
