package outboxcmd_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// auditJSON is the JSON of audit.
type auditJSON struct {
	Entries []struct {
		ID     string    `json:"id"`
		At     time.Time `json:"at"`
		Actor  string    `json:"actor"`
		Action string    `json:"action"`
		Target string    `json:"target"`
		Count  int64     `json:"count"`
	} `json:"entries"`
	Next string `json:"next"`
}

// entries returns the entries of page as "actor action target count", one a line.
func (page auditJSON) entries() string {
	var b strings.Builder
	for _, e := range page.Entries {
		fmt.Fprintf(&b, "%s %s %s %d\n", e.Actor, e.Action, e.Target, e.Count)
	}
	return b.String()
}

func deadEvents(ids ...string) []seedEvent {
	var events []seedEvent
	for _, id := range ids {
		events = append(events, seedEvent{id: id, typ: "A", aggType: "Order", aggID: id, status: outbox.StatusDead, lastError: "refused"})
	}
	return events
}

// TestBulkChanges: replay, discard and delete of several IDs change those in the right
// state, 500 to a statement, and say how many of how many changed.
func TestBulkChanges(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		events := append(deadEvents("d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"),
			seedEvent{id: "n0", typ: "A", aggType: "Order", aggID: "n0"},
			seedEvent{id: "x0", typ: "A", aggType: "Order", aggID: "x0", status: outbox.StatusDone, doneAt: time.Now()})
		store := seed(t, tg, time.Now().Add(-time.Hour).UTC(), events)

		// An ID given twice counts once.
		out, errOut, code := tg.outboxCmd(t, "replay", "d0", "d1", "missing", "n0", "d0")
		if code != 1 || out != "replayed 2 of 4 events\n" || !strings.Contains(errOut, "2 of 4 events were not replayed: not found, or not DEAD") {
			t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
		}
		var res changeJSON
		out, errOut, code = tg.outboxCmd(t, "-json", "discard", "d2", "d3", "n0")
		decode(t, out, &res)
		if code != 0 || errOut != "" || res != (changeJSON{Action: "discard", Requested: 3, Changed: 3}) {
			t.Fatalf("discard: exit %d, %+v\n%s", code, res, errOut)
		}
		out, errOut, code = tg.outboxCmd(t, "-json", "delete", "d4", "d5", "x0")
		res = changeJSON{}
		decode(t, out, &res)
		if code != 1 || res.Requested != 3 || res.Changed != 2 || !strings.Contains(res.Error, "1 of 3 events were not deleted") ||
			!strings.Contains(errOut, "1 of 3 events were not deleted") {
			t.Fatalf("delete: exit %d, %+v\n%s", code, res, errOut)
		}
		for id, want := range map[string]outbox.Status{
			"d0": outbox.StatusNew, "d1": outbox.StatusNew, "d2": outbox.StatusDiscarded, "d3": outbox.StatusDiscarded,
			"n0": outbox.StatusDiscarded, "d4": -1, "d5": -1, "x0": outbox.StatusDone, "d6": outbox.StatusDead,
		} {
			if got := status(t, store, id); got != want {
				t.Errorf("%s: %v, want %v", id, got, want)
			}
		}

		// More IDs than one statement takes: a statement (and an audit entry) per 500.
		ids := []string{"d6"}
		for i := range 598 {
			ids = append(ids, fmt.Sprint("m", i))
		}
		ids = append(ids, "d7")
		if out, errOut, code := tg.outboxCmd(t, append([]string{"replay"}, ids...)...); code != 1 || out != "replayed 2 of 600 events\n" {
			t.Fatalf("replay of 600 IDs: exit %d\n%s%s", code, out, errOut)
		}
		var page auditJSON
		decode(t, tg.ok(t, "-json", "audit", "-limit", "2"), &page)
		if len(page.Entries) != 2 || page.Entries[0].Count != 1 || !strings.HasSuffix(page.Entries[0].Target, ",m597,d7") ||
			page.Entries[1].Count != 1 || !strings.HasPrefix(page.Entries[1].Target, "d6,m0,m1,") {
			t.Fatalf("audit of the 600 IDs:\n%s", page.entries())
		}
	})
}

