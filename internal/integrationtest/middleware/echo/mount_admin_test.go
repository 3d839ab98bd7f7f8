package outboxecho_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/outboxkit/outbox/internal/admintest"
	outboxecho "github.com/outboxkit/outbox/middleware/echo"
)

// TestMountAdmin runs the admin's conformance suite through an echo mount.
func TestMountAdmin(t *testing.T) {
	t.Parallel()
	admintest.Run(t, func(t *testing.T, h http.Handler) string {
		e := echo.New()
		outboxecho.Mount(e.Group("/outbox/admin"), h)
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		return srv.URL + "/outbox/admin/"
	})
}
