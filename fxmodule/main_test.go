package outboxfx_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. The module's tests on SQLite and PostgreSQL
// live in internal/integrationtest/fxmodule (docs/testing.md).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
