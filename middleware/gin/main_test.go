package outboxgin_test

import (
	"testing"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"
)

// TestMain puts gin in test mode (no route listing on stdout, which the examples
// print to) and checks for leaked goroutines. The middleware's tests on SQLite,
// PostgreSQL and MariaDB live in internal/integrationtest/middleware/gin (docs/testing.md).
func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m)
}
