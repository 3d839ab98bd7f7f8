package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	outboxadmin "github.com/outboxkit/outbox/admin"
)

// Names the command reads from its environment.
const (
	envDSN   = "MYSQL_DSN"
	envToken = "OUTBOX_ADMIN_TOKEN"
)

// shutdownTimeout bounds each step of the shutdown: the HTTP server's, then the outbox's.
const shutdownTimeout = 10 * time.Second

func main() {
	os.Exit(realMain(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// realMain runs the command and returns its exit status: 0 after a clean shutdown, 2 for
// bad flags or a missing or malformed DSN, 1 for any other error.
func realMain(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFlags):
		return 2 // the flag package has printed the error and the usage
	case err != nil:
		fmt.Fprintln(stderr, "sqlx-mysql:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // after the first signal, a second one ends the process at once

	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(ctx, cfg, stdout, logger); err != nil {
		logger.Error("sqlx-mysql failed", slog.String("error", err.Error()))
		return 1
	}
	return 0
}

// config is what the command reads from its flags and environment.
type config struct {
	addr  string        // listen address
	dsn   *mysql.Config // the parsed DSN, with parseTime=true
	token string        // admin bearer token
}

// errFlags reports flags the flag package rejected; it has printed why.
var errFlags = errors.New("bad flags")

// errMissingDSN explains how to get a database when MYSQL_DSN is not set.
var errMissingDSN = errors.New(envDSN + " is not set: set it to a MySQL or MariaDB DSN, for example\n" +
	"  " + envDSN + "='app:secret@tcp(127.0.0.1:3306)/outbox_example'\n" +
	"(parseTime=true and loc=UTC, which the outbox needs, are added when missing).\n" +
	"For a throwaway MariaDB server, run from the repository root:\n" +
	"  while IFS= read -r line; do export \"$line\"; done < <(scripts/testdb.sh start mysql)\n" +
	"  " + envDSN + "=$OUTBOX_TEST_MYSQL_DSN go run ./examples/sqlx-mysql")

// parseConfig reads the flags in args and the environment through getenv. It returns
// flag.ErrHelp for -h, errFlags for flags the flag package rejected, errMissingDSN when
// MYSQL_DSN is empty, and an error naming MYSQL_DSN when it cannot be parsed.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("sqlx-mysql", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s=<dsn> sqlx-mysql [flags]\n", envDSN)
		fs.PrintDefaults()
	}
	var cfg config
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen `address`; port 0 picks a free port")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, errFlags
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	dsn, err := parseDSN(getenv(envDSN))
	if err != nil {
		return cfg, err
	}
	cfg.dsn = dsn
	token, err := adminToken(getenv(envToken))
	if err != nil {
		return cfg, err
	}
	cfg.token = token
	return cfg, nil
}

// parseDSN parses a go-sql-driver/mysql DSN and turns on parseTime, which the outbox
// needs (see outbox.MySQLDSNParams). loc is left as it is: UTC unless the DSN says
// otherwise, in which case the outbox's connection check refuses it at start.
func parseDSN(dsn string) (*mysql.Config, error) {
	if dsn == "" {
		return nil, errMissingDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's message never repeats the DSN, so it cannot leak the password.
		return nil, fmt.Errorf("%s: %w", envDSN, err)
	}
	cfg.ParseTime = true
	return cfg, nil
}

// run starts everything, prints the banner to stdout and serves until ctx ends, then
// shuts down: the HTTP server first, then the outbox (draining it), then the database.
func run(ctx context.Context, cfg config, stdout io.Writer, logger *slog.Logger) error {
	db, err := openDB(ctx, cfg.dsn)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			logger.Warn("close database", slog.String("error", err.Error()))
			return
		}
		logger.Info("database closed")
	}()
	if err := migrate(ctx, db); err != nil {
		return err
	}

	app, err := newApp(db, logger)
	if err != nil {
		return err
	}
	if err := app.outbox.Start(ctx); err != nil {
		return err
	}
	defer func() {
		// Graceful: events already handed to the dispatcher are delivered first. ctx is
		// done by now; keep its values, not its cancellation.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := app.outbox.Stop(stopCtx); err != nil {
			logger.Warn("outbox stop cut short; undelivered events stay in the table", slog.String("error", err.Error()))
		}
	}()

	admin, err := outboxadmin.New(app.outbox.Events(), outboxadmin.Options{
		Authorize: outboxadmin.BearerToken(cfg.token),
		Logger:    logger,
	})
	if err != nil {
		return err
	}
	mux := app.routes()
	// The admin's routes are relative: strip the prefix. ServeMux redirects
	// /outbox/admin to /outbox/admin/.
	mux.Handle("/outbox/admin/", http.StripPrefix("/outbox/admin", admin))

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	printBanner(stdout, banner{
		title:    "outbox sqlx-mysql: net/http + sqlx on MySQL/MariaDB",
		database: maskDSN(cfg.dsn),
		base:     baseURL(ln.Addr()),
		token:    cfg.token,
	})
	logger.Info("listening", slog.String("addr", ln.Addr().String()))

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: stopping the HTTP server, then draining the outbox")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	<-served // http.ErrServerClosed
	logger.Info("http server stopped")
	return nil
}
