package outboxotel_test

import (
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines.
func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }
