// Command echo-bun-postgres tells the outbox story on echo v4, bun and PostgreSQL.
//
// POST /orders inserts an order and two events, OrderPlaced and
// ConfirmationEmailRequested, in one bun transaction (outboxbun.RunInTx and
// outboxbun.Write, in app.go). Right after the commit both events are handed to the
// in-process dispatcher: OrderPlaced is "published" (logged), and the confirmation
// email is "sent", except to addresses at bounce.example, where it fails three times, a
// little later each time, and ends DEAD (the listeners are in ../internal/orderstory,
// which the two server examples share). The dead-event
// admin (outboxadmin, mounted on the echo router with outboxecho.Mount) lists it and
// replays it; it takes a bearer token generated at start and printed in the banner.
// /metrics serves the outbox metrics (outboxprom) from a private Prometheus registry.
// Ctrl-C (SIGINT) or SIGTERM stops the HTTP server, then drains the outbox, and the
// command exits with status 0.
//
// # Running it
//
// The command needs a PostgreSQL database, named by the environment variable
// POSTGRES_DSN (a URL or key=value DSN for the pgx driver). It creates its tables
// (outbox_event and orders) if they do not exist, so an empty database will do, and so
// will the same database on the next run. From the repository root, with a throwaway
// server on 127.0.0.1 (PostgreSQL 15 binaries, no Docker):
//
//	while IFS= read -r line; do export "$line"; done < <(scripts/testdb.sh start postgres)
//	POSTGRES_DSN=$OUTBOX_TEST_POSTGRES_DSN go run ./examples/echo-bun-postgres
//
// and, when you are done, scripts/testdb.sh stop "$OUTBOX_TEST_POSTGRES_DIR". The banner
// shows the URLs, the admin token and two curl commands: the first order's email is sent,
// the second one's is not.
//
// Flags: -addr sets the listen address (default 127.0.0.1:8080; 127.0.0.1:0 picks a free
// port, shown in the banner). The environment variable OUTBOX_ADMIN_TOKEN sets the admin
// token instead of a random one, for scripts.
//
// Logs go to stderr, the banner to stdout. When POSTGRES_DSN is not set, the command
// says so and exits with status 2.
package main
