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
	DefaultLimit = outbox.DefaultDeadPageSize
	// MaxLimit is the largest page a list request returns; larger limits are clamped to it.
	MaxLimit = outbox.MaxDeadPageSize
	// MaxBodyBytes bounds the JSON body of a POST request; a larger one gets 413.
	MaxBodyBytes = 64 << 10
)

// DeadEvents is what the handler needs from the dead-event manager.
// [*outbox.DeadEvents] (from [outbox.Outbox.Dead]) implements it; tests can pass a fake.
// Errors wrapping [outbox.ErrNotFound], [outbox.ErrNotDead] or [outbox.ErrFinished], and
// [outbox.ErrInvalidArgument] become 404, 409 and 400; any other error is a 500.
type DeadEvents interface {
	// List returns a page of DEAD events, oldest first; see [outbox.DeadEvents.List].
	List(ctx context.Context, q outbox.DeadQuery) (outbox.DeadPage, error)
	// Count counts the DEAD events matching f.
	Count(ctx context.Context, f outbox.DeadFilter) (int64, error)
	// Get returns one event, whatever its status.
	Get(ctx context.Context, id string) (outbox.Event, error)
	// Replay moves one DEAD event back to NEW.
	Replay(ctx context.Context, id string) error
	// ReplayAll replays every DEAD event matching f in batches and returns how many.
	ReplayAll(ctx context.Context, f outbox.DeadFilter, batchSize int) (int64, error)
	// Delete deletes one DEAD event for good; see [outbox.DeadEvents.Delete].
	Delete(ctx context.Context, id string) error
	// Discard makes one event DISCARDED, kept but never delivered; see
	// [outbox.DeadEvents.Discard].
	Discard(ctx context.Context, id string) error
	// Stats counts events per status and finds the oldest pending one.
	Stats(ctx context.Context) (outbox.Stats, error)
}

var _ DeadEvents = (*outbox.DeadEvents)(nil)

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
	// Logger receives an audit line per replay, the warning of [AllowAll] and the real
	// errors behind 500 responses. Defaults to slog.Default().
	Logger *slog.Logger
}

// New returns the admin handler over dead. It returns a *[outbox.ConfigError] (matching
// [outbox.ErrInvalidConfig]) when dead is nil, when Authorize is a [BearerToken] with
// an empty or unsendable token or a nil [AuthorizerFunc], when ReplayBatchSize is
// negative, or when a trusted origin is malformed. Without Authorize it logs a warning,
// since every request will get 401; with [AllowAll] it logs a louder one.
func New(dead DeadEvents, opts Options) (http.Handler, error) {
	if d, ok := dead.(*outbox.DeadEvents); dead == nil || ok && d == nil {
		return nil, &outbox.ConfigError{Field: "dead", Reason: "is nil"}
	}
	if err := validAuthorizer(opts.Authorize); err != nil {
		return nil, err
	}
	if opts.ReplayBatchSize < 0 {
		return nil, &outbox.ConfigError{Field: "ReplayBatchSize", Reason: fmt.Sprintf("is negative (%d)", opts.ReplayBatchSize)}
	}
	logger := cmp.Or(opts.Logger, slog.Default()).With(slog.String("component", "outboxadmin"))
	h := &handler{
		dead:   dead,
		auth:   opts.Authorize,
		redact: opts.Redact,
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
	dead   DeadEvents
	auth   Authorizer
	redact func(*outbox.Event)
	batch  int
	logger *slog.Logger
	mux    *http.ServeMux
	cop    *http.CrossOriginProtection
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
	// patReplayAllGET keeps GET /api/dead-events/replay from matching patGet with the
	// ID "replay": it answers 405.
	patReplayAllGET = "GET /api/dead-events/replay"
)

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
	h.mux.HandleFunc(patReplayAllGET, func(w http.ResponseWriter, r *http.Request) {
		methodNotAllowed(w, r, []string{http.MethodPost})
	})
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
		if _, pattern := h.mux.Handler(probe); pattern != "" && pattern != patReplayAllGET {
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

// recoverPanic turns a panic in a route (for example in Options.Redact or a DeadEvents
// implementation) into a logged error and a generic 500. http.ErrAbortHandler is
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
