package outboxgin_test

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

	"github.com/gin-gonic/gin"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/internal/adaptertest"
	outboxgin "github.com/outboxkit/outbox/middleware/gin"
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

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// orderRouter is an app on gin: POST /orders/:id/:outcome?event=<id> inserts the order
// and writes its event in the request's transaction, then answers as outcome says.
// An error-handling middleware before TxPerRequest turns c.Errors into a 422, and an
// outer one records the status gin reports.
func orderRouter(t *testing.T, b *adaptertest.Bundle, ev *events, reported *sync.Map) *gin.Engine {
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		reported.Store(c.Param("id"), c.Writer.Status())
	})
	r.Use(gin.RecoveryWithWriter(io.Discard))
	r.Use(func(c *gin.Context) {
		c.Next()
		if len(c.Errors) > 0 && !c.Writer.Written() {
			c.JSON(http.StatusUnprocessableEntity, gin.H{"error": "rejected"})
		}
	})
	r.Use(outboxgin.TxPerRequest(b.DB, outboxhttp.Config{}))
	r.POST("/orders/:id/:outcome", func(c *gin.Context) {
		tx, ok := outboxgin.Tx(c)
		if !ok {
			t.Error("the handler has no transaction")
			return
		}
		ctx := c.Request.Context()
		if _, err := tx.ExecContext(ctx, b.InsertOrderSQL(), c.Param("id")); err != nil {
			t.Errorf("insert order: %v", err)
		}
		if _, err := b.Writer.Write(ctx, tx, b.Envelope(c.Query("event"), c.Param("id"))); err != nil {
			t.Errorf("write event: %v", err)
		}
		tx.AfterCommit(func() { ev.add("after-commit " + c.Param("id")) })
		switch c.Param("outcome") {
		case "created":
			c.JSON(http.StatusCreated, gin.H{"id": c.Param("id")})
		case "accepted": // recorded only; gin sends it after the chain
			c.Status(http.StatusAccepted)
		case "nothing":
		case "invalid":
			c.JSON(http.StatusBadRequest, gin.H{"error": "invalid"})
		case "abort":
			c.AbortWithStatus(http.StatusInternalServerError)
		case "conflict": // recorded only
			c.Status(http.StatusConflict)
		case "error":
			_ = c.Error(errors.New("domain rule broken"))
		case "panic":
			panic("boom")
		}
	})
	return r
}

func TestTxPerRequest(t *testing.T) {
	t.Parallel()
	adaptertest.ForEach(t, func(t *testing.T, be adaptertest.Backend) {
		b := adaptertest.Setup(t, be, adaptertest.Options{})
		var ev events
		var reported sync.Map
		srv := httptest.NewServer(statusProbe(&ev, orderRouter(t, b, &ev, &reported)))
		t.Cleanup(srv.Close)

		for _, tc := range []struct {
			outcome string
			status  int
			commit  bool
		}{
			{"created", http.StatusCreated, true},
			{"accepted", http.StatusAccepted, true},
			{"nothing", http.StatusOK, true},
			{"invalid", http.StatusBadRequest, false},
			{"abort", http.StatusInternalServerError, false},
			{"conflict", http.StatusConflict, false},
			{"error", http.StatusUnprocessableEntity, false},
			{"panic", http.StatusInternalServerError, false},
		} {
			t.Run(tc.outcome, func(t *testing.T) {
				order, id := "o-"+tc.outcome, outbox.NewID()
				status, body := post(t, srv.URL+"/orders/"+order+"/"+tc.outcome+"?event="+id)
				if status != tc.status {
					t.Fatalf("got %d %s, want %d", status, body, tc.status)
				}
				if got, _ := reported.Load(order); got != tc.status {
					t.Errorf("c.Writer.Status() = %v, want %d", got, tc.status)
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
				if log := ev.String(); !strings.Contains(log, fmt.Sprintf("after-commit %s,status %d", order, tc.status)) {
					t.Errorf("order of events: %s", log)
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

func TestTxPerRequestCommitFailure(t *testing.T) {
	t.Parallel()
	db := newDeferredFKDB(t)
	var reported atomic.Int64
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		reported.Store(int64(c.Writer.Status()))
	})
	r.Use(outboxgin.TxPerRequest(db, outboxhttp.Config{}))
	r.POST("/lines", func(c *gin.Context) {
		tx, _ := outboxgin.Tx(c)
		if _, err := tx.ExecContext(c.Request.Context(), `INSERT INTO order_line (id, order_id) VALUES ('l-1', 'missing')`); err != nil {
			t.Errorf("insert: %v", err)
		}
		c.Header("Location", "/lines/l-1")
		c.JSON(http.StatusCreated, gin.H{"id": "l-1"})
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/lines", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || string(body) != "Internal Server Error\n" || resp.Header.Get("Location") != "" {
		t.Fatalf("got %d %q Location=%q; want a plain 500", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	if got := reported.Load(); got != http.StatusInternalServerError {
		t.Errorf("c.Writer.Status() = %d, want 500", got)
	}
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM order_line`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows committed (%v)", n, err)
	}
}

func TestTxPerRequestSkipAndBeginFailure(t *testing.T) {
	t.Parallel()
	closed := newDeferredFKDB(t)
	closed.Close()
	db := newDeferredFKDB(t)
	skipGET := func(r *http.Request) bool { return r.Method == http.MethodGet }
	r := gin.New()
	hasTx := func(c *gin.Context) {
		_, ok := outboxgin.Tx(c)
		c.String(http.StatusOK, "%t", ok)
	}
	r.Match([]string{http.MethodGet, http.MethodPost}, "/ok", outboxgin.TxPerRequest(db, outboxhttp.Config{Skip: skipGET}), hasTx)
	r.POST("/broken", outboxgin.TxPerRequest(closed, outboxhttp.Config{}), func(c *gin.Context) {
		t.Error("a handler ran without its transaction")
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "false" {
		t.Errorf("skipped GET: has a transaction")
	}
	if _, body := post(t, srv.URL+"/ok"); body != "true" {
		t.Errorf("POST: no transaction")
	}
	if status, body := post(t, srv.URL+"/broken"); status != http.StatusInternalServerError || body != "Internal Server Error\n" {
		t.Errorf("begin failure: got %d %q", status, body)
	}
}
