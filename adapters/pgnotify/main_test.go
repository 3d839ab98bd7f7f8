package pgnotify_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. The notifier's tests on PostgreSQL live in
// internal/integrationtest/adapters/pgnotify (docs/testing.md).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
