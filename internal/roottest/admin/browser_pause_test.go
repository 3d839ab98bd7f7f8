package outboxadmin_test

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/admintest"
)

// TestBrowserPause drives headless Chromium through a pause and a resume on PostgreSQL:
// the By type view lists each subscription with its state, including one paused by
// another process that this one does not run; Pause asks for confirmation and a reason
// (a cancel changes nothing), and the row then says since when, by whom and why while
// the subscription's new event stays pending; Resume, confirmed, delivers it; the
// audit view shows both changes with the actor.
func TestBrowserPause(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	fx := admintest.NewFixture(t, admintest.FixtureOptions{Backend: "postgres", PollInterval: 50 * time.Millisecond})
	fx.Fix()
	placed := admintest.RouteListener(admintest.AggregateOrder, admintest.TypeOrderPlaced)
	const elsewhere = "reports/Nightly"
	ctx := outbox.WithActor(context.Background(), "deploy-bot")
	if err := fx.Outbox.Events().Pause(ctx, elsewhere, "reports DB migration"); err != nil {
		t.Fatal(err)
	}

	const actor = "alice@example.com"
	h, err := outboxadmin.New(fx.Outbox.Events(), outboxadmin.Options{
		Authorize: outboxadmin.AllowAll(),
		Actor:     func(*http.Request) string { return actor },
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	bctx := newBrowser(t, execPath)

	row := func(name string) string { return `#sub-rows tr[data-listener="` + name + `"]` }
	state := func(name string) string {
		return run(bctx, t, chromedp.Evaluate[string](`document.querySelector('`+row(name)+` td.state')?.textContent ?? 'no row'`))
	}
	waitJS := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(60*time.Second))
	}
	err = chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/outbox/admin/"),
		chromedp.WaitVisible(chromedp.ID("tab-types")),
		chromedp.Click(chromedp.ID("tab-types")),
		chromedp.WaitVisible(chromedp.CSS(row(placed)+` button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(row(elsewhere))),
		// The page's first refresh and the tab's overlap: the later answer redraws
		// the rows.
		settled(),
	)
	if err != nil {
		t.Fatalf("open By type: %v", err)
	}
	if got := state(placed); got != "" {
		t.Errorf("state of %s before the pause: %q, want none", placed, got)
	}
	if got := state(elsewhere); !strings.Contains(got, "Paused since") || !strings.Contains(got, "by deploy-bot: reports DB migration") ||
		!strings.Contains(got, "not run by this process") {
		t.Errorf("state of a subscription paused for another process: %q", got)
	}
	if n := run(bctx, t, chromedp.Evaluate[int](`document.querySelectorAll('`+row(elsewhere)+` button[data-action="resume"]').length`)); n != 1 {
		t.Errorf("%d Resume buttons on the row of %s, want 1", n, elsewhere)
	}

	// Pause, then cancel: nothing changes.
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row(placed)+` button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-cancel")),
		chromedp.Click(chromedp.ID("confirm-cancel")),
		chromedp.WaitNotVisible(chromedp.ID("confirm")),
	)
	if err != nil {
		t.Fatalf("ask to pause, then cancel: %v", err)
	}
	if paused := pausedNames(t, fx); paused != elsewhere {
		t.Fatalf("paused after a cancelled pause: %q, want %s alone", paused, elsewhere)
	}

	// Pause with a reason.
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row(placed)+` button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-reason")),
		chromedp.SendKeys(chromedp.ID("confirm-reason"), "inventory service down"),
	)
	if err != nil {
		t.Fatalf("ask to pause: %v", err)
	}
	if text := run(bctx, t, chromedp.TextContent(chromedp.ID("confirm-text"))); !strings.Contains(text, "stay pending") || !strings.Contains(text, placed) {
		t.Errorf("the pause confirmation says %q", text)
	}
	screenshot(bctx, t, "admin-confirm-pause.png")
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(row(placed)+`[data-state="paused"] button[data-action="resume"]`)),
		chromedp.WaitVisible(chromedp.ID("toast")),
	)
	if err != nil {
		t.Fatalf("confirm the pause: %v", err)
	}
	if got := state(placed); !strings.Contains(got, "Paused since") || !strings.Contains(got, "by "+actor+": inventory service down") ||
		strings.Contains(got, "not run") {
		t.Errorf("state of %s after the pause: %q", placed, got)
	}
	if paused := pausedNames(t, fx); paused != placed+","+elsewhere {
		t.Fatalf("paused after the pause: %q", paused)
	}
	screenshot(bctx, t, "admin-paused.png")

	// Its new event stays pending; another subscription's is delivered.
	held := fx.Write(t, admintest.Seed{})[0]
	other := fx.Write(t, admintest.Seed{Type: admintest.TypeOrderShipped})[0]
	fx.WaitStatus(t, outbox.StatusDone, other)
	fx.Poll(t)
	if got := fx.Status(t, held); got != outbox.StatusNew || fx.Deliveries(held) != 0 {
		t.Fatalf("an event of the paused subscription: %s, %d deliveries; want NEW, 0", got, fx.Deliveries(held))
	}

	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row(placed)+` button[data-action="resume"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-ok")),
	)
	if err != nil {
		t.Fatalf("ask to resume: %v", err)
	}
	if visible := run(bctx, t, chromedp.Evaluate[bool](`!document.getElementById('confirm-reason-label').hidden`)); visible {
		t.Error("the resume confirmation asks for a reason")
	}
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(row(placed)+`[data-state="active"] button[data-action="pause"]`)),
	)
	if err != nil {
		t.Fatalf("confirm the resume: %v", err)
	}
	fx.WaitStatus(t, outbox.StatusDone, held)
	if n := fx.Deliveries(held); n != 1 {
		t.Errorf("%d deliveries of the held event after the resume, want 1", n)
	}

	// The audit view: the resume, then the pause, by the page's actor; the other
	// process's pause by its own.
	entry := func(i int) string {
		return `document.querySelectorAll('#audit-rows tr')[` + strconv.Itoa(i) + `]?.textContent ?? ''`
	}
	err = chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("tab-audit")),
		waitJS(`document.querySelectorAll('#audit-rows tr').length === 3`),
	)
	if err != nil {
		t.Fatalf("open the audit view: %v", err)
	}
	for i, want := range []string{actor + "resume1" + placed, actor + "pause1" + placed, "deploy-bot" + "pause1" + elsewhere} {
		got := run(bctx, t, chromedp.Evaluate[string](entry(i)))
		if _, rest, _ := strings.Cut(got, ")"); rest != want { // after "2026-… (3s ago)"
			t.Errorf("audit row %d reads %q, want it to end with %q", i, got, want)
		}
	}
	if n := run(bctx, t, chromedp.Evaluate[int](`document.querySelectorAll('#audit-rows td.action-pause').length`)); n != 2 {
		t.Errorf("%d pause cells in the audit view, want 2", n)
	}
	screenshot(bctx, t, "admin-audit-pause.png")
}

