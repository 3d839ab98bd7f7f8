package outboxtest_test

import (
	"testing"

	"github.com/outboxkit/outbox/core/outboxtest"
	"github.com/outboxkit/outbox/core/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Features{}, func(t *testing.T) storetest.Harness {
		return storetest.Harness{Store: outboxtest.NewMemoryStore()}
	})
}
