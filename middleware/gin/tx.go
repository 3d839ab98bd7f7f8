package outboxgin

import (
	"bufio"
	"database/sql"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"

	outbox "github.com/outboxkit/outbox/core"
	outboxhttp "github.com/outboxkit/outbox/middleware/nethttp"
)

// TxPerRequest returns gin middleware that runs each request in a transaction on db:
// [outboxhttp.TxPerRequest] adapted to gin's handler chain. The handlers after it get the
// transaction from [Tx]. It ends when the response status is known, before it is
// sent:
//
//   - the first body write, c.Writer.WriteHeaderNow or Flush (c.JSON, c.String,
//     c.AbortWithStatus and the like) ends it with the status set so far (gin's
//     c.Status only records a status);
//   - if the handlers return without writing, it ends with the recorded status (200
//     unless c.Status was called); if they recorded an error with c.Error, with 500
//     (or the recorded status if it is 400 or more), so it rolls back, and an
//     error-handling middleware placed before this one can still choose the response;
//   - a panic rolls it back and goes on to gin.Recovery, which must come before
//     this middleware (gin.Default has it).
//
// cfg.Commit decides which statuses commit (below 400 by default). If the commit fails
// the client gets cfg.ErrorHandler's response (a plain 500 by default) and
// c.Writer.Status reports it. If the transaction cannot begin, the request gets that
// response and the chain is aborted. cfg.Skip requests get no transaction.
func TxPerRequest(db *sql.DB, cfg outboxhttp.Config) gin.HandlerFunc {
	mw := outboxhttp.TxPerRequest(db, cfg)
	return func(c *gin.Context) {
		req, w := c.Request, c.Writer
		defer func() { c.Request, c.Writer = req, w }()
		ran := false
		mw(http.HandlerFunc(func(tw http.ResponseWriter, r *http.Request) {
			ran = true
			c.Request = r
			if r == req {
				// Skipped, or the transaction is an outer TxPerRequest's: the request
				// and its writer are passed on unchanged.
				c.Next()
				return
			}
			rw := &responseWriter{ResponseWriter: w, tx: tw}
			c.Writer = rw
			c.Next()
			if !w.Written() {
				status := w.Status()
				if len(c.Errors) > 0 && status < http.StatusBadRequest {
					status = http.StatusInternalServerError
				}
				// Ends the transaction. gin only records the status; it is sent after
				// the chain, unless a middleware before this one writes another.
				tw.WriteHeader(status)
			}
		})).ServeHTTP(w, req)
		if !ran {
			c.Abort() // no transaction: the error response is written
		}
	}
}

// Tx returns the transaction [TxPerRequest] began for the request, or false when there
// is none (the middleware did not run, or its Skip skipped the request).
func Tx(c *gin.Context) (*outbox.Tx, bool) {
	return outboxhttp.TxFromRequest(c.Request)
}

// responseWriter is the gin.ResponseWriter of a request with a transaction. gin's
// writer records the status and sends it with the first write; this one ends the
// transaction through tx (the outbox's writer over gin's) just before that.
type responseWriter struct {
	gin.ResponseWriter                     // gin's: Status, Size, Written, WriteHeader
	tx                 http.ResponseWriter // the outbox's, over gin's
}

var _ gin.ResponseWriter = (*responseWriter)(nil)

// WriteHeaderNow ends the transaction with the recorded status, then sends it (gin's
// writer ignores the status if the commit failed and the error response is written).
func (w *responseWriter) WriteHeaderNow() {
	if !w.ResponseWriter.Written() {
		w.tx.WriteHeader(w.ResponseWriter.Status())
		w.ResponseWriter.WriteHeaderNow()
	}
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	return w.tx.Write(b)
}

func (w *responseWriter) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	return io.WriteString(w.tx, s)
}

func (w *responseWriter) Flush() {
	w.WriteHeaderNow()
	_ = http.NewResponseController(w.tx).Flush()
}

func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.tx).Hijack()
}

// Unwrap returns the outbox's writer, for [net/http.ResponseController].
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.tx }
