package outboxecho

import (
	"database/sql"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	outbox "github.com/outboxkit/outbox/core"
	outboxhttp "github.com/outboxkit/outbox/middleware/nethttp"
)

// TxPerRequest returns echo middleware that runs each request in a transaction on db:
// [outboxhttp.TxPerRequest] adapted to echo's handler chain. The handler gets the
// transaction from [Tx]. It ends when the response status is known, before it is
// sent:
//
//   - when the handler writes the response (c.JSON, c.NoContent, c.Response().Write
//     and the like), with its status;
//   - when the handler returns an error before writing, the middleware hands the error
//     to echo's HTTPErrorHandler at once (as middleware.RequestLogger's HandleError
//     does) and the status it writes decides: 4xx and 5xx roll back. The error is still
//     returned, and echo's DefaultHTTPErrorHandler skips a committed response (a custom
//     one should check c.Response().Committed too). If the error handler writes nothing,
//     the middleware answers the error's status (an *echo.HTTPError's Code, else 500);
//   - when the handler returns nil without writing, with net/http's implicit 200;
//   - a panic rolls it back and goes on to middleware.Recover, which must come before
//     this middleware.
//
// cfg.Commit decides which statuses commit (below 400 by default). If the commit fails
// the client gets cfg.ErrorHandler's response (a plain 500 by default) and
// c.Response().Status reports it to the middleware before this one. If the transaction
// cannot begin, the request gets that response and the handler does not run.
// cfg.Skip requests get no transaction.
func TxPerRequest(db *sql.DB, cfg outboxhttp.Config) echo.MiddlewareFunc {
	mw := outboxhttp.TxPerRequest(db, cfg)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req, res := c.Request(), c.Response()
			defer func() { c.SetRequest(req); c.SetResponse(res) }()
			var err error
			mw(http.HandlerFunc(func(tw http.ResponseWriter, r *http.Request) {
				c.SetRequest(r)
				if r == req {
					// Skipped, or the transaction is an outer TxPerRequest's: the request
					// and its writer are passed on unchanged.
					err = next(c)
					return
				}
				// The handler writes through a Response of its own over the outbox's
				// writer, which writes to res: res then holds the status the client got.
				inner := echo.NewResponse(tw, c.Echo())
				c.SetResponse(inner)
				err = next(c)
				if err != nil && !inner.Committed {
					c.Error(err)
					if !inner.Committed {
						inner.WriteHeader(errorStatus(err))
					}
				}
			})).ServeHTTP(res, req)
			return err
		}
	}
}

// errorStatus is the status echo's default error handler gives err.
func errorStatus(err error) int {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if inner, ok := he.Internal.(*echo.HTTPError); ok {
			he = inner
		}
		return he.Code
	}
	return http.StatusInternalServerError
}

// Tx returns the transaction [TxPerRequest] began for the request, or false when there
// is none (the middleware did not run, or its Skip skipped the request).
func Tx(c echo.Context) (*outbox.Tx, bool) {
	return outboxhttp.TxFromRequest(c.Request())
}
