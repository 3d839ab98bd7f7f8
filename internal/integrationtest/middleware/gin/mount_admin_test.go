package outboxgin_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/outboxkit/outbox/internal/admintest"
	outboxgin "github.com/outboxkit/outbox/middleware/gin"
)

// TestMountAdmin runs the admin's conformance suite through a gin mount.
func TestMountAdmin(t *testing.T) {
	t.Parallel()
	admintest.Run(t, func(t *testing.T, h http.Handler) string {
		r := gin.New()
		outboxgin.Mount(r.Group("/outbox/admin"), h)
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		return srv.URL + "/outbox/admin/"
	})
}
