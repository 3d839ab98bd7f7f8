package exampletest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The event types and the failure every example produces.
const (
	orderPlaced       = "OrderPlaced"
	confirmationEmail = "ConfirmationEmailRequested"
	bounceAddress     = "bob@bounce.example"
	bounceError       = "mailbox unavailable: " + bounceAddress
	maxAttempts       = 3
)

// story checks an example over HTTP.
type story struct {
	t    *testing.T
	p    *process
	b    banner
	http *http.Client
}

// newStory returns a story with its own HTTP client, whose idle connections are closed
// when the test ends, so that they never look like leaked goroutines.
func newStory(t *testing.T, p *process, b banner) *story {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &story{t: t, p: p, b: b, http: &http.Client{
		Transport:     tr,
		Timeout:       requestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// order is the response of POST /orders.
type order struct {
	OrderID string   `json:"order_id"`
	Events  []string `json:"events"`
}

// adminEvent is an event as the admin API shows it.
type adminEvent struct {
	ID            string `json:"id"`
	EventType     string `json:"event_type"`
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	Status        string `json:"status"`
	Attempts      int    `json:"attempts"`
	LastError     string `json:"last_error"`
}

// counts are the admin overview's events per status.
type counts map[string]int64

func (c counts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// run tells the story.
func (s *story) run() {
	s.t.Helper()
	s.checkToken()
	before := s.overview()
	// curl -d sends a form content type; the examples decode JSON whatever it says.
	good := []order{
		s.createOrder("ada@example.com", "application/x-www-form-urlencoded"),
		s.createOrder("grace@example.com", "application/json"),
	}
	bounce := s.createOrder(bounceAddress, "")
	s.rejectBadOrders()
	dead := s.waitOutcomes(good, bounce)
	s.checkDeadVisible(dead)
	s.checkOverview(before)
	s.replay(dead)
	s.checkMetrics(before)
}

// checkToken requires a generated token (32 hex characters) unless OUTBOX_ADMIN_TOKEN
// sets one.
func (s *story) checkToken() {
	s.t.Helper()
	if os.Getenv("OUTBOX_ADMIN_TOKEN") != "" || slices.ContainsFunc(s.p.cmd.Env, func(kv string) bool {
		return strings.HasPrefix(kv, "OUTBOX_ADMIN_TOKEN=") && kv != "OUTBOX_ADMIN_TOKEN="
	}) {
		return
	}
	if !hexToken.MatchString(s.b.token) {
		s.t.Errorf("admin token %q: want 32 hex characters from crypto/rand", s.b.token)
	}
}

var hexToken = regexp.MustCompile(`^[0-9a-f]{32}$`)

// response is a read HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return describe(r.status, r.body) }

// isJSON reports whether the response says it is JSON and its body is valid JSON.
func (r response) isJSON() bool {
	return strings.HasPrefix(r.header.Get("Content-Type"), "application/json") && json.Valid(r.body)
}

// do sends a request; a non-empty token goes in an Authorization: Bearer header and a
// non-empty contentType in Content-Type.
func (s *story) do(method, u, contentType, body, token string) response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, u, strings.NewReader(body))
	if err != nil {
		s.t.Fatalf("new request %s %s: %v", method, u, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("read %s %s: %v", method, u, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// decode decodes a JSON response into dst, failing the test when it is not JSON.
func (s *story) decode(what string, r response, dst any) {
	s.t.Helper()
	if !r.isJSON() {
		s.t.Fatalf("%s: want a JSON response, got Content-Type %q: %s", what, r.header.Get("Content-Type"), r)
	}
	if err := json.Unmarshal(r.body, dst); err != nil {
		s.t.Fatalf("%s: decode %s: %v", what, r, err)
	}
}

// createOrder places an order for customer and checks the 201 response.
func (s *story) createOrder(customer, contentType string) order {
	s.t.Helper()
	body := fmt.Sprintf(`{"customer":%q,"item":"book","quantity":1}`, customer)
	r := s.do(http.MethodPost, s.b.orders, contentType, body, "")
	if r.status != http.StatusCreated {
		s.t.Fatalf("POST /orders for %s (Content-Type %q): %s, want 201", customer, contentType, r)
	}
	var o order
	s.decode("POST /orders", r, &o)
	if o.OrderID == "" || len(o.Events) != 2 || o.Events[0] == "" || o.Events[1] == "" || o.Events[0] == o.Events[1] {
		s.t.Fatalf("POST /orders for %s: %s, want an order_id and two event IDs", customer, r)
	}
	return o
}

// rejectBadOrders checks that malformed orders get a 400 with a JSON body. That they
// write nothing is checked by checkOverview.
func (s *story) rejectBadOrders() {
	s.t.Helper()
	for _, body := range []string{
		`{"customer":`,
		`not json`,
		`{"item":"book","quantity":1}`,
		`{"customer":"eve@example.com","quantity":1}`,
		`{"customer":"eve@example.com","item":"book"}`,
	} {
		r := s.do(http.MethodPost, s.b.orders, "application/json", body, "")
		if r.status != http.StatusBadRequest || !r.isJSON() {
			s.t.Errorf("POST /orders %s: %s (Content-Type %q), want 400 with a JSON body",
				body, r, r.header.Get("Content-Type"))
		}
	}
}

// event returns one event through the admin API.
func (s *story) event(id string) adminEvent {
	s.t.Helper()
	r := s.do(http.MethodGet, s.b.admin+"api/dead-events/"+url.PathEscape(id), "", "", s.b.token)
	if r.status != http.StatusOK {
		s.t.Fatalf("GET admin api/dead-events/%s: %s, want 200", id, r)
	}
	var e adminEvent
	s.decode("GET admin event", r, &e)
	return e
}

// waitOutcomes waits until every event of the orders is DONE or DEAD, checks that the
// bounced confirmation email alone is DEAD, after maxAttempts attempts, each in the log,
// and that the other events' listeners logged them, and returns the dead event's ID.
func (s *story) waitOutcomes(good []order, bounce order) string {
	s.t.Helper()
	all := append(slices.Clone(good), bounce)
	events := map[string]adminEvent{}
	s.p.eventually(s.t, "every event of the orders to be DONE or DEAD", deliveryTimeout, func() (bool, string) {
		for _, o := range all {
			for _, id := range o.Events {
				e := s.event(id)
				events[id] = e
				if e.Status != "DONE" && e.Status != "DEAD" {
					return false, fmt.Sprintf("event %s (%s) is %s after %d attempts", id, e.EventType, e.Status, e.Attempts)
				}
			}
		}
		return true, ""
	})
	var dead string
	for _, o := range all {
		byType := map[string]adminEvent{}
		for _, id := range o.Events {
			byType[events[id].EventType] = events[id]
		}
		placed, email := byType[orderPlaced], byType[confirmationEmail]
		if placed.ID == "" || email.ID == "" {
			s.t.Fatalf("order %s: events %v, want one %s and one %s", o.OrderID, events, orderPlaced, confirmationEmail)
		}
		s.checkPlaced(o, placed)
		if o.OrderID == bounce.OrderID {
			s.checkBounced(email)
			dead = email.ID
			continue
		}
		if email.Status != "DONE" || email.AggregateType != "Order" {
			s.t.Errorf("%s %s: %+v, want DONE, aggregate type Order", confirmationEmail, email.ID, email)
		}
		if countLines(s.p.output(), "sent confirmation email", email.ID) == 0 {
			s.t.Errorf("no log line says %q with event ID %s", "sent confirmation email", email.ID)
		}
	}
	return dead
}

// checkPlaced checks the OrderPlaced event of o: DONE, of the order's aggregate, and
// published in the log.
func (s *story) checkPlaced(o order, e adminEvent) {
	s.t.Helper()
	if e.Status != "DONE" || e.AggregateType != "Order" || e.AggregateID != o.OrderID {
		s.t.Errorf("%s %s: %+v, want DONE, aggregate Order %s", orderPlaced, e.ID, e, o.OrderID)
	}
	if countLines(s.p.output(), "published OrderPlaced", e.ID) == 0 {
		s.t.Errorf("no log line says %q with event ID %s", "published OrderPlaced", e.ID)
	}
}

// checkBounced checks that the bounced email's event is DEAD after maxAttempts failed
// attempts, each logged.
func (s *story) checkBounced(e adminEvent) {
	s.t.Helper()
	if e.Status != "DEAD" || e.Attempts != maxAttempts || !strings.Contains(e.LastError, bounceError) {
		s.t.Fatalf("%s %s: %+v, want DEAD after %d attempts with last_error %q",
			confirmationEmail, e.ID, e, maxAttempts, bounceError)
	}
	// The outcome is logged right after it is written: the last line may trail the row.
	s.p.eventually(s.t, "a log line per failed attempt", deliveryTimeout, func() (bool, string) {
		n := s.failureLines(e.ID)
		return n >= maxAttempts, fmt.Sprintf("%d log lines name event %s and %q", n, e.ID, bounceError)
	})
	if n := s.failureLines(e.ID); n != maxAttempts {
		s.t.Errorf("%d log lines name event %s and %q, want one per attempt (%d)", n, e.ID, bounceError, maxAttempts)
	}
}

// failureLines counts the log lines of failed attempts of the event id: the outbox logs
// each one that will be retried at WARN ("delivery failed; will retry") and the last
// one at ERROR ("event moved to dead"), each naming the event and the bounce error.
func (s *story) failureLines(id string) int {
	out := s.p.output()
	return countLines(out, id, bounceError, "delivery failed; will retry") + countLines(out, id, bounceError, "moved to dead")
}

// checkDeadVisible checks that the dead event is listed by the admin API with the token,
// and that the API refuses requests without it, while the page itself is public.
func (s *story) checkDeadVisible(id string) {
	s.t.Helper()
	list := s.b.admin + "api/dead-events?event_type=" + confirmationEmail
	if !s.listed(list, id) {
		s.t.Errorf("GET %s does not list the dead event %s", list, id)
	}
	for _, u := range []string{list, s.b.admin + "api/dead-events/" + id, s.b.admin + "api/overview"} {
		for _, token := range []string{"", "wrong-" + s.b.token} {
			if r := s.do(http.MethodGet, u, "", "", token); r.status != http.StatusUnauthorized {
				s.t.Errorf("GET %s with token %q: %s, want 401", u, token, r)
			}
		}
	}
	page := s.do(http.MethodGet, s.b.admin, "", "", "")
	if page.status != http.StatusOK || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") {
		s.t.Errorf("GET %s (the admin page): %d %q, want 200 text/html", s.b.admin, page.status, page.header.Get("Content-Type"))
	}
}

// listed pages through the list at u until it finds the event id.
func (s *story) listed(u, id string) bool {
	s.t.Helper()
	after := ""
	for range 100 {
		q := u
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		r := s.do(http.MethodGet, q, "", "", s.b.token)
		if r.status != http.StatusOK {
			s.t.Fatalf("GET %s: %s, want 200", q, r)
		}
		var page struct {
			Events []adminEvent `json:"events"`
			Next   string       `json:"next"`
		}
		s.decode("GET dead events", r, &page)
		if slices.ContainsFunc(page.Events, func(e adminEvent) bool { return e.ID == id && e.Status == "DEAD" }) {
			return true
		}
		if page.Next == "" {
			return false
		}
		after = page.Next
	}
	return false
}

// overview returns the admin overview's counts per status.
func (s *story) overview() counts {
	s.t.Helper()
	r := s.do(http.MethodGet, s.b.admin+"api/overview", "", "", s.b.token)
	if r.status != http.StatusOK {
		s.t.Fatalf("GET admin api/overview: %s, want 200", r)
	}
	var o struct {
		Counts counts `json:"counts"`
	}
	s.decode("GET admin overview", r, &o)
	return o.Counts
}

// checkOverview checks that the orders wrote six events, five DONE and one DEAD, and the
// rejected requests none.
func (s *story) checkOverview(before counts) {
	s.t.Helper()
	after := s.overview()
	if d := after.total() - before.total(); d != 6 {
		s.t.Errorf("overview: %d events written (before %v, after %v), want 6: two per order, none for a rejected one", d, before, after)
	}
	if after["DONE"]-before["DONE"] != 5 || after["DEAD"]-before["DEAD"] != 1 {
		s.t.Errorf("overview: before %v, after %v; want 5 more DONE and 1 more DEAD", before, after)
	}
}

// replay replays the dead event through the admin API and checks that it is attempted
// maxAttempts times again, its attempts counted from zero, and ends DEAD again.
func (s *story) replay(id string) {
	s.t.Helper()
	u := s.b.admin + "api/dead-events/" + url.PathEscape(id) + "/replay"
	if r := s.do(http.MethodPost, u, "application/json", "{}", ""); r.status != http.StatusUnauthorized {
		s.t.Errorf("POST %s without the token: %s, want 401", u, r)
	}
	before := s.failureLines(id)
	r := s.do(http.MethodPost, u, "application/json", "{}", s.b.token)
	var res struct {
		Replayed int `json:"replayed"`
	}
	if r.status != http.StatusOK {
		s.t.Fatalf("POST %s: %s, want 200", u, r)
	}
	if s.decode("POST replay", r, &res); res.Replayed != 1 {
		s.t.Fatalf("POST %s: %s, want replayed 1", u, r)
	}
	s.p.eventually(s.t, "the replayed event to fail again and be DEAD", deliveryTimeout, func() (bool, string) {
		e := s.event(id)
		n := s.failureLines(id) - before
		return e.Status == "DEAD" && n >= maxAttempts, fmt.Sprintf("%d more failed attempts logged; event %+v", n, e)
	})
	e := s.event(id)
	if n := s.failureLines(id) - before; n != maxAttempts || e.Attempts != maxAttempts {
		s.t.Errorf("after the replay: %d more failed attempts logged, event %+v; want %d, and attempts %d",
			n, e, maxAttempts, maxAttempts)
	}
}
