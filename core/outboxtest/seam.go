package outboxtest

import (
	"context"

	outbox "github.com/outboxkit/outbox/core"
	"github.com/outboxkit/outbox/core/internal/testseam"
)

// Poll runs one poll cycle of ob now, instead of waiting for the next interval, and
// returns the number of events it handed to the dispatcher. The cycle reads due rows
// as the running poller does (older than Config.SkipRecent; claimed in MultiNode mode),
// from the oldest row, as the running poller does now and then, so a test can write
// events, however old their timestamps, through a transaction without after-commit
// hooks, call Poll, and wait for its listener. ob must be started for the
// events to be queued (a stopped dispatcher takes none). It returns an error wrapping
// outbox.ErrInvalidArgument in WriterOnly mode, which runs no poller, and the store's
// error when a query fails.
func Poll(ctx context.Context, ob *outbox.Outbox) (int, error) {
	return testseam.Poll(ctx, ob)
}

// Purge runs one purge of ob now: it deletes finished rows older than their retention
// (Config.PurgeRetention; PurgeDeadRetention, when set, for DEAD, FALLBACK and DISCARDED
// rows) and, with Config.PurgeUndeliveredAfter, undelivered rows older than it, in
// batches, and returns how many it deleted. It returns an error wrapping
// outbox.ErrInvalidArgument when purging is disabled.
func Purge(ctx context.Context, ob *outbox.Outbox) (int64, error) {
	return testseam.Purge(ctx, ob)
}

// QueueDepths returns the number of events waiting in ob's hot and cold queues (0, 0
// in WriterOnly mode).
func QueueDepths(ob *outbox.Outbox) (hot, cold int) {
	return testseam.QueueDepths(ob)
}
