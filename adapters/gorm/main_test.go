package outboxgorm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. The adapter's tests on SQLite, PostgreSQL and
// MariaDB live in internal/integrationtest/adapters/gorm (docs/testing.md).
//
// GORM's prepared-statement cache (PrepareStmt) starts an expiry goroutine that it never
// stops (gorm.io/gorm/internal/lru.NewLRU: "done channel is never closed"); it is not
// ours, so it is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"))
}
