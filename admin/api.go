package outboxadmin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// eventSummary is an event in a list: everything but headers and payload, which can be
// large; GET /api/dead-events/{id} has them.
type eventSummary struct {
	ID            string     `json:"id"`
	EventType     string     `json:"event_type"`
	AggregateType string     `json:"aggregate_type"`
	AggregateID   string     `json:"aggregate_id"`
	TenantID      string     `json:"tenant_id"`
	Listener      string     `json:"listener"` // its fan-out subscription, or the listener that failed for good; "" if none
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error"`
	CreatedAt     time.Time  `json:"created_at"`
	AvailableAt   time.Time  `json:"available_at"`
	DoneAt        *time.Time `json:"done_at"` // when it became DONE, DEAD, FALLBACK or DISCARDED; null while pending
	// OrderKey is an ordered event's key: a DEAD event with one holds the key's later
	// events under outbox.DeadKeyWaits until it is replayed. OrderSeq is its place.
	OrderKey string `json:"order_key,omitempty"`
	OrderSeq int64  `json:"order_seq,omitempty"`
}

// eventDetail is one event with everything the handler may show.
type eventDetail struct {
	eventSummary
	// FirstAttemptAt is when its first failed attempt was recorded; null if none failed.
	FirstAttemptAt *time.Time `json:"first_attempt_at"`
	// LockedBy and LockedUntil are its claim in MultiNode mode: the claiming node's
	// token and when the claim expires; "" and null when it is not claimed.
	LockedBy    string            `json:"locked_by"`
	LockedUntil *time.Time        `json:"locked_until"`
	Headers     map[string]string `json:"headers"`
	Payload     json.RawMessage   `json:"payload"`
}

type listResponse struct {
	Events []eventSummary `json:"events"`
	// Next is the after value of the following page; absent on the last page.
	Next  string `json:"next,omitempty"`
	Limit int    `json:"limit"`
	// Partial is set when a filtered page stopped after ScanLimit DEAD events with
	// fewer events than the limit: Next continues the search where it stopped.
	Partial   bool `json:"partial"`
	ScanLimit int  `json:"scan_limit"`
}

type countResponse struct {
	// Count is the number of events counted; with AtLeast, the count stopped after
	// CountLimit events of the index and there are Count or more.
	Count      int64           `json:"count"`
	AtLeast    bool            `json:"at_least"`
	CountLimit int             `json:"count_limit"`
	ByType     []typeCount     `json:"by_type,omitempty"`
	ByListener []listenerCount `json:"by_listener,omitempty"`
	// Partial is set when the per-type and per-listener counts cover only some of the
	// events (the oldest ones): those the count read.
	Partial bool `json:"partial,omitempty"`
}

type typeCount struct {
	AggregateType string `json:"aggregate_type"`
	EventType     string `json:"event_type"`
	Count         int64  `json:"count"`
}

// listenerCount counts the DEAD events of one listener; Listener is "" for the events
// that name none (dead before the listener was recorded, or unroutable).
type listenerCount struct {
	Listener string `json:"listener"`
	Count    int64  `json:"count"`
}

type overviewResponse struct {
	// Counts has a key per status name: NEW, RETRY, DEAD, DONE, WAITING, FALLBACK,
	// DISCARDED. Each count reads at most CountLimit rows of an index: AtLeast names the
	// statuses whose count stopped there (there are that many or more).
	Counts                  map[string]int64 `json:"counts"`
	AtLeast                 map[string]bool  `json:"at_least"`
	CountLimit              int              `json:"count_limit"`
	OldestPendingAt         *time.Time       `json:"oldest_pending_at"`
	OldestPendingAgeSeconds *float64         `json:"oldest_pending_age_seconds"`
	// BlockedKeys counts the order keys whose WAITING events wait behind a RETRY or
	// DEAD event; OldestBlockedAt is when the oldest such event was created.
	// BlockedKeysAtLeast: the keys were counted among CountLimit rows of the order
	// index, which has more (there are that many blocked keys or more).
	BlockedKeys        int64      `json:"blocked_keys"`
	BlockedKeysAtLeast bool       `json:"blocked_keys_at_least"`
	OldestBlockedAt    *time.Time `json:"oldest_blocked_at"`
	// ByType counts the events per status and event type, by event type then status,
	// among the events Counts counted (AtLeast: of those only); null when the store
	// cannot count them (errors.ErrUnsupported).
	ByType []statusTypeCount `json:"by_type"`
}

