// Package admintest is the conformance suite of the admin handler
// (github.com/outboxkit/outbox/admin, package outboxadmin) as mounted on a router: every
// route, status code, limit, auth and cross-origin case, through real HTTP, over events
// made by a real [outbox.Outbox] on SQLite, and the replay paths, the lists of every
// status, the bulk actions, the pause and resume of subscriptions and the audit trail
// on PostgreSQL (and MySQL/MariaDB) too. The
// admin's tests (internal/roottest/admin) run it on an [net/http.ServeMux], those of the
// gin and echo packages (internal/integrationtest/middleware/...) on their routers.
//
// Import path: github.com/outboxkit/outbox/internal/admintest (package admintest). Only
// tests import it. A test package that runs [Run] needs a TestMain that stops the
// throwaway PostgreSQL server (see [testdb.StopAll]) and checks for leaks:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { testdb.StopAll(); os.Exit(code) }))
//	}
//
//	func TestAdminGin(t *testing.T) {
//		admintest.Run(t, func(t *testing.T, h http.Handler) string {
//			r := gin.New()
//			outboxgin.Mount(r.Group("/outbox/admin"), h)
//			srv := httptest.NewServer(r)
//			t.Cleanup(srv.Close)
//			return srv.URL + "/outbox/admin/"
//		})
//	}
package admintest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outbox "github.com/outboxkit/outbox/core"
)

// Mount serves h under some prefix of some router on a server that lives until the test
// ends, and returns the admin's base URL, ending with "/" (for example
// "http://127.0.0.1:41234/outbox/admin/"). The base URL without its trailing slash must
// answer with a redirect to the base URL, or serve the page itself.
type Mount func(t *testing.T, h http.Handler) (baseURL string)

// ServeMux returns a [Mount] that serves h on a [net/http.ServeMux] at prefix ("" for
// the root, else "/outbox/admin" with no trailing slash) through [net/http.StripPrefix],
// on an [net/http/httptest.Server]. Both the prefix and the prefix with a slash reach the
// handler, so the handler's own redirect of the bare prefix is exercised.
func ServeMux(prefix string) Mount {
	return func(t *testing.T, h http.Handler) string {
		t.Helper()
		mux := http.NewServeMux()
		if prefix == "" {
			mux.Handle("/", h)
		} else {
			stripped := http.StripPrefix(prefix, h)
			mux.Handle(prefix, stripped)
			mux.Handle(prefix+"/", stripped)
		}
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv.URL + prefix + "/"
	}
}

// Run runs the suite through mount. Subtests run in parallel, each on its own database
// and server.
func Run(t *testing.T, mount Mount) {
	t.Helper()
	t.Run("Security", func(t *testing.T) {
		t.Parallel()
		runSecurity(t, mount)
	})
	t.Run("Read", func(t *testing.T) {
		t.Parallel()
		runRead(t, mount)
	})
	t.Run("Listeners", func(t *testing.T) {
		t.Parallel()
		runListeners(t, mount)
	})
	t.Run("Failures", func(t *testing.T) {
		t.Parallel()
		runFailures(t, mount)
	})
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run("Replay/"+backend, func(t *testing.T) {
			t.Parallel()
			runReplay(t, mount, backend)
		})
	}
	for _, backend := range []string{"sqlite", "postgres", "mysql"} {
		t.Run("Events/"+backend, func(t *testing.T) {
			t.Parallel()
			runEvents(t, mount, backend)
		})
		t.Run("Bulk/"+backend, func(t *testing.T) {
			t.Parallel()
			runBulk(t, mount, backend)
		})
		t.Run("PartialPage/"+backend, func(t *testing.T) {
			t.Parallel()
			runPartial(t, mount, backend)
		})
		t.Run("Pause/"+backend, func(t *testing.T) {
			t.Parallel()
			runPause(t, mount, backend)
		})
	}
}

// env is one admin handler over a fixture, mounted, with a client that has the right
// token and one that has none.
type env struct {
	fx    *Fixture
	base  string
	token string
	c     *client // sends the token
	anon  *client // sends no credentials
	logs  *logRecorder
}

// setup starts a fixture and mounts a handler over its dead events, protected by a
// bearer token unless configure changes Options.Authorize.
func setup(t *testing.T, mount Mount, fo FixtureOptions, configure func(*outboxadmin.Options)) *env {
	t.Helper()
	fx := NewFixture(t, fo)
	return mountHandler(t, mount, fx, fx.Outbox.Events(), configure)
}

// mountHandler mounts a handler over events (fx may be nil).
func mountHandler(t *testing.T, mount Mount, fx *Fixture, events *outbox.Events, configure func(*outboxadmin.Options)) *env {
	t.Helper()
	e := &env{fx: fx, token: "tok-" + outbox.NewID(), logs: &logRecorder{}}
	opts := outboxadmin.Options{Authorize: outboxadmin.BearerToken(e.token), Logger: newLogger(e.logs)}
	if configure != nil {
		configure(&opts)
	}
	h, err := outboxadmin.New(events, opts)
	if err != nil {
		t.Fatalf("outboxadmin.New: %v", err)
	}
	e.base = mount(t, h)
	e.c = newClient(t, e.base, e.token)
	e.anon = newClient(t, e.base, "")
	return e
}
