package outboxecho_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/adaptertest"
	outboxecho "github.com/outboxkit/outbox/middleware/echo"
	outboxhttp "github.com/outboxkit/outbox/middleware/nethttp"
)

// events is an ordered log shared by the handler and the status probe.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.log, ",")
}

// statusProbe logs every status that reaches the server's ResponseWriter, under the
// router: what the client is about to see.
func statusProbe(ev *events, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&probeWriter{ResponseWriter: w, ev: ev}, r)
	})
}

type probeWriter struct {
	http.ResponseWriter
	ev *events
}

func (p *probeWriter) WriteHeader(code int) {
	p.ev.add(fmt.Sprintf("status %d", code))
	p.ResponseWriter.WriteHeader(code)
}

func (p *probeWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

func send(t *testing.T, method, url string) (int, string) {
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
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// recoverer does what echo's middleware.Recover does with a panic: it hands an error to
// the HTTPErrorHandler. (Importing echo/v4/middleware would add golang.org/x/time to
// go.sum.)
func recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				c.Error(fmt.Errorf("panic: %v", r))
				err = nil
			}
		}()
		return next(c)
	}
}

func newEcho() *echo.Echo {
	e := echo.New()
	e.Logger.SetOutput(io.Discard)
	return e
}

// orderApp is an app on echo: POST /orders/:id/:outcome?event=<id> inserts the order
// and writes its event in the request's transaction, then answers as outcome says. An
// outer middleware records the status echo reports.
func orderApp(t *testing.T, b *adaptertest.Bundle, ev *events, reported *sync.Map) *echo.Echo {
	e := newEcho()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			reported.Store(c.Param("id"), c.Response().Status)
			return err
		}
	})
	e.Use(recoverer)
	e.Use(outboxecho.TxPerRequest(b.DB, outboxhttp.Config{}))
	e.POST("/orders/:id/:outcome", func(c echo.Context) error {
		tx, ok := outboxecho.Tx(c)
		if !ok {
			t.Error("the handler has no transaction")
			return nil
		}
		ctx := c.Request().Context()
		if _, err := tx.ExecContext(ctx, b.InsertOrderSQL(), c.Param("id")); err != nil {
			t.Errorf("insert order: %v", err)
		}
		if _, err := b.Writer.Write(ctx, tx, b.Envelope(c.QueryParam("event"), c.Param("id"))); err != nil {
			t.Errorf("write event: %v", err)
		}
		tx.AfterCommit(func() { ev.add("after-commit " + c.Param("id")) })
		switch c.Param("outcome") {
		case "created":
			return c.JSON(http.StatusCreated, map[string]string{"id": c.Param("id")})
		case "nothing":
			return nil
		case "created-then-error": // the response is out: the error changes nothing
			_ = c.NoContent(http.StatusCreated)
			return errors.New("too late")
		case "invalid":
			return c.JSON(http.StatusBadRequest, map[string]string{"error": "invalid"})
		case "no-content-500":
			return c.NoContent(http.StatusInternalServerError)
		case "http-error":
			return echo.NewHTTPError(http.StatusConflict, "conflict")
		case "error":
			return errors.New("database unavailable")
		case "panic":
			panic("boom")
		}
		return nil
	})
	return e
}