// statusTypeCount is the number of events of one status and event type.
type statusTypeCount struct {
	Status    string `json:"status"`
	EventType string `json:"event_type"`
	Count     int64  `json:"count"`
	AtLeast   bool   `json:"at_least"`
}

type replayResponse struct {
	Replayed int64  `json:"replayed"`
	ID       string `json:"id,omitempty"`
}

// replayAllRequest is the body of POST /api/dead-events/replay. Empty fields match any.
type replayAllRequest struct {
	EventType     string `json:"event_type"`
	AggregateType string `json:"aggregate_type"`
	Listener      string `json:"listener"`
}

// maxTypeScan bounds how many DEAD events GET /api/dead-events/count?by=... reads on a
// store without bounded counts (the fallback): it counts pages of events itself.
const maxTypeScan = 10_000

// allStatuses are the statuses of the overview, in its order.
var allStatuses = [...]outbox.Status{outbox.StatusNew, outbox.StatusRetry, outbox.StatusDead, outbox.StatusDone,
	outbox.StatusWaiting, outbox.StatusFallback, outbox.StatusDiscarded}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		writeParamError(w, err)
		return
	}
	resp := overviewResponse{Counts: map[string]int64{}, AtLeast: map[string]bool{}, CountLimit: outbox.MaxCountRows}
	for _, st := range allStatuses {
		resp.Counts[st.String()] = 0
	}
	o, err := h.events.Overview(r.Context())
	if errors.Is(err, errors.ErrUnsupported) {
		// A custom store without bounded counts: its own exact ones.
		h.unboundedOverview(w, r, resp)
		return
	}
	if err != nil {
		h.fail(w, r, "overview", err)
		return
	}
	for st, c := range o.Counts {
		resp.Counts[st.String()] = c.N
		if c.AtLeast {
			resp.AtLeast[st.String()] = true
		}
	}
	resp.setOldest(o.OldestPending, o.OldestBlocked)
	resp.BlockedKeys, resp.BlockedKeysAtLeast = o.BlockedKeys.N, o.BlockedKeys.AtLeast
	resp.ByType = make([]statusTypeCount, 0, len(o.ByType))
	for _, c := range o.ByType {
		resp.ByType = append(resp.ByType, statusTypeCount{Status: c.Status.String(), EventType: c.EventType, Count: c.Count,
			AtLeast: o.Counts[c.Status].AtLeast})
	}
	resp.sortByType()
	writeJSON(w, http.StatusOK, resp)
}

// setOldest sets the times of the oldest pending event and the oldest holder of a
// blocked key; zero times stay null.
func (resp *overviewResponse) setOldest(pending, blocked time.Time) {
	if !pending.IsZero() {
		at := pending.UTC()
		age := max(time.Since(at).Seconds(), 0)
		resp.OldestPendingAt, resp.OldestPendingAgeSeconds = &at, &age
	}
	if !blocked.IsZero() {
		at := blocked.UTC()
		resp.OldestBlockedAt = &at
	}
}

// sortByType orders ByType by event type, then status.
func (resp *overviewResponse) sortByType() {
	rank := map[string]int{}
	for i, st := range []outbox.Status{outbox.StatusNew, outbox.StatusDone, outbox.StatusRetry, outbox.StatusDead,
		outbox.StatusWaiting, outbox.StatusFallback, outbox.StatusDiscarded} {
		rank[st.String()] = i
	}
	slices.SortFunc(resp.ByType, func(a, b statusTypeCount) int {
		return cmp.Or(cmp.Compare(a.EventType, b.EventType), cmp.Compare(rank[a.Status], rank[b.Status]))
	})
}

