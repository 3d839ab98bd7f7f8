package storetest

import (
	"fmt"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/outboxtype"
	"github.com/outboxkit/outbox/core/storage"
)

// testListEventsErrorFolding: EventFilter.ErrorContains ignores case by Unicode simple
// case folding on every store, whatever the database's collation ("É" matches "é", the
// Kelvin sign "k", "ẞ" "ß"), folds no accents ("e" is not "é") and expands no letters
// ("ss" is not "ß"); keyset pages hold only matches when most rows of the window look
// alike to a database that folds less or more.
func testListEventsErrorFolding(x *fixture) {
	x.events()
	reasons := map[string]string{
		"e-accent": "Échec : délai DÉPASSÉ",
		"e-ascii":  "timeout talking to the broker",
		"e-sharp":  "Straße gesperrt",
		"e-kelvin": "sensor at 300 \u212A",
		"e-dotted": "kayıt bulunamadı: İSTANBUL",
	}
	var events []outbox.Event
	for id := range reasons {
		events = append(events, ev(id, at(0)))
	}
	// 24 more: even ones fail with "Überlastung", odd ones with "uberlastung" (no
	// umlaut), which a LIKE on an ASCII-lowered text cannot tell apart.
	for i := range 24 {
		id := fmt.Sprintf("u-%02d", i)
		events = append(events, ev(id, at(time.Duration(i+1)*time.Second)))
		reasons[id] = fmt.Sprintf("uberlastung %d", i)
		if i%2 == 0 {
			reasons[id] = fmt.Sprintf("Überlastung %d", i)
		}
	}
	x.insert(events...)
	for id, reason := range reasons {
		x.markDead(id, reason)
	}
	f := func(text string) []outbox.Event {
		x.Helper()
		got, _ := x.listEvents(storage.ListEventsParams{Status: outbox.StatusDead, EventFilter: outbox.EventFilter{ErrorContains: text}})
		return got
	}
	x.wantIDs("É folds to é", f("échec"), "e-accent")
	x.wantIDs("é folds to É", f("délai dépassé"), "e-accent")
	x.wantIDs("no accent folding", f("echec"))
	x.wantIDs("no accent folding, upper case", f("DEPASSE"))
	x.wantIDs("ASCII", f("TIMEOUT"), "e-ascii")
	x.wantIDs("ẞ folds to ß", f("STRAẞE"), "e-sharp")
	x.wantIDs("ß is not ss", f("strasse"))
	x.wantIDs("the Kelvin sign folds to k", f("300 k"), "e-kelvin")
	x.wantIDs("İ is not I", f("istanbul"))
	x.wantIDs("ı is not i", f("kayit"))
	x.wantIDs("İ is İ", f("İstanbul"), "e-dotted")

	var want []string
	for i := 0; i < 24; i += 2 {
		want = append(want, fmt.Sprintf("u-%02d", i))
	}
	x.wantIDs("Ü is not u", f("ÜBERLASTUNG"), want...)
	if cs, ok := x.h.Store.(storage.EventCountStore); ok {
		for text, n := range map[string]int64{"ÜBERLASTUNG": 12, "überlastung 1": 5, "echec": 0, "Échec": 1} {
			c, err := cs.CountEvents(x.ctx, storage.CountEventsParams{Status: outbox.StatusDead, Groups: true, ScanLimit: 100,
				EventFilter: outbox.EventFilter{ErrorContains: text}})
			if err != nil || c.N != n || c.AtLeast || n > 0 && (len(c.Groups) != 1 || c.Groups[0].N != n) {
				x.Fatalf("CountEvents of DEAD events whose error contains %q = %+v, %v; want %d", text, c, err, n)
			}
		}
	}
	var got []outbox.Event
	p := storage.ListEventsParams{Status: outbox.StatusDead, EventFilter: outbox.EventFilter{ErrorContains: "überlastung"}, Limit: 5}
	for range 10 {
		page, stop := x.listEvents(p)
		if !stop.IsZero() {
			x.Fatalf("page after %+v stopped at %+v: the window holds every row", p.After, stop)
		}
		got = append(got, page...)
		if len(page) < p.Limit {
			break
		}
		p.After = outboxtype.ListCursor(page[len(page)-1], p.Status, p.EventFilter)
	}
	x.wantIDs("pages of five", got, want...)
}
