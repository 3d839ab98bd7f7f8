package outboxnats_test

import (
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines: every test shuts its nats-server, its
// connections and its outbox down when it ends.
func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }
