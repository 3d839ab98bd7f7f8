package outboxnats_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines: every test shuts its nats-server, its
// connections and its outbox down when it ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
