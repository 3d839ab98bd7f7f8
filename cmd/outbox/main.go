// Command outbox operates an outbox table from a terminal, against PostgreSQL,
// MySQL/MariaDB or SQLite: apply and show the schema version, count events per status,
// list DEAD events, show one event, and replay, discard or delete events.
//
// Usage:
//
//	outbox [flags] migrate [-status]
//	outbox [flags] stats
//	outbox [flags] events list [-type T] [-aggregate A] [-listener L] [-limit N] [-after CURSOR]
//	outbox [flags] events show ID
//	outbox [flags] replay ID...
//	outbox [flags] discard ID...
//	outbox [flags] delete ID...
//
// Flags (before the command):
//
//	-db postgres|mysql|sqlite   the database kind (default $OUTBOX_DB)
//	-dsn DSN                    its DSN (default $OUTBOX_DSN): a postgres:// URL, a
//	                            go-sql-driver/mysql DSN (parseTime=true&loc=UTC are
//	                            added when missing), or an SQLite file path
//	-table NAME                 the outbox table, optionally schema-qualified
//	                            (default outbox_event)
//	-json                       print JSON instead of tables, for scripts
//	-timeout D                  bound on the whole command (default 30s)
//
// events list lists DEAD events, oldest first, with the admin page's filters and keyset
// cursor; -listener keeps the events of one listener: the subscription a fan-out
// delivery is for, or the listener whose delivery failed for good. The exit status is 0
// on success, 1 when an operation failed (a database that cannot be reached, an unknown
// event, an event in the wrong state) and 2 on bad usage.
// Every mutation is logged on standard error with the event ID.
package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	outbox "github.com/outboxkit/outbox/core"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command line the program cannot run: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// cli is one invocation.
type cli struct {
	out, errOut io.Writer
	json        bool
	db          *sql.DB
	dialect     outbox.Dialect
	table       string
	ob          *outbox.Outbox
}

// run runs the command line args and returns the exit status.
func run(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	fs.SetOutput(errOut)
	kind := fs.String("db", os.Getenv("OUTBOX_DB"), "database kind: postgres, mysql or sqlite (default $OUTBOX_DB)")
	dsn := fs.String("dsn", os.Getenv("OUTBOX_DSN"), "the database's DSN (default $OUTBOX_DSN)")
	table := fs.String("table", outbox.DefaultTable, "the outbox table, optionally schema-qualified")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the whole command")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: outbox [flags] migrate [-status] | stats | events list [filters] | events show ID | replay ID... | discard ID... | delete ID...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	c := &cli{out: out, errOut: errOut, json: *asJSON, table: *table}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	err := c.run(ctx, *kind, *dsn, fs.Args())
	if c.db != nil {
		c.db.Close()
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(errOut, "outbox:", err)
		fs.Usage()
		return 2
	default:
		fmt.Fprintln(errOut, "outbox:", err)
		return 1
	}
}

func (c *cli) run(ctx context.Context, kind, dsn string, args []string) error {
	if len(args) == 0 {
		return usagef("no command")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "migrate", "stats", "events", "replay", "discard", "delete":
	default:
		return usagef("unknown command %q", cmd)
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
	default:
		return c.mutate(ctx, cmd, rest)
	}
}

// open connects to the database and checks that it answers.
func (c *cli) open(ctx context.Context, kind, dsn string) error {
	if dsn == "" {
		return usagef("no DSN: set -dsn or OUTBOX_DSN")
	}
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
		return usagef("unknown database kind %q: want postgres, mysql or sqlite", kind)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return usagef("bad DSN: %v", err)
	}
	c.db = db
	if kind == "sqlite" {
		db.SetMaxOpenConns(1)
	}
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("cannot reach the %s database: %w", kind, err)
	}
	return nil
}

// outbox returns a WriterOnly outbox on the table (it starts nothing), for its
// dead-event manager.
func (c *cli) outbox() (*outbox.Outbox, error) {
	if c.ob != nil {
		return c.ob, nil
	}
	ob, err := outbox.New(c.db, outbox.Config{Mode: outbox.WriterOnly, Dialect: c.dialect, Table: c.table, PurgeInterval: -1})
	if err != nil {
		var ce *outbox.ConfigError
		if errors.As(err, &ce) {
			return nil, usagef("%v", err)
		}
		return nil, err
	}
	c.ob = ob
	return ob, nil
}

