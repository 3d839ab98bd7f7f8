package outboxadmin_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/admintest"
	"github.com/outboxkit/outbox/internal/testdb"
)

// EnvArtifacts names a directory where tests write artifacts such as screenshots; when
// unset they go to the test's temporary directory.
const EnvArtifacts = "OUTBOX_TEST_ARTIFACTS"

// chromium returns the path of a Chromium or Chrome binary. Without one the test skips
// with a loud message, or fails under CI or OUTBOX_TEST_REQUIRE_DBS, like the database
// tests.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("\n*** CHROMIUM IS UNAVAILABLE: none of %v found\n*** Install it (apt-get install -y chromium); the browser test did NOT run.", candidates)
	if os.Getenv("CI") != "" || os.Getenv(testdb.EnvRequireDBs) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestBrowserReplay drives real headless Chromium through the page: it opens the URL a
// quickstart prints (the bare mount prefix with the token in the fragment), sees the
// seeded DEAD events with their hostile last_error shown as text, opens the details,
// replays one with the confirmation dialog, and sees it leave the list and get
// delivered. Screenshots are saved as test artifacts.
func TestBrowserReplay(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)

	// A poll interval short enough for the replayed event to be delivered on its own.
	fx := admintest.NewFixture(t, admintest.FixtureOptions{PollInterval: 50 * time.Millisecond})
	const hostile = `<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script> card declined`
	ids := fx.SeedDead(t,
		admintest.Seed{AggregateType: admintest.AggregatePayment, Type: admintest.TypePaymentTaken, AggregateID: "pay-7731",
			Reason: hostile, Headers: map[string]string{"trace_id": "4bf92f3577b34da6"},
			Payload: map[string]any{"order_id": "order-1042", "amount_cents": 1999, "currency": "EUR"}},
		admintest.Seed{AggregateID: "order-1043", Reason: "inventory service: 503 Service Unavailable"},
		admintest.Seed{Type: admintest.TypeOrderShipped, AggregateID: "order-1044", Reason: "carrier API timeout after 30s"},
	)
	victim := ids[0]
	fx.Fix()

	token := rand.Text()
	h, err := outboxadmin.New(fx.Outbox.Events(), outboxadmin.Options{
		Authorize: outboxadmin.BearerToken(token),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx := newBrowser(t, execPath)

	row := func(id string) chromedp.CSS { return chromedp.CSS(`#rows tr[data-id="` + id + `"]`) }
	cell := func(id, sel string) chromedp.CSS { return row(id) + chromedp.CSS(" "+sel) }
	// What a quickstart prints: the bare prefix (redirected to the slash) and the token
	// in the fragment, which the browser keeps across the redirect.
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/outbox/admin#token="+token),
		chromedp.WaitVisible(row(victim)),
		chromedp.WaitVisible(row(ids[2])),
	)
	if err != nil {
		t.Fatalf("load the page: %v", err)
	}
	href := run(ctx, t, chromedp.Location())
	if strings.Contains(href, "token") || !strings.HasSuffix(href, "/outbox/admin/") {
		t.Errorf("address bar after load = %s, want the prefix with a slash and no token", href)
	}
	shownError := run(ctx, t, chromedp.TextContent(cell(victim, "td.last-error")))
	injected := run(ctx, t, chromedp.Evaluate[int](`document.querySelectorAll('#rows script, #rows img').length`))
	if title := run(ctx, t, chromedp.Title()); shownError != hostile || injected != 0 || title == "pwned" {
		t.Errorf("last_error shown as %q (%d script/img elements, title %q); want the text itself", shownError, injected, title)
	}

	err = chromedp.Do(ctx,
		chromedp.Click(cell(victim, `button[data-action="details"]`)),
		chromedp.WaitVisible(chromedp.ID("detail")),
	)
	if err != nil {
		t.Fatalf("open the details: %v", err)
	}
	if payload := run(ctx, t, chromedp.TextContent(chromedp.ID("detail-payload"))); !strings.Contains(payload, `"order_id": "order-1042"`) {
		t.Errorf("details show payload %q", payload)
	}
	if shown := run(ctx, t, chromedp.TextContent(chromedp.ID("detail-error"))); shown != hostile {
		t.Errorf("details show last_error %q", shown)
	}
	screenshot(ctx, t, "admin-dead-events.png")

	err = chromedp.Do(ctx,
		chromedp.Click(cell(victim, `button[data-action="replay"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
	)
	if err != nil {
		t.Fatalf("ask to replay: %v", err)
	}
	screenshot(ctx, t, "admin-confirm-replay.png")
	if got := fx.Status(t, victim); got != outbox.StatusDead {
		t.Fatalf("status before confirming = %s, want DEAD", got)
	}

	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(row(victim)),
		chromedp.WaitVisible(chromedp.ID("toast")),
	)
	if err != nil {
		t.Fatalf("confirm the replay: %v", err)
	}
	fx.WaitStatus(t, outbox.StatusDone, victim)
	if n := fx.Deliveries(victim); n != 1 {
		t.Errorf("%d deliveries of the replayed event, want 1", n)
	}

	// Refresh: the event is gone from the list, the others stay, DONE counts it.
	const doneValue = `#overview li[data-status="DONE"] .value`
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("refresh")),
		chromedp.Poll[chromedp.Void](`document.querySelector('`+doneValue+`')?.textContent === "1"`,
			chromedp.WithPollingTimeout(60*time.Second)),
		chromedp.WaitVisible(row(ids[1])),
		chromedp.WaitNotPresent(row(victim)),
	)
	if err != nil {
		t.Fatalf("refresh after the replay: %v", err)
	}
	if remaining := run(ctx, t, chromedp.TextContent(chromedp.ID("match-count"))); !strings.HasPrefix(remaining, "2 dead events") {
		t.Errorf("after the replay the page says %q, want 2 dead events", remaining)
	}
	screenshot(ctx, t, "admin-after-replay.png")
	for _, id := range ids[1:] {
		if got := fx.Status(t, id); got != outbox.StatusDead {
			t.Errorf("untouched event %s is %s, want DEAD", id, got)
		}
	}

	// Delete one for good, from its details, with the confirmation: it leaves the list
	// and the table and is never delivered; cancelling first changes nothing.
	doomed := ids[2]
	err = chromedp.Do(ctx,
		chromedp.Click(cell(doomed, `button[data-action="details"]`)),
		chromedp.WaitVisible(chromedp.ID("detail-delete")),
		chromedp.Click(chromedp.ID("detail-delete")),
		chromedp.WaitVisible(chromedp.ID("confirm-cancel")),
		chromedp.Click(chromedp.ID("confirm-cancel")),
		chromedp.WaitNotVisible(chromedp.ID("confirm")),
	)
	if err != nil {
		t.Fatalf("ask to delete, then cancel: %v", err)
	}
	if got := fx.Status(t, doomed); got != outbox.StatusDead {
		t.Fatalf("status after a cancelled delete = %s, want DEAD", got)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("detail-delete")),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
	)
	if err != nil {
		t.Fatalf("ask to delete: %v", err)
	}
	if text := run(ctx, t, chromedp.TextContent(chromedp.ID("confirm-text"))); !strings.Contains(text, "never delivered") {
		t.Errorf("the delete confirmation says %q", text)
	}
	screenshot(ctx, t, "admin-confirm-delete.png")
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(row(doomed)),
		chromedp.Poll[chromedp.Void](`document.getElementById('match-count').textContent.startsWith("1 dead event")`,
			chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("confirm the delete: %v", err)
	}
	if _, err := fx.Outbox.Events().Get(context.Background(), doomed); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the deleted event is still in the table: %v", err)
	}
	if n := fx.Deliveries(doomed); n != 0 {
		t.Errorf("%d deliveries of the deleted event, want 0", n)
	}
	screenshot(ctx, t, "admin-after-delete.png")
}

