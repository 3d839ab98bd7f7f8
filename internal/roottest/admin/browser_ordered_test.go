package outboxadmin_test

import (
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
)

// TestBrowserOrderedDeadEvent: in headless Chromium, a DEAD ordered event that holds its
// key shows its order key in its details, the overview shows the WAITING events and
// the blocked key (and FALLBACK and DISCARDED events, a chip each), and deleting the event (with the confirmation) frees the key: its
// next event is promoted, and the blocked-keys chip drops to 0.
func TestBrowserOrderedDeadEvent(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	store, ob, created := deadOrderedKey(t)
	// And an event a listener's fallback handled: the overview shows a FALLBACK chip.
	handled := outbox.Event{ID: "f0", Type: "Shipped", AggregateType: "Order", Payload: []byte(`{}`), CreatedAt: created, AvailableAt: created}
	if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{handled}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.MarkDead(t.Context(), storage.MarkDeadParams{ID: "f0", DeadAt: time.Now(), Reason: "carrier refused",
		CountAttempt: true, Fallback: true}); err != nil {
		t.Fatal(err)
	}
	// And a discarded one: a DISCARDED chip.
	dropped := handled
	dropped.ID = "x0"
	if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{dropped}}); err != nil {
		t.Fatal(err)
	}
	if err := ob.Events().Discard(t.Context(), "x0"); err != nil {
		t.Fatal(err)
	}
	h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	bctx := newBrowser(t, execPath)
	chip := func(status string) string {
		return `document.querySelector('#overview li[data-status="` + status + `"] .value')?.textContent`
	}
	row := chromedp.CSS(`#rows tr[data-id="e0"]`)
	err = chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/outbox/admin/"),
		chromedp.WaitVisible(row),
		chromedp.Poll[chromedp.Void](chip("WAITING")+` === "2" && `+chip("blocked-keys")+` === "1" && `+chip("FALLBACK")+` === "1" && `+chip("DISCARDED")+` === "1"`,
			chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.Click(row+chromedp.CSS(` button[data-action="details"]`)),
		chromedp.WaitVisible(chromedp.ID("detail")),
	)
	if err != nil {
		t.Fatalf("load the page and open the details: %v", err)
	}
	if fields := run(bctx, t, chromedp.TextContent(chromedp.ID("detail-fields"))); !strings.Contains(fields, "Account:42 (#1)") ||
		!strings.Contains(fields, "later events of this key wait") {
		t.Errorf("details say %q, want the order key and what it holds", fields)
	}
	screenshot(bctx, t, "admin-ordered-dead-event.png")
	err = chromedp.Do(bctx,
		chromedp.Click(row+chromedp.CSS(` button[data-action="delete"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(row),
		chromedp.Poll[chromedp.Void](chip("WAITING")+` === "1" && `+chip("blocked-keys")+` === "0"`,
			chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("delete the event: %v", err)
	}
	if e, ok := store.Event("e1"); !ok || e.Status != outbox.StatusNew {
		t.Fatalf("e1 after the delete = %+v, want NEW (its key moved on)", e)
	}
	if _, ok := store.Event("e0"); ok {
		t.Fatal("e0 is still in the store after the delete")
	}
	screenshot(bctx, t, "admin-ordered-after-delete.png")
}

// TestBrowserKeyWaitingList: in headless Chromium, the details of a DEAD ordered event
// open the WAITING events of its key, in the key's order with their places, and no
// event of another key.
func TestBrowserKeyWaitingList(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	store, ob, created := deadOrderedKey(t)
	// Another key with a WAITING event: not in Account:42's list.
	var other []outbox.Event
	for _, id := range []string{"o0", "o1"} {
		other = append(other, outbox.Event{ID: id, Type: "Changed", AggregateType: "Account", Payload: []byte(`{}`),
			CreatedAt: created, AvailableAt: created, OrderKey: "Account:7"})
	}
	if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: other}); err != nil {
		t.Fatal(err)
	}
	srv := adminAtRoot(t, ob)
	bctx := newBrowser(t, execPath)
	row := chromedp.CSS(`#rows tr[data-id="e0"]`)
	err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(row),
		chromedp.Click(row+chromedp.CSS(` button[data-action="details"]`)),
		chromedp.WaitVisible(chromedp.ID("detail-key")),
		chromedp.Click(chromedp.ID("detail-key")),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="e2"]`)),
	)
	if err != nil {
		t.Fatalf("open the waiting events of the key: %v", err)
	}
	rows := run(bctx, t, chromedp.Evaluate[string](`[...document.querySelectorAll('#rows tr')].map(r => r.dataset.id + ' ' + r.cells[1].textContent.split(' · ')[0]).join(', ')`))
	if rows != "e1 #2, e2 #3" {
		t.Errorf("the key's list shows %q, want e1 #2, e2 #3", rows)
	}
	if key := run(bctx, t, chromedp.Evaluate[string](`document.getElementById('f-order-key').value`)); key != "Account:42" {
		t.Errorf("the order key filter holds %q, want Account:42", key)
	}
	if tab := run(bctx, t, chromedp.Evaluate[string](`document.querySelector('#tabs .active').dataset.view`)); tab != "waiting" {
		t.Errorf("the active tab is %q, want waiting", tab)
	}
	screenshot(bctx, t, "admin-key-waiting-list.png")
	// The Done tab has no list by key: opening it clears the filter instead of failing.
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#tabs [data-view="done"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('f-order-key').value === '' && !document.getElementById('toast').hidden`,
			chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.WaitVisible(chromedp.ID("empty")),
	)
	if err != nil {
		t.Fatalf("open the Done tab from a list by key: %v", err)
	}
	if st := run(bctx, t, chromedp.Evaluate[bool](`document.getElementById('status').hidden`)); !st {
		t.Errorf("the Done tab shows an error: %q", run(bctx, t, chromedp.TextContent(chromedp.ID("status-text"))))
	}
}