// unboundedOverview answers GET /api/overview from Stats and CountByType, which count
// every row: for a store without bounded counts.
func (h *handler) unboundedOverview(w http.ResponseWriter, r *http.Request, resp overviewResponse) {
	s, err := h.events.Stats(r.Context())
	if err != nil {
		h.fail(w, r, "stats", err)
		return
	}
	for st, n := range s.Counts {
		resp.Counts[st.String()] += n
	}
	resp.setOldest(s.OldestPending, s.OldestBlocked)
	resp.BlockedKeys = s.BlockedKeys
	counts, err := h.events.CountByType(r.Context())
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		// A store without lists of every status: the rest of the overview still holds.
	case err != nil:
		h.fail(w, r, "count by type", err)
		return
	default:
		resp.ByType = make([]statusTypeCount, 0, len(counts))
		for _, c := range counts {
			resp.ByType = append(resp.ByType, statusTypeCount{Status: c.Status.String(), EventType: c.EventType, Count: c.Count})
		}
		resp.sortByType()
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r.URL.RawQuery)
	if err != nil {
		writeParamError(w, err)
		return
	}
	page, err := h.events.ListDead(r.Context(), q)
	if err != nil {
		h.fail(w, r, "list dead events", err)
		return
	}
	resp := listResponse{Events: make([]eventSummary, 0, len(page.Events)), Limit: q.Limit, Partial: page.Partial,
		ScanLimit: outbox.MaxScanRows}
	for _, e := range page.Events {
		resp.Events = append(resp.Events, h.render(e).eventSummary)
	}
	if !page.Next.IsZero() {
		resp.Next = encodeCursor(page.Next)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *handler) count(w http.ResponseWriter, r *http.Request) {
	f, by, err := parseCountQuery(r.URL.RawQuery)
	if err != nil {
		writeParamError(w, err)
		return
	}
	c, err := h.events.Count(r.Context(), outbox.EventCountQuery{Status: outbox.StatusDead, Groups: by.any(),
		EventFilter: outbox.EventFilter{EventType: f.EventType, AggregateType: f.AggregateType, Listener: f.Listener}})
	if errors.Is(err, errors.ErrUnsupported) {
		h.unboundedCount(w, r, f, by)
		return
	}
	if err != nil {
		h.fail(w, r, "count dead events", err)
		return
	}
	resp := countResponse{Count: c.N, AtLeast: c.AtLeast, CountLimit: outbox.MaxCountRows, Partial: by.any() && c.AtLeast}
	if by.any() {
		type key struct{ agg, typ string }
		types := map[key]int64{}
		listeners := map[string]int64{}
		for _, g := range c.Groups {
			types[key{g.AggregateType, g.EventType}] += g.N
			listeners[g.Listener] += g.N
		}
		if by.types {
			resp.ByType = make([]typeCount, 0, len(types))
			for k, n := range types {
				resp.ByType = append(resp.ByType, typeCount{AggregateType: k.agg, EventType: k.typ, Count: n})
			}
		}
		if by.listeners {
			resp.ByListener = make([]listenerCount, 0, len(listeners))
			for l, n := range listeners {
				resp.ByListener = append(resp.ByListener, listenerCount{Listener: l, Count: n})
			}
		}
		resp.sortGroups()
	}
	writeJSON(w, http.StatusOK, resp)
}

// unboundedCount answers GET /api/dead-events/count with CountDead and pages of
// ListDead: for a store without bounded counts.
func (h *handler) unboundedCount(w http.ResponseWriter, r *http.Request, f outbox.DeadFilter, by countBy) {
	n, err := h.events.CountDead(r.Context(), f)
	if err != nil {
		h.fail(w, r, "count dead events", err)
		return
	}
	resp := countResponse{Count: n, CountLimit: outbox.MaxCountRows}
	if by.any() {
		if err = h.countGroups(r, f, by, &resp); err != nil {
			h.fail(w, r, "count dead events by type or listener", err)
			return
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// sortGroups orders ByType and ByListener largest count first.
func (resp *countResponse) sortGroups() {
	slices.SortFunc(resp.ByType, func(a, b typeCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.AggregateType, b.AggregateType), cmp.Compare(a.EventType, b.EventType))
	})
	slices.SortFunc(resp.ByListener, func(a, b listenerCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Listener, b.Listener))
	})
}

