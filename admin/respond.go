package outboxadmin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	outbox "github.com/outboxkit/outbox/core"
)

// apiCSP is the Content-Security-Policy of every response but the page: a JSON
// document opened in a browser can load nothing and be framed by nobody.
const apiCSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// setSecurityHeaders sets the headers every response carries.
func setSecurityHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Content-Security-Policy", apiCSP)
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error apiError `json:"error"`
}

type apiError struct {
	// Code is a stable machine-readable reason, such as "not_found".
	Code string `json:"code"`
	// Message is for humans; it never holds internal details.
	Message string `json:"message"`
	// Param names the query parameter or body field at fault, for a 400.
	Param string `json:"param,omitempty"`
}

// writeJSON writes v with status. encoding/json escapes <, > and & (also inside raw
// payloads), so stored text can never be read as markup.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		// Only a value the handler built itself gets here: no user data can fail to encode.
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeError(w http.ResponseWriter, status int, code, message, param string) {
	writeJSON(w, status, errorBody{Error: apiError{Code: code, Message: message, Param: param}})
}

func writeUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="outbox admin"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", "authentication required", "")
}

// fail answers a request whose call to Source returned err. Typed errors of the
// core become 4xx; anything else is logged with its details and answered with a
// generic 500.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, op string, err error) {
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "no event has this ID", "")
	case errors.Is(err, outbox.ErrNotDead):
		writeError(w, http.StatusConflict, "not_dead", "the event is not DEAD; only DEAD events can be replayed", "")
	case errors.Is(err, outbox.ErrFinished):
		writeError(w, http.StatusConflict, "finished", "the event is finished (DONE, FALLBACK or DISCARDED) and cannot be discarded", "")
	case errors.As(err, new(*outbox.AuditError)):
		var ae *outbox.AuditError
		errors.As(err, &ae)
		h.logger.ErrorContext(r.Context(), "outboxadmin: "+op+": audit trail not written", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Int64("unrecorded", ae.Unrecorded), slog.Any("error", err))
		writeError(w, http.StatusInternalServerError, "audit_failed", auditMessage(ae), "")
	case errors.Is(err, errors.ErrUnsupported):
		// A Store without lists of every status or an audit trail (a custom one).
		h.logger.WarnContext(r.Context(), "outboxadmin: "+op+": unsupported by the store", slog.Any("error", err))
		writeError(w, http.StatusNotImplemented, "unsupported", "the outbox's store does not support this", "")
	case errors.Is(err, outbox.ErrInvalidArgument):
		// The parsers check everything the core checks, so this is unexpected; the
		// core's message may name internals, so it is logged, not sent.
		h.logger.WarnContext(r.Context(), "outboxadmin: invalid argument", slog.String("op", op), slog.Any("error", err))
		writeError(w, http.StatusBadRequest, "invalid_argument", "invalid argument", "")
	case r.Context().Err() != nil:
		// The client went away or the server is shutting down; nobody reads this.
		h.logger.DebugContext(r.Context(), "outboxadmin: request canceled", slog.String("op", op), slog.Any("error", err))
		writeError(w, http.StatusServiceUnavailable, "canceled", "request canceled", "")
	default:
		h.logger.ErrorContext(r.Context(), "outboxadmin: "+op, slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Any("error", err))
		writeError(w, http.StatusInternalServerError, "internal", "internal error", "")
	}
}

// auditMessage says what an *outbox.AuditError means for the change: the cause, without
// the database's own message (which the log has), and what was changed.
func auditMessage(ae *outbox.AuditError) string {
	msg := "the audit trail could not be written (" + ae.Reason + "; see the server log)"
	switch {
	case ae.Unrecorded > 0:
		return msg + fmt.Sprintf("; the change was made to %d events, which the trail lacks", ae.Unrecorded)
	case ae.Recorded > 0:
		return msg + fmt.Sprintf("; %d events were replayed and recorded before, the others were not replayed", ae.Recorded)
	default:
		return msg + "; nothing was changed"
	}
}
