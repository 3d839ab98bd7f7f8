package outboxadmin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

// eventsResponse is the body of GET /api/events.
type eventsResponse struct {
	Events []eventSummary `json:"events"`
	// Next is the after value of the following page; "" on the last page.
	Next string `json:"next"`
	// Partial is set when the page stopped after ScanLimit rows of its index with fewer
	// events than the limit: Next continues the search where it stopped.
	Partial   bool `json:"partial"`
	ScanLimit int  `json:"scan_limit"`
	Limit     int  `json:"limit"`
}

// listEvents lists the events of one status: GET /api/events?status=...
func (h *handler) listEvents(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventsQuery(r.URL.RawQuery)
	if err != nil {
		writeParamError(w, err)
		return
	}
	page, err := h.events.List(r.Context(), q)
	if q.AggregateID != "" && errors.Is(err, errors.ErrUnsupported) {
		// The table has no aggregate index: opt-in, as it costs every write.
		writeError(w, http.StatusNotImplemented, "no_aggregate_index", "listing by aggregate needs the aggregate index, "+
			"which the table does not have: create it with outbox.MigrateAggregateIndex or outbox migrate -aggregate-index (docs/databases.md)", "")
		return
	}
	if err != nil {
		h.fail(w, r, "list events", err)
		return
	}
	resp := eventsResponse{Events: make([]eventSummary, 0, len(page.Events)), Partial: page.Partial,
		ScanLimit: outbox.MaxScanRows, Limit: q.Limit}
	for _, e := range page.Events {
		resp.Events = append(resp.Events, h.render(e).eventSummary)
	}
	if !page.Next.IsZero() {
		resp.Next = encodeCursor(page.Next)
	}
	writeJSON(w, http.StatusOK, resp)
}

// bulkRequest is the body of POST /api/events/replay, /discard and /delete.
type bulkRequest struct {
	IDs []string `json:"ids"`
}

// bulkResponse is the answer to a bulk action: how many events it changed, of how many
// distinct IDs it was given.
type bulkResponse struct {
	Count     int64 `json:"count"`
	Requested int   `json:"requested"`
}

// A bulk action: what it logs and the method of Source that does it.
type bulkAction struct {
	op, logMsg string
	act        func(Source, context.Context, []string) (int64, error)
}

var (
	bulkReplay  = bulkAction{"replay events", "outboxadmin: replayed events", Source.ReplayIDs}
	bulkDiscard = bulkAction{"discard events", "outboxadmin: discarded events", Source.DiscardIDs}
	bulkDelete  = bulkAction{"delete events", "outboxadmin: deleted events", Source.DeleteIDs}
)

// bulk returns the handler of a bulk action: it checks the body {"ids": [...]}, runs the
// action under the request's actor, writes the audit log line (also when the action
// changed events and then failed, as when the audit trail could not be written) and
// answers with the counts.
func (h *handler) bulk(a bulkAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body bulkRequest
		if !h.readBody(w, r, &body, "ids") {
			return
		}
		ids, err := checkIDs(body.IDs)
		if err != nil {
			writeParamError(w, err)
			return
		}
		ctx, actor := h.actorContext(r)
		n, err := a.act(h.events, ctx, ids)
		if err == nil || n > 0 {
			h.logger.InfoContext(ctx, a.logMsg, slog.Int64("count", n), slog.Int("requested", len(ids)),
				slog.Any("event_ids", ids), slog.String("actor", actor), slog.String("remote_addr", r.RemoteAddr))
		}
		if err != nil {
			h.fail(w, r, a.op, err)
			return
		}
		writeJSON(w, http.StatusOK, bulkResponse{Count: n, Requested: len(ids)})
	}
}

// auditResponse is the body of GET /api/audit.
type auditResponse struct {
	Entries []auditEntry `json:"entries"`
	// Next is the before value of the following (older) page; "" on the last page.
	Next string `json:"next"`
}

// auditEntry is one change in the audit trail.
type auditEntry struct {
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"` // replay, replay-all, delete, discard, pause or resume
	Target string    `json:"target"` // the event IDs, comma-separated, the filter of a replay-all, or the subscription
	Count  int64     `json:"count"`
}

// audit lists the audit trail, newest first: GET /api/audit.
func (h *handler) audit(w http.ResponseWriter, r *http.Request) {
	q, err := parseAuditQuery(r.URL.RawQuery)
	if err != nil {
		writeParamError(w, err)
		return
	}
	page, err := h.events.Audit(r.Context(), q)
	if err != nil {
		h.fail(w, r, "list audit trail", err)
		return
	}
	resp := auditResponse{Entries: make([]auditEntry, 0, len(page.Entries)), Next: page.Next}
	for _, e := range page.Entries {
		resp.Entries = append(resp.Entries, auditEntry{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action,
			Target: e.Target, Count: e.Count})
	}
	writeJSON(w, http.StatusOK, resp)
}
