package outboxadmin_test

import (
	"crypto/rand"
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
	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/admintest"
)

// TestBrowserEventLists drives headless Chromium through the lists of every status on
// PostgreSQL, with the admin mounted under a prefix: the Pending and Done lists, a
// filter by aggregate ID that follows the user from list to list, the details of a
// DONE event, a bulk replay of two DEAD events picked by their checkboxes through the
// confirmation that says how many, and the audit trail that names who did it and how
// many events it touched.
func TestBrowserEventLists(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	fx := admintest.NewFixture(t, admintest.FixtureOptions{Backend: "postgres", PollInterval: 50 * time.Millisecond})
	dead := fx.SeedDead(t,
		admintest.Seed{AggregateID: "order-42", Reason: "inventory service: 503 Service Unavailable"},
		admintest.Seed{AggregateType: admintest.AggregatePayment, Type: admintest.TypePaymentTaken, AggregateID: "pay-9",
			Reason: "card declined by issuer"},
		admintest.Seed{Type: admintest.TypeOrderShipped, AggregateID: "order-77", Reason: "carrier API timeout after 30s"},
	)
	later := time.Now().Add(time.Hour)
	pending := fx.Write(t,
		admintest.Seed{AggregateID: "order-42", AvailableAt: later},
		admintest.Seed{Type: admintest.TypeOrderShipped, AggregateID: "order-88", AvailableAt: later},
	)
	fx.Fix()
	var done []string
	for _, s := range []admintest.Seed{
		{AggregateID: "order-42", Headers: map[string]string{"trace_id": "4bf92f3577b34da6"},
			Payload: map[string]any{"order_id": "order-42", "total_cents": 4200}},
		{AggregateType: admintest.AggregatePayment, Type: admintest.TypePaymentTaken, AggregateID: "pay-10"},
	} {
		id := fx.Write(t, s)[0]
		fx.WaitStatus(t, outbox.StatusDone, id)
		done = append(done, id)
		time.Sleep(5 * time.Millisecond) // distinct finish times
	}

	token := rand.Text()
	const actor = "alice@example.com"
	h, err := outboxadmin.New(fx.Outbox.Events(), outboxadmin.Options{
		Authorize: outboxadmin.BearerToken(token),
		Actor:     func(*http.Request) string { return actor },
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/outbox/", http.StripPrefix("/ops/outbox", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := newBrowser(t, execPath)

	row := func(id string) chromedp.CSS { return chromedp.CSS(`#rows tr[data-id="` + id + `"]`) }
	rowIDs := func() string {
		return run(ctx, t, chromedp.Evaluate[string](`[...document.querySelectorAll('#rows tr')].map((tr) => tr.dataset.id).join(',')`))
	}
	text := func(sel string) string { return run(ctx, t, chromedp.TextContent(chromedp.CSS(sel))) }
	waitText := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(60*time.Second))
	}

	// The dead list is the first one shown; the tabs count every status.
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/ops/outbox#token="+token),
		chromedp.WaitVisible(row(dead[2])),
		waitText(`document.querySelector('#tab-new .n').textContent === "2" && document.querySelector('#tab-done .n').textContent === "2"`),
	)
	if err != nil {
		t.Fatalf("load the page: %v", err)
	}
	if got := rowIDs(); got != strings.Join(dead, ",") {
		t.Errorf("dead list = %s, want %v", got, dead)
	}

	// Pending: the NEW events, oldest first.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-new")),
		chromedp.WaitVisible(row(pending[1])),
		chromedp.WaitNotPresent(row(dead[0])),
	)
	if err != nil {
		t.Fatalf("open the pending list: %v", err)
	}
	if got := rowIDs(); got != strings.Join(pending, ",") {
		t.Errorf("pending list = %s, want %v", got, pending)
	}
	if head, count := text("#time-head"), text("#match-count"); head != "Created" || !strings.HasPrefix(count, "2 pending events") {
		t.Errorf("pending list: time column %q, summary %q", head, count)
	}
	screenshot(ctx, t, "admin-events-pending.png")

	// Done: newest first, by finish time.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-done")),
		chromedp.WaitVisible(row(done[0])),
		chromedp.WaitNotPresent(row(pending[0])),
	)
	if err != nil {
		t.Fatalf("open the done list: %v", err)
	}
	if got := rowIDs(); got != done[1]+","+done[0] {
		t.Errorf("done list = %s, want %s,%s (newest first)", got, done[1], done[0])
	}
	newest := run(ctx, t, chromedp.Evaluate[bool](`document.getElementById('f-newest').checked`))
	if head := text("#time-head"); head != "Finished" || !newest {
		t.Errorf("done list: time column %q, newest first %v; want Finished, true", head, newest)
	}
	screenshot(ctx, t, "admin-events-done.png")

	// Filter by aggregate ID: order-42's DONE event, then its pending one.
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("f-aggregate-id"), "order-42"),
		chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)),
		chromedp.WaitNotPresent(row(done[1])),
		chromedp.WaitVisible(row(done[0])),
		chromedp.Click(row(done[0])+chromedp.CSS(` button[data-action="details"]`)),
		chromedp.WaitVisible(chromedp.ID("detail")),
	)
	if err != nil {
		t.Fatalf("filter the done list by aggregate ID and open the details: %v", err)
	}
	fields := text("#detail-fields")
	for _, want := range []string{"StatusDONE", "AggregateOrder order-42", "Delivered20", "Claimed by—"} {
		if !strings.Contains(fields, want) {
			t.Errorf("details say %q, want %q", fields, want)
		}
	}
	if payload := text("#detail-payload"); !strings.Contains(payload, `"total_cents": 4200`) {
		t.Errorf("details show payload %q", payload)
	}
	if headers := text("#detail-headers"); !strings.Contains(headers, "4bf92f3577b34da6") {
		t.Errorf("details show headers %q", headers)
	}
	if visible := run(ctx, t, chromedp.Evaluate[bool](`!document.getElementById('detail-replay').hidden`)); visible {
		t.Error("a DONE event offers a replay")
	}
	screenshot(ctx, t, "admin-events-detail.png")
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-new")),
		chromedp.WaitVisible(row(pending[0])),
		chromedp.WaitNotPresent(row(done[0])),
	)
	if err != nil {
		t.Fatalf("the pending list under the filter: %v", err)
	}
	if got := rowIDs(); got != pending[0] {
		t.Errorf("pending list of order-42 = %s, want %s", got, pending[0])
	}

	// Dead, without the filter: pick two, replay them in bulk through the confirmation.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-dead")),
		chromedp.Click(chromedp.ID("clear-filters")),
		chromedp.WaitVisible(row(dead[2])),
		chromedp.Click(row(dead[0])+chromedp.CSS(` input.pick`)),
		chromedp.Click(row(dead[1])+chromedp.CSS(` input.pick`)),
		waitText(`document.getElementById('picked-count').textContent === "2 events selected"`),
		chromedp.Click(chromedp.ID("bulk-replay")),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
	)
	if err != nil {
		t.Fatalf("pick two dead events and ask to replay them: %v", err)
	}
	title, body, ok := text("#confirm-title"), text("#confirm-text"), text("#confirm-ok")
	if title != "Replay 2 events?" || !strings.Contains(body, "2 selected DEAD events") || ok != "Replay 2" {
		t.Errorf("the confirmation says %q / %q / %q; want how many events it touches", title, body, ok)
	}
	screenshot(ctx, t, "admin-events-bulk-confirm.png")
	for _, id := range dead {
		if got := fx.Status(t, id); got != outbox.StatusDead {
			t.Fatalf("%s before the confirmation: %s, want DEAD", id, got)
		}
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(row(dead[0])),
		chromedp.WaitNotPresent(row(dead[1])),
		chromedp.WaitVisible(row(dead[2])),
		waitText(`document.getElementById('toast').textContent.startsWith("Replayed 2 of 2 selected events")`),
	)
	if err != nil {
		t.Fatalf("confirm the bulk replay: %v", err)
	}
	fx.WaitStatus(t, outbox.StatusDone, dead[:2]...)
	if got := fx.Status(t, dead[2]); got != outbox.StatusDead {
		t.Errorf("the event not picked is %s, want DEAD", got)
	}

	// The audit trail: who, what, how many.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-audit")),
		chromedp.WaitVisible(chromedp.CSS(`#audit-rows tr`)),
	)
	if err != nil {
		t.Fatalf("open the audit trail: %v", err)
	}
	cells := run(ctx, t, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#audit-rows tr:first-child td')].map((td) => td.textContent)`))
	if len(cells) != 5 || cells[1] != actor || cells[2] != outbox.AuditReplay || cells[3] != "2" ||
		!strings.Contains(cells[4], dead[0]) || !strings.Contains(cells[4], dead[1]) {
		t.Errorf("first audit row = %q, want %s, replay, 2 and the two IDs", cells, actor)
	}
	screenshot(ctx, t, "admin-events-audit.png")

	// Pending: "select page" ticks both, and a bulk discard (cancelled once) makes them
	// DISCARDED.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-new")),
		chromedp.WaitVisible(row(pending[1])),
		chromedp.Click(chromedp.ID("select-page")),
		waitText(`document.getElementById('picked-count').textContent === "2 events selected"`),
		chromedp.Click(chromedp.ID("bulk-discard")),
		chromedp.WaitVisible(chromedp.ID("confirm-cancel")),
		chromedp.Click(chromedp.ID("confirm-cancel")),
		chromedp.WaitNotVisible(chromedp.ID("confirm")),
	)
	if err != nil {
		t.Fatalf("select the page of pending events, ask to discard them and cancel: %v", err)
	}
	for _, id := range pending {
		if got := fx.Status(t, id); got != outbox.StatusNew {
			t.Fatalf("%s after a cancelled discard: %s, want NEW", id, got)
		}
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("bulk-discard")),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(row(pending[0])),
		chromedp.WaitNotPresent(row(pending[1])),
		waitText(`document.querySelector('#tab-discarded .n').textContent === "2"`),
	)
	if err != nil {
		t.Fatalf("discard the page of pending events: %v", err)
	}
	for _, id := range pending {
		if got := fx.Status(t, id); got != outbox.StatusDiscarded {
			t.Errorf("%s after the bulk discard: %s, want DISCARDED", id, got)
		}
	}

	// By type: the counts per event type and status.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("tab-types")),
		chromedp.WaitVisible(chromedp.ID("type-table")),
		waitText(`document.querySelector('#type-rows tr[data-event-type="OrderShipped"] td[data-status="DEAD"]')?.textContent === "1"`),
	)
	if err != nil {
		t.Fatalf("open the counts per type: %v", err)
	}
	screenshot(ctx, t, "admin-events-by-type.png")
}

