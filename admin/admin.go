package outboxadmin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strings"

	outbox "github.com/outboxkit/outbox/core"
)

// Limits of the API.
const (
	// DefaultLimit is the page size of a list request without limit.
	DefaultLimit = outbox.DefaultPageSize
	// MaxLimit is the largest page a list request returns; larger limits are clamped to it.
	MaxLimit = outbox.MaxPageSize
	// MaxBodyBytes bounds the JSON body of a POST request; a larger one gets 413.
	MaxBodyBytes = 64 << 10
)

// Options configures [New]. Only Authorize matters for most users: the zero value
// serves nothing but 401s.
type Options struct {
	// Authorize decides whether a request may use the API: use [BearerToken],
	// [AuthorizerFunc] or, for local development only, [AllowAll]. Nil rejects every
	// request, the page included, with 401. Defaults to nil.
	Authorize Authorizer
	// Redact, when set, is called with a copy of every event before it is written to a
	// response (get and list), and may change any field of that copy, for example to
	// blank secrets in the payload or drop headers. A payload it leaves as invalid JSON
	// is sent as a JSON string. Defaults to nil: events are sent as stored.
	Redact func(e *outbox.Event)
	// ReplayBatchSize is the batch size of POST /api/dead-events/replay: each batch is
	// one short UPDATE. Defaults to [outbox.DefaultReplayBatchSize].
	ReplayBatchSize int
	// TrustedOrigins are origins ("https://admin.example.com") whose cross-origin POST
	// requests are allowed, for a page served from another origin than the API or
	// behind a proxy that rewrites Host. Each must be scheme://host[:port]. Defaults to
	// none: only same-origin and non-browser requests may mutate.
	TrustedOrigins []string
	// Actor names who makes a change, for the audit trail ([outbox.WithActor]) and the
	// audit log line: it is called once per POST request that passed Authorize, for
	// example to return the user of a session or the name a proxy put in a header (a
	// header is only as trustworthy as the path to the handler: read one only when the
	// handler is reachable through that proxy alone, which sets it and drops the
	// client's, else anyone can forge it; see docs/admin.md). An empty result, like a
	// nil Actor, falls back to the default. Defaults to
	// "admin <remote address>" (the client's IP address and port as the server sees
	// them: a proxy's address when one is in front).
	Actor func(r *http.Request) string
	// Logger receives an audit line per change, the warning of [AllowAll] and the real
	// errors behind 500 responses. Defaults to slog.Default().
	Logger *slog.Logger
}

// Source is what the admin reads and changes: *[outbox.Events], from
// [outbox.Outbox.Events], is the implementation, and every route is one of these
// methods. To restrict or observe what the admin does (a tenant's filter, an extra
// check before a replay), pass a type that embeds *outbox.Events and overrides the
// methods it changes: it keeps satisfying Source when a later version of the admin
// calls one more method.
type Source interface {
	// Reads of every status.
	List(ctx context.Context, q outbox.EventQuery) (outbox.EventPage, error)
	Count(ctx context.Context, q outbox.EventCountQuery) (outbox.EventCounts, error)
	Get(ctx context.Context, id string) (outbox.Event, error)
	Overview(ctx context.Context) (outbox.Overview, error)
	Stats(ctx context.Context) (outbox.Stats, error)
	CountByType(ctx context.Context) ([]outbox.TypeCount, error)
	Audit(ctx context.Context, q outbox.AuditQuery) (outbox.AuditPage, error)
	// The subscriptions' load in the process that serves the admin, and the paused
	// subscriptions of the table.
	Subscriptions(ctx context.Context) ([]outbox.SubscriptionLoad, error)
	Paused(ctx context.Context) ([]outbox.Pause, error)
	// Reads of DEAD events (the /api/dead-events routes).
	ListDead(ctx context.Context, q outbox.DeadQuery) (outbox.DeadPage, error)
	CountDead(ctx context.Context, f outbox.DeadFilter) (int64, error)
	// Changes, each recorded in the audit trail.
	Replay(ctx context.Context, id string) error
	Discard(ctx context.Context, id string) error
	Delete(ctx context.Context, id string) error
	ReplayIDs(ctx context.Context, ids []string) (int64, error)
	DiscardIDs(ctx context.Context, ids []string) (int64, error)
	DeleteIDs(ctx context.Context, ids []string) (int64, error)
	ReplayAll(ctx context.Context, f outbox.DeadFilter, batchSize int) (int64, error)
	// Changes of a subscription, recorded in the audit trail too.
	Pause(ctx context.Context, listener, reason string) error
	Resume(ctx context.Context, listener string) error
}

