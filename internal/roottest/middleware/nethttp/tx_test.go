package outboxhttp_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/adaptertest"
	outboxhttp "github.com/outboxkit/outbox/middleware/nethttp"
)

var sqliteBackend = adaptertest.Backend{Name: "sqlite", Dialect: outbox.SQLite}

// statusProbe records in l every status that reaches the ResponseWriter below the
// middleware, that is, what the client is about to see.
func statusProbe(l *callLog, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&probeWriter{ResponseWriter: w, l: l}, r)
	})
}

type probeWriter struct {
	http.ResponseWriter
	l *callLog
}

func (p *probeWriter) WriteHeader(code int) {
	p.l.fn(fmt.Sprintf("status %d", code))()
	p.ResponseWriter.WriteHeader(code)
}

func (p *probeWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// serveHTTP serves h on a test server and returns its URL.
func serveHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// send makes a request and returns the response with its body read.
func send(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(body)
}

// placeOrder is the business work of a handler: the order row and its event, in tx.
func placeOrder(t *testing.T, b *adaptertest.Bundle, r *http.Request, eventID, orderID string) *outbox.Tx {
	t.Helper()
	tx, ok := outboxhttp.TxFromRequest(r)
	if !ok {
		t.Error("the handler has no transaction")
		return nil
	}
	if exec, _ := outbox.TxFromContext(r.Context()); exec != outbox.Executor(tx) {
		t.Error("TxFromContext and TxFromRequest disagree")
	}
	if _, err := tx.ExecContext(r.Context(), b.InsertOrderSQL(), orderID); err != nil {
		t.Errorf("insert order: %v", err)
	}
	if _, err := b.Writer.Write(r.Context(), tx, b.Envelope(eventID, orderID)); err != nil {
		t.Errorf("write event: %v", err)
	}
	return tx
}

// logCounter is a slog.Handler that keeps every record's level and message.
type logCounter struct {
	mu      sync.Mutex
	records []string
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }

func (h *logCounter) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func TestTxPerRequestCommitsBeforeTheStatusIsSent(t *testing.T) {
	t.Parallel()
	b := adaptertest.Setup(t, sqliteBackend, adaptertest.Options{})
	var l callLog
	id := outbox.NewID()
	h := outboxhttp.TxPerRequest(b.DB, outboxhttp.Config{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := placeOrder(t, b, r, id, "o-1")
		tx.AfterCommit(l.fn("after-commit"))
		tx.AfterRollback(l.fn("after-rollback"))
		w.Header().Set("Location", "/orders/o-1")
		w.WriteHeader(http.StatusCreated)
		l.fn("WriteHeader returned")()
		_, _ = io.WriteString(w, `{"id":"o-1"}`)
	}))
	resp, body := send(t, http.MethodPost, serveHTTP(t, statusProbe(&l, h)))
	if resp.StatusCode != http.StatusCreated || body != `{"id":"o-1"}` || resp.Header.Get("Location") != "/orders/o-1" {
		t.Fatalf("got %d %q Location=%q", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	if got := l.String(); got != "after-commit,status 201,WriteHeader returned" {
		t.Errorf("order of events: %s", got)
	}
	b.WaitDelivered(t, id) // the hot path: the poller runs once an hour
	if !b.HasOrder(t, "o-1") {
		t.Error("the order was not committed")
	}
}

func TestTxPerRequestCommitsWithoutExplicitStatus(t *testing.T) {
	t.Parallel()
	b := adaptertest.Setup(t, sqliteBackend, adaptertest.Options{})
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		body  string
	}{
		{"NothingWritten", func(http.ResponseWriter) {}, ""},
		{"WriteOnly", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "ok") }, "ok"},
		{"Flush", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var l callLog
			id, order := outbox.NewID(), "o-"+tc.name
			h := outboxhttp.TxPerRequest(b.DB, outboxhttp.Config{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				placeOrder(t, b, r, id, order).AfterCommit(l.fn("after-commit"))
				tc.write(w)
			}))
			resp, body := send(t, http.MethodPost, serveHTTP(t, statusProbe(&l, h)))
			if resp.StatusCode != http.StatusOK || body != tc.body {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			want := "after-commit,status 200"
			if tc.name == "NothingWritten" {
				want = "after-commit" // net/http sends the implicit 200 itself
			}
			if got := l.String(); got != want {
				t.Errorf("order of events: %s, want %s", got, want)
			}
			b.WaitDelivered(t, id)
			if !b.HasOrder(t, order) {
				t.Error("the order was not committed")
			}
		})
	}
}