// TestReplayAll: replay -all says how many DEAD events match and replays them only when
// -yes confirms it; standard input that is not a terminal never does.
func TestReplayAll(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		events := deadEvents("a0", "a1", "b0")
		events[1].listener = "mail"
		events[2].typ = "B"
		store := seed(t, tg, time.Now().Add(-time.Hour).UTC(), events)

		for _, o := range []runOpts{{}, {stdin: strings.NewReader("y\n")}} {
			out, errOut, code := tg.command(t, o, "replay", "-all", "-type", "A")
			if code != 2 || out != "" || !strings.Contains(errOut, "would replay 2 DEAD events (event_type=A); nothing replayed: pass -yes") ||
				strings.Contains(errOut, "usage:") {
				t.Fatalf("replay -all without -yes (stdin %T): exit %d\n%s%s", o.stdin, code, out, errOut)
			}
		}
		var res changeJSON
		out, _, code := tg.outboxCmd(t, "-json", "replay", "-all", "-type", "A", "-listener", "mail")
		decode(t, out, &res)
		if code != 2 || res.Action != "replay-all" || res.Requested != 1 || res.Changed != 0 || res.Filter == nil ||
			res.Filter.EventType != "A" || res.Filter.Listener != "mail" || !strings.Contains(res.Error, "-yes") {
			t.Fatalf("replay -all -json without -yes: exit %d, %+v", code, res)
		}
		for _, id := range []string{"a0", "a1", "b0"} {
			if got := status(t, store, id); got != outbox.StatusDead {
				t.Fatalf("%s is %v after replays that were not confirmed", id, got)
			}
		}

		out, errOut, code := tg.outboxCmd(t, "replay", "-all", "-type", "A", "-listener", "mail", "-yes")
		if code != 0 || out != "replayed 1 of 1 DEAD events\n" || !strings.Contains(errOut, "replaying 1 DEAD event (event_type=A listener=mail)") {
			t.Fatalf("replay -all -yes: exit %d\n%s%s", code, out, errOut)
		}
		res = changeJSON{}
		decode(t, tg.ok(t, "-json", "replay", "-all", "-yes"), &res)
		if res.Requested != 2 || res.Changed != 2 || res.Error != "" {
			t.Fatalf("replay -all -yes -json: %+v", res)
		}
		for _, id := range []string{"a0", "a1", "b0"} {
			if got := status(t, store, id); got != outbox.StatusNew {
				t.Errorf("%s is %v after replay -all", id, got)
			}
		}
		if out := tg.ok(t, "replay", "-all"); !strings.Contains(out, "no DEAD events match (all dead events)") {
			t.Fatalf("replay -all of nothing: %q", out)
		}
		var page auditJSON
		decode(t, tg.ok(t, "-json", "audit"), &page)
		if got := page.entries(); strings.Count(got, "\n") != 2 || !strings.Contains(got, " replay-all all dead events 2\n") ||
			!strings.Contains(got, " replay-all event_type=A listener=mail 1\n") {
			t.Fatalf("audit after replay -all:\n%s", got)
		}
	})
}