var _ Source = (*outbox.Events)(nil)

// New returns the admin handler over events, usually the *[outbox.Events] of
// [outbox.Outbox.Events]: every route is one of [Source]'s methods. Errors of those methods wrapping [outbox.ErrNotFound],
// [outbox.ErrNotDead] or [outbox.ErrFinished], and [outbox.ErrInvalidArgument], become
// 404, 409 and 400; one wrapping [errors.ErrUnsupported] (a store without lists of every
// status or an audit trail) is a 501; any other error is a 500.
//
// New returns a *[outbox.ConfigError] (matching [outbox.ErrInvalidConfig]) when events is
// nil (or a nil *outbox.Events), when Authorize is a [BearerToken] with an empty or unsendable token or a nil
// [AuthorizerFunc], when ReplayBatchSize is negative, or when a trusted origin is
// malformed. Without Authorize it logs a warning, since every request will get 401; with
// [AllowAll] it logs a louder one.
func New(events Source, opts Options) (http.Handler, error) {
	if e, ok := events.(*outbox.Events); events == nil || ok && e == nil {
		return nil, &outbox.ConfigError{Field: "events", Reason: "is nil"}
	}
	if err := validAuthorizer(opts.Authorize); err != nil {
		return nil, err
	}
	if opts.ReplayBatchSize < 0 {
		return nil, &outbox.ConfigError{Field: "ReplayBatchSize", Reason: fmt.Sprintf("is negative (%d)", opts.ReplayBatchSize)}
	}
	logger := cmp.Or(opts.Logger, slog.Default()).With(slog.String("component", "outboxadmin"))
	h := &handler{
		events: events,
		auth:   opts.Authorize,
		redact: opts.Redact,
		actor:  opts.Actor,
		batch:  cmp.Or(opts.ReplayBatchSize, outbox.DefaultReplayBatchSize),
		logger: logger,
		mux:    http.NewServeMux(),
		cop:    http.NewCrossOriginProtection(),
	}
	for _, o := range opts.TrustedOrigins {
		if err := h.cop.AddTrustedOrigin(o); err != nil {
			return nil, &outbox.ConfigError{Field: "TrustedOrigins", Reason: err.Error()}
		}
	}
	h.routes()
	switch opts.Authorize.(type) {
	case nil:
		logger.Warn("outboxadmin: no Options.Authorize: every request gets 401")
	case allowAll:
		logger.Warn("outboxadmin: AllowAll: anyone who can reach the handler can read and replay dead events; use it for local development only")
	}
	return h, nil
}

// handler is the http.Handler New returns.
type handler struct {
	events Source
	auth   Authorizer
	redact func(*outbox.Event)
	actor  func(*http.Request) string
	batch  int
	logger *slog.Logger
	mux    *http.ServeMux
	cop    *http.CrossOriginProtection
}

// actorContext returns r's context naming the actor of the change r makes
// ([outbox.WithActor]), and that actor: [Options.Actor]'s answer, or "admin <remote
// address>".
func (h *handler) actorContext(r *http.Request) (context.Context, string) {
	actor := ""
	if h.actor != nil {
		actor = strings.TrimSpace(h.actor(r))
	}
	if actor == "" {
		actor = "admin " + r.RemoteAddr
	}
	return outbox.WithActor(r.Context(), actor), actor
}

// Route patterns. The page's patterns are public once an authorizer is set.
const (
	patPage      = "GET /{$}"
	patScript    = "GET /app.js"
	patStyle     = "GET /app.css"
	patOverview  = "GET /api/overview"
	patList      = "GET /api/dead-events"
	patCount     = "GET /api/dead-events/count"
	patGet       = "GET /api/dead-events/{id}"
	patReplay    = "POST /api/dead-events/{id}/replay"
	patReplayAll = "POST /api/dead-events/replay"
	patDelete    = "POST /api/dead-events/{id}/delete"
	patDiscard   = "POST /api/dead-events/{id}/discard"
	patEvents    = "GET /api/events"
	patEvent     = "GET /api/events/{id}"
	patBulkRepl  = "POST /api/events/replay"
	patBulkDisc  = "POST /api/events/discard"
	patBulkDel   = "POST /api/events/delete"
	patAudit     = "GET /api/audit"
	patSubs      = "GET /api/subscriptions"
	patPause     = "POST /api/subscriptions/pause"
	patResume    = "POST /api/subscriptions/resume"
)

// postOnly are the paths of POST routes that a GET pattern with an {id} would match
// ("GET /api/events/replay" is not the event "replay"): a GET there answers 405.
var postOnly = [...]string{"/api/dead-events/replay", "/api/events/replay", "/api/events/discard", "/api/events/delete"}

