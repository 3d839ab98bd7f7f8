package outboxadmin_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	h, err := outboxadmin.New(fx.Outbox.Dead(), outboxadmin.Options{
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
	// cancelAlloc kills the browser if it is still running and waits for it and for the
	// allocator's goroutines, so goleak sees none of them.
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer func() {
		ctx, cancel := context.WithTimeout(browserCtx, 10*time.Second)
		defer cancel()
		_ = chromedp.Cancel(ctx) // closes the browser gracefully
		cancelBrowser()
	}()
	ctx, cancel := context.WithTimeout(browserCtx, 90*time.Second)
	defer cancel()

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
			chromedp.WithPollingTimeout(30*time.Second)),
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
