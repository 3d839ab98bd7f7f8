package outboxhttp

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"

	outbox "github.com/outboxkit/outbox/core"
)

// Config configures [TxPerRequest]. The zero value is ready to use.
type Config struct {
	// TxOptions are passed to [outbox.BeginTx] for every transaction. Defaults to nil: the
	// driver's default isolation level, read-write.
	TxOptions *sql.TxOptions
	// Commit reports whether a response with this status code commits the transaction;
	// any other status rolls it back. Defaults to status < 400: 1xx (101 only, see
	// [TxPerRequest]), 2xx and 3xx commit, 4xx and 5xx roll back.
	Commit func(status int) bool
	// Skip, when it returns true, lets the request through without a transaction:
	// [TxFromRequest] then reports false and a write fails with [outbox.ErrNoTransaction].
	// Every request that gets a transaction holds a database connection (and, on SQLite
	// opened with _txlock=immediate, the write lock) until its response starts; skip the
	// requests that never write, for example safe methods:
	//
	//	Skip: func(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead },
	//
	// Defaults to nil: every request gets a transaction.
	Skip func(r *http.Request) bool
	// ErrorHandler writes the response when the transaction cannot begin or its commit
	// fails. The error has already been logged; the response must not reveal it.
	// Defaults to a plain-text 500 Internal Server Error.
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)
	// Logger receives failures to begin, commit or roll back. Defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultCommit is the default of [Config.Commit]: it commits on a status below 400.
func DefaultCommit(status int) bool { return status < http.StatusBadRequest }

// TxPerRequest returns net/http middleware that runs every request in a database
// transaction on db: it begins an [*outbox.Tx], puts it in the request's context (see
// [TxFromRequest] and [outbox.TxFromContext]) and ends it when the response status is
// known. The shape func(http.Handler) http.Handler fits http.Handler chains and chi's
// Use; the packages outboxgin and outboxecho adapt it to their routers.
//
// # When it commits
//
// The transaction ends at the handler's first WriteHeader, Write, Flush or Hijack,
// before anything reaches the client: with a status that commits (see [Config.Commit];
// Write implies 200, Hijack 101), it commits first and the after-commit callbacks run
// (events written through [outbox.Writer.Write] are handed to the dispatcher), then the
// status goes out. If the commit fails, the handler's status, headers and body are
// replaced by [Config.ErrorHandler]'s response (a 500 by default), so a client never
// sees success for a transaction that did not commit; later writes of the handler are
// discarded. With any other status it rolls back,
// then the response goes out unchanged. Informational statuses other than 101 (such as
// 103 Early Hints) pass through and decide nothing. A handler that returns without
// writing gets net/http's implicit 200, so its transaction commits. Finish all database
// work before writing the response: once it has started, the transaction is over.
//
// If the handler panics before the transaction has ended, it is rolled back and the
// panic goes on to the router's recovery (the panic is not recovered). A panic after
// the response started changes nothing: the transaction has already ended.
//
// If the transaction cannot begin, the handler does not run and the request gets
// ErrorHandler's response. A request that Skip skips, or whose context already holds a
// transaction begun by TxPerRequest (the middleware applied twice, which then reuses
// that transaction), reaches the handler unchanged: the same *http.Request and
// ResponseWriter.
//
// The ResponseWriter the handler gets implements http.Flusher and http.Hijacker and
// unwraps (Unwrap) to the one it wraps, for [net/http.ResponseController].
func TxPerRequest(db *sql.DB, cfg Config) func(http.Handler) http.Handler {
	s := &txSettings{
		txOpts:  cfg.TxOptions,
		commit:  cfg.Commit,
		skip:    cfg.Skip,
		onError: cfg.ErrorHandler,
		logger:  cmp.Or(cfg.Logger, slog.Default()).With(slog.String("component", "tx_per_request")),
	}
	if s.commit == nil {
		s.commit = DefaultCommit
	}
	if s.onError == nil {
		s.onError = defaultTxError
	}
	if db == nil {
		s.logger.Error("outbox: TxPerRequest has a nil *sql.DB: every request will get an error response")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (s.skip != nil && s.skip(r)) || r.Context().Value(txPerRequestKey{}) != nil {
				next.ServeHTTP(w, r)
				return
			}
			header := w.Header().Clone() // the headers to keep if the response is replaced
			tx, err := outbox.BeginTx(r.Context(), db, s.txOpts)
			if err != nil {
				s.logger.LogAttrs(r.Context(), slog.LevelError, "outbox: begin request transaction",
					requestAttrs(r, err)...)
				s.onError(w, r, err)
				return
			}
			tw := &txResponseWriter{w: w, r: r, tx: tx, s: s, header: header}
			ctx := context.WithValue(outbox.ContextWithTx(r.Context(), tx), txPerRequestKey{}, true)
			returned := false
			defer func() {
				// A panic (or runtime.Goexit) in the handler: roll back and let it go on.
				if !returned && tw.state == reqPending {
					tw.rollback()
				}
			}()
			next.ServeHTTP(tw, r.WithContext(ctx))
			returned = true
			if tw.state == reqPending {
				tw.decide(http.StatusOK) // nothing written: net/http sends 200
			}
		})
	}
}