func (c *cli) migrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(c.errOut)
	status := fs.Bool("status", false, "show the schema version without changing anything")
	if err := fs.Parse(args); err != nil {
		return usagef("migrate: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("migrate takes no arguments")
	}
	if !*status {
		if err := outbox.MigrateTable(ctx, c.db, c.dialect, c.table); err != nil {
			return asUsage(err)
		}
	}
	have, latest, err := outbox.SchemaVersion(ctx, c.db, c.dialect, c.table)
	if err != nil {
		return asUsage(err)
	}
	if c.json {
		return c.writeJSON(map[string]any{"table": c.table, "version": have, "latest": latest, "up_to_date": have == latest})
	}
	state := "up to date"
	switch {
	case have == 0:
		state = "no table: run outbox migrate"
	case have < latest:
		state = "behind: run outbox migrate"
	}
	_, err = fmt.Fprintf(c.out, "%s: schema version %d of %d (%s)\n", c.table, have, latest, state)
	return err
}

// asUsage turns a *ConfigError (a bad table name) into a usage error.
func asUsage(err error) error {
	var ce *outbox.ConfigError
	if errors.As(err, &ce) {
		return usagef("%v", err)
	}
	return err
}

// statuses are the statuses stats prints, in order.
var statuses = []outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusWaiting, outbox.StatusDead,
	outbox.StatusDone, outbox.StatusFallback, outbox.StatusDiscarded}

func (c *cli) stats(ctx context.Context) error {
	ob, err := c.outbox()
	if err != nil {
		return err
	}
	st, err := ob.Dead().Stats(ctx)
	if err != nil {
		return err
	}
	if c.json {
		counts := map[string]int64{}
		for _, s := range statuses {
			counts[s.String()] = st.Counts[s]
		}
		body := map[string]any{"counts": counts, "blocked_keys": st.BlockedKeys}
		if !st.OldestPending.IsZero() {
			body["oldest_pending_at"] = st.OldestPending
		}
		if !st.OldestBlocked.IsZero() {
			body["oldest_blocked_at"] = st.OldestBlocked
		}
		return c.writeJSON(body)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STATUS\tEVENTS")
	for _, s := range statuses {
		fmt.Fprintf(w, "%s\t%d\n", s, st.Counts[s])
	}
	oldest := "-"
	if !st.OldestPending.IsZero() {
		oldest = st.OldestPending.UTC().Format(time.RFC3339) + " (" + time.Since(st.OldestPending).Round(time.Second).String() + " ago)"
	}
	fmt.Fprintf(w, "\noldest pending\t%s\nblocked keys\t%d\n", oldest, st.BlockedKeys)
	return w.Flush()
}

func (c *cli) events(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("events: want list or show")
	}
	switch args[0] {
	case "list":
		return c.list(ctx, args[1:])
	case "show":
		if len(args) != 2 || args[1] == "" {
			return usagef("events show takes one event ID")
		}
		return c.show(ctx, args[1])
	default:
		return usagef("events: unknown subcommand %q (want list or show)", args[0])
	}
}

