// Package exampletest is the smoke test of the example apps in examples/: [Run] builds
// an example with go build, starts it as a real process, and checks the whole story it
// tells over HTTP, then stops it with SIGTERM.
//
// Import path: github.com/outboxkit/outbox/internal/exampletest (package exampletest).
// Only tests import it.
//
// # What an example must do
//
// Every example tells the same story, so that one harness checks them all. It accepts
// -addr (Run passes -addr 127.0.0.1:0) and, once its listener is bound, prints a banner
// on stdout. Run reads four lines of it; the URL lines have a two-space indent and
// their label padded to nine characters:
//
//	database  /tmp/outbox-quickstart-123456/quickstart.db
//	  orders   POST http://127.0.0.1:41234/orders
//	  admin    http://127.0.0.1:41234/outbox/admin/#token=0123456789abcdef0123456789abcdef
//	  metrics  http://127.0.0.1:41234/metrics
//
// The token is 32 hex characters unless OUTBOX_ADMIN_TOKEN sets it. The database line
// shows a path or a DSN with its password masked: Run fails when the password of a DSN
// in [Options.Env] shows up in the output. Then:
//
//   - POST <orders> with {"customer":"…","item":"…","quantity":1} and any Content-Type
//     answers 201 with {"order_id":"…","events":["<id>","<id>"]}: an OrderPlaced event
//     of aggregate Order <order_id> and a ConfirmationEmailRequested event of aggregate
//     type Order. Bad JSON or a missing field answers 400 with a JSON body and writes
//     nothing.
//   - The OrderPlaced listener logs "published OrderPlaced" with the event ID. The
//     ConfirmationEmailRequested listener logs "sent confirmation email" with the event
//     ID or, for an address ending in @bounce.example, logs one line with the event ID
//     and its error "mailbox unavailable: <address>" per attempt and fails. With
//     MaxAttempts 3 the event is DEAD after three such lines.
//   - The admin handler (package outboxadmin) is mounted at the admin URL with
//     outboxadmin.BearerToken(<token>); /metrics serves the outboxprom metrics and
//     stats collector, plus the Go and process collectors.
//   - SIGTERM stops the app gracefully: it logs lines containing "stopped" and exits
//     with status 0.
//
// The output must hold no "panic", no "DATA RACE" and no "level=ERROR" line other
// than the outbox's own `msg="event moved to dead"`, which the bounced email causes on
// purpose.
//
// # Databases
//
// [PostgresDatabase] and [MySQLDatabase] create a database of its own for one test on
// the servers of package testdb and return its DSN, for the examples that need a server.
package exampletest

import (
	"testing"
	"time"
)

// Options configures [Run].
type Options struct {
	// Pkg is the package to build, relative to the module root, such as
	// "./examples/quickstart".
	Pkg string
	// Env is extra environment for the example, such as "POSTGRES_DSN=…", added to the
	// test's own.
	Env []string
	// Args are extra flags; Run always passes -addr 127.0.0.1:0 first.
	Args []string
}

// Result is what [Run] saw of a run that passed.
type Result struct {
	// Database is the value of the banner's database line.
	Database string
	// Output is everything the process wrote, stdout and stderr interleaved.
	Output string
}

// Deadlines of [Run]. Every wait polls; none sleeps for a fixed time.
const (
	buildTimeout    = 4 * time.Minute  // go build; the first build of a cgo driver takes a minute
	bannerTimeout   = 20 * time.Second // start to banner
	deliveryTimeout = 30 * time.Second // an event to reach DONE or DEAD
	metricsTimeout  = 15 * time.Second // /metrics to catch up (the stats collector caches for 5 s)
	exitTimeout     = 30 * time.Second // SIGTERM to exit
	requestTimeout  = 10 * time.Second // one HTTP request
)

// Run builds opts.Pkg with go build (with -race when the test binary has the race
// detector), starts it as a real process and checks the story described in the package
// documentation: orders created over HTTP; their events delivered; the bounce.example
// order's ConfirmationEmailRequested event DEAD after three attempts, seen through the
// admin API with the token (and 401 without); replayed through the admin API, attempted
// three times more and DEAD again; bad requests answered 400 with nothing written;
// /metrics scraped and the outbox series found; SIGTERM answered with exit status 0
// within 30 seconds, and an output free of panics, data races and unexpected errors.
//
// On failure the process's whole output is in the test log. The process is killed when
// the test ends, whatever happened, and its TMPDIR is a temp dir of the test. The builds of one test process run one at a time, so
// that parallel tests of one example compile it once.
func Run(t *testing.T, opts Options) Result {
	t.Helper()
	bin := build(t, opts.Pkg)
	p := start(t, bin, opts)
	b := p.waitBanner(t)
	s := newStory(t, p, b)
	s.run()
	p.stop(t)
	checkOutput(t, p.output(), opts.Env)
	return Result{Database: b.database, Output: p.output()}
}
