package outboxadmin_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/admintest"
)

// TestBrowserCappedCounts: with more DEAD events than a count reads
// (outbox.MaxCountRows), the API says the counts stopped there (at_least): the overview's
// and a filtered count's, which counts the matches among the first 10,000 (partial
// groups). The page shows them as such: "10,000+" on the Dead tab, "At least" in the
// Dead list's count, "9,999+" and "1+" in the By type table.
func TestBrowserCappedCounts(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	fx := admintest.NewFixture(t, admintest.FixtureOptions{})
	fx.SeedDead(t, admintest.Seed{})
	store, err := outbox.NewSQLStore(fx.DB, outbox.SQLite, outbox.SQLStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Newer than the seeded event: the oldest 10,000 DEAD events are it and 9,999 of them.
	created := time.Now().Add(time.Hour).UTC()
	n := outbox.MaxCountRows + 1
	for start := 0; start < n; start += 1000 {
		var events []outbox.Event
		for i := start; i < min(start+1000, n); i++ {
			events = append(events, outbox.Event{ID: fmt.Sprintf("bulk-%05d", i), Type: "Bulk", AggregateType: "Thing",
				Payload: json.RawMessage(`{}`), CreatedAt: created, AvailableAt: created.Add(48 * time.Hour)})
		}
		if _, err := store.Insert(t.Context(), fx.DB, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fx.DB.ExecContext(t.Context(), `UPDATE outbox_event SET status = 3, attempts = 1, last_error = 'bulk', done_at = created_at WHERE event_type = 'Bulk'`); err != nil {
		t.Fatal(err)
	}

	h, err := outboxadmin.New(fx.Outbox.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var overview struct {
		Counts     map[string]int64 `json:"counts"`
		AtLeast    map[string]bool  `json:"at_least"`
		CountLimit int              `json:"count_limit"`
	}
	getJSON(t, srv.URL+"/outbox/admin/api/overview", &overview)
	if overview.Counts["DEAD"] != int64(outbox.MaxCountRows) || !overview.AtLeast["DEAD"] || overview.AtLeast["NEW"] ||
		overview.CountLimit != outbox.MaxCountRows {
		t.Fatalf("overview %+v; want DEAD counted to %d, at least", overview, outbox.MaxCountRows)
	}
	var count struct {
		Count   int64 `json:"count"`
		AtLeast bool  `json:"at_least"`
		Partial bool  `json:"partial"`
	}
	// A filtered count counts the matches among the window: those are at least that many.
	for typ, want := range map[string]int64{admintest.TypeOrderPlaced: 1, "Unknown": 0} {
		getJSON(t, srv.URL+"/outbox/admin/api/dead-events/count?by=type&event_type="+typ, &count)
		if count.Count != want || !count.AtLeast || !count.Partial {
			t.Fatalf("count of the %s DEAD events %+v; want %d, at least, partial", typ, count, want)
		}
	}

	ctx := newBrowser(t, execPath)
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/outbox/admin/"),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('match-count').textContent.includes('dead events')`, chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("open the page: %v", err)
	}
	if got := run(ctx, t, chromedp.TextContent(chromedp.CSS(`#tab-dead .n`))); got != "10,000+" {
		t.Errorf("the Dead tab's count is %q, want 10,000+", got)
	}
	if got := run(ctx, t, chromedp.TextContent(chromedp.ID("match-count"))); got != "At least 10,000 dead events (counted among the first 10,000 of the list)" {
		t.Errorf("the Dead list says %q, want at least 10,000 dead events", got)
	}
	if got := run(ctx, t, chromedp.Evaluate[string](`document.querySelector('#types').textContent`)); !strings.Contains(got, "counted the oldest 10,000 only") {
		t.Errorf("the Dead list's type chips %q do not say they counted the oldest 10,000", got)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-types")),
		chromedp.WaitVisible(chromedp.CSS(`#type-rows tr[data-event-type="Bulk"]`)),
	)
	if err != nil {
		t.Fatalf("open By type: %v", err)
	}
	if got := run(ctx, t, chromedp.TextContent(chromedp.CSS(`#type-rows tr[data-event-type="Bulk"] td[data-status="DEAD"]`))); got != "9,999+" {
		t.Errorf("By type shows %q DEAD Bulk events, want 9,999+ (of the first 10,000)", got)
	}
	if got := run(ctx, t, chromedp.TextContent(chromedp.CSS(`#type-rows tr[data-event-type="`+admintest.TypeOrderPlaced+`"] td[data-status="DEAD"]`))); got != "1+" {
		t.Errorf("By type shows %q DEAD %s events, want 1+", got, admintest.TypeOrderPlaced)
	}
	// Under the per-type table, each subscription of the serving process: its load
	// (nothing queued here: these DEAD rows wait for nobody), its limits (none), no
	// state (not paused, not limited) and its Pause button.
	sub := `#sub-rows tr[data-listener="` + admintest.AggregateOrder + "/" + admintest.TypeOrderPlaced + `"]`
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sub))); err != nil {
		t.Fatalf("the subscriptions table: %v", err)
	}
	// Read by script: the overview's refresh renders the rows again.
	if got := run(ctx, t, chromedp.Evaluate[string](`document.querySelector('`+sub+`').textContent`)); got != admintest.AggregateOrder+"/"+admintest.TypeOrderPlaced+"00——Pause…" {
		t.Errorf("the subscription's row reads %q, want its name, 0 queued, 0 running, no limits and Pause", got)
	}
	screenshot(ctx, t, "admin-capped-counts.png")
}

// getJSON decodes the JSON answer of a GET of url into v, failing on a status other
// than 200.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
