package outbox_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines and stops the throwaway database servers the
// tests started. goleak's Cleanup replaces its os.Exit, so it exits itself with the
// code goleak computed (non-zero on a leak). Started with OUTBOX_TEST_NODE set, the
// binary is a node process of the multi-process test instead and runs no tests; with
// OUTBOX_TEST_LEASE_NODE set, a node of the dispatch lease's process tests.
func TestMain(m *testing.M) {
	if os.Getenv(envNode) != "" {
		os.Exit(runNodeProcess())
	}
	if os.Getenv(envLeaseNode) != "" {
		os.Exit(runLeaseNodeProcess())
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(exitCode int) {
		testdb.StopAll()
		os.Exit(exitCode)
	}))
}
