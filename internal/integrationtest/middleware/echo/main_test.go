package outboxecho_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines and stops the throwaway database servers the
// tests started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(exitCode int) {
		testdb.StopAll()
		os.Exit(exitCode)
	}))
}
