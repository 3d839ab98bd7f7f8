package outboxadmin_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines (the Outboxes, HTTP servers and clients of the
// suite, and the browser test's chromedp goroutines, which it waits for) and stops the
// throwaway PostgreSQL server the replay tests may have started. goleak's Cleanup
// replaces its os.Exit, so it exits itself with the code goleak computed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(exitCode int) {
		testdb.StopAll()
		os.Exit(exitCode)
	}))
}