// TestBrowserBlockingFilter: in headless Chromium, "Holding their key" on the Dead tab
// leaves the DEAD event that holds its key and drops a DEAD event alone in its key and
// an unordered one; the box is not offered on the Waiting tab.
func TestBrowserBlockingFilter(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	store, ob, created := deadOrderedKey(t)
	for _, e := range []outbox.Event{
		{ID: "alone", Type: "Changed", AggregateType: "Account", Payload: []byte(`{}`), CreatedAt: created, AvailableAt: created, OrderKey: "Account:9"},
		{ID: "plain", Type: "Changed", AggregateType: "Account", Payload: []byte(`{}`), CreatedAt: created, AvailableAt: created},
	} {
		if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: []outbox.Event{e}}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.MarkDead(t.Context(), storage.MarkDeadParams{ID: e.ID, DeadAt: time.Now(), Reason: "poison", CountAttempt: true}); err != nil {
			t.Fatal(err)
		}
	}
	srv := adminAtRoot(t, ob)
	bctx := newBrowser(t, execPath)
	ids := func() string {
		return run(bctx, t, chromedp.Evaluate[string](`[...document.querySelectorAll('#rows tr')].map((tr) => tr.dataset.id).sort().join(',')`))
	}
	err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="plain"]`)),
	)
	if err != nil {
		t.Fatalf("load the page: %v", err)
	}
	if got := ids(); got != "alone,e0,plain" {
		t.Fatalf("the Dead tab lists %q, want alone,e0,plain", got)
	}
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("f-blocking")),
		chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#rows tr[data-id="plain"]`)),
	)
	if err != nil {
		t.Fatalf("filter the events holding their key: %v", err)
	}
	if got := ids(); got != "e0" {
		t.Errorf("the Dead tab holding their key lists %q, want e0", got)
	}
	screenshot(bctx, t, "admin-dead-holding-their-key.png")
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#tabs [data-view="waiting"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="e1"]`)),
	)
	if err != nil {
		t.Fatalf("open the Waiting tab: %v", err)
	}
	if hidden := run(bctx, t, chromedp.Evaluate[bool](`document.getElementById('f-blocking-label').hidden`)); !hidden {
		t.Error("the Waiting tab offers the box of the events holding their key")
	}
}