// newBrowser starts headless Chromium and returns a context for it that ends after 4
// minutes; the test's cleanup closes the browser and waits for it. The deadline only
// stops a hung test: a walk that takes 3 s on an idle machine took more than 90 s in
// CI, beside the fault suite and the million-row index tests on the same two cores.
func newBrowser(t *testing.T, execPath string) context.Context {
	t.Helper()
	return newBrowserFor(t, execPath, 4*time.Minute)
}

// newBrowserFor is newBrowser with a context that ends after d.
func newBrowserFor(t *testing.T, execPath string, d time.Duration) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(execPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1100),
	)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	ctx, cancel := context.WithTimeout(browserCtx, d)
	// Cleanups run last in, first out: the deadline goes, then the browser is closed
	// gracefully, then cancelAlloc kills it if it still runs and waits for it and for
	// the allocator's goroutines, so goleak sees none of them.
	t.Cleanup(cancelAlloc)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(browserCtx, 10*time.Second)
		defer cancel()
		_ = chromedp.Cancel(ctx)
		cancelBrowser()
	})
	t.Cleanup(cancel)
	return ctx
}

// settled waits until no refresh of the page is in flight (#app loses aria-busy). A
// click is aimed at a node: an answer that lands in between redraws the table under
// it, and the click fails on a node that no longer exists.
func settled() chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`!document.getElementById('app').hasAttribute('aria-busy')`,
		chromedp.WithPollingTimeout(60*time.Second))
}

