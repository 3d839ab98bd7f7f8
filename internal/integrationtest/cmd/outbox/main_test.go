package outboxcmd_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
	"github.com/outboxkit/outbox/internal/testdb"
)

// binary is the outbox command built for the tests, which run it as a user would.
var binary string

// command is the package of the command under test.
const command = "github.com/outboxkit/outbox/cmd/outbox"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outbox-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Removed at the end (VerifyTestMain exits, so a deferred RemoveAll never ran and
	// each run left its directory and binary behind).
	testdb.AtExit(func() { os.RemoveAll(dir) })
	binary = filepath.Join(dir, "outbox")
	if out, err := exec.Command("go", "build", "-o", binary, command).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testdb.VerifyTestMain(m)
}

// target is one database the command runs against.
type target struct {
	kind, dsn, table string
	db               *sql.DB
	dialect          outbox.Dialect
}

// forEachDatabase runs fn against a fresh outbox table on SQLite, PostgreSQL and MariaDB.
func forEachDatabase(t *testing.T, fn func(t *testing.T, tg target)) {
	for _, kind := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			tg := target{kind: kind, table: outbox.DefaultTable}
			switch kind {
			case "sqlite":
				tg = sqliteTarget(t)
			case "postgres":
				tg.dsn, tg.dialect, tg.db = testdb.PostgresDSN(t), outbox.Postgres, testdb.NewPostgresDB(t)
				tg.table = testdb.IsolatedTable(t, tg.db, kind)
			case "mysql":
				tg.dsn, tg.dialect, tg.db = testdb.MySQLDSN(t), outbox.MySQL, testdb.NewMySQLDB(t)
				tg.table = testdb.IsolatedTable(t, tg.db, kind)
			}
			fn(t, tg)
		})
	}
}

// sqliteTarget returns a target on a new SQLite file.
func sqliteTarget(t *testing.T) target {
	tg := target{kind: "sqlite", table: outbox.DefaultTable, dsn: filepath.Join(t.TempDir(), "outbox.db"), dialect: outbox.SQLite}
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(tg.dsn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tg.db = db
	return tg
}

// outboxCmd runs the command with the target's flags and args, and returns its output
// and exit status.
func (tg target) outboxCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return tg.command(t, runOpts{}, args...)
}

// runOpts are the environment and standard input of one run of the command.
type runOpts struct {
	env   []string  // added to the test's environment, whose OUTBOX_* variables are cleared
	stdin io.Reader // nil reads the null device; an *os.File is the command's own
}