// TestBrowserDiscard: in headless Chromium, discarding a DEAD event (with the
// confirmation) takes it off the list, keeps it DISCARDED, and lets its key move on.
func TestBrowserDiscard(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	store, ob, _ := deadOrderedKey(t)
	srv := adminAtRoot(t, ob)
	bctx := newBrowser(t, execPath)
	chip := `document.querySelector('#overview li[data-status="DISCARDED"] .value')?.textContent`
	row := chromedp.CSS(`#rows tr[data-id="e0"]`)
	err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(row),
		chromedp.Click(row+chromedp.CSS(` button[data-action="discard"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(row),
		chromedp.Poll[chromedp.Void](chip+` === "1"`, chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("discard the event: %v", err)
	}
	screenshot(bctx, t, "admin-discarded.png")
	if e, ok := store.Event("e0"); !ok || e.Status != outbox.StatusDiscarded {
		t.Fatalf("e0 after the discard = %+v, want DISCARDED", e)
	}
	if e, ok := store.Event("e1"); !ok || e.Status != outbox.StatusNew {
		t.Fatalf("e1 after the discard = %+v, want NEW (its key moved on)", e)
	}
}

// adminAtRoot serves the admin of ob at the root of a test server, closed when t ends.
func adminAtRoot(t *testing.T, ob *outbox.Outbox) *httptest.Server {
	t.Helper()
	h, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestBrowserBlockedKeysChip: in headless Chromium, the "blocked keys" chip opens the
// events that hold their key: the Dead tab while a DEAD event holds one, and the
// Retrying tab once the only holder left is a RETRY event; "By type" has the same link.
func TestBrowserBlockedKeysChip(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	store, ob, created := deadOrderedKey(t)
	// A second key held by a RETRY event, with one event waiting behind it.
	var held []outbox.Event
	for i := range 2 {
		held = append(held, outbox.Event{ID: fmt.Sprint("r", i), Type: "Changed", AggregateType: "Account",
			Payload: []byte(`{}`), CreatedAt: created, AvailableAt: created, OrderKey: "Account:7"})
	}
	if _, err := store.Insert(t.Context(), nil, storage.InsertParams{Events: held}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Reschedule(t.Context(), storage.RescheduleParams{ID: "r0", Status: outbox.StatusRetry,
		AvailableAt: time.Now().Add(time.Hour), CountAttempt: true, LastError: "timeout"}); err != nil {
		t.Fatal(err)
	}
	srv := adminAtRoot(t, ob)
	bctx := newBrowser(t, execPath)
	chip := chromedp.CSS(`#overview li[data-status="blocked-keys"] button[data-action="blocked-keys"]`)
	listed := func() string {
		return run(bctx, t, chromedp.Evaluate[string](`[...document.querySelectorAll('#rows tr')].map((tr) => tr.dataset.id).sort().join(',')`))
	}
	err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chip),
		chromedp.Click(chromedp.CSS(`#tabs [data-view="waiting"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="r1"]`)),
		settled(), // the tab's refresh draws the chip again
		chromedp.Click(chip),
		chromedp.WaitNotPresent(chromedp.CSS(`#rows tr[data-id="r1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="e0"]`)),
	)
	if err != nil {
		t.Fatalf("open the holders from the chip: %v", err)
	}
	if got := run(bctx, t, chromedp.Evaluate[string](`document.querySelector('#tabs [aria-selected="true"]')?.dataset.view || ''`)); got != "dead" {
		t.Errorf("the chip opened the %q tab, want dead", got)
	}
	if !run(bctx, t, chromedp.Evaluate[bool](`document.getElementById('f-blocking').checked`)) {
		t.Error("the chip opened the Dead tab without Holding their key")
	}
	if got := listed(); got != "e0" {
		t.Errorf("the chip lists %q, want e0", got)
	}
	// Discard the DEAD holder (its key moves on): the only holder left is RETRY.
	if err := ob.Events().Discard(t.Context(), "e0"); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#tabs [data-view="types"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#types-summary button[data-action="holders"]`)),
		settled(), // drawn by the last refresh, then again by the tab's
		chromedp.Click(chromedp.CSS(`#types-summary button[data-action="holders"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr[data-id="r0"]`)),
	)
	if err != nil {
		t.Fatalf("open the holders from By type: %v", err)
	}
	if got := run(bctx, t, chromedp.Evaluate[string](`document.querySelector('#tabs [aria-selected="true"]')?.dataset.view || ''`)); got != "retry" {
		t.Errorf("the link opened the %q tab, want retry", got)
	}
	if got := listed(); got != "r0" {
		t.Errorf("the link lists %q, want r0", got)
	}
	screenshot(bctx, t, "admin-retry-holding-their-key.png")
}
