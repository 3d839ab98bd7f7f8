package outbox

import "fmt"

// invalidParams reports bad input to a [Store] method; nothing runs in that case.
func invalidParams(method, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, method, fmt.Sprintf(format, args...))
}

// Validate reports whether p can be passed to [Store.MarkDone]: IDs must not be empty
// and DoneAt must be set. The error matches [ErrInvalidArgument].
func (p MarkDoneParams) Validate() error {
	if len(p.IDs) == 0 {
		return invalidParams("mark done", "IDs is empty")
	}
	if p.DoneAt.IsZero() {
		return invalidParams("mark done", "DoneAt is zero")
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Reschedule]: ID must be set, Status
// must be StatusRetry or StatusNew and AvailableAt must be set. The error matches
// [ErrInvalidArgument].
func (p RescheduleParams) Validate() error {
	if p.ID == "" {
		return invalidParams("reschedule", "ID is empty")
	}
	if p.Status != StatusRetry && p.Status != StatusNew {
		return invalidParams("reschedule", "Status must be NEW or RETRY, got %s", p.Status)
	}
	if p.AvailableAt.IsZero() {
		return invalidParams("reschedule", "AvailableAt is zero")
	}
	return nil
}

// Validate reports whether p can be passed to [Store.MarkDead]: ID and DeadAt must be set. The
// error matches [ErrInvalidArgument].
func (p MarkDeadParams) Validate() error {
	if p.ID == "" {
		return invalidParams("mark dead", "ID is empty")
	}
	if p.DeadAt.IsZero() {
		return invalidParams("mark dead", "DeadAt is zero")
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Pending]: Limit must be positive,
// Now set and SkipRecent not negative. The error matches [ErrInvalidArgument].
func (p PendingParams) Validate() error {
	if p.Limit <= 0 {
		return invalidParams("pending", "Limit must be positive, got %d", p.Limit)
	}
	if p.Now.IsZero() {
		return invalidParams("pending", "Now is zero")
	}
	if p.SkipRecent < 0 {
		return invalidParams("pending", "SkipRecent is negative: %s", p.SkipRecent)
	}
	return nil
}

// Validate reports whether p can be passed to [Store.ListDead]: Limit must be positive.
// The error matches [ErrInvalidArgument].
func (p ListDeadParams) Validate() error {
	if p.Limit <= 0 {
		return invalidParams("list dead", "Limit must be positive, got %d", p.Limit)
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Replay]: either IDs is not empty or
// Limit is positive, and Now is set. The error matches [ErrInvalidArgument].
func (p ReplayParams) Validate() error {
	if len(p.IDs) == 0 && p.Limit <= 0 {
		return invalidParams("replay", "IDs is empty and Limit is not positive (%d)", p.Limit)
	}
	if p.Now.IsZero() {
		return invalidParams("replay", "Now is zero")
	}
	return nil
}

// Validate reports whether p can be passed to [Store.Purge]: Limit must be positive and
// Before set. The error matches [ErrInvalidArgument].
func (p PurgeParams) Validate() error {
	if p.Limit <= 0 {
		return invalidParams("purge", "Limit must be positive, got %d", p.Limit)
	}
	if p.Before.IsZero() {
		return invalidParams("purge", "Before is zero")
	}
	return nil
}
