package purge

import "github.com/outboxkit/outbox/core/outboxtype"

type ConfigError = outboxtype.ConfigError

var ErrStopped = outboxtype.ErrStopped