// pausedNames returns the table's paused subscriptions, comma-separated, by name.
func pausedNames(t *testing.T, fx *admintest.Fixture) string {
	t.Helper()
	list, err := fx.Outbox.Events().Paused(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Listener)
	}
	return strings.Join(names, ",")
}

// TestBrowserOverlappingRefreshes: an answer older than one the page already drew is
// dropped. The page's first load asks for the subscriptions, and that answer (taken
// while the subscription was active) is held back; the subscription is paused, a
// second refresh draws it paused, and then the held answer reaches the page: the row
// must not say active again. Before the page numbered its overview requests, a slow
// first answer could undo a pause on screen.
func TestBrowserOverlappingRefreshes(t *testing.T) {
	t.Parallel()
	execPath := chromium(t)
	fx := admintest.NewFixture(t, admintest.FixtureOptions{Backend: "postgres", PollInterval: 50 * time.Millisecond})
	fx.Fix()
	placed := admintest.RouteListener(admintest.AggregateOrder, admintest.TypeOrderPlaced)
	h, err := outboxadmin.New(fx.Outbox.Events(), outboxadmin.Options{
		Authorize: outboxadmin.AllowAll(),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The first GET of api/subscriptions is answered at once into a recorder, and the
	// answer is written to the page when release closes.
	var first atomic.Bool
	taken, release, written := make(chan struct{}), make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/subscriptions" || !first.CompareAndSwap(false, true) {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		close(taken)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		close(written)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var releaseOnce sync.Once
	releaseHeld := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseHeld() // before srv.Close, which waits for the held request
	bctx := newBrowser(t, execPath)

	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/outbox/admin/")); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	select {
	case <-taken:
	case <-bctx.Done():
		t.Fatal("the page never asked for the subscriptions")
	}
	if err := fx.Outbox.Events().Pause(context.Background(), placed, "held answer"); err != nil {
		t.Fatal(err)
	}
	row := `#sub-rows tr[data-listener="` + placed + `"]`
	// The page is still loading (the held answer), so By type is opened from script: a
	// second refresh, whose answer comes at once.
	err = chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById('tab-types').click()`),
		chromedp.WaitVisible(chromedp.CSS(row+`[data-state="paused"]`)),
		settled(),
		// Every redraw of the table from now on records the row's state.
		chromedp.Evaluate[chromedp.Void](`window.drawn = [];
			new MutationObserver(() => {
				const r = document.querySelector('`+row+`');
				window.drawn.push(r ? r.dataset.state : 'none');
			}).observe(document.getElementById('sub-rows'), { childList: true })`),
	)
	if err != nil {
		t.Fatalf("open By type while the first answer is held: %v", err)
	}
	releaseHeld()
	select {
	case <-written:
	case <-bctx.Done():
		t.Fatal("the held answer was never written")
	}
	// A third refresh, asked after the held answer was written, so that the page has
	// handled that answer before it draws this one. The Refresh button sits in the
	// lists' filter bar, hidden on By type, so it is pressed from script.
	err = chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById('refresh').click()`),
		chromedp.Poll[chromedp.Void](`window.drawn.length > 0 && !document.getElementById('app').hasAttribute('aria-busy')`,
			chromedp.WithPollingTimeout(60*time.Second)),
	)
	if err != nil {
		t.Fatalf("refresh after the held answer: %v", err)
	}
	drawn := run(bctx, t, chromedp.Evaluate[[]string](`window.drawn`))
	if slices.Contains(drawn, "active") || drawn[len(drawn)-1] != "paused" {
		t.Errorf("the row's states drawn after the held answer was released: %q, want paused alone", drawn)
	}
}
