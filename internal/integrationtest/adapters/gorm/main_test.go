package outboxgorm_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines and stops the throwaway database servers the
// tests started.
//
// GORM's prepared-statement cache (PrepareStmt) starts an expiry goroutine that it never
// stops (gorm.io/gorm/internal/lru.NewLRU: "done channel is never closed"); it is not
// ours, so it is ignored.
func TestMain(m *testing.M) {
	testdb.VerifyTestMain(m, goleak.IgnoreAnyFunction("gorm.io/gorm/internal/lru.NewLRU[...].func1"))
}
