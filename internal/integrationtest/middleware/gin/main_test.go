package outboxgin_test

import (
	"os"
	"testing"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain puts gin in test mode (no route listing on stdout, which the examples
// print to), checks for leaked goroutines and stops the throwaway database servers.
func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(exitCode int) {
		testdb.StopAll()
		os.Exit(exitCode)
	}))
}
