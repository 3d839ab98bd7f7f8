// Command outbox operates an outbox table from a terminal, against PostgreSQL,
// MySQL/MariaDB or SQLite: apply and show the schema version, count events per status
// and event type, list the events of any status, show one event, replay, discard or
// delete events, pause and resume subscriptions, and list the audit trail of those
// changes.
//
// Usage:
//
//	outbox [flags] migrate [-status] [-aggregate-index]
//	outbox [flags] stats
//	outbox [flags] events list [-status S] [-type T] [-aggregate A] [-aggregate-id ID]
//	                           [-listener L] [-error TEXT] [-from TIME] [-to TIME]
//	                           [-newest] [-limit N] [-after CURSOR]
//	outbox [flags] events show ID
//	outbox [flags] replay ID...
//	outbox [flags] replay -all [-type T] [-aggregate A] [-listener L] [-yes]
//	outbox [flags] discard ID...
//	outbox [flags] delete ID...
//	outbox [flags] pause SUBSCRIPTION [-reason TEXT]
//	outbox [flags] resume SUBSCRIPTION
//	outbox [flags] paused
//	outbox [flags] audit [-limit N] [-before ID]
//
// Flags (before the command):
//
//	-db postgres|mysql|sqlite   the database kind (default $OUTBOX_DB)
//	-dsn DSN                    its DSN (default $OUTBOX_DSN): a postgres:// URL, a
//	                            go-sql-driver/mysql DSN (parseTime=true&loc=UTC are
//	                            added when missing), or an SQLite file path
//	-table NAME                 the outbox table, optionally schema-qualified
//	                            (default outbox_event)
//	-actor NAME                 who the audit trail names for the changes made
//	                            (default $OUTBOX_ACTOR, else cli:<OS user>@<hostname>)
//	-json                       print JSON instead of tables, for scripts
//	-timeout D                  bound on the command's database work (default 30s)
//
// events list lists the events of one status (-status new, retry, waiting, dead, done,
// fallback or discarded; default dead), oldest first or -newest first, with the admin
// page's filters and keyset cursor: -listener keeps the events of one listener (the
// subscription a fan-out delivery is for, or the listener whose delivery failed for
// good), -error the events whose last error contains the text (any case), -from
// (inclusive) and -to (exclusive) bound the list's time in RFC 3339. A DONE, FALLBACK or
// DISCARDED list is in the order the events finished, the others in the order they were
// created. A filter outside the list's index reads at most 10,000 rows a page: a page
// that stops there says so on standard error ("partial" in JSON) with the cursor that
// continues the search.
//
// replay, discard and delete of one ID say why the event was not changed (not found, or
// in the wrong state); of several IDs they act on those in the right state, 500 to a
// statement, and print how many of how many changed. replay -all replays every DEAD
// event that matches the filters: it prints how many that is and needs -yes, or a "y"
// typed at the terminal. pause holds a subscription's events pending on every process
// of the table until resume (the name need not be one this command knows: it runs no
// listener), and paused lists the paused subscriptions with since when, who and why.
// Every change is recorded in the audit trail (the table <table>_audit) with the actor;
// audit lists it, newest first. Changes, paused and audit need the table at the latest
// schema version (outbox migrate).
//
// The command never prints the DSN's password: the usage names $OUTBOX_DSN without its
// value, and a message shows a DSN redacted (postgres://app:xxxxx@db/app). What it
// prints of the database's text (types, IDs, errors, actors, headers, payloads) shows
// control characters, C1 controls and bidirectional overrides escaped ("a\n\x1b[31m").
//
// The exit status is 0 on success, 1 when an operation failed (a database that cannot
// be reached, an unknown event, an event in the wrong state, fewer events changed than
// named) and 2 on bad usage or a replay -all that was not confirmed.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a command line the program cannot run: exit status 2, with the usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// refusedError is a change the program did not make because nobody confirmed it: exit
// status 2, without the usage.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// cli is one invocation.
type cli struct {
	in          io.Reader
	out, errOut io.Writer
	json        bool
	timeout     time.Duration
	db          *sql.DB
	dialect     outbox.Dialect
	table       string
	ob          *outbox.Outbox
	usage       func()   // the usage of the subcommand being run; nil before its flags
	secrets     []string // the DSN's passwords, which no message prints
}

