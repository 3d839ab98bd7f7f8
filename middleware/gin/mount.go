package outboxgin

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"
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
	n := segments(base)
	serve := func(c *gin.Context) {
		r, ok := stripSegments(c.Request, n)
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

// segments returns how many segments the route path p has: "/outbox/admin" and
// "/outbox/admin/" have 2, "/" has none.
func segments(p string) int {
	return strings.Count(strings.TrimSuffix(p, "/"), "/")
}

// stripSegments returns a shallow copy of r whose URL path lacks its first n segments,
// or false if it has fewer. When the URL has a RawPath (the path has escapes that
// matter, such as %2F), the segments are cut from the RawPath and the Path is its
// unescaped rest.
func stripSegments(r *http.Request, n int) (*http.Request, bool) {
	p, rp := r.URL.Path, r.URL.RawPath
	var ok bool
	if rp != "" {
		if rp, ok = cutSegments(rp, n); !ok {
			return nil, false
		}
		var err error
		if p, err = url.PathUnescape(rp); err != nil {
			return nil, false
		}
	} else if p, ok = cutSegments(p, n); !ok {
		return nil, false
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path, r2.URL.RawPath = p, rp
	return r2, true
}

// cutSegments removes the first n segments of p: "/a/b/c" without 2 is "/c", without
// 3 is "".
func cutSegments(p string, n int) (string, bool) {
	for range n {
		if !strings.HasPrefix(p, "/") {
			return "", false
		}
		if i := strings.IndexByte(p[1:], '/'); i >= 0 {
			p = p[1+i:]
		} else {
			p = ""
		}
	}
	return p, true
}