func (c *cli) list(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("events list", flag.ContinueOnError)
	fs.SetOutput(c.errOut)
	var q outbox.DeadQuery
	fs.StringVar(&q.EventType, "type", "", "only events of this type")
	fs.StringVar(&q.AggregateType, "aggregate", "", "only events of this aggregate type")
	fs.StringVar(&q.Listener, "listener", "", "only events of this listener (a fan-out delivery's subscription, or the listener that failed for good)")
	fs.IntVar(&q.Limit, "limit", outbox.DefaultDeadPageSize, fmt.Sprintf("events per page (at most %d)", outbox.MaxDeadPageSize))
	after := fs.String("after", "", "the cursor a previous page printed")
	if err := fs.Parse(args); err != nil {
		return usagef("events list: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("events list takes flags only")
	}
	if q.Limit < 1 || q.Limit > outbox.MaxDeadPageSize {
		return usagef("events list: -limit must be between 1 and %d", outbox.MaxDeadPageSize)
	}
	if *after != "" {
		cur, err := decodeCursor(*after)
		if err != nil {
			return usagef("events list: -after %q is not a cursor a previous page printed", *after)
		}
		q.After = cur
	}
	ob, err := c.outbox()
	if err != nil {
		return err
	}
	page, err := ob.Dead().List(ctx, q)
	if err != nil {
		if errors.Is(err, outbox.ErrInvalidArgument) {
			return usagef("events list: %v", err)
		}
		return err
	}
	next := ""
	if !page.Next.IsZero() {
		next = encodeCursor(page.Next)
	}
	if c.json {
		return c.writeJSON(map[string]any{"events": page.Events, "next": next})
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tCREATED\tTYPE\tAGGREGATE\tLISTENER\tATTEMPTS\tLAST ERROR")
	for _, e := range page.Events {
		agg := e.AggregateType
		if e.AggregateID != "" {
			agg += " " + e.AggregateID
		}
		listener := e.Listener
		if listener == "" {
			listener = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.CreatedAt.UTC().Format(time.RFC3339), e.Type, agg, listener, e.Attempts, oneLine(e.LastError, 80))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if next != "" {
		_, err = fmt.Fprintf(c.out, "\nnext page: outbox events list -after %s\n", next)
	}
	return err
}

func (c *cli) show(ctx context.Context, id string) error {
	ob, err := c.outbox()
	if err != nil {
		return err
	}
	e, err := ob.Dead().Get(ctx, id)
	if err != nil {
		return err
	}
	if c.json {
		return c.writeJSON(e)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s\t%s\n", k, v)
		}
	}
	t := func(v time.Time) string {
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format(time.RFC3339Nano)
	}
	row("id", e.ID)
	row("status", e.Status.String())
	row("type", e.Type)
	row("aggregate", strings.TrimSpace(e.AggregateType+" "+e.AggregateID))
	row("listener", e.Listener)
	row("tenant", e.TenantID)
	row("attempts", fmt.Sprint(e.Attempts))
	row("last error", oneLine(e.LastError, 0))
	row("created", t(e.CreatedAt))
	row("available", t(e.AvailableAt))
	row("first failed attempt", t(e.FirstAttemptAt))
	row("finished", t(e.DoneAt))
	if e.OrderKey != "" {
		row("order key", fmt.Sprintf("%s (#%d)", e.OrderKey, e.OrderSeq))
	}
	row("claimed by", e.LockedBy)
	row("claim until", t(e.LockedUntil))
	if len(e.Headers) > 0 {
		h, _ := json.Marshal(e.Headers)
		row("headers", string(h))
	}
	row("payload", string(e.Payload))
	return w.Flush()
}

// mutate replays, discards or deletes each event of ids; it reports every one and
// fails when one of them failed.
func (c *cli) mutate(ctx context.Context, cmd string, ids []string) error {
	if len(ids) == 0 {
		return usagef("%s takes one or more event IDs", cmd)
	}
	for _, id := range ids {
		if id == "" {
			return usagef("%s: empty event ID", cmd)
		}
	}
	ob, err := c.outbox()
	if err != nil {
		return err
	}
	act := map[string]func(context.Context, string) error{
		"replay": ob.Dead().Replay, "discard": ob.Dead().Discard, "delete": ob.Dead().Delete,
	}[cmd]
	past := map[string]string{"replay": "replayed", "discard": "discarded", "delete": "deleted"}[cmd]
	type result struct {
		ID    string `json:"id"`
		OK    bool   `json:"ok"`
		Error string `json:"error,omitempty"`
	}
	var results []result
	failed := 0
	for _, id := range ids {
		r := result{ID: id, OK: true}
		if err := act(ctx, id); err != nil {
			r.OK, r.Error = false, err.Error()
			failed++
		} else {
			fmt.Fprintf(c.errOut, "outbox: %s event %s\n", past, id) // the audit line
		}
		results = append(results, r)
	}
	if c.json {
		if err := c.writeJSON(results); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			if r.OK {
				fmt.Fprintf(c.out, "%s %s\n", past, r.ID)
			} else {
				fmt.Fprintf(c.out, "FAILED %s: %s\n", r.ID, r.Error)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d of %d events failed", cmd, failed, len(ids))
	}
	return nil
}

// encodeCursor returns the -after value that continues after cur: the admin API's
// cursor form, base64url of "created_at|event_id".
func encodeCursor(cur outbox.Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cur.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + cur.ID))
}

// decodeCursor reverses encodeCursor.
func decodeCursor(s string) (outbox.Cursor, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return outbox.Cursor{}, err
	}
	ts, id, ok := strings.Cut(string(b), "|")
	if !ok || id == "" {
		return outbox.Cursor{}, errors.New("no event ID")
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return outbox.Cursor{}, err
	}
	return outbox.Cursor{CreatedAt: t.UTC(), ID: id}, nil
}

func (c *cli) writeJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// oneLine returns s on one line, cut to max runes when max > 0.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); max > 0 && len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
