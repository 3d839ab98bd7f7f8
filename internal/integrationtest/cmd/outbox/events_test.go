package outboxcmd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// listJSON is the JSON of events list.
type listJSON struct {
	Events  []outbox.Event `json:"events"`
	Next    string         `json:"next"`
	Partial bool           `json:"partial"`
}

// listIDs runs events list -json with args and returns the IDs of the page, space-separated.
func (tg target) listIDs(t *testing.T, args ...string) (ids string, page listJSON) {
	t.Helper()
	decode(t, tg.ok(t, append([]string{"-json", "events", "list"}, args...)...), &page)
	var s []string
	for _, e := range page.Events {
		s = append(s, e.ID)
	}
	return strings.Join(s, " "), page
}

// tableIDs returns the first field of the rows of a table printed by the command.
func tableIDs(out string) string {
	var ids []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "ID" || f[0] == "next" {
			continue
		}
		ids = append(ids, f[0])
	}
	return strings.Join(ids, " ")
}

// TestListStatuses lists the events of every status with each filter, in both orders
// and in pages, and counts them per type with stats, on each database.
func TestListStatuses(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
		at := func(d time.Duration) string { return base.Add(d).Format(time.RFC3339) }
		seed(t, tg, base, []seedEvent{
			{id: "n0", typ: "A", aggType: "Order", aggID: "1"},
			{id: "n1", typ: "B", aggType: "Order", aggID: "2"},
			{id: "n2", typ: "A", aggType: "Cart", aggID: "7"},
			{id: "r0", typ: "A", aggType: "Order", aggID: "7", status: outbox.StatusRetry, lastError: "HTTP 503 from carrier"},
			{id: "r1", typ: "B", aggType: "Order", aggID: "3", status: outbox.StatusRetry, lastError: "Timeout after 5s"},
			// An ordered key whose first event is retrying: the second waits behind it.
			{id: "w0", typ: "C", aggType: "Order", aggID: "7", orderKey: "k", status: outbox.StatusRetry, lastError: "connection reset"},
			{id: "w1", typ: "C", aggType: "Order", aggID: "7", orderKey: "k"},
			{id: "d0", typ: "A", aggType: "Order", aggID: "7", status: outbox.StatusDead, lastError: "carrier refused"},
			{id: "f0", typ: "A", aggType: "Order", aggID: "8", status: outbox.StatusFallback, lastError: "gave up"},
			{id: "x0", typ: "B", aggType: "Order", aggID: "9", status: outbox.StatusDone, doneAt: base.Add(30 * time.Minute)},
			{id: "x1", typ: "B", aggType: "Order", aggID: "9", status: outbox.StatusDone, doneAt: base.Add(20 * time.Minute)},
		})
		// Lists by aggregate need the opt-in aggregate index: without it, the command
		// says how to create it, and migrate -aggregate-index does.
		if _, stderr, code := tg.outboxCmd(t, "events", "list", "-status", "new", "-aggregate-id", "7"); code == 0 ||
			!strings.Contains(stderr, "migrate -aggregate-index") {
			t.Fatalf("a list by aggregate without the index: exit %d, stderr %q; want an error naming migrate -aggregate-index", code, stderr)
		}
		if _, _, code := tg.outboxCmd(t, "migrate", "-status", "-aggregate-index"); code != 2 {
			t.Fatalf("migrate -status -aggregate-index: exit %d, want 2 (usage)", code)
		}
		tg.ok(t, "migrate", "-aggregate-index")

		for _, c := range []struct {
			args []string
			want string
		}{
			{nil, "d0"},
			{[]string{"-status", "new"}, "n0 n1 n2"},
			{[]string{"-status", "NEW", "-newest"}, "n2 n1 n0"},
			{[]string{"-status", "new", "-type", "A"}, "n0 n2"},
			{[]string{"-status", "new", "-aggregate", "Cart"}, "n2"},
			{[]string{"-status", "new", "-aggregate-id", "7"}, "n2"},
			{[]string{"-status", "new", "-aggregate", "Order", "-aggregate-id", "7"}, ""},
			{[]string{"-status", "new", "-from", at(time.Second)}, "n1 n2"},
			{[]string{"-status", "new", "-from", at(time.Second), "-to", at(2 * time.Second)}, "n1"},
			{[]string{"-status", "retry"}, "r0 r1 w0"},
			{[]string{"-status", "retry", "-error", "TIMEOUT"}, "r1"},
			{[]string{"-status", "retry", "-error", "503"}, "r0"},
			{[]string{"-status", "retry", "-aggregate-id", "7", "-newest"}, "w0 r0"},
			{[]string{"-status", "retry", "-listener", "mail"}, ""},
			{[]string{"-status", "waiting"}, "w1"},
			{[]string{"-status", "dead", "-error", "refused"}, "d0"},
			{[]string{"-status", "fallback"}, "f0"},
			{[]string{"-status", "discarded"}, ""},
			// DONE lists are in the order the events finished, and -from/-to bound that time.
			{[]string{"-status", "done"}, "x1 x0"},
			{[]string{"-status", "done", "-newest"}, "x0 x1"},
			{[]string{"-status", "done", "-from", at(25 * time.Minute)}, "x0"},
			{[]string{"-status", "done", "-to", at(25 * time.Minute)}, "x1"},
			// One aggregate's list is in the order its events were created.
			{[]string{"-status", "done", "-aggregate-id", "9"}, "x0 x1"},
			// One order key's list, of any status the key still holds.
			{[]string{"-status", "waiting", "-order-key", "k"}, "w1"},
			{[]string{"-status", "retry", "-order-key", "k"}, "w0"},
			{[]string{"-status", "retry", "-order-key", "other"}, ""},
			// The events that hold their key: w0 holds k (w1 waits); d0 is unordered.
			{[]string{"-status", "retry", "-blocking"}, "w0"},
			{[]string{"-status", "dead", "-blocking"}, ""},
		} {
			if got, page := tg.listIDs(t, c.args...); got != c.want || page.Next != "" || page.Partial {
				t.Errorf("events list %v: %q (next %q, partial %v), want %q", c.args, got, page.Next, page.Partial, c.want)
			}
		}

		// Pages: the JSON cursor, and the command the table prints for the next page.
		got, page := tg.listIDs(t, "-status", "retry", "-newest", "-limit", "2")
		if got != "w0 r1" || page.Next == "" {
			t.Fatalf("first page: %q, next %q", got, page.Next)
		}
		if got, page := tg.listIDs(t, "-status", "retry", "-newest", "-limit", "2", "-after", page.Next); got != "r0" || page.Next != "" {
			t.Fatalf("second page: %q, next %q", got, page.Next)
		}
		out := tg.ok(t, "events", "list", "-status", "retry", "-newest", "-limit", "2")
		_, hint, ok := strings.Cut(out, "next page: outbox ")
		if tableIDs(out) != "w0 r1" || !ok || strings.Contains(out, "HTTP 503") {
			t.Fatalf("first page in a table:\n%s", out)
		}
		next := tg.ok(t, strings.Fields(hint)...)
		if tableIDs(next) != "r0" || !strings.Contains(next, "HTTP 503 from carrier") || strings.Contains(next, "next page") {
			t.Fatalf("outbox %s:\n%s", hint, next)
		}

		// A list by order key: its table shows each event's place, and its pages go on
		// with a cursor of the key's order.
		out = tg.ok(t, "events", "list", "-status", "waiting", "-order-key", "k")
		if !strings.HasPrefix(out, "ID  SEQ  CREATED ") || !strings.Contains(out, "\nw1  2    "+at(6*time.Second)) {
			t.Errorf("events list -status waiting -order-key k:\n%s", out)
		}
		got, page = tg.listIDs(t, "-status", "retry", "-order-key", "k", "-limit", "1")
		if got != "w0" || page.Next != "" {
			t.Errorf("retry events of key k: %q, next %q", got, page.Next)
		}
		if _, page = tg.listIDs(t, "-status", "retry", "-limit", "1"); page.Next == "" {
			t.Fatal("retry events, a page of one: no next")
		}
		// A time cursor does not continue a list by order key.
		if out, errOut, code := tg.outboxCmd(t, "events", "list", "-status", "retry", "-order-key", "k", "-after", page.Next); code != 2 ||
			!strings.Contains(errOut, "not a cursor of a list by order key") {
			t.Errorf("a time cursor in a list by order key: exit %d\n%s%s", code, out, errOut)
		}

		// The table's time column is the list's.
		out = tg.ok(t, "events", "list", "-status", "done")
		if !strings.Contains(out, "FINISHED") || !strings.Contains(out, at(20*time.Minute)) || tableIDs(out) != "x1 x0" {
			t.Errorf("events list -status done:\n%s", out)
		}
		if out := tg.ok(t, "events", "list", "-status", "waiting"); !strings.Contains(out, "CREATED") || !strings.Contains(out, at(6*time.Second)) {
			t.Errorf("events list -status waiting:\n%s", out)
		}

		// stats: per status, per status and type, and the blocked key of w0 and w1.
		out = tg.ok(t, "stats")
		for _, f := range [][]string{
			{"NEW", "3"}, {"RETRY", "3"}, {"WAITING", "1"}, {"DEAD", "1"}, {"DONE", "2"}, {"FALLBACK", "1"}, {"DISCARDED", "0"},
			{"blocked", "keys", "1"}, {"STATUS", "TYPE", "EVENTS"},
			{"NEW", "A", "2"}, {"NEW", "B", "1"}, {"RETRY", "A", "1"}, {"RETRY", "B", "1"}, {"RETRY", "C", "1"},
			{"WAITING", "C", "1"}, {"DEAD", "A", "1"}, {"DONE", "B", "2"}, {"FALLBACK", "A", "1"},
		} {
			if !hasFields(out, f...) {
				t.Errorf("stats: no line %q\n%s", f, out)
			}
		}
		if strings.Contains(out, "oldest blocked  -") || strings.Contains(out, "oldest pending  -") {
			t.Errorf("stats: no oldest blocked or pending event\n%s", out)
		}
		var st struct {
			Counts map[string]int64
			ByType []struct {
				Status    string `json:"status"`
				EventType string `json:"event_type"`
				Count     int64  `json:"count"`
			} `json:"by_type"`
			BlockedKeys     int64      `json:"blocked_keys"`
			OldestBlockedAt *time.Time `json:"oldest_blocked_at"`
		}
		decode(t, tg.ok(t, "-json", "stats"), &st)
		var byType []string
		for _, c := range st.ByType {
			byType = append(byType, fmt.Sprint(c.Status, " ", c.EventType, " ", c.Count))
		}
		want := "NEW A 2, NEW B 1, RETRY A 1, RETRY B 1, RETRY C 1, WAITING C 1, DEAD A 1, DONE B 2, FALLBACK A 1"
		if got := strings.Join(byType, ", "); got != want || st.Counts["RETRY"] != 3 || st.BlockedKeys != 1 || st.OldestBlockedAt == nil {
			t.Errorf("stats -json: by_type %q, want %q; %+v", got, want, st)
		}
	})
}