// TxFromRequest returns the transaction [TxPerRequest] began for r, or false when
// there is none (the middleware did not run, or skipped r). Pass it to
// [outbox.Writer.Write] and run the business SQL through it; [outbox.Tx.SQLTx] gives the
// *sql.Tx for an ORM.
func TxFromRequest(r *http.Request) (*outbox.Tx, bool) {
	exec, ok := outbox.TxFromContext(r.Context())
	if !ok {
		return nil, false
	}
	tx, ok := exec.(*outbox.Tx)
	return tx, ok
}

// errTxCommitFailed is Hijack's error after a failed commit.
var errTxCommitFailed = errors.New("outbox: the request transaction failed to commit")

// txPerRequestKey marks a context whose transaction TxPerRequest began.
type txPerRequestKey struct{}

type txSettings struct {
	txOpts  *sql.TxOptions
	commit  func(int) bool
	skip    func(*http.Request) bool
	onError func(http.ResponseWriter, *http.Request, error)
	logger  *slog.Logger
}

func defaultTxError(w http.ResponseWriter, _ *http.Request, _ error) {
	http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
}

func requestAttrs(r *http.Request, err error) []slog.Attr {
	return []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Any("error", err),
	}
}

type reqOutcome int

const (
	reqPending    reqOutcome = iota // the handler has not started the response
	reqCommitted                    // committed; the handler's response goes out
	reqRolledBack                   // rolled back; the handler's response goes out
	reqFailed                       // the commit failed; the handler's response is discarded
)

// txResponseWriter ends the request's transaction when the handler starts its
// response, before the status reaches the client.
type txResponseWriter struct {
	w      http.ResponseWriter
	r      *http.Request
	tx     *outbox.Tx
	s      *txSettings
	header http.Header // w's headers before the handler ran
	state  reqOutcome
}

var (
	_ http.Flusher  = (*txResponseWriter)(nil)
	_ http.Hijacker = (*txResponseWriter)(nil)
)

func (t *txResponseWriter) Header() http.Header { return t.w.Header() }

func (t *txResponseWriter) WriteHeader(code int) {
	if t.state == reqPending {
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			t.w.WriteHeader(code) // informational: the final status is still to come
			return
		}
		t.decide(code)
	}
	if t.state != reqFailed {
		t.w.WriteHeader(code)
	}
}

func (t *txResponseWriter) Write(b []byte) (int, error) {
	if t.state == reqPending {
		t.WriteHeader(http.StatusOK)
	}
	if t.state == reqFailed {
		return len(b), nil // the error response is already written
	}
	return t.w.Write(b)
}

// Flush implements http.Flusher: a flush starts the response (200 unless WriteHeader
// was called).
func (t *txResponseWriter) Flush() { _ = t.FlushError() }

// FlushError is the flush of [net/http.ResponseController].
func (t *txResponseWriter) FlushError() error {
	if t.state == reqPending {
		t.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(t.w).Flush()
}

// Hijack implements http.Hijacker: the transaction ends as for a 101 response first.
// If its commit fails, the error response is written and Hijack returns an error.
func (t *txResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if t.state == reqPending {
		t.decide(http.StatusSwitchingProtocols)
	}
	if t.state == reqFailed {
		return nil, nil, errTxCommitFailed
	}
	return http.NewResponseController(t.w).Hijack()
}

// Unwrap returns the wrapped ResponseWriter, for [net/http.ResponseController].
func (t *txResponseWriter) Unwrap() http.ResponseWriter { return t.w }

// decide commits or rolls back for a response with the status code. On a failed
// commit it writes the error response instead of the handler's.
func (t *txResponseWriter) decide(code int) {
	if !t.s.commit(code) {
		t.rollback()
		return
	}
	// Should Commit panic (an after-commit callback did), state stays pending and the
	// deferred rollback in TxPerRequest is a no-op on the ended transaction.
	if err := t.tx.Commit(); err != nil {
		t.state = reqFailed
		level := slog.LevelError
		if errors.Is(err, context.Canceled) {
			level = slog.LevelWarn // the client went away: database/sql rolled back
		}
		t.s.logger.LogAttrs(t.r.Context(), level, "outbox: commit request transaction",
			append(requestAttrs(t.r, err), slog.Int("status", code))...)
		// Replace the handler's response: drop the headers it set, keep the ones set
		// before it ran (CORS, request ID).
		h := t.w.Header()
		clear(h)
		maps.Copy(h, t.header)
		t.s.onError(t.w, t.r, err)
		return
	}
	t.state = reqCommitted
}

func (t *txResponseWriter) rollback() {
	t.state = reqRolledBack
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		t.s.logger.LogAttrs(t.r.Context(), slog.LevelWarn, "outbox: roll back request transaction",
			requestAttrs(t.r, err)...)
	}
}