// run runs an action that returns a value, failing the test on error.
func run[T any](ctx context.Context, t *testing.T, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// screenshot saves a PNG of the window under OUTBOX_TEST_ARTIFACTS, or the test's temporary
// directory, and logs its path.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("artifacts dir: %v", err)
		return
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("save screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// TestBrowserStates drives the page through the states around its data: a loading state
// until the first answer, an error that says what to do when the server does not answer
// (and a Retry that recovers), the sign-in form with an explanation when the token is
// stale, and table cells that never wrap a word in the middle.
func TestBrowserStates(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	fx := admintest.NewFixture(t, admintest.FixtureOptions{})
	longID := "order-2026-11-25-customer-ada-lovelace-analytical-engine-0001"
	fx.SeedDead(t,
		admintest.Seed{AggregateID: longID, Reason: strings.Repeat("inventory service: 503 Service Unavailable; ", 8)},
		admintest.Seed{AggregateType: admintest.AggregatePayment, Type: admintest.TypePaymentTaken, AggregateID: "pay-1"},
	)

	token := rand.Text()
	h, err := outboxadmin.New(fx.Outbox.Events(), outboxadmin.Options{
		Authorize: outboxadmin.BearerToken(token),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	// hold keeps the API's answers back until it is closed; down makes the server drop
	// API requests without an answer, as a server that went away does.
	hold := make(chan struct{})
	var down atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			<-hold
			if down.Load() {
				panic(http.ErrAbortHandler)
			}
		}
		h.ServeHTTP(w, r)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	release := sync.OnceFunc(func() { close(hold) })
	defer release() // before srv.Close, which waits for the held handlers
	ctx := newBrowser(t, execPath)

	statusText := func() string { return run(ctx, t, chromedp.TextContent(chromedp.ID("status-text"))) }
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/outbox/admin/#token="+token),
		chromedp.WaitVisible(chromedp.ID("status")),
	)
	if err != nil {
		t.Fatalf("load the page: %v", err)
	}
	if got := statusText(); !strings.Contains(got, "Loading") {
		t.Errorf("before the first answer the page says %q, want a loading state", got)
	}
	screenshot(ctx, t, "admin-loading.png")
	release()
	err = chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#rows tr`)),
		chromedp.WaitNotVisible(chromedp.ID("status")),
	)
	if err != nil {
		t.Fatalf("the first answer: %v", err)
	}

	// No cell of the type and aggregate columns has its text on more than one line: the
	// line boxes of each text node all start at the same height.
	lines := run(ctx, t, chromedp.Evaluate[int](`Math.max(...[...document.querySelectorAll('#rows td:nth-child(3), #rows td:nth-child(4)')].map((td) => {
		const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
		let most = 0;
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			const r = document.createRange();
			r.selectNodeContents(n);
			most = Math.max(most, new Set([...r.getClientRects()].filter((x) => x.height > 0).map((x) => Math.round(x.top))).size);
		}
		return most;
	}))`))
	if lines != 1 {
		t.Errorf("a type or aggregate cell spans %d lines, want 1 (never wrapped mid-word)", lines)
	}
	if title := run(ctx, t, chromedp.Evaluate[string](`[...document.querySelectorAll('#rows td:nth-child(4) span')].map((s) => s.title).join('|')`)); !strings.Contains(title, longID) {
		t.Errorf("aggregate cells' tooltips %q, want the full aggregate ID", title)
	}
	screenshot(ctx, t, "admin-long-cells.png")

	down.Store(true)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("refresh")),
		chromedp.WaitVisible(chromedp.ID("status-retry")),
	)
	if err != nil {
		t.Fatalf("refresh with the server down: %v", err)
	}
	if got := statusText(); !strings.Contains(got, "Cannot reach") || !strings.Contains(got, "Retry") {
		t.Errorf("with the server down the page says %q, want that it cannot reach the API and to retry", got)
	}
	screenshot(ctx, t, "admin-server-down.png")
	down.Store(false)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("status-retry")),
		chromedp.WaitNotVisible(chromedp.ID("status")),
		chromedp.WaitVisible(chromedp.CSS(`#rows tr`)),
	)
	if err != nil {
		t.Fatalf("retry with the server back: %v", err)
	}

	// A stale token (the service restarted with a new one): the sign-in form says so. (A
	// query string makes it a new document: a change of fragment alone loads nothing.)
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/outbox/admin/?again#token=stale"),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	if err != nil {
		t.Fatalf("open with a stale token: %v", err)
	}
	if got := run(ctx, t, chromedp.TextContent(chromedp.ID("login-error"))); !strings.Contains(got, "not accepted") ||
		!strings.Contains(got, "latest start") {
		t.Errorf("with a stale token the sign-in form says %q, want why and what to do", got)
	}
	if visible := run(ctx, t, chromedp.Evaluate[bool](`!document.getElementById('status').hidden`)); visible {
		t.Error("the status panel stays visible over the sign-in form")
	}
}

