// Package pathprefix strips a router group's prefix from a request's URL path by
// counting path segments, for the gin and echo mounts of the admin handler. Counting
// segments instead of comparing strings makes prefixes with path parameters
// ("/tenants/:tenant/outbox") work.
package pathprefix

import (
	"net/http"
	"net/url"
	"strings"
)

// Segments returns how many segments the route path p has: "/outbox/admin" and
// "/outbox/admin/" have 2, "/" has none.
func Segments(p string) int {
	return strings.Count(strings.TrimSuffix(p, "/"), "/")
}

// Strip returns a shallow copy of r whose URL path lacks its first n segments, or false
// if it has fewer, as [net/http.StripPrefix] does (r.RequestURI is kept). When the URL
// has a RawPath (the path has escapes that matter, such as %2F), the segments are cut
// from the RawPath and the Path is its unescaped rest.
func Strip(r *http.Request, n int) (*http.Request, bool) {
	p, rp := r.URL.Path, r.URL.RawPath
	var ok bool
	if rp != "" {
		if rp, ok = cut(rp, n); !ok {
			return nil, false
		}
		var err error
		if p, err = url.PathUnescape(rp); err != nil {
			return nil, false
		}
	} else if p, ok = cut(p, n); !ok {
		return nil, false
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path, r2.URL.RawPath = p, rp
	return r2, true
}

// cut removes the first n segments of p: "/a/b/c" without 2 is "/c", without 3 is "".
func cut(p string, n int) (string, bool) {
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