func TestTxPerRequestRollsBackOnErrorStatus(t *testing.T) {
	t.Parallel()
	b := adaptertest.Setup(t, sqliteBackend, adaptertest.Options{})
	onlyCreated := func(status int) bool { return status == http.StatusCreated }
	for _, tc := range []struct {
		name   string
		status int
		commit func(int) bool
	}{
		{"400", http.StatusBadRequest, nil},
		{"404", http.StatusNotFound, nil},
		{"409", http.StatusConflict, nil},
		{"500", http.StatusInternalServerError, nil},
		{"503", http.StatusServiceUnavailable, nil},
		{"CustomCommit200", http.StatusOK, onlyCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var l callLog
			id, order := outbox.NewID(), "o-"+tc.name
			h := outboxhttp.TxPerRequest(b.DB, outboxhttp.Config{Commit: tc.commit})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx := placeOrder(t, b, r, id, order)
				tx.AfterCommit(l.fn("after-commit"))
				tx.AfterRollback(l.fn("after-rollback"))
				w.Header().Set("X-Reason", "invalid")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "handler body")
			}))
			resp, body := send(t, http.MethodPost, serveHTTP(t, statusProbe(&l, h)))
			if resp.StatusCode != tc.status || body != "handler body" || resp.Header.Get("X-Reason") != "invalid" {
				t.Fatalf("got %d %q X-Reason=%q; want the handler's response", resp.StatusCode, body, resp.Header.Get("X-Reason"))
			}
			if got, want := l.String(), fmt.Sprintf("after-rollback,status %d", tc.status); got != want {
				t.Errorf("order of events: %s, want %s", got, want)
			}
			b.AssertNotDelivered(t, id)
			if b.HasOrder(t, order) {
				t.Error("the order was committed")
			}
			if _, ok := b.Status(t, id); ok {
				t.Error("the event has a row")
			}
		})
	}
}

func TestTxPerRequestRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	b := adaptertest.Setup(t, sqliteBackend, adaptertest.Options{})

	t.Run("Recovered", func(t *testing.T) {
		t.Parallel()
		var l callLog
		id := outbox.NewID()
		var recovered any
		recoverer := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() {
					if recovered = recover(); recovered != nil {
						l.fn("recovered")()
						w.WriteHeader(http.StatusInternalServerError)
					}
				}()
				next.ServeHTTP(w, r)
			})
		}
		h := outboxhttp.TxPerRequest(b.DB, outboxhttp.Config{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx := placeOrder(t, b, r, id, "o-panic")
			tx.AfterCommit(l.fn("after-commit"))
			tx.AfterRollback(l.fn("after-rollback"))
			panic("boom")
		}))
		resp, _ := send(t, http.MethodPost, serveHTTP(t, recoverer(h)))
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("got %d, want the recoverer's 500", resp.StatusCode)
		}
		if recovered != "boom" {
			t.Errorf("the recoverer got %v, want the handler's panic", recovered)
		}
		if got := l.String(); got != "after-rollback,recovered" {
			t.Errorf("order of events: %s", got)
		}
		b.AssertNotDelivered(t, id)
		if b.HasOrder(t, "o-panic") {
			t.Error("the order was committed")
		}
	})

	t.Run("ErrAbortHandler", func(t *testing.T) {
		t.Parallel()
		var l callLog
		id := outbox.NewID()
		h := outboxhttp.TxPerRequest(b.DB, outboxhttp.Config{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			placeOrder(t, b, r, id, "o-abort").AfterRollback(l.fn("after-rollback"))
			panic(http.ErrAbortHandler) // net/http's own recovery aborts the connection
		}))
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, serveHTTP(t, h), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("got %d; want the connection aborted", resp.StatusCode)
		}
		b.AssertNotDelivered(t, id)
		if b.HasOrder(t, "o-abort") {
			t.Error("the order was committed")
		}
		if got := l.String(); got != "after-rollback" {
			t.Errorf("callbacks: %s", got)
		}
	})
}

