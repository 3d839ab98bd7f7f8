package outboxkafka_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines: every test closes its kgo clients and its
// kfake cluster.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
