package outboxadmin

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	outbox "github.com/outboxkit/outbox/core"
)

// subscriptionsResponse is the body of GET /api/subscriptions.
type subscriptionsResponse struct {
	Subscriptions []subscriptionLoad `json:"subscriptions"`
	// PauseSupported is false when the store keeps no pauses (a table without the
	// pause migration): nothing is paused, and pausing answers 501.
	PauseSupported bool `json:"pause_supported"`
}

// subscriptionLoad is one subscription of GET /api/subscriptions.
type subscriptionLoad struct {
	Listener       string  `json:"listener"`
	Queued         int     `json:"queued"`
	Running        int     `json:"running"`
	MaxConcurrency int     `json:"max_concurrency"`
	RateLimit      float64 `json:"rate_limit"`
	Limited        bool    `json:"limited"`
	// Paused: the serving process holds the subscription's events pending
	// (outbox.SubscriptionLoad.Paused); true for a paused subscription it does not run.
	Paused bool `json:"paused"`
	// Pause is the table's pause of the subscription; null when it is not paused.
	Pause *pauseInfo `json:"pause"`
	// Registered is false for a paused subscription that the serving process does not
	// run (another process's): listed from the table's pauses alone.
	Registered bool `json:"registered"`
}

// pauseInfo is a pause of the table: since when, by whom, why.
type pauseInfo struct {
	Since  time.Time `json:"since"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
}

// subscriptions answers GET /api/subscriptions: each subscription's load here, and the
// table's pauses, also of subscriptions this process does not run; by listener.
func (h *handler) subscriptions(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r.URL.RawQuery); err != nil {
		writeParamError(w, err)
		return
	}
	loads, err := h.events.Subscriptions(r.Context())
	if err != nil {
		h.fail(w, r, "subscriptions", err)
		return
	}
	resp := subscriptionsResponse{Subscriptions: make([]subscriptionLoad, 0, len(loads)), PauseSupported: true}
	pauses, err := h.events.Paused(r.Context())
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		resp.PauseSupported = false
	case err != nil:
		h.fail(w, r, "paused subscriptions", err)
		return
	}
	byName := make(map[string]*pauseInfo, len(pauses))
	for _, p := range pauses {
		byName[p.Listener] = &pauseInfo{Since: p.At.UTC(), Actor: p.Actor, Reason: p.Reason}
	}
	for _, l := range loads {
		resp.Subscriptions = append(resp.Subscriptions, subscriptionLoad{Listener: l.Listener, Queued: l.Queued, Running: l.Running,
			MaxConcurrency: l.MaxConcurrency, RateLimit: l.RateLimit, Limited: l.Limited, Paused: l.Paused,
			Pause: byName[l.Listener], Registered: true})
		delete(byName, l.Listener)
	}
	for _, p := range pauses {
		if info, ok := byName[p.Listener]; ok {
			resp.Subscriptions = append(resp.Subscriptions, subscriptionLoad{Listener: p.Listener, Paused: true, Pause: info})
			delete(byName, p.Listener)
		}
	}
	slices.SortStableFunc(resp.Subscriptions, func(a, b subscriptionLoad) int { return strings.Compare(a.Listener, b.Listener) })
	writeJSON(w, http.StatusOK, resp)
}

// pauseRequest is the body of POST /api/subscriptions/pause; resumeRequest that of
// POST /api/subscriptions/resume. The subscription's name goes in the body: names hold
// "/" ("Order/OrderPlaced"), which a path segment cannot carry unescaped.
type pauseRequest struct {
	Listener string `json:"listener"`
	Reason   string `json:"reason"`
}

type resumeRequest struct {
	Listener string `json:"listener"`
}

// pauseResponse is the answer to a pause or a resume: the subscription and its state.
type pauseResponse struct {
	Listener string `json:"listener"`
	Paused   bool   `json:"paused"`
}

// pause pauses a subscription on every process of the table: POST
// /api/subscriptions/pause {"listener": "...", "reason": "..."}.
func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	var body pauseRequest
	if !h.readBody(w, r, &body, "listener", "reason") {
		return
	}
	h.setPaused(w, r, body.Listener, body.Reason, true)
}

// resume resumes a paused subscription: POST /api/subscriptions/resume {"listener": "..."}.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	var body resumeRequest
	if !h.readBody(w, r, &body, "listener") {
		return
	}
	h.setPaused(w, r, body.Listener, "", false)
}

// setPaused checks the body's fields, pauses or resumes the subscription under the
// request's actor, writes the audit log line and answers its new state.
func (h *handler) setPaused(w http.ResponseWriter, r *http.Request, listener, reason string, pause bool) {
	if err := validListener(listener); err != nil {
		writeParamError(w, err)
		return
	}
	if !utf8.ValidString(reason) || strings.IndexByte(reason, 0) >= 0 || len(reason) > outbox.MaxLastErrorLen {
		writeParamError(w, badParam("reason", "must be at most %d bytes of valid UTF-8 without NUL", outbox.MaxLastErrorLen))
		return
	}
	ctx, actor := h.actorContext(r)
	op, logMsg := "resume subscription", "outboxadmin: resumed subscription"
	var err error
	if pause {
		op, logMsg = "pause subscription", "outboxadmin: paused subscription"
		err = h.events.Pause(ctx, listener, reason)
	} else {
		err = h.events.Resume(ctx, listener)
	}
	if errors.Is(err, errors.ErrUnsupported) && !errors.As(err, new(*outbox.AuditError)) {
		h.logger.WarnContext(r.Context(), "outboxadmin: "+op+": unsupported by the store", slog.Any("error", err))
		writeError(w, http.StatusNotImplemented, "unsupported",
			"the outbox's store keeps no pauses: the table needs the pause migration (outbox.MigrateTable)", "")
		return
	}
	if err != nil {
		h.fail(w, r, op, err)
		return
	}
	attrs := []any{slog.String("listener", listener), slog.String("actor", actor), slog.String("remote_addr", r.RemoteAddr)}
	if pause {
		attrs = append(attrs, slog.String("reason", reason))
	}
	h.logger.InfoContext(ctx, logMsg, attrs...)
	writeJSON(w, http.StatusOK, pauseResponse{Listener: listener, Paused: pause})
}

// validListener checks a subscription's name from a body before it reaches the store.
func validListener(name string) error {
	if name == "" || len(name) > outbox.MaxListenerLen || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return badParam("listener", "must be 1 to %d bytes of valid UTF-8 without NUL", outbox.MaxListenerLen)
	}
	return nil
}
