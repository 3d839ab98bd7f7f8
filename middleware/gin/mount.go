package outboxgin

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/outboxkit/outbox/internal/pathprefix"
)

// Mount serves h under group: a request for the group's path, or for anything below
// it, with any method, reaches h with the group's prefix removed from its URL path, as
// [net/http.StripPrefix] does (r.RequestURI is kept). With group r.Group("/outbox/admin"),
// "/outbox/admin/api/dead-events/42" reaches h as "/api/dead-events/42",
// "/outbox/admin/" as "/" and "/outbox/admin" as "" (outboxadmin redirects it to the
// path with a slash). The group's prefix may contain path parameters
// ("/tenants/:tenant/outbox"). Mount registers the group's path itself (unless it ends
// with a slash) and a catch-all route below it, for every method of gin's Any; do not
// register other routes in the same group.
func Mount(group *gin.RouterGroup, h http.Handler) {
	base := group.BasePath()
	n := pathprefix.Segments(base)
	serve := func(c *gin.Context) {
		r, ok := pathprefix.Strip(c.Request, n)
		if !ok {
			// Not reachable for a request gin routed here; be safe anyway.
			c.AbortWithStatus(http.StatusNotFound)
			return
		}
		h.ServeHTTP(c.Writer, r)
	}
	if !strings.HasSuffix(base, "/") {
		group.Any("", serve)
	}
	group.Any("/*path", serve)
}
