package outboxcmd_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
)

// hostile returns a value named name that holds the characters a terminal acts on: ESC
// with a colour sequence, BEL, CR, LF, TAB, DEL, two C1 controls (NEL, CSI), a
// bidirectional override and isolate. On SQLite it also holds a byte that is not UTF-8
// (0x9b, CSI to a terminal that reads 8-bit controls); the other databases refuse one.
func hostile(kind, name string) string {
	s := name + "\x1b[31m\a\r\n\t\x7f\u0085\u009b\u202e\u2066!"
	if kind == "sqlite" {
		s += "\x9b"
	}
	return s
}

// rawControl returns the first rune of out that reaches the terminal as it is though it
// must not (a line feed ends a line of the output and is allowed), and false when there
// is none.
func rawControl(out string) (string, bool) {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		if r == utf8.RuneError && n == 1 || r != '\n' && !strconv.IsPrint(r) {
			return fmt.Sprintf("%q at byte %d in %q", out[i:i+n], i, out[max(0, i-40):min(len(out), i+40)]), true
		}
		i += n
	}
	return "", false
}

// quoteTable returns the table's name quoted for tg's database.
func quoteTable(tg target, name string) string {
	q := `"`
	if tg.kind == "mysql" {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// exec runs query, written with ? placeholders, on tg's database and fails the test
// unless it changed want rows.
func (tg target) exec(t *testing.T, want int64, query string, args ...any) {
	t.Helper()
	if tg.kind == "postgres" {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
		}
	}
	res, err := tg.db.ExecContext(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != want {
		t.Fatalf("%s: %d rows changed, %v; want %d", query, n, err, want)
	}
}

// TestHostileRows stores rows whose every text field holds control characters, as a
// hostile writer of the table could, and checks that events list, events show, stats
// and audit print none of them as it is (nor their JSON), and show each field escaped.
func TestHostileRows(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		h := func(name string) string { return hostile(tg.kind, name) }
		seed(t, tg, time.Now().Add(-time.Hour).UTC().Truncate(time.Second), []seedEvent{
			{id: "h0", typ: "T", aggType: "Order", aggID: "1", status: outbox.StatusDead, lastError: "refused", listener: "mail"},
			{id: "a0", typ: "T", aggType: "Order", aggID: "2", status: outbox.StatusDead, lastError: "refused"},
			{id: "a1", typ: "T", aggType: "Order", aggID: "3", status: outbox.StatusDead, lastError: "refused"},
		})
		tg.ok(t, "discard", "a0")
		tg.ok(t, "discard", "a1")

		headers, err := json.Marshal(map[string]string{h("hk"): h("hv")})
		if err != nil {
			t.Fatal(err)
		}
		// Valid JSON: white space between its tokens, DEL, C1 and bidi runes in a string.
		payload := "{\n\t\"p\": \"pay\x7f\u0085\u009b\u202e\u2066!\",\r\n \"e\": \"\\u001b[31m\"}"
		id := hostile("postgres", "id") // UTF-8: the store finds no event by an ID that is not
		tg.exec(t, 1, "UPDATE "+quoteTable(tg, tg.table)+` SET event_id = ?, event_type = ?, aggregate_type = ?, aggregate_id = ?,
			tenant_id = ?, last_error = ?, locked_by = ?, order_key = ?, order_seq = 1, listener = ?, headers = ?, payload = ?
			WHERE event_id = ?`, id, h("type"), h("agg"), h("aid"), h("tenant"), h("error"), h("claim"), h("okey"), h("listener"),
			string(headers), payload, "h0")
		for i, target := range []string{"a0", "a1"} {
			tg.exec(t, 1, "UPDATE "+quoteTable(tg, tg.table+"_audit")+" SET audit_id = ?, actor = ?, action = ?, target = ? WHERE target = ?",
				h(fmt.Sprint("zz", i)), h("actor"), h("act"), h("target"), target)
		}

		check := func(what, out string, want ...string) {
			t.Helper()
			if c, ok := rawControl(out); ok {
				t.Errorf("%s prints %s:\n%s", what, c, out)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: no %s in\n%s", what, w, out)
				}
			}
		}
		q := strconv.Quote
		check("events list", tg.ok(t, "events", "list"),
			q(id), q(h("type")), q(h("agg"))+" "+q(h("aid")), q(h("listener")), q(h("error")))
		check("events show", tg.ok(t, "events", "show", id),
			q(id), q(h("type")), q(h("agg"))+" "+q(h("aid")), q(h("listener")), q(h("tenant")), q(h("error")),
			q(h("claim")), q(h("okey"))+" (#1)", `hk\u001b[31m\u0007\r\n\t\u007f\u0085\u009b\u202e\u2066!`,
			`"p":"pay\u007f\u0085\u009b\u202e\u2066!"`, `"e":"\u001b[31m"`)
		check("stats", tg.ok(t, "stats"), q(h("type")))
		auditOut := tg.ok(t, "audit", "-limit", "1")
		check("audit", auditOut, q(h("actor")), q(h("act")), q(h("target")), "-before $'zz")
		// The next page's command, with its escapes, runs in a shell that reads $'...'.
		_, hint, _ := strings.Cut(auditOut, "next page: outbox ")
		if !strings.Contains(hint, `-before $'zz1\x1b[31m\a\r\n\t\x7f\u0085\u009b\u202e\u2066!`) {
			t.Errorf("audit: next page %q", hint)
		}

		// The events that do not exist, named by a hostile ID: the message escapes it.
		_, errOut, code := tg.outboxCmd(t, "events", "show", h("missing"))
		check("events show of a missing event", errOut, `missing\x1b[31m\a\r\n\t\x7f\u0085\u009b\u202e\u2066!`)
		if code != 1 {
			t.Errorf("events show of a missing event: exit %d\n%s", code, errOut)
		}

		// JSON: encoding/json escapes the C0 controls; the command escapes the rest, and
		// the values decode as stored (a byte that is not UTF-8 decodes as U+FFFD, as
		// encoding/json makes it).
		utf := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		var shown outbox.Event
		out := tg.ok(t, "-json", "events", "show", id)
		check("events show -json", out, `\u202e`, `\u0085`, `\u007f`)
		decode(t, out, &shown)
		if shown.ID != utf(id) || shown.Type != utf(h("type")) || shown.LastError != utf(h("error")) || shown.Headers[utf(h("hk"))] != utf(h("hv")) {
			t.Errorf("events show -json: %+v", shown)
		}
		var page listJSON
		out = tg.ok(t, "-json", "events", "list")
		check("events list -json", out)
		decode(t, out, &page)
		if len(page.Events) != 1 || page.Events[0].TenantID != utf(h("tenant")) || page.Events[0].Listener != utf(h("listener")) {
			t.Errorf("events list -json: %+v", page.Events)
		}
		check("stats -json", tg.ok(t, "-json", "stats"))
		var trail auditJSON
		out = tg.ok(t, "-json", "audit")
		check("audit -json", out)
		decode(t, out, &trail)
		if len(trail.Entries) != 2 || trail.Entries[0].Actor != utf(h("actor")) || trail.Entries[1].Target != utf(h("target")) {
			t.Errorf("audit -json:\n%s", trail.entries())
		}
	})
}
