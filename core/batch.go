package outbox

import (
	"context"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// BatchListener is a [Listener] whose HandleBatch gets the events of its subscription
// queued together, up to [Subscription.BatchSize]; the dispatcher never calls Handle.
// The result holds one error per item, in order, each read as Handle's; one of another
// length fails all. Each item keeps its interceptors, whose context is BatchItem.Ctx.
type BatchListener interface {
	Listener
	HandleBatch(ctx context.Context, batch []BatchItem) []error
}

// BatchItem is one event of a batch (Event) with its attempt's context (Ctx).
type BatchItem = outboxtype.BatchItem