// run runs the command line args and returns the exit status.
func run(args []string, in io.Reader, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	// The defaults that come from the environment are not flag defaults, so that the
	// usage never prints them: $OUTBOX_DSN holds a password.
	kind := fs.String("db", "", "database kind: postgres, mysql or sqlite (default $OUTBOX_DB)")
	dsn := fs.String("dsn", "", "the database's DSN (default $OUTBOX_DSN)")
	table := fs.String("table", outbox.DefaultTable, "the outbox table, optionally schema-qualified")
	actor := fs.String("actor", "", "who the audit trail names for the changes (default $OUTBOX_ACTOR, else cli:<OS user>@<hostname>)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the command's database work")
	// Parse reports nothing itself: its errors may quote a value, which is printed
	// redacted below.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	usage := func() {
		fmt.Fprintln(errOut, "usage: outbox [flags] migrate [-status] [-aggregate-index] | stats | events list [filters] | events show ID |\n"+
			"       replay ID... | replay -all [filters] [-yes] | discard ID... | delete ID... |\n"+
			"       pause SUBSCRIPTION [-reason TEXT] | resume SUBSCRIPTION | paused | audit [-limit N] [-before ID]")
		fs.SetOutput(errOut)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	perr := fs.Parse(args)
	fromEnv(fs, "db", "OUTBOX_DB")
	fromEnv(fs, "dsn", "OUTBOX_DSN")
	fromEnv(fs, "actor", "OUTBOX_ACTOR")
	// Every message is cleared of the DSN's passwords, whichever DSN it quotes.
	_, secrets := redactSecrets(*dsn)
	if _, env := redactSecrets(os.Getenv("OUTBOX_DSN")); len(env) > 0 {
		secrets = append(secrets, env...)
	}
	if perr != nil {
		if errors.Is(perr, flag.ErrHelp) {
			usage()
			return 0
		}
		fmt.Fprintln(errOut, "outbox:", escapeControls(scrub(perr.Error(), secrets)))
		usage()
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintln(errOut, "outbox: -timeout must be positive")
		return 2
	}
	c := &cli{in: in, out: out, errOut: errOut, json: *asJSON, table: *table, timeout: *timeout, secrets: secrets}
	ctx := outbox.WithActor(context.Background(), cmp.Or(strings.TrimSpace(*actor), defaultActor()))
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.run(ctx, *kind, *dsn, fs.Args())
	if c.db != nil {
		c.db.Close()
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, errHelp) {
		c.usage()
		return 0
	}
	fmt.Fprintln(errOut, "outbox:", escapeControls(c.message(err)))
	var ue *usageError
	var re *refusedError
	switch {
	case errors.As(err, &ue):
		if c.usage != nil {
			c.usage()
		} else {
			usage()
		}
		return 2
	case errors.As(err, &re):
		return 2
	default:
		return 1
	}
}

// fromEnv sets flag name of fs to the value of environment variable env, unless the
// command line set it.
func fromEnv(fs *flag.FlagSet, name, env string) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set {
		fs.Set(name, os.Getenv(env))
	}
}

// message is err's text without the "outbox: " prefixes of the library's errors, which
// every message of the command has once.
func message(err error) string { return strings.ReplaceAll(err.Error(), "outbox: ", "") }

// message is err's text as message makes it, without the DSN's passwords (a driver's
// error may quote the DSN) and with every word that reads as a DSN redacted.
func (c *cli) message(err error) string { return scrub(message(err), c.secrets) }

// errHelp is returned for a subcommand's -h: its usage is printed, and the exit
// status is 0.
var errHelp = errors.New("help requested")

