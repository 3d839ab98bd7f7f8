package outboxecho

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/outboxkit/outbox/internal/pathprefix"
)

// Mount serves h under g: a request for the group's prefix, or for anything below it,
// with any method, reaches h with the prefix removed from its URL path, as
// [net/http.StripPrefix] does (r.RequestURI is kept). With g = e.Group("/outbox/admin"),
// "/outbox/admin/api/dead-events/42" reaches h as "/api/dead-events/42",
// "/outbox/admin/" as "/" and "/outbox/admin" as "" (outboxadmin redirects it to the
// path with a slash). The prefix may contain path parameters ("/tenants/:tenant/outbox").
// Mount registers the prefix itself and a catch-all route below it, for every method of
// echo's Any; do not register other routes in the same group.
func Mount(g *echo.Group, h http.Handler) {
	var n int // segments of the prefix; set before any request can arrive
	serve := func(c echo.Context) error {
		r, ok := pathprefix.Strip(c.Request(), n)
		if !ok {
			return echo.ErrNotFound // not reachable for a request echo routed here
		}
		h.ServeHTTP(c.Response(), r)
		return nil
	}
	prefix := g.Any("", serve)[0].Path
	n = pathprefix.Segments(prefix)
	if strings.HasSuffix(prefix, "/") {
		g.Any("*", serve)
	} else {
		g.Any("/*", serve)
	}
}
