package outbox

import (
	"context"
	"fmt"

	"github.com/outboxkit/outbox/core/internal/testseam"
)

// The operations behind outboxtest.Poll, Purge and QueueDepths: the one way for tests
// outside this package to drive a poll or a purge deterministically.
func init() {
	testseam.Poll = func(ctx context.Context, ob any) (int, error) {
		o := ob.(*Outbox)
		if o.poller == nil {
			return 0, fmt.Errorf("%w: a %s outbox runs no poller", ErrInvalidArgument, o.mode)
		}
		return o.poller.Poll(ctx)
	}
	testseam.Purge = func(ctx context.Context, ob any) (int64, error) {
		o := ob.(*Outbox)
		if o.purger == nil {
			return 0, fmt.Errorf("%w: purging is disabled (PurgeInterval -1)", ErrInvalidArgument)
		}
		return o.purger.RunOnce(ctx)
	}
	testseam.QueueDepths = func(ob any) (hot, cold int) {
		o := ob.(*Outbox)
		if o.queues == nil {
			return 0, 0
		}
		return o.queues.Depths()
	}
}