// TestBrowserPartialPage: a search that reads outbox.MaxScanRows rows without filling a
// page says so, and "Continue searching" reads on to the end.
func TestBrowserPartialPage(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	store := outboxtest.NewMemoryStore()
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	later := time.Now().Add(time.Hour)
	events := make([]outbox.Event, outbox.MaxScanRows+1)
	for i := range events {
		events[i] = outbox.Event{ID: fmt.Sprintf("e%05d", i), Type: "Changed", AggregateType: "Account",
			Payload: json.RawMessage(`{}`), CreatedAt: created.Add(time.Duration(i) * time.Millisecond), AvailableAt: later}
	}
	events[len(events)-1].Type = "Rare"
	if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: events}); err != nil {
		t.Fatal(err)
	}
	h, err := outboxadmin.New(eventsOver(t, store), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := newBrowser(t, execPath)

	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/outbox/admin/"),
		chromedp.WaitVisible(chromedp.ID("tab-new")),
		chromedp.Click(chromedp.ID("tab-new")),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="e00000"]`)),
		chromedp.SendKeys(chromedp.ID("f-event-type"), "Rare"),
		chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("partial")),
	)
	if err != nil {
		t.Fatalf("search for a rare type: %v", err)
	}
	if note := run(ctx, t, chromedp.TextContent(chromedp.ID("partial-text"))); !strings.Contains(note, "searched 10,000 rows") ||
		!strings.Contains(note, "found 0 matching events") {
		t.Errorf("the partial page says %q", note)
	}
	if n := run(ctx, t, chromedp.Evaluate[int](`document.querySelectorAll('#rows tr').length`)); n != 0 {
		t.Errorf("%d rows on the partial page, want 0", n)
	}
	screenshot(ctx, t, "admin-events-partial.png")
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("partial-continue")),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="e10000"]`)),
		chromedp.WaitNotVisible(chromedp.ID("partial")),
	)
	if err != nil {
		t.Fatalf("continue the search: %v", err)
	}
	if info := run(ctx, t, chromedp.TextContent(chromedp.ID("page-info"))); !strings.HasPrefix(info, "Page 2") {
		t.Errorf("after continuing the page says %q, want page 2", info)
	}
}
