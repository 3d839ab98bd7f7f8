package outboxhttp_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. The tests that need database drivers, the
// throwaway servers or a browser live in internal/roottest (a module of its own, so
// that this module's go.mod stays free of them); their TestMain also stops the servers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
