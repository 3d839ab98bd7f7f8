package outboxsqlx_test

import (
	"testing"

	"github.com/outboxkit/outbox/internal/testdb"
)

// TestMain checks for leaked goroutines and stops the throwaway database servers the
// tests started.
func TestMain(m *testing.M) { testdb.VerifyTestMain(m) }
