package outboxecho_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. The middleware's tests on SQLite, PostgreSQL
// and MariaDB live in internal/integrationtest/middleware/echo (docs/testing.md).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
