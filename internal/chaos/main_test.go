package chaos

import (
	"os"
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines and stops the throwaway database servers the
// tests started. Started with OUTBOX_CHAOS_ROLE set, the test binary is a node or
// writer process of a scenario instead (see node.go) and runs no tests.
func TestMain(m *testing.M) {
	if role := os.Getenv(EnvRole); role != "" {
		os.Exit(RunRole(role))
	}
	testdb.VerifyTestMain(m)
}