// isPostOnlyGET reports whether pattern is one of the GET patterns of postOnly.
func isPostOnlyGET(pattern string) bool {
	for _, p := range postOnly {
		if pattern == "GET "+p {
			return true
		}
	}
	return false
}

func (h *handler) routes() {
	h.mux.HandleFunc(patPage, servePage)
	h.mux.HandleFunc(patScript, serveScript)
	h.mux.HandleFunc(patStyle, serveStyle)
	h.mux.HandleFunc(patOverview, h.overview)
	h.mux.HandleFunc(patList, h.list)
	h.mux.HandleFunc(patCount, h.count)
	h.mux.HandleFunc(patGet, h.get)
	h.mux.HandleFunc(patReplay, h.replay)
	h.mux.HandleFunc(patReplayAll, h.replayAll)
	h.mux.HandleFunc(patDelete, h.delete)
	h.mux.HandleFunc(patDiscard, h.discard)
	h.mux.HandleFunc(patEvents, h.listEvents)
	h.mux.HandleFunc(patEvent, h.get)
	h.mux.HandleFunc(patBulkRepl, h.bulk(bulkReplay))
	h.mux.HandleFunc(patBulkDisc, h.bulk(bulkDiscard))
	h.mux.HandleFunc(patBulkDel, h.bulk(bulkDelete))
	h.mux.HandleFunc(patAudit, h.audit)
	h.mux.HandleFunc(patSubs, h.subscriptions)
	h.mux.HandleFunc(patPause, h.pause)
	h.mux.HandleFunc(patResume, h.resume)
	for _, p := range postOnly {
		h.mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) {
			methodNotAllowed(w, r, []string{http.MethodPost})
		})
	}
}

func isPublic(pattern string) bool {
	return pattern == patPage || pattern == patScript || pattern == patStyle
}

// ServeHTTP checks, in order: the authorizer is configured, the path is canonical, a
// mutation is not cross-origin, the request is authorized (except for the page), and the
// route exists for the method; then it runs the route.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	defer h.recoverPanic(w, r)

	if h.auth == nil {
		writeUnauthorized(w)
		return
	}
	p := r.URL.EscapedPath()
	if p == "" {
		// Mounted with http.StripPrefix("/outbox/admin", h) and asked for "/outbox/admin":
		// ServeMux would redirect to "/", the root of the whole site. Redirect to the
		// prefix with a slash instead, relative to the request's own path.
		redirectToSlash(w, r)
		return
	}
	if cleanPath(p) != p {
		// ServeMux would redirect to the cleaned path, which drops the mount prefix.
		writeError(w, http.StatusNotFound, "not_found", "no such route", "")
		return
	}
	if err := h.cop.Check(r); err != nil {
		writeError(w, http.StatusForbidden, "cross_origin", "cross-origin request rejected", "")
		return
	}
	_, pattern := h.mux.Handler(r)
	if !isPublic(pattern) && !h.auth.Authorize(r) {
		writeUnauthorized(w)
		return
	}
	if pattern == "" {
		h.noRoute(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// noRoute answers a request no pattern matches: 405 with Allow when the path exists for
// another method, else 404, both as JSON (ServeMux's own answers are plain text).
func (h *handler) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range [...]string{http.MethodGet, http.MethodPost} {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" && !isPostOnlyGET(pattern) {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, "not_found", "no such route", "")
		return
	}
	methodNotAllowed(w, r, allow)
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
		"method "+printable(r.Method)+" is not allowed here; use "+strings.Join(allow, " or "), "")
}

// redirectToSlash redirects a request for the mount point without its trailing slash to
// the mount point with it, using a relative reference so the prefix need not be known.
func redirectToSlash(w http.ResponseWriter, r *http.Request) {
	reqPath, _, _ := strings.Cut(r.RequestURI, "?")
	last := reqPath[strings.LastIndexByte(reqPath, '/')+1:]
	target := "./" + last + "/"
	if last == "" {
		target = "./"
	}
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	// Not http.Redirect: it would add an HTML body.
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusTemporaryRedirect)
}

// cleanPath is ServeMux's canonical form of a path: no "." or ".." elements, no
// repeated slashes, the trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// recoverPanic turns a panic in a route (for example in Options.Redact or a store's
// method) into a logged error and a generic 500. http.ErrAbortHandler is
// passed on.
func (h *handler) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(v)
	}
	h.logger.ErrorContext(r.Context(), "outboxadmin: panic while serving request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("panic", v),
		slog.String("stack", string(debug.Stack())))
	writeError(w, http.StatusInternalServerError, "internal", "internal error", "")
}