// TestAudit: every change is recorded with its actor (-actor, $OUTBOX_ACTOR, or the OS
// user at the host), and a later run of the command lists it, in pages.
func TestAudit(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		seed(t, tg, time.Now().Add(-time.Hour).UTC(), deadEvents("d0", "d1", "d2", "d3"))
		if out := tg.ok(t, "audit"); tableIDs(out) != "AT" {
			t.Fatalf("empty audit:\n%s", out)
		}
		bob := runOpts{env: []string{"OUTBOX_ACTOR=bob"}}
		if _, errOut, code := tg.command(t, bob, "-actor", "alice", "replay", "d0"); code != 0 {
			t.Fatal(errOut)
		}
		if _, errOut, code := tg.command(t, bob, "discard", "d1", "d2"); code != 0 {
			t.Fatal(errOut)
		}
		tg.ok(t, "delete", "d3")
		tg.outboxCmd(t, "replay", "d3") // fails: nothing changed, nothing recorded
		tg.ok(t, "-actor", "carol", "events", "list")

		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		host, err := os.Hostname()
		if err != nil {
			t.Fatal(err)
		}
		me := "cli:" + u.Username + "@" + host
		var page auditJSON
		decode(t, tg.ok(t, "-json", "audit"), &page)
		want := me + " delete d3 1\nbob discard d1,d2 2\nalice replay d0 1\n"
		if got := page.entries(); got != want || page.Next != "" {
			t.Fatalf("audit:\n%swant\n%s", got, want)
		}
		for _, e := range page.Entries {
			if time.Since(e.At) > time.Minute || e.ID == "" {
				t.Errorf("audit entry %+v", e)
			}
		}

		decode(t, tg.ok(t, "-json", "audit", "-limit", "2"), &page)
		if got := page.entries(); got != me+" delete d3 1\nbob discard d1,d2 2\n" || page.Next == "" {
			t.Fatalf("first page:\n%s(next %q)", got, page.Next)
		}
		decode(t, tg.ok(t, "-json", "audit", "-limit", "2", "-before", page.Next), &page)
		if got := page.entries(); got != "alice replay d0 1\n" || page.Next != "" {
			t.Fatalf("second page:\n%s(next %q)", got, page.Next)
		}

		out := tg.ok(t, "audit", "-limit", "2")
		_, hint, ok := strings.Cut(out, "next page: outbox ")
		lines := strings.Split(out, "\n")
		if f := strings.Fields(lines[1]); !ok || !hasFields(lines[0], "AT", "ACTOR", "ACTION", "EVENTS", "TARGET") ||
			len(f) != 5 || f[1] != me || f[2] != "delete" || f[3] != "1" || f[4] != "d3" {
			t.Fatalf("audit table:\n%s", out)
		}
		if out := tg.ok(t, strings.Fields(hint)...); !strings.Contains(out, "alice") || !strings.Contains(out, "replay") || strings.Contains(out, "bob") {
			t.Fatalf("outbox %s:\n%s", hint, out)
		}
	})
}

// TestOldSchema: changes (pause and resume too), paused and the audit trail need the
// admin migration; without it the command changes nothing and says to migrate. The check is the same on every database;
// SQLite's down migration makes the old table.
func TestOldSchema(t *testing.T) {
	t.Parallel()
	func(t *testing.T, tg target) {
		store := seed(t, tg, time.Now().Add(-time.Hour).UTC(), deadEvents("d0"))
		down, err := fs.ReadFile(outbox.Migrations(outbox.SQLite), "0005_admin.down.sql")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tg.db.ExecContext(t.Context(), string(down)); err != nil {
			t.Fatal(err)
		}
		_, latest, err := outbox.SchemaVersion(t.Context(), tg.db, tg.dialect, tg.table)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("is at schema version 4 of %d (changes and the audit trail need the latest): run outbox migrate", latest)
		for _, args := range [][]string{{"replay", "d0"}, {"replay", "-all", "-yes"}, {"discard", "d0", "d1"}, {"audit"},
			{"pause", "Order/A"}, {"resume", "Order/A"}, {"paused"}} {
			out, errOut, code := tg.outboxCmd(t, args...)
			if code != 1 || !strings.Contains(errOut, want) {
				t.Errorf("%v on schema version 4: exit %d\n%s%s", args, code, out, errOut)
			}
		}
		if got := status(t, store, "d0"); got != outbox.StatusDead {
			t.Fatalf("d0 is %v", got)
		}
		var paused int
		if err := tg.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM outbox_event_pause").Scan(&paused); err != nil || paused != 0 {
			t.Fatalf("%d subscriptions paused after pause on schema version 4 (%v), want 0", paused, err)
		}
		tg.ok(t, "migrate")
		tg.ok(t, "replay", "d0")
		if out := tg.ok(t, "audit"); !strings.Contains(out, "d0") {
			t.Fatalf("audit after migrate:\n%s", out)
		}
	}(t, sqliteTarget(t))
}