// flags returns the flag set of subcommand name, whose usage then goes with every usage
// error. A parse error is reported once, by run, not by the flag package.
func (c *cli) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.usage = func() {
		fmt.Fprintln(c.errOut, "usage: outbox [flags] "+synopsis)
		fs.SetOutput(c.errOut)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses the flags of a subcommand.
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	if err != nil {
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

// defaultActor names the person at the terminal for the audit trail:
// "cli:<OS user>@<hostname>".
func defaultActor() string {
	name := cmp.Or(os.Getenv("USER"), os.Getenv("USERNAME"))
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + cmp.Or(name, "unknown") + "@" + cmp.Or(host, "unknown")
}

func (c *cli) run(ctx context.Context, kind, dsn string, args []string) error {
	if len(args) == 0 {
		return usagef("no command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "migrate", "stats", "events", "replay", "discard", "delete", "pause", "resume", "paused", "audit":
	default:
		return usagef("unknown command %q", redactDSN(cmd)) // a DSN given without -dsn
	}
	if err := c.open(ctx, kind, dsn); err != nil {
		return err
	}
	switch cmd {
	case "migrate":
		return c.migrate(ctx, rest)
	case "stats":
		if len(rest) > 0 {
			return usagef("stats takes no arguments")
		}
		return c.stats(ctx)
	case "events":
		return c.events(ctx, rest)
	case "audit":
		return c.audit(ctx, rest)
	case "pause", "resume":
		return c.setPaused(ctx, cmd, rest)
	case "paused":
		return c.paused(ctx, rest)
	default:
		return c.change(ctx, cmd, rest)
	}
}

// open connects to the database and checks that it answers. Its messages show the
// DSN redacted.
func (c *cli) open(ctx context.Context, kind, dsn string) error {
	if dsn == "" {
		return usagef("no DSN: set -dsn or OUTBOX_DSN")
	}
	shown := redactDSN(dsn)
	var driver string
	switch kind {
	case "postgres":
		driver, c.dialect = "pgx", outbox.Postgres
	case "mysql":
		driver, c.dialect = "mysql", outbox.MySQL
		if !strings.Contains(dsn, "parseTime=") {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			dsn += sep + outbox.MySQLDSNParams
		}
	case "sqlite":
		driver, c.dialect = "sqlite", outbox.SQLite
		if !strings.HasPrefix(dsn, "file:") {
			dsn = outbox.SQLiteDSN(dsn)
		}
	case "":
		return usagef("no database kind: set -db or OUTBOX_DB (postgres, mysql or sqlite)")
	default:
		return usagef("unknown database kind %q: want postgres, mysql or sqlite", redactDSN(kind)) // the DSN in -db
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return usagef("bad DSN %s: %v", shown, err)
	}
	c.db = db
	if kind == "sqlite" {
		db.SetMaxOpenConns(1)
	}
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("cannot reach the %s database at %s: %w", kind, shown, err)
	}
	return nil
}

// dead returns the event manager of a WriterOnly outbox on the table (it starts
// nothing).
func (c *cli) dead() (*outbox.Events, error) {
	if c.ob != nil {
		return c.ob.Events(), nil
	}
	ob, err := outbox.New(c.db, outbox.Config{Mode: outbox.WriterOnly, Dialect: c.dialect, Table: c.table, PurgeInterval: -1})
	if err != nil {
		return nil, asUsage(err)
	}
	c.ob = ob
	return ob.Events(), nil
}

// asUsage turns a *ConfigError (a bad table name) or an error wrapping
// ErrInvalidArgument (a bad filter, cursor or ID) into a usage error.
func asUsage(err error) error {
	var ce *outbox.ConfigError
	if errors.As(err, &ce) || errors.Is(err, outbox.ErrInvalidArgument) {
		return usagef("%v", err)
	}
	return err
}

// writeJSON prints v as indented JSON. encoding/json escapes the C0 controls in
// strings but not DEL, the C1 controls or the bidirectional overrides: those are
// escaped too (\u007f, \u009b, \u202e), which keeps the same JSON values.
func (c *cli) writeJSON(v any) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := io.WriteString(c.out, escapeJSON(b.String(), true))
	return err
}

// orDash returns s, or "-" when it is empty, for a table cell.
func orDash(s string) string { return cmp.Or(s, "-") }

// utc formats t for a table, or "-" when it is zero.
func utc(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
