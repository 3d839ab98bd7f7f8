// Package outboxgin integrates the outbox with the gin router: it mounts the admin
// handler on a router group and runs requests in a database transaction.
//
// Import path: github.com/outboxkit/outbox/middleware/gin (package outboxgin).
//
// # Mounting the admin
//
// [Mount] serves an [net/http.Handler], such as the one outboxadmin.New returns, under
// a router group, with every method and the path below the group's prefix intact:
//
//	admin, err := outboxadmin.New(ob.Events(), outboxadmin.Options{Authorize: outboxadmin.BearerToken(token)})
//	if err != nil { ... }
//	outboxgin.Mount(r.Group("/outbox/admin"), admin)
//
// The group's middleware (authentication, logging) runs before the handler. Give the
// handler a group of its own: Mount registers a catch-all route in it.
//
// # A transaction per request
//
// [TxPerRequest] adapts [outboxhttp.TxPerRequest] (see there for the rules): it begins a
// transaction for each request, gives it to the handlers through [Tx], and commits it
// before the response status is sent when the status is a success (below 400 by
// default), rolling it back otherwise, when the handler panics (gin.Recovery then
// answers 500), or when the handlers wrote nothing but recorded an error with
// c.Error (for an error-handling middleware before it to answer). If the commit fails,
// the client gets a 500 instead of the handler's response. After the commit, the
// events written in the transaction are handed to the outbox's dispatcher.
//
//	api := r.Group("/api", outboxgin.TxPerRequest(db, outboxhttp.Config{}))
//	api.POST("/orders", func(c *gin.Context) {
//		tx, _ := outboxgin.Tx(c)
//		ctx := c.Request.Context()
//		if _, err := tx.ExecContext(ctx, `INSERT INTO orders ...`, ...); err != nil {
//			c.JSON(http.StatusConflict, ...) // rolls back
//			return
//		}
//		if _, err := ob.Writer().Write(ctx, tx, env); err != nil { ... }
//		c.JSON(http.StatusCreated, order) // commits, then sends 201
//	})
//
// The transaction is also in c.Request.Context() ([outbox.TxFromContext],
// [outboxhttp.TxFromRequest]); note that gin's Context looks values up in the request's
// context only with Engine.ContextWithFallback set, so prefer [Tx].
package outboxgin