// TestBrowserListener drives the page over fan-out deliveries: the table shows each dead
// event's listener, the per-listener chips count them, the listener filter narrows the
// list, and "Replay all matching" replays the dead deliveries of that listener only.
func TestBrowserListener(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	fx := admintest.NewFixture(t, admintest.FixtureOptions{PollInterval: 50 * time.Millisecond})
	fan := fx.SeedDeadFanOut(t, admintest.Seed{AggregateID: "order-7"}, admintest.Seed{AggregateID: "order-8", Reason: "smtp down"})
	billing, mail := fan[admintest.ListenerBilling], fan[admintest.ListenerMail]
	plain := fx.SeedDead(t, admintest.Seed{AggregateID: "order-9"})[0]
	fx.Fix()

	h, err := outboxadmin.New(fx.Outbox.Events(), outboxadmin.Options{Authorize: outboxadmin.AllowAll(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := newBrowser(t, execPath)

	row := func(id string) chromedp.CSS { return chromedp.CSS(`#rows tr[data-id="` + id + `"]`) }
	listenerCell := func(id string) string {
		return run(ctx, t, chromedp.TextContent(row(id)+chromedp.CSS(" td:nth-child(5)")))
	}
	chip := func(listener string) string {
		return `document.querySelector('#listeners [data-listener="` + listener + `"] .value')?.textContent`
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/outbox/admin/"),
		chromedp.WaitVisible(row(billing[0])),
		chromedp.WaitVisible(row(plain)),
		chromedp.Poll[chromedp.Void](chip(admintest.ListenerBilling)+` === "2" && `+chip(admintest.ListenerMail)+` === "2"`,
			chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("load the page: %v", err)
	}
	if head := run(ctx, t, chromedp.TextContent(chromedp.CSS(`#view-events thead th:nth-child(5)`))); head != "Listener" {
		t.Errorf("fifth column is %q, want Listener", head)
	}
	for id, want := range map[string]string{billing[0]: admintest.ListenerBilling, mail[1]: admintest.ListenerMail,
		plain: admintest.RouteListener(admintest.AggregateOrder, admintest.TypeOrderPlaced)} {
		if got := listenerCell(id); got != want {
			t.Errorf("listener cell of %s = %q, want %q", id, got, want)
		}
	}
	err = chromedp.Do(ctx,
		chromedp.Click(row(mail[1])+chromedp.CSS(` button[data-action="details"]`)),
		chromedp.WaitVisible(chromedp.ID("detail")),
	)
	if err != nil {
		t.Fatalf("open the details: %v", err)
	}
	if fields := run(ctx, t, chromedp.TextContent(chromedp.ID("detail-fields"))); !strings.Contains(fields, "Listener"+admintest.ListenerMail) {
		t.Errorf("details say %q, want the listener", fields)
	}
	screenshot(ctx, t, "admin-listeners.png")

	// Filter by listener: only mail's deliveries stay.
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("f-listener"), admintest.ListenerMail),
		chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)),
		chromedp.WaitNotPresent(row(billing[0])),
		chromedp.WaitNotPresent(row(plain)),
		chromedp.WaitVisible(row(mail[0])),
		chromedp.Poll[chromedp.Void](`document.getElementById('match-count').textContent.startsWith("2 dead events")`,
			chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("filter by listener: %v", err)
	}
	if n := run(ctx, t, chromedp.Evaluate[int](`document.querySelectorAll('#rows tr').length`)); n != 2 {
		t.Errorf("%d rows under the mail filter, want 2", n)
	}
	if text := run(ctx, t, chromedp.TextContent(chromedp.ID("match-count"))); !strings.Contains(text, `listener "mail"`) {
		t.Errorf("the count says %q, want the listener filter", text)
	}

	// Replay all matching: mail's deliveries only.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("replay-all")),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
	)
	if err != nil {
		t.Fatalf("ask to replay all matching: %v", err)
	}
	if text := run(ctx, t, chromedp.TextContent(chromedp.ID("confirm-text"))); !strings.Contains(text, `listener "mail"`) {
		t.Errorf("the confirmation says %q, want the listener filter", text)
	}
	screenshot(ctx, t, "admin-replay-listener.png")
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotPresent(row(mail[0])),
		chromedp.WaitVisible(chromedp.ID("toast")),
	)
	if err != nil {
		t.Fatalf("confirm the replay: %v", err)
	}
	fx.WaitStatus(t, outbox.StatusDone, mail...)
	for _, id := range mail {
		if n := fx.Deliveries(id); n != 1 {
			t.Errorf("mail delivery %s: %d deliveries, want 1", id, n)
		}
	}
	for _, id := range append(slices.Clone(billing), plain) {
		if got, n := fx.Status(t, id), fx.Deliveries(id); got != outbox.StatusDead || n != 0 {
			t.Errorf("%s after the replay of mail: %s, %d deliveries; want DEAD, 0", id, got, n)
		}
	}
	// Clear the filters: the others are still there.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("clear-filters")),
		chromedp.WaitVisible(row(billing[1])),
		chromedp.WaitVisible(row(plain)),
	)
	if err != nil {
		t.Fatalf("clear the filters: %v", err)
	}
	if v := run(ctx, t, chromedp.Evaluate[string](`document.getElementById('f-listener').value`)); v != "" {
		t.Errorf("listener filter after Clear = %q", v)
	}
}
