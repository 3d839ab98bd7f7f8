package outboxbun_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. The adapter's tests on SQLite, PostgreSQL and
// MariaDB live in internal/integrationtest/adapters/bun (docs/testing.md).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