// countGroups reads the DEAD events matching f page by page, at most maxTypeScan of
// them, and counts them per (aggregate type, event type) into resp.ByType and per
// listener into resp.ByListener, as by asks, largest count first.
func (h *handler) countGroups(r *http.Request, f outbox.DeadFilter, by countBy, resp *countResponse) error {
	type key struct{ agg, typ string }
	types := map[key]int64{}
	listeners := map[string]int64{}
	q := outbox.DeadQuery{DeadFilter: f, Limit: MaxLimit}
	scanned := 0
	for pages := 1; ; pages++ {
		page, err := h.events.ListDead(r.Context(), q)
		if err != nil {
			return err
		}
		for _, e := range page.Events {
			types[key{e.AggregateType, e.Type}]++
			listeners[e.Listener]++
		}
		scanned += len(page.Events)
		if page.Next.IsZero() {
			break
		}
		// A page may be partial (few events of many rows read): the pages are bounded too.
		if scanned >= maxTypeScan || pages >= maxTypeScan/MaxLimit {
			resp.Partial = true
			break
		}
		q.After = page.Next
	}
	if by.types {
		resp.ByType = make([]typeCount, 0, len(types))
		for k, n := range types {
			resp.ByType = append(resp.ByType, typeCount{AggregateType: k.agg, EventType: k.typ, Count: n})
		}
	}
	if by.listeners {
		resp.ByListener = make([]listenerCount, 0, len(listeners))
		for l, n := range listeners {
			resp.ByListener = append(resp.ByListener, listenerCount{Listener: l, Count: n})
		}
	}
	resp.sortGroups()
	return nil
}

// get returns one event whatever its status, so that a replayed event can be followed.
func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := validID(id); err != nil {
		writeParamError(w, err)
		return
	}
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		writeParamError(w, err)
		return
	}
	e, err := h.events.Get(r.Context(), id)
	if err != nil {
		h.fail(w, r, "get event", err)
		return
	}
	writeJSON(w, http.StatusOK, h.render(e))
}

func (h *handler) replay(w http.ResponseWriter, r *http.Request) {
	h.onDead(w, r, "replay event", "outboxadmin: replayed dead event", h.events.Replay,
		func(id string) any { return replayResponse{Replayed: 1, ID: id} })
}

// deleteResponse is the body of a successful POST /api/dead-events/{id}/delete.
type deleteResponse struct {
	Deleted int64  `json:"deleted"`
	ID      string `json:"id"`
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	h.onDead(w, r, "delete event", "outboxadmin: deleted dead event", h.events.Delete,
		func(id string) any { return deleteResponse{Deleted: 1, ID: id} })
}

// discardResponse is the body of a successful POST /api/dead-events/{id}/discard.
type discardResponse struct {
	Discarded int64  `json:"discarded"`
	ID        string `json:"id"`
}

func (h *handler) discard(w http.ResponseWriter, r *http.Request) {
	h.onDead(w, r, "discard event", "outboxadmin: discarded event", h.events.Discard,
		func(id string) any { return discardResponse{Discarded: 1, ID: id} })
}

// onDead runs act on the DEAD event the path names, after checking the ID and the
// empty JSON body: on success it writes the audit line and answers ok(id); an error
// is answered by fail (404, 409, 400 or 500).
func (h *handler) onDead(w http.ResponseWriter, r *http.Request, what, audit string,
	act func(ctx context.Context, id string) error, ok func(id string) any) {
	id := r.PathValue("id")
	if err := validID(id); err != nil {
		writeParamError(w, err)
		return
	}
	var body struct{}
	if !h.readBody(w, r, &body) {
		return
	}
	ctx, actor := h.actorContext(r)
	if err := act(ctx, id); err != nil {
		h.fail(w, r, what, err)
		return
	}
	h.logger.InfoContext(ctx, audit, slog.String("event_id", id), slog.String("actor", actor),
		slog.String("remote_addr", r.RemoteAddr))
	writeJSON(w, http.StatusOK, ok(id))
}