// command runs the command with the target's flags, o and args, and returns its output
// and exit status.
func (tg target) command(t *testing.T, o runOpts, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full := append([]string{"-db", tg.kind, "-dsn", tg.dsn, "-table", tg.table}, args...)
	cmd := exec.CommandContext(ctx, binary, full...)
	cmd.Env = append(append(os.Environ(), "OUTBOX_DB=", "OUTBOX_DSN=", "OUTBOX_ACTOR="), o.env...)
	cmd.Stdin = o.stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// ok runs the command and fails the test unless it exits 0.
func (tg target) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := tg.outboxCmd(t, args...)
	if code != 0 {
		t.Fatalf("outbox %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// TestCommand runs the binary through an operator's session on each database: migrate
// and its status, stats, listing and showing DEAD events, paging, replay, discard and
// delete, in tables and in JSON.
func TestCommand(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		if out := tg.ok(t, "migrate", "-status"); !strings.Contains(out, "schema version 0 of") || !strings.Contains(out, "no table") {
			t.Fatalf("migrate -status before migrating: %q", out)
		}
		if out := tg.ok(t, "migrate"); !strings.Contains(out, "up to date") {
			t.Fatalf("migrate: %q", out)
		}
		var mig struct {
			Version, Latest int
			UpToDate        bool `json:"up_to_date"`
		}
		decode(t, tg.ok(t, "-json", "migrate", "-status"), &mig)
		if !mig.UpToDate || mig.Version != mig.Latest || mig.Latest < 3 {
			t.Fatalf("migrate -status -json: %+v", mig)
		}

		// Three DEAD events, one pending, one DONE, written through the store; two of the
		// DEAD ones name the listener that failed (a fan-out delivery's subscription).
		store, err := outbox.NewSQLStore(tg.db, tg.dialect, outbox.SQLStoreConfig{Table: tg.table})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		created := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
		var events []outbox.Event
		for i, typ := range []string{"Shipped", "Shipped", "Billed", "Shipped", "Shipped"} {
			events = append(events, outbox.Event{ID: fmt.Sprint("e", i), Type: typ, AggregateType: "Order", AggregateID: fmt.Sprint(i),
				Payload: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`), CreatedAt: created.Add(time.Duration(i) * time.Second), AvailableAt: created})
		}
		if _, err := store.Insert(ctx, tg.db, storage.InsertParams{Events: events}); err != nil {
			t.Fatal(err)
		}
		for id, listener := range map[string]string{"e0": "mail", "e1": "billing", "e2": ""} {
			if _, err := store.MarkDead(ctx, storage.MarkDeadParams{ID: id, DeadAt: time.Now(), Reason: "carrier\nrefused " + id,
				CountAttempt: true, Listener: listener}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{"e4"}, DoneAt: time.Now()}); err != nil {
			t.Fatal(err)
		}

		if out := tg.ok(t, "stats"); !regexpLine(out, "DEAD", "3") || !regexpLine(out, "NEW", "1") || !regexpLine(out, "DONE", "1") {
			t.Fatalf("stats:\n%s", out)
		}
		var st struct{ Counts map[string]int64 }
		decode(t, tg.ok(t, "-json", "stats"), &st)
		if st.Counts["DEAD"] != 3 || st.Counts["NEW"] != 1 || st.Counts["DISCARDED"] != 0 {
			t.Fatalf("stats -json: %+v", st)
		}

		out := tg.ok(t, "events", "list")
		if !strings.Contains(out, "e0") || !strings.Contains(out, `"carrier\nrefused e0"`) || strings.Contains(out, "e3") {
			t.Fatalf("events list:\n%s", out)
		}
		listeners := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 5 && f[0] == "ID" {
				listeners[f[0]] = f[4] // ID, CREATED, TYPE, AGGREGATE, LISTENER
			} else if len(f) > 5 {
				listeners[f[0]] = f[5] // the aggregate is its type and ID
			}
		}
		if want := map[string]string{"ID": "LISTENER", "e0": "mail", "e1": "billing", "e2": "-"}; fmt.Sprint(listeners) != fmt.Sprint(want) {
			t.Fatalf("events list: listener column %v, want %v\n%s", listeners, want, out)
		}
		var page struct {
			Events []outbox.Event
			Next   string
		}
		decode(t, tg.ok(t, "-json", "events", "list", "-type", "Shipped", "-limit", "1"), &page)
		if len(page.Events) != 1 || page.Events[0].ID != "e0" || page.Next == "" {
			t.Fatalf("first page: %+v", page)
		}
		decode(t, tg.ok(t, "-json", "events", "list", "-type", "Shipped", "-limit", "1", "-after", page.Next), &page)
		if len(page.Events) != 1 || page.Events[0].ID != "e1" {
			t.Fatalf("second page: %+v", page)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"-listener", "mail"}, "e0 mail"},
			{[]string{"-listener", "billing", "-type", "Shipped", "-aggregate", "Order"}, "e1 billing"},
			{[]string{"-listener", "billing", "-type", "Billed"}, ""},
			{[]string{"-listener", "nobody"}, ""},
			{[]string{"-listener", ""}, "e0 mail e1 billing e2 "},
		} {
			page.Events, page.Next = nil, ""
			decode(t, tg.ok(t, append([]string{"-json", "events", "list"}, c.args...)...), &page)
			got := ""
			for _, e := range page.Events {
				got += e.ID + " " + e.Listener + " "
			}
			if strings.TrimSpace(got) != strings.TrimSpace(c.want) || page.Next != "" {
				t.Errorf("events list %v: %q (next %q), want %q", c.args, got, page.Next, c.want)
			}
		}
		if out := tg.ok(t, "events", "list", "-listener", "mail"); !strings.Contains(out, "e0") || strings.Contains(out, "e1") {
			t.Errorf("events list -listener mail:\n%s", out)
		}

		if out := tg.ok(t, "events", "show", "e2"); !regexpLine(out, "status", "DEAD") || !strings.Contains(strings.ReplaceAll(out, " ", ""), `{"n":2}`) ||
			!strings.Contains(out, "first failed attempt") || strings.Contains("\n"+out, "\nlistener") {
			t.Fatalf("events show:\n%s", out)
		}
		if out := tg.ok(t, "events", "show", "e0"); !regexpLine(out, "listener", "mail") {
			t.Fatalf("events show of a delivery that names its listener:\n%s", out)
		}
		var shown outbox.Event
		decode(t, tg.ok(t, "-json", "events", "show", "e1"), &shown)
		if shown.ID != "e1" || shown.Listener != "billing" {
			t.Fatalf("events show -json: %+v", shown)
		}

		if out := tg.ok(t, "replay", "e0"); !strings.Contains(out, "replayed e0") {
			t.Fatalf("replay: %q", out)
		}
		if out, errOut, code := tg.outboxCmd(t, "discard", "e1", "e4"); code != 1 || !strings.Contains(out, "discarded 1 of 2 events") ||
			!strings.Contains(errOut, "1 of 2 events were not discarded") {
			t.Fatalf("discard of a DEAD and a DONE event: exit %d\n%s%s", code, out, errOut)
		}
		tg.ok(t, "delete", "e2")
		for id, want := range map[string]outbox.Status{"e0": outbox.StatusNew, "e1": outbox.StatusDiscarded} {
			if e, err := store.Get(ctx, id); err != nil || e.Status != want {
				t.Errorf("%s: %+v, %v; want %s", id, e.Status, err, want)
			}
		}
		if _, err := store.Get(ctx, "e2"); err == nil {
			t.Error("e2 is still there after delete")
		}
		var res changeJSON
		out, _, code := tg.outboxCmd(t, "-json", "replay", "missing")
		decode(t, out, &res)
		if code != 1 || res.Action != "replay" || res.Requested != 1 || res.Changed != 0 || !strings.Contains(res.Error, "not found") {
			t.Fatalf("replay of a missing event: exit %d, %+v", code, res)
		}
		if out, errOut, code := tg.outboxCmd(t, "replay", "e4"); code != 1 || out != "" || !strings.Contains(errOut, "status DONE") ||
			!strings.Contains(errOut, "not dead") || strings.Contains(errOut, "outbox: outbox:") {
			t.Fatalf("replay of a DONE event: exit %d\n%s%s", code, out, errOut)
		}
	})
}

// changeJSON is the JSON of replay, discard and delete.
type changeJSON struct {
	Action    string      `json:"action"`
	Filter    *filterJSON `json:"filter"` // replay -all
	Requested int64       `json:"requested"`
	Changed   int64       `json:"changed"`
	Error     string      `json:"error"`
}

type filterJSON struct {
	EventType     string `json:"event_type"`
	AggregateType string `json:"aggregate_type"`
	Listener      string `json:"listener"`
}

// TestBadInput: usage errors exit 2 with a message (bad flags with the subcommand's
// usage), a database that cannot be reached or a table without the audit trail exits 1
// and says so.
func TestBadInput(t *testing.T) {
	t.Parallel()
	sqlite := target{kind: "sqlite", dsn: filepath.Join(t.TempDir(), "x.db"), table: outbox.DefaultTable}
	for _, tc := range []struct {
		name string
		tg   target
		args []string
		code int
		msg  string
	}{
		{"no command", sqlite, nil, 2, "no command"},
		{"unknown command", sqlite, []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown kind", target{kind: "oracle", dsn: "x", table: outbox.DefaultTable}, []string{"stats"}, 2, `unknown database kind "oracle"`},
		{"no DSN", target{kind: "sqlite", table: outbox.DefaultTable}, []string{"stats"}, 2, "no DSN"},
		{"bad table", target{kind: "sqlite", dsn: sqlite.dsn, table: "a.b.c"}, []string{"migrate"}, 2, "Table"},
		{"show without ID", sqlite, []string{"events", "show"}, 2, "one event ID"},
		{"replay without ID", sqlite, []string{"replay"}, 2, "one or more event IDs"},
		{"bad cursor", sqlite, []string{"events", "list", "-after", "nope!"}, 2, "not a cursor"},
		{"bad limit", sqlite, []string{"events", "list", "-limit", "0"}, 2, "-limit must be between 1 and 500"},
		{"long listener", sqlite, []string{"events", "list", "-listener", strings.Repeat("l", outbox.MaxListenerLen+1)}, 2, "Listener is 256 bytes"},
		{"unreachable postgres", target{kind: "postgres", dsn: "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
			table: outbox.DefaultTable}, []string{"stats"}, 1, "cannot reach the postgres database"},
		{"unreachable mysql", target{kind: "mysql", dsn: "nobody:x@tcp(127.0.0.1:1)/x?timeout=2s", table: outbox.DefaultTable},
			[]string{"stats"}, 1, "cannot reach the mysql database"},
		{"no table", sqlite, []string{"stats"}, 1, "outbox_event"},
		{"bad timeout", sqlite, []string{"-timeout", "0s", "stats"}, 2, "-timeout must be positive"},
		{"bad status", sqlite, []string{"events", "list", "-status", "pending"}, 2,
			`invalid value "pending" for flag -status: want new, retry, waiting, dead, done, fallback or discarded`},
		{"bad time", sqlite, []string{"events", "list", "-from", "yesterday"}, 2, `invalid value "yesterday" for flag -from: want an RFC 3339 time`},
		{"time out of range", sqlite, []string{"events", "list", "-to", "0999-12-31T23:59:59Z"}, 2, "want a time in the years 1000 to 9999"},
		{"cursor out of range", sqlite, []string{"events", "list", "-after", "MDUwMC0wMS0wMVQwMDowMDowMFp8ZTE"}, 2, "not a cursor"},
		{"from after to", sqlite, []string{"events", "list", "-from", "2026-01-02T00:00:00Z", "-to", "2026-01-01T00:00:00Z"}, 2, "is not before To"},
		{"unknown list flag", sqlite, []string{"events", "list", "-state", "dead"}, 2, "flag provided but not defined: -state"},
		{"list argument", sqlite, []string{"events", "list", "dead"}, 2, "takes flags only"},
		{"done by order key", sqlite, []string{"events", "list", "-status", "done", "-order-key", "k"}, 2, "OrderKey lists NEW, RETRY, DEAD and WAITING events, not DONE"},
		{"blocking waiting", sqlite, []string{"events", "list", "-status", "waiting", "-blocking"}, 2, "Blocking lists RETRY and DEAD events, not WAITING"},
		{"order key and aggregate", sqlite, []string{"events", "list", "-order-key", "k", "-aggregate-id", "a"}, 2, "OrderKey does not go with AggregateID"},
		{"long error search", sqlite, []string{"events", "list", "-error", strings.Repeat("e", outbox.MaxErrorSearchLen+1)}, 2, "ErrorContains is 257 bytes"},
		{"unknown replay flag", sqlite, []string{"replay", "-force", "e1"}, 2, "flag provided but not defined: -force"},
		{"unknown discard flag", sqlite, []string{"discard", "-all"}, 2, "flag provided but not defined: -all"},
		{"yes without all", sqlite, []string{"replay", "-yes", "e1"}, 2, "go with -all"},
		{"filter without all", sqlite, []string{"replay", "-type", "A", "e1"}, 2, "go with -all"},
		{"all with IDs", sqlite, []string{"replay", "-all", "e1"}, 2, "not event IDs"},
		{"long ID", sqlite, []string{"delete", strings.Repeat("i", outbox.MaxIDLen+1)}, 2, "longer than 64 bytes"},
		{"long filter", sqlite, []string{"replay", "-all", "-type", strings.Repeat("t", outbox.MaxTypeLen+1)}, 2, "EventType is"},
		{"change without table", sqlite, []string{"replay", "e1"}, 1, "there is no table outbox_event: run outbox migrate"},
		{"audit bad limit", sqlite, []string{"audit", "-limit", "501"}, 2, "-limit must be between 1 and 500"},
		{"audit argument", sqlite, []string{"audit", "x"}, 2, "audit takes flags only"},
		{"audit unknown flag", sqlite, []string{"audit", "-after", "x"}, 2, "flag provided but not defined: -after"},
		{"pause without name", sqlite, []string{"pause"}, 2, "pause takes the name of one subscription"},
		{"pause of two", sqlite, []string{"pause", "a", "-reason", "r", "b"}, 2, "pause takes one subscription, not 2"},
		{"resume with reason", sqlite, []string{"resume", "a", "-reason", "r"}, 2, "flag provided but not defined: -reason"},
		{"long subscription", sqlite, []string{"pause", strings.Repeat("l", outbox.MaxListenerLen+1)}, 2, "longer than 255 bytes"},
		{"long reason", sqlite, []string{"pause", "a", "-reason", strings.Repeat("r", outbox.MaxLastErrorLen+1)}, 2, "-reason is longer than 4000 bytes"},
		{"paused argument", sqlite, []string{"paused", "a"}, 2, "paused takes no arguments"},
		{"pause without table", sqlite, []string{"pause", "a"}, 1, "there is no table outbox_event: run outbox migrate"},
		{"paused without table", sqlite, []string{"paused"}, 1, "there is no table outbox_event: run outbox migrate"},
		{"unreachable audit", target{kind: "postgres", dsn: "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
			table: outbox.DefaultTable}, []string{"audit"}, 1, "cannot reach the postgres database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := tc.tg.outboxCmd(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) || strings.Count(errOut, tc.msg) != 1 || out != "" {
				t.Errorf("exit %d, stderr %q (stdout %q); want exit %d and %q once", code, errOut, out, tc.code, tc.msg)
			}
		})
	}
}

// seedEvent is an event seed writes: created at base plus its index in seconds.
type seedEvent struct {
	id, typ, aggType, aggID string
	status                  outbox.Status // NEW (WAITING behind an earlier event of orderKey), RETRY, DEAD, FALLBACK, DONE or DISCARDED
	lastError, listener     string
	orderKey                string
	doneAt                  time.Time // DONE
}

// seed migrates the target's table with the command and writes events through the store.
func seed(t *testing.T, tg target, base time.Time, events []seedEvent) storage.Store {
	t.Helper()
	tg.ok(t, "migrate")
	store, err := outbox.NewSQLStore(tg.db, tg.dialect, outbox.SQLStoreConfig{Table: tg.table})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var rows []outbox.Event
	for i, e := range events {
		rows = append(rows, outbox.Event{ID: e.id, Type: e.typ, AggregateType: e.aggType, AggregateID: e.aggID, OrderKey: e.orderKey,
			Payload: json.RawMessage(`{}`), CreatedAt: base.Add(time.Duration(i) * time.Second), AvailableAt: base})
	}
	for chunk := range slices.Chunk(rows, 1000) {
		if _, err := store.Insert(ctx, tg.db, storage.InsertParams{Events: chunk}); err != nil {
			t.Fatal(err)
		}
	}
	// MySQL/MariaDB inserts every ordered event WAITING: make each key's first one NEW.
	if _, err := store.(storage.OrderStore).Promote(ctx, storage.PromoteParams{DeadBlocks: true, Limit: len(events)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, e := range events {
		n, err := int64(1), error(nil)
		switch e.status {
		case outbox.StatusRetry:
			n, err = store.Reschedule(ctx, storage.RescheduleParams{ID: e.id, Status: outbox.StatusRetry, AvailableAt: now.Add(time.Hour),
				CountAttempt: true, LastError: e.lastError})
		case outbox.StatusDead, outbox.StatusFallback:
			n, err = store.MarkDead(ctx, storage.MarkDeadParams{ID: e.id, DeadAt: now, Reason: e.lastError, CountAttempt: true,
				Listener: e.listener, Fallback: e.status == outbox.StatusFallback})
		case outbox.StatusDone:
			n, err = store.MarkDone(ctx, storage.MarkDoneParams{IDs: []string{e.id}, DoneAt: e.doneAt})
		case outbox.StatusDiscarded:
			n, err = store.(storage.DiscardStore).Discard(ctx, []string{e.id}, now)
		}
		if err != nil || n != 1 {
			t.Fatalf("seed %s: %d rows changed, %v", e.id, n, err)
		}
	}
	return store
}

// status returns the status of event id, or -1 when it does not exist.
func status(t *testing.T, store storage.Store, id string) outbox.Status {
	t.Helper()
	e, err := store.Get(t.Context(), id)
	if errors.Is(err, outbox.ErrNotFound) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.Status
}

// hasFields reports whether out has a line whose fields are fields.
func hasFields(out string, fields ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		if slices.Equal(strings.Fields(l), fields) {
			return true
		}
	}
	return false
}

func decode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

// regexpLine reports whether out has a line whose fields are key then value.
func regexpLine(out, key, value string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key && f[len(f)-1] == value {
			return true
		}
	}
	return false
}
