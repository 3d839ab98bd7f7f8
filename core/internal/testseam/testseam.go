// Package testseam carries the operations that package outboxtest drives on an
// *outbox.Outbox without package outbox exporting them: package outbox fills the
// variables in its init, and outboxtest calls them. The values are the outbox as any,
// because this package cannot import package outbox.
package testseam

import "context"

var (
	// Poll runs one poll cycle of the outbox now and returns the events it queued.
	Poll func(ctx context.Context, ob any) (int, error)
	// Purge runs one purge now and returns the rows it deleted.
	Purge func(ctx context.Context, ob any) (int64, error)
	// QueueDepths returns the events waiting in the hot and cold queues.
	QueueDepths func(ob any) (hot, cold int)
)
