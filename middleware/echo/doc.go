// Package outboxecho integrates the outbox with the echo (v4) router: it mounts the
// admin handler on a group and runs requests in a database transaction.
//
// Import path: github.com/outboxkit/outbox/middleware/echo (package outboxecho).
//
// # Mounting the admin
//
// [Mount] serves an [net/http.Handler], such as the one outboxadmin.New returns, under
// a group, with every method and the path below the group's prefix intact:
//
//	admin, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.BearerToken(token)})
//	if err != nil { ... }
//	outboxecho.Mount(e.Group("/outbox/admin"), admin)
//
// The group's middleware (authentication, logging) runs before the handler. Give the
// handler a group of its own: Mount registers a catch-all route in it.
//
// # A transaction per request
//
// [TxPerRequest] adapts [outboxhttp.TxPerRequest] (see there for the rules): it begins a
// transaction for each request, gives it to the handler through [Tx], and commits it
// before the response status is sent when the status is a success (below 400 by
// default), rolling it back otherwise, when the handler returns an error, or when it
// panics (middleware.Recover then answers 500). If the commit fails, the client gets a
// 500 instead of the handler's response. After the commit, the events written in the
// transaction are handed to the outbox's dispatcher.
//
//	api := e.Group("/api", outboxecho.TxPerRequest(db, outboxhttp.Config{}))
//	api.POST("/orders", func(c echo.Context) error {
//		tx, _ := outboxecho.Tx(c)
//		ctx := c.Request().Context()
//		if _, err := tx.ExecContext(ctx, `INSERT INTO orders ...`, ...); err != nil {
//			return err // rolls back; the error handler answers
//		}
//		if _, err := ob.Writer().Write(ctx, tx, env); err != nil {
//			return err
//		}
//		return c.JSON(http.StatusCreated, order) // commits, then sends 201
//	})
//
// The transaction is also in c.Request().Context() ([outbox.TxFromContext],
// [outboxhttp.TxFromRequest]).
package outboxecho
