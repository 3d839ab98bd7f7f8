package outboxfx_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	outboxadmin "github.com/outboxkit/outbox/admin"
	outboxfx "github.com/outboxkit/outbox/fxmodule"
)

// TestModuleProvidesAdminHandler mounts the provided admin handler and checks that it
// serves the Outbox's dead events with the supplied authorizer, and that without
// supplied options it refuses every request.
func TestModuleProvidesAdminHandler(t *testing.T) {
	t.Parallel()
	tb := setup(t, backends[0]) // SQLite: the handler itself is tested on every database in admin/
	get := func(h http.Handler, token string) int {
		req := httptest.NewRequest(http.MethodGet, "/outbox/admin/api/overview", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		http.StripPrefix("/outbox/admin", h).ServeHTTP(rec, req)
		return rec.Code
	}

	t.Run("with options", func(t *testing.T) {
		var admin outboxfx.AdminHandler
		app := fxtest.New(t,
			fx.Supply(tb.config()),
			fx.Supply(outboxadmin.Options{Authorize: outboxadmin.BearerToken("s3cret"), Logger: quietLogger()}),
			outboxfx.Module,
			tb.provideDB(),
			fx.Populate(&admin),
		)
		app.RequireStart()
		defer app.RequireStop()
		if code := get(admin, "s3cret"); code != http.StatusOK {
			t.Errorf("with the token: %d, want 200", code)
		}
		if code := get(admin, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("with a wrong token: %d, want 401", code)
		}
	})

	t.Run("without options", func(t *testing.T) {
		var admin outboxfx.AdminHandler
		app := fxtest.New(t,
			fx.Supply(tb.config()),
			outboxfx.Module,
			tb.provideDB(),
			fx.Populate(&admin),
		)
		app.RequireStart()
		defer app.RequireStop()
		if code := get(admin, "s3cret"); code != http.StatusUnauthorized {
			t.Errorf("no authorizer: %d, want 401", code)
		}
	})

	t.Run("invalid options", func(t *testing.T) {
		var admin outboxfx.AdminHandler
		app := fx.New(
			fx.NopLogger,
			fx.Supply(tb.config()),
			fx.Supply(outboxadmin.Options{Authorize: outboxadmin.BearerToken("")}),
			outboxfx.Module,
			tb.provideDB(),
			fx.Populate(&admin),
		)
		requireErrorContains(t, app.Err(), "token")
	})
}