// newDeferredFKDB returns a SQLite database whose commit fails when an order_line
// refers to a missing order: the foreign key is checked at commit.
func newDeferredFKDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "fk.db"))+"&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE orders (id TEXT PRIMARY KEY)`,
		`CREATE TABLE order_line (id TEXT PRIMARY KEY,
			order_id TEXT NOT NULL REFERENCES orders (id) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTxPerRequestCommitFailureReplacesTheResponse(t *testing.T) {
	t.Parallel()
	jsonError := func(w http.ResponseWriter, _ *http.Request, err error) {
		if err == nil {
			t.Error("ErrorHandler got a nil error")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":"try again"}`)
	}
	for _, tc := range []struct {
		name        string
		onError     func(http.ResponseWriter, *http.Request, error)
		status      int
		contentType string
		body        string
	}{
		{"Default", nil, http.StatusInternalServerError, "text/plain; charset=utf-8", "Internal Server Error\n"},
		{"ErrorHandler", jsonError, http.StatusServiceUnavailable, "application/json", `{"error":"try again"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := newDeferredFKDB(t)
			logs := &logCounter{}
			var l callLog
			mw := outboxhttp.TxPerRequest(db, outboxhttp.Config{ErrorHandler: tc.onError, Logger: slog.New(logs)})
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := outboxhttp.TxFromRequest(r)
				tx.AfterCommit(l.fn("after-commit"))
				tx.AfterRollback(l.fn("after-rollback"))
				if _, err := tx.ExecContext(r.Context(), `INSERT INTO order_line (id, order_id) VALUES ('l-1', 'missing')`); err != nil {
					t.Errorf("insert: %v", err)
				}
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Location", "/orders/missing")
				w.Header().Set("Content-Length", "100")
				w.WriteHeader(http.StatusCreated)
				if n, err := io.WriteString(w, `{"id":"l-1"}`); n != len(`{"id":"l-1"}`) || err != nil {
					t.Errorf("discarded write returned %d, %v", n, err)
				}
				l.fn("handler returned")()
			}))
			// A middleware before it sets a header that must survive.
			outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "req-1")
				h.ServeHTTP(w, r)
			})
			resp, body := send(t, http.MethodPost, serveHTTP(t, statusProbe(&l, outer)))
			if resp.StatusCode != tc.status || body != tc.body {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := resp.Header.Get("Location"); got != "" {
				t.Errorf("the handler's Location header was sent: %q", got)
			}
			if got := resp.Header.Get("X-Request-Id"); got != "req-1" {
				t.Errorf("the outer middleware's header was dropped: %q", got)
			}
			want := fmt.Sprintf("after-rollback,status %d,handler returned", tc.status)
			if got := l.String(); got != want {
				t.Errorf("order of events: %s, want %s", got, want)
			}
			if n := countRows(t, db, "order_line"); n != 0 {
				t.Errorf("%d rows committed", n)
			}
			if n := logs.count("ERROR outbox: commit request transaction"); n != 1 {
				t.Errorf("commit failure logged %d times, want once", n)
			}
		})
	}
}

func TestTxPerRequestHijackCommitsFirst(t *testing.T) {
	t.Parallel()
	b := adaptertest.Setup(t, sqliteBackend, adaptertest.Options{})
	var l callLog
	id := outbox.NewID()
	h := outboxhttp.TxPerRequest(b.DB, outboxhttp.Config{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		placeOrder(t, b, r, id, "o-hijack").AfterCommit(l.fn("after-commit"))
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		l.fn("hijacked")()
		_, _ = buf.WriteString("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
		_ = buf.Flush()
	}))
	resp, _ := send(t, http.MethodPost, serveHTTP(t, h))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("got %d", resp.StatusCode)
	}
	if got := l.String(); got != "after-commit,hijacked" {
		t.Errorf("order of events: %s", got)
	}
	b.WaitDelivered(t, id)
}

func TestTxPerRequestResponseController(t *testing.T) {
	t.Parallel()
	db := newDeferredFKDB(t)
	var l callLog
	h := outboxhttp.TxPerRequest(db, outboxhttp.Config{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := outboxhttp.TxFromRequest(r)
		tx.AfterCommit(l.fn("after-commit"))
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through Unwrap: %v", err)
		}
		w.WriteHeader(http.StatusEarlyHints) // informational: decides nothing
		l.fn("early hints sent")()
		_, _ = io.WriteString(w, "chunk")
		if err := rc.Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
	}))
	resp, body := send(t, http.MethodGet, serveHTTP(t, statusProbe(&l, h)))
	if resp.StatusCode != http.StatusOK || body != "chunk" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if got := l.String(); got != "status 103,early hints sent,after-commit,status 200" {
		t.Errorf("order of events: %s", got)
	}
}

func TestTxPerRequestSkip(t *testing.T) {
	t.Parallel()
	b := adaptertest.Setup(t, sqliteBackend, adaptertest.Options{})
	skipReads := func(r *http.Request) bool { return r.Method == http.MethodGet }
	h := outboxhttp.TxPerRequest(b.DB, outboxhttp.Config{Skip: skipReads})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := outboxhttp.TxFromRequest(r)
		fmt.Fprint(w, ok)
	}))
	url := serveHTTP(t, h)
	if _, body := send(t, http.MethodGet, url); body != "false" {
		t.Errorf("GET has a transaction")
	}
	if _, body := send(t, http.MethodPost, url); body != "true" {
		t.Errorf("POST has no transaction")
	}
	if _, ok := outboxhttp.TxFromRequest(httptest.NewRequest(http.MethodGet, "/", nil)); ok {
		t.Error("a plain request has a transaction")
	}
}

func TestTxPerRequestAppliedTwiceUsesOneTransaction(t *testing.T) {
	t.Parallel()
	db := newDeferredFKDB(t)
	mw := outboxhttp.TxPerRequest(db, outboxhttp.Config{})
	var outer *outbox.Tx
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := outboxhttp.TxFromRequest(r)
		if tx != outer {
			t.Error("the inner middleware began another transaction")
		}
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO orders (id) VALUES ('o-1')`); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		outer, _ = outboxhttp.TxFromRequest(r)
		inner.ServeHTTP(w, r)
	}))
	if resp, _ := send(t, http.MethodPost, serveHTTP(t, h)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("got %d", resp.StatusCode)
	}
	if n := countRows(t, db, "orders"); n != 1 {
		t.Errorf("%d orders committed, want 1", n)
	}
}

func TestTxPerRequestBeginFailure(t *testing.T) {
	t.Parallel()
	closed, err := sql.Open("sqlite", outbox.SQLiteDSN(filepath.Join(t.TempDir(), "closed.db")))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	for _, tc := range []struct {
		name     string
		db       *sql.DB
		wantLogs int // errors logged, at construction and per request
	}{
		{"ClosedDB", closed, 1},
		{"NilDB", nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &logCounter{}
			h := outboxhttp.TxPerRequest(tc.db, outboxhttp.Config{Logger: slog.New(logs)})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Error("the handler ran without a transaction")
			}))
			resp, body := send(t, http.MethodPost, serveHTTP(t, h))
			if resp.StatusCode != http.StatusInternalServerError || body != "Internal Server Error\n" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			if n := logs.count("ERROR"); n != tc.wantLogs {
				t.Errorf("%d errors logged, want %d", n, tc.wantLogs)
			}
		})
	}
}
