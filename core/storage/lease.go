package storage

import (
	"github.com/outboxkit/outbox/core/internal/check"
	"github.com/outboxkit/outbox/core/outboxtype"
)

// Validate reports whether p can be passed to [LeaseStore.AcquireLease]; the error
// matches [outboxtype.ErrInvalidArgument].
func (p LeaseParams) Validate() error {
	switch {
	case p.Holder == "":
		return check.Invalid("acquire lease", "Holder is empty")
	case len(p.Holder) > outboxtype.MaxClaimTokenLen:
		return check.Invalid("acquire lease", "Holder is %d bytes, more than MaxClaimTokenLen (%d)", len(p.Holder), outboxtype.MaxClaimTokenLen)
	case p.TTL < minClaimTTL:
		return check.Invalid("acquire lease", "TTL must be positive, got %s", p.TTL)
	}
	return nil
}
