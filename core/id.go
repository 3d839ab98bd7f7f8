package outbox

import "github.com/outboxkit/outbox/core/internal/ids"

// NewID returns a new ULID; IDs sort in creation order within this process.
func NewID() string { return ids.New() }
