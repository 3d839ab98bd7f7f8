package dispatch

import "github.com/outboxkit/outbox/core/outboxtype"

// The shared vocabulary, under the names package outbox gives it.
type (
	Event           = outboxtype.Event
	Status          = outboxtype.Status
	Metrics         = outboxtype.Metrics
	DispatchInfo    = outboxtype.DispatchInfo
	Path            = outboxtype.Path
	Outcome         = outboxtype.Outcome
	Interceptor     = outboxtype.Interceptor
	ConfigError     = outboxtype.ConfigError
	DeferError      = outboxtype.DeferError
	RetryAfterError = outboxtype.RetryAfterError
	PanicError      = outboxtype.PanicError
	BatchItem       = outboxtype.BatchItem
	Failure         = outboxtype.Failure
	// SubscriptionLoad is one lane's load (Queues.Loads).
	SubscriptionLoad = outboxtype.SubscriptionLoad
)

const (
	StatusNew       = outboxtype.StatusNew
	StatusRetry     = outboxtype.StatusRetry
	StatusWaiting   = outboxtype.StatusWaiting
	PathHot         = outboxtype.PathHot
	PathCold        = outboxtype.PathCold
	OutcomeDone     = outboxtype.OutcomeDone
	OutcomeRetry    = outboxtype.OutcomeRetry
	OutcomeDead     = outboxtype.OutcomeDead
	OutcomeDeferred = outboxtype.OutcomeDeferred
	OutcomeFallback = outboxtype.OutcomeFallback
	ClaimTaken      = outboxtype.ClaimTaken
	ClaimRenewed    = outboxtype.ClaimRenewed
	ClaimLost       = outboxtype.ClaimLost
	ClaimExpired    = outboxtype.ClaimExpired
	ClaimReleased   = outboxtype.ClaimReleased
)

var (
	ErrStopped       = outboxtype.ErrStopped
	ErrUnrecoverable = outboxtype.ErrUnrecoverable
	ErrUnroutable    = outboxtype.ErrUnroutable
)