// TestPartialPage: a filter outside the index stops a page after outbox.MaxScanRows rows;
// the command says so with the cursor that goes on, and the next page finds the event.
func TestPartialPage(t *testing.T) {
	t.Parallel()
	forEachDatabase(t, func(t *testing.T, tg target) {
		events := make([]seedEvent, 0, outbox.MaxScanRows+1)
		for i := range outbox.MaxScanRows {
			events = append(events, seedEvent{id: fmt.Sprintf("c%05d", i), typ: "Common", aggType: "Order", aggID: fmt.Sprint(i)})
		}
		events = append(events, seedEvent{id: "rare", typ: "Rare", aggType: "Order", aggID: "r"})
		seed(t, tg, time.Now().Add(-24*time.Hour).UTC().Truncate(time.Second), events)

		got, page := tg.listIDs(t, "-status", "new", "-type", "Rare", "-limit", "5")
		if got != "" || !page.Partial || page.Next == "" {
			t.Fatalf("first page: %q, %+v", got, page)
		}
		if got, page := tg.listIDs(t, "-status", "new", "-type", "Rare", "-limit", "5", "-after", page.Next); got != "rare" || page.Partial || page.Next != "" {
			t.Fatalf("second page: %q, %+v", got, page)
		}

		out, errOut, code := tg.outboxCmd(t, "events", "list", "-status", "new", "-type", "Rare", "-limit", "5")
		_, hint, ok := strings.Cut(errOut, "the search goes on with: outbox ")
		if code != 0 || tableIDs(out) != "" || !strings.Contains(errOut, "partial page: 0 of 5 events found") || !ok {
			t.Fatalf("partial page in a table: exit %d\n%s%s", code, out, errOut)
		}
		if out := tg.ok(t, strings.Fields(hint)...); tableIDs(out) != "rare" {
			t.Fatalf("outbox %s:\n%s", hint, out)
		}
	})
}
