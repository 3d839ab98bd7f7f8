package outboxprom

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. The stats collector's tests on PostgreSQL and
// MariaDB live in internal/integrationtest/adapters/prometheus (docs/testing.md).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
