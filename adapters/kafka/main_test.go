package outboxkafka_test

import (
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines: every test closes its kgo clients and its
// kfake cluster.
func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }
