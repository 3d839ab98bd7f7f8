// Command quickstart is a small order service that shows the outbox from end to end. A
// gin handler writes an order and two events in one gorm transaction on SQLite;
// listeners receive the events right after the commit; a listener that keeps failing
// retries until its event is DEAD; the admin page shows the dead event and replays it;
// Prometheus metrics count it all. uber-go/fx wires the parts together.
//
// Run it from the repository root. It needs no database server:
//
//	go run ./examples/quickstart
//
// It prints its URLs and two curl commands to try. Ctrl-C stops it: the server stops
// taking requests, the outbox delivers what it has queued, and the app exits.
//
// # What to read
//
//   - main.go (this file) wires the app with fx and handles start and stop.
//   - orders.go: POST /orders inserts the order with gorm and writes an OrderPlaced and a
//     ConfirmationEmailRequested event with outboxgorm.WriteAll, all inside
//     outboxgorm.Transaction. The events exist only if the order does, and they reach
//     the dispatcher right after the commit.
//   - listeners.go: the outbox's configuration and its two listeners. One "publishes"
//     OrderPlaced, the other "sends" the confirmation email. The mail server refuses
//     addresses at bounce.example, so that event fails 3 times, a second or two apart,
//     and ends DEAD.
//   - server.go: the routes (the orders API, the admin at /outbox/admin/ and /metrics)
//     and the HTTP server.
//   - database.go: the SQLite database, its tables, and gorm on top of it.
//
// The admin page lists dead events with their last error and replays them. Its token
// is new at every start and the banner prints the page's URL with it; set
// OUTBOX_ADMIN_TOKEN to choose your own. /metrics serves the outbox_* series of package
// outboxprom and the Go and process collectors.
//
// # Flags
//
//	-addr host:port  the address to listen on; 127.0.0.1:0 picks a free port
//	                 (default 127.0.0.1:8080)
//	-db path         the SQLite file, kept and reused by the next run (default: a new
//	                 file in a temporary directory, removed on exit)
//
// Everything is Go, SQLite included (github.com/glebarez/sqlite, gorm's SQLite dialect
// over modernc.org/sqlite's engine): no C compiler runs, and the first build on a fresh
// machine takes well under a minute (.ci/run measures it on every run).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/fx"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// config is what the command line and the environment decide.
type config struct {
	addr       string // where the HTTP server listens
	dbPath     string // the SQLite file
	adminToken string // the admin API's bearer token
}

// How long the app may take to start, and to stop (draining the outbox included).
const (
	startTimeout = 15 * time.Second
	stopTimeout  = 15 * time.Second
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on (127.0.0.1:0 picks a free port)")
	dbPath := flag.String("db", "", "SQLite file, kept and reused (default: a new file in a temporary directory, removed on exit)")
	flag.Parse()
	if err := run(*addr, *dbPath); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run starts the app, waits for Ctrl-C (SIGINT) or SIGTERM, and stops it.
func run(addr, dbPath string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)) // level INFO
	gin.SetMode(gin.ReleaseMode)                            // no debug output from gin

	if dbPath == "" {
		dir, err := os.MkdirTemp("", "outbox-quickstart-")
		if err != nil {
			return fmt.Errorf("create a temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "quickstart.db")
	}
	token, err := adminToken()
	if err != nil {
		return err
	}
	cfg := config{addr: addr, dbPath: dbPath, adminToken: token}

	var srv *httpServer
	app := fx.New(appOptions(cfg, logger), fx.Populate(&srv))

	// The first signal starts a graceful stop; stopSignals() then restores the default,
	// so that a second Ctrl-C kills the app at once.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	printBanner(os.Stdout, srv.URL(), cfg)

	<-ctx.Done()
	stopSignals()
	logger.Info("stopping: the server takes no more requests, the outbox delivers what it has queued")
	stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := app.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	logger.Info("quickstart stopped")
	return nil
}

// appOptions is the whole app for fx. fx calls each constructor once, when something
// needs what it returns, in the order of their dependencies. On start it runs the hooks
// they registered in that order (the outbox starts, then the HTTP server), and on stop
// in reverse: the server stops taking requests, the outbox drains, the database closes.
func appOptions(cfg config, logger *slog.Logger) fx.Option {
	return fx.Options(
		fx.NopLogger, // fx's own log of its wiring would bury the banner
		fx.Supply(cfg, logger),

		// The outbox: outboxfx.Module builds it from the *sql.DB and the outboxfx.Config,
		// registers the listeners provided with AsListener, and starts and stops it with
		// the app. It uses the *slog.Logger supplied above.
		outboxfx.Module,
		fx.Provide(newOutboxConfig),
		fx.Provide(
			outboxfx.AsListener(newOrderPlacedListener),
			outboxfx.AsListener(newConfirmationEmailListener),
		),

		// The admin handler outboxfx.Module provides (outboxfx.AdminHandler) takes its
		// options from the graph: here, the bearer token.
		fx.Supply(outboxadmin.Options{Authorize: outboxadmin.BearerToken(cfg.adminToken), Logger: logger}),

		fx.Provide(
			openDB,          // *sql.DB, with the outbox table
			openGorm,        // *gorm.DB over that *sql.DB, with the orders table
			newMetrics,      // the Prometheus registry and the outbox's metrics hook
			newOrderHandler, // POST /orders
			newRouter,       // gin routes
			newHTTPServer,   // listens on cfg.addr while the app runs
		),
		fx.Invoke(registerOutboxStats),
	)
}

// adminToken returns OUTBOX_ADMIN_TOKEN, or else a new random token of 32 hex
// characters.
func adminToken() (string, error) {
	if t := os.Getenv("OUTBOX_ADMIN_TOKEN"); t != "" {
		return t, nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate the admin token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// printBanner tells the user where everything is.
func printBanner(w io.Writer, baseURL string, cfg config) {
	fmt.Fprintf(w, `outbox quickstart: gin + gorm + fx on SQLite
database  %[2]s

  orders   POST %[1]s/orders
  admin    %[1]s/outbox/admin/#token=%[3]s
  metrics  %[1]s/metrics

Try it:
  curl -s -X POST %[1]s/orders -d '{"customer":"ada@example.com","item":"book","quantity":1}'
  curl -s -X POST %[1]s/orders -d '{"customer":"bob@bounce.example","item":"lamp","quantity":2}'

The second order's confirmation email fails 3 times and ends DEAD: open the admin URL to see it
and replay it. Ctrl-C stops the server and drains the outbox.
`, baseURL, cfg.dbPath, cfg.adminToken)
}
