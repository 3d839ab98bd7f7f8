// Command sqlx-mysql tells the outbox story on net/http, sqlx and MySQL or MariaDB.
//
// POST /orders inserts an order and two events, OrderPlaced and
// ConfirmationEmailRequested, in one sqlx transaction (outboxsqlx.RunInTx and
// outboxsqlx.Write, in app.go). Right after the commit both events are handed to the
// in-process dispatcher: OrderPlaced is "published" (logged), and the confirmation
// email is "sent", except to addresses at bounce.example, where it fails three times, a
// little later each time, and ends DEAD (the listeners are in ../internal/orderstory,
// which the two server examples share). The dead-event
// admin (outboxadmin, mounted on the http.ServeMux with http.StripPrefix) lists it and
// replays it; it takes a bearer token generated at start and printed in the banner.
// /metrics serves the outbox metrics (outboxprom) from a private Prometheus registry.
// Ctrl-C (SIGINT) or SIGTERM stops the HTTP server, then drains the outbox, and the
// command exits with status 0.
//
// # Running it
//
// The command needs a MySQL 8 or MariaDB 10.6+ database, named by the environment
// variable MYSQL_DSN in the github.com/go-sql-driver/mysql format
// (user:password@tcp(host:port)/dbname). The outbox needs DATETIME values scanned as
// time.Time in UTC, the parameters of outbox.MySQLDSNParams: the command adds
// parseTime=true itself, and loc=UTC is the driver's default (a DSN with another loc is
// refused when the outbox starts). It creates its tables (outbox_event and orders) if
// they do not exist, so an empty database will do, and so will the same database on the
// next run. From the repository root, with a throwaway MariaDB on 127.0.0.1 (Debian
// package mariadb-server, no Docker):
//
//	while IFS= read -r line; do export "$line"; done < <(scripts/testdb.sh start mysql)
//	MYSQL_DSN=$OUTBOX_TEST_MYSQL_DSN go run ./examples/sqlx-mysql
//
// and, when you are done, scripts/testdb.sh stop "$OUTBOX_TEST_MYSQL_DIR". (The DSN holds
// shell metacharacters, hence the loop instead of eval.) The banner shows the URLs, the
// admin token and two curl commands: the first order's email is sent, the second one's
// is not.
//
// Flags: -addr sets the listen address (default 127.0.0.1:8080; 127.0.0.1:0 picks a free
// port, shown in the banner). The environment variable OUTBOX_ADMIN_TOKEN sets the admin
// token instead of a random one, for scripts.
//
// Logs go to stderr, the banner to stdout. When MYSQL_DSN is not set, the command says so
// and exits with status 2.
package main