func (h *handler) replayAll(w http.ResponseWriter, r *http.Request) {
	var body replayAllRequest
	if !h.readBody(w, r, &body, "event_type", "aggregate_type", "listener") {
		return
	}
	f := outbox.DeadFilter{EventType: body.EventType, AggregateType: body.AggregateType, Listener: body.Listener}
	if err := validFilter(f); err != nil {
		writeParamError(w, err)
		return
	}
	ctx, actor := h.actorContext(r)
	n, err := h.events.ReplayAll(ctx, f, h.batch)
	if n > 0 {
		h.logger.InfoContext(ctx, "outboxadmin: replayed dead events", slog.Int64("count", n),
			slog.String("event_type", f.EventType), slog.String("aggregate_type", f.AggregateType),
			slog.String("listener", f.Listener), slog.String("actor", actor), slog.String("remote_addr", r.RemoteAddr))
	}
	if err != nil {
		h.fail(w, r, "replay dead events", err)
		return
	}
	writeJSON(w, http.StatusOK, replayResponse{Replayed: n})
}

// readBody checks a mutation request and decodes its body, a JSON object, into dst. It
// writes the error response and returns false when the request has a query string
// (parameters of a mutation go in the body, and one that was ignored could widen a
// replay), is not application/json (415), is larger than MaxBodyBytes (413), or is not
// one JSON object with only known fields (400). accepted names dst's fields, for the
// message about an unknown one.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request, dst any, accepted ...string) bool {
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		writeParamError(w, err)
		return false
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if cs, ok := params["charset"]; err != nil || mt != "application/json" || (ok && !strings.EqualFold(cs, "utf-8")) {
		w.Header().Set("Accept-Post", "application/json")
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be application/json", "")
		return false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the body is larger than 64 KiB", "")
			return false
		}
		h.fail(w, r, "read body", err)
		return false
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		writeError(w, http.StatusBadRequest, "invalid_body", "the body must be a JSON object, such as {}", "")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_body", bodyErrorMessage(err, accepted), "")
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "invalid_body", "the body must hold one JSON object and nothing after it", "")
		return false
	}
	return true
}

// bodyErrorMessage describes a decoding error without echoing the body; accepted are
// the fields the body may have.
func bodyErrorMessage(err error, accepted []string) string {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return "field " + printable(typeErr.Field) + " has the wrong type"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		msg := "the body has an " + printable(strings.TrimPrefix(err.Error(), "json: "))
		if len(accepted) == 0 {
			return msg + "; it must be {}"
		}
		return msg + "; accepted: " + strings.Join(accepted, ", ")
	default:
		return "the body is not valid JSON"
	}
}

func writeParamError(w http.ResponseWriter, err error) {
	var pe *paramError
	if !errors.As(err, &pe) {
		pe = &paramError{param: "query", msg: "is invalid"}
	}
	writeError(w, http.StatusBadRequest, "invalid_parameter", pe.Error(), pe.param)
}

// render copies e, applies Options.Redact to the copy and converts it for a response.
func (h *handler) render(e outbox.Event) eventDetail {
	e.Headers = maps.Clone(e.Headers)
	e.Payload = slices.Clone(e.Payload)
	if h.redact != nil {
		h.redact(&e)
	}
	d := eventDetail{
		eventSummary: eventSummary{
			ID: e.ID, EventType: e.Type, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
			TenantID: e.TenantID, Listener: e.Listener, Status: e.Status.String(), Attempts: e.Attempts, LastError: e.LastError,
			CreatedAt: e.CreatedAt.UTC(), AvailableAt: e.AvailableAt.UTC(), OrderKey: e.OrderKey, OrderSeq: e.OrderSeq,
		},
		Headers: e.Headers,
		Payload: e.Payload,
	}
	d.DoneAt = optionalTime(e.DoneAt)
	d.FirstAttemptAt = optionalTime(e.FirstAttemptAt)
	d.LockedBy, d.LockedUntil = e.LockedBy, optionalTime(e.LockedUntil)
	if d.Headers == nil {
		d.Headers = map[string]string{}
	}
	if !json.Valid(d.Payload) {
		// A stored payload is valid JSON, but Redact may have broken it (or emptied it).
		s, _ := json.Marshal(string(d.Payload))
		d.Payload = s
	}
	return d
}

// optionalTime is t in UTC, or nil for the zero time (null in JSON).
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