func TestTxPerRequest(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := adaptertest.Setup(t, be, adaptertest.Options{})
		var ev events
		var reported sync.Map
		srv := httptest.NewServer(statusProbe(&ev, orderApp(t, b, &ev, &reported)))
		t.Cleanup(srv.Close)

		for _, tc := range []struct {
			outcome string
			status  int
			body    string // "" to skip the check
			commit  bool
		}{
			{"created", http.StatusCreated, `{"id":"o-created"}` + "\n", true},
			{"nothing", http.StatusOK, "", true},
			{"created-then-error", http.StatusCreated, "", true},
			{"invalid", http.StatusBadRequest, `{"error":"invalid"}` + "\n", false},
			{"no-content-500", http.StatusInternalServerError, "", false},
			{"http-error", http.StatusConflict, `{"message":"conflict"}` + "\n", false},
			{"error", http.StatusInternalServerError, `{"message":"Internal Server Error"}` + "\n", false},
			{"panic", http.StatusInternalServerError, `{"message":"Internal Server Error"}` + "\n", false},
		} {
			t.Run(tc.outcome, func(t *testing.T) {
				order, id := "o-"+tc.outcome, outbox.NewID()
				status, body := send(t, http.MethodPost, srv.URL+"/orders/"+order+"/"+tc.outcome+"?event="+id)
				if status != tc.status || (tc.body != "" && body != tc.body) {
					t.Fatalf("got %d %q, want %d %q", status, body, tc.status, tc.body)
				}
				if got, _ := reported.Load(order); got != tc.status {
					t.Errorf("c.Response().Status = %v, want %d", got, tc.status)
				}
				if !tc.commit {
					b.AssertNotDelivered(t, id)
					if b.HasOrder(t, order) {
						t.Error("the order was committed")
					}
					return
				}
				b.WaitDelivered(t, id)
				if !b.HasOrder(t, order) {
					t.Error("the order was not committed")
				}
				// The commit and its callbacks came before the status reached the client.
				want := fmt.Sprintf("after-commit %s,status %d", order, tc.status)
				if tc.outcome == "nothing" {
					want = "after-commit " + order // net/http sends the implicit 200 itself
				}
				if log := ev.String(); !strings.Contains(log, want) {
					t.Errorf("order of events: %s, want %s", log, want)
				}
			})
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

func TestTxPerRequestCommitFailure(t *testing.T) {
	t.Parallel()
	db := newDeferredFKDB(t)
	var reported atomic.Int64
	e := newEcho()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			reported.Store(int64(c.Response().Status))
			return err
		}
	})
	e.Use(outboxecho.TxPerRequest(db, outboxhttp.Config{}))
	e.POST("/lines", func(c echo.Context) error {
		tx, _ := outboxecho.Tx(c)
		if _, err := tx.ExecContext(c.Request().Context(), `INSERT INTO order_line (id, order_id) VALUES ('l-1', 'missing')`); err != nil {
			t.Errorf("insert: %v", err)
		}
		c.Response().Header().Set("Location", "/lines/l-1")
		return c.JSON(http.StatusCreated, map[string]string{"id": "l-1"})
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	if status, body := send(t, http.MethodPost, srv.URL+"/lines"); status != http.StatusInternalServerError || body != "Internal Server Error\n" {
		t.Fatalf("got %d %q; want a plain 500", status, body)
	}
	if got := reported.Load(); got != http.StatusInternalServerError {
		t.Errorf("c.Response().Status = %d, want 500", got)
	}
	if n := countRows(t, db, "order_line"); n != 0 {
		t.Errorf("%d rows committed", n)
	}
}

// TestTxPerRequestErrorHandlerWritesNothing: a returned error still rolls back when a
// custom error handler answers nothing; the middleware answers the error's status.
func TestTxPerRequestErrorHandlerWritesNothing(t *testing.T) {
	t.Parallel()
	db := newDeferredFKDB(t)
	e := newEcho()
	e.HTTPErrorHandler = func(error, echo.Context) {}
	e.Use(outboxecho.TxPerRequest(db, outboxhttp.Config{}))
	e.POST("/orders", func(c echo.Context) error {
		tx, _ := outboxecho.Tx(c)
		if _, err := tx.ExecContext(c.Request().Context(), `INSERT INTO orders (id) VALUES ('o-1')`); err != nil {
			t.Errorf("insert: %v", err)
		}
		return fmt.Errorf("wrapped: %w", echo.NewHTTPError(http.StatusTeapot))
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	if status, _ := send(t, http.MethodPost, srv.URL+"/orders"); status != http.StatusTeapot {
		t.Fatalf("got %d, want 418", status)
	}
	if n := countRows(t, db, "orders"); n != 0 {
		t.Errorf("%d rows committed", n)
	}
}

func TestTxPerRequestSkipAndBeginFailure(t *testing.T) {
	t.Parallel()
	closed := newDeferredFKDB(t)
	closed.Close()
	db := newDeferredFKDB(t)
	skipGET := func(r *http.Request) bool { return r.Method == http.MethodGet }
	e := newEcho()
	hasTx := func(c echo.Context) error {
		_, ok := outboxecho.Tx(c)
		return c.String(http.StatusOK, fmt.Sprint(ok))
	}
	e.Match([]string{http.MethodGet, http.MethodPost}, "/ok", hasTx, outboxecho.TxPerRequest(db, outboxhttp.Config{Skip: skipGET}))
	e.POST("/broken", func(echo.Context) error {
		t.Error("a handler ran without its transaction")
		return nil
	}, outboxecho.TxPerRequest(closed, outboxhttp.Config{}))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)

	if _, body := send(t, http.MethodGet, srv.URL+"/ok"); body != "false" {
		t.Errorf("skipped GET: has a transaction")
	}
	if _, body := send(t, http.MethodPost, srv.URL+"/ok"); body != "true" {
		t.Errorf("POST: no transaction")
	}
	if status, body := send(t, http.MethodPost, srv.URL+"/broken"); status != http.StatusInternalServerError || body != "Internal Server Error\n" {
		t.Errorf("begin failure: got %d %q", status, body)
	}
}
