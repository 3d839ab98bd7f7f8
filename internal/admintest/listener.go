package admintest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/storage"
)

// runListeners covers the listener filter of the read routes over DEAD fan-out
// deliveries (one row per listener of an event), DEAD events of a route's only listener,
// and a DEAD event that names no listener.
func runListeners(t *testing.T, mount Mount) {
	e := setup(t, mount, FixtureOptions{}, nil)
	placed := e.fx.SeedDead(t, Seed{}, Seed{})
	fan := e.fx.SeedDeadFanOut(t, Seed{AggregateID: "order-1"}, Seed{AggregateID: "order-2"}, Seed{AggregateID: "order-3", Reason: "smtp down"})
	billing, mail := fan[ListenerBilling], fan[ListenerMail]
	none := deadWithoutListener(t, e.fx)
	placedListener := RouteListener(AggregateOrder, TypeOrderPlaced)

	// Each delivery names its listener, in the list and in the details; the event that
	// names none has "listener": "".
	var page listBody
	res := e.c.get(t, "api/dead-events?limit="+strconv.Itoa(len(placed)+len(billing)+len(mail)+1))
	res.decode(t, http.StatusOK, &page)
	got := map[string]string{}
	for _, ev := range page.Events {
		if ev.Listener == nil {
			t.Fatalf("event %s has no listener field: %s", ev.ID, res.body)
		}
		got[ev.ID] = *ev.Listener
	}
	want := map[string]string{none: ""}
	for _, id := range placed {
		want[id] = placedListener
	}
	for name, ids := range fan {
		for _, id := range ids {
			want[id] = name
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listeners of the DEAD events = %v, want %v", got, want)
	}
	var ev eventBody
	e.c.get(t, "api/dead-events/"+mail[2]).decode(t, http.StatusOK, &ev)
	if ev.Listener == nil || *ev.Listener != ListenerMail || ev.EventType != TypeOrderCancelled || ev.AggregateID != "order-3" ||
		ev.LastError != "smtp down" || ev.Status != "DEAD" {
		t.Errorf("get of a mail delivery = %+v", ev)
	}

	lists := []struct {
		query string
		want  []string
	}{
		{"listener=" + ListenerBilling, billing},
		{"listener=" + ListenerMail + "&event_type=" + TypeOrderCancelled + "&aggregate_type=" + AggregateOrder, mail},
		{"listener=" + ListenerMail + "&event_type=" + TypeOrderPlaced, nil},
		{"listener=" + url.QueryEscape(placedListener), placed},
		{"listener=NoSuchListener", nil},
		{"listener=" + ListenerBilling + "&limit=2", billing[:2]},
	}
	for _, c := range lists {
		var page listBody
		e.c.get(t, "api/dead-events?"+c.query).decode(t, http.StatusOK, &page)
		var got []string
		for _, ev := range page.Events {
			got = append(got, ev.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("?%s: got %v, want %v", c.query, got, c.want)
		}
	}
	// The next page keeps the filter.
	var first, second listBody
	e.c.get(t, "api/dead-events?listener="+ListenerMail+"&limit=2").decode(t, http.StatusOK, &first)
	e.c.get(t, "api/dead-events?listener="+ListenerMail+"&limit=2&after="+url.QueryEscape(first.Next)).decode(t, http.StatusOK, &second)
	if len(first.Events) != 2 || first.Next == "" || len(second.Events) != 1 || second.Events[0].ID != mail[2] || second.Next != "" {
		t.Errorf("pages of mail deliveries: %+v then %+v", first, second)
	}

	counts := map[string]int64{
		"?listener=" + ListenerBilling:                                 int64(len(billing)),
		"?listener=" + ListenerMail + "&event_type=" + TypeOrderPlaced: 0,
		"?listener=" + url.QueryEscape(placedListener):                 int64(len(placed)),
		"?listener=": int64(len(placed) + len(billing) + len(mail) + 1),
	}
	for q, want := range counts {
		var c countBody
		e.c.get(t, "api/dead-events/count"+q).decode(t, http.StatusOK, &c)
		if c.Count != want || c.ByListener != nil || c.ByType != nil {
			t.Errorf("count%s = %+v, want %d", q, c, want)
		}
	}
	// Dead deliveries per listener, largest count first; the events that name no
	// listener count under "".
	var c countBody
	e.c.get(t, "api/dead-events/count?by=listener").decode(t, http.StatusOK, &c)
	wantBy := fmt.Sprint([]listenerCount{{ListenerBilling, 3}, {ListenerMail, 3}, {placedListener, 2}, {"", 1}})
	if c.Count != 9 || fmt.Sprint(c.ByListener) != wantBy || c.ByType != nil {
		t.Errorf("count?by=listener = %+v, want by_listener %s", c, wantBy)
	}
	c = countBody{}
	e.c.get(t, "api/dead-events/count?by=type,listener&listener="+ListenerMail).decode(t, http.StatusOK, &c)
	if c.Count != 3 || len(c.ByType) != 1 || c.ByType[0].EventType != TypeOrderCancelled || c.ByType[0].Count != 3 ||
		fmt.Sprint(c.ByListener) != fmt.Sprint([]listenerCount{{ListenerMail, 3}}) {
		t.Errorf("count?by=type,listener&listener=mail = %+v", c)
	}

	// A listener longer than a row holds, or not text, is a 400 that gives the limit.
	long := strings.Repeat("l", outbox.MaxListenerLen+1)
	for _, path := range []string{"api/dead-events?listener=" + long, "api/dead-events/count?listener=" + long} {
		got := e.c.get(t, path).wantError(t, http.StatusBadRequest, "invalid_parameter")
		if got.Param != "listener" || !strings.Contains(got.Message, strconv.Itoa(outbox.MaxListenerLen)) {
			t.Errorf("GET %.40s…: %+v, want a listener error with the limit", path, got)
		}
	}
	e.c.get(t, "api/dead-events?listener="+strings.Repeat("l", outbox.MaxListenerLen)).decode(t, http.StatusOK, &page)
	if len(page.Events) != 0 {
		t.Errorf("a listener of %d bytes matches %d events", outbox.MaxListenerLen, len(page.Events))
	}
	if got := e.c.get(t, "api/dead-events?listners=mail").wantError(t, http.StatusBadRequest, "invalid_parameter"); got.Param != "listners" ||
		!strings.Contains(got.Message, "listener") {
		t.Errorf("a misspelled listener: %+v, want an error naming the accepted parameters", got)
	}
}

// deadWithoutListener writes an event and makes it DEAD through the store without a
// listener, as a row that died before the listener column was recorded, and returns its
// ID.
func deadWithoutListener(t *testing.T, fx *Fixture) string {
	t.Helper()
	id := fx.Write(t, Seed{AvailableAt: time.Now().Add(time.Hour)})[0]
	n, err := fx.Outbox.Store().MarkDead(context.Background(), storage.MarkDeadParams{ID: id, DeadAt: time.Now(), Reason: "legacy"})
	if err != nil || n != 1 {
		t.Fatalf("mark %s dead: %d, %v", id, n, err)
	}
	return id
}
