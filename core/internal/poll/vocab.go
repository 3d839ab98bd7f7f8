package poll

import "github.com/outboxkit/outbox/core/outboxtype"

// The shared vocabulary, under the names package outbox gives it.
type (
	Event        = outboxtype.Event
	RowError     = outboxtype.RowError
	Metrics      = outboxtype.Metrics
	Cursor       = outboxtype.Cursor
	DispatchInfo = outboxtype.DispatchInfo
	ConfigError  = outboxtype.ConfigError
)

const (
	PathCold       = outboxtype.PathCold
	ClaimTaken     = outboxtype.ClaimTaken
	ClaimTakenOver = outboxtype.ClaimTakenOver
	ClaimExpired   = outboxtype.ClaimExpired
	OutcomeDead    = outboxtype.OutcomeDead
)

var ErrStopped = outboxtype.ErrStopped
