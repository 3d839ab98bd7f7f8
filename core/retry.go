package outbox

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy decides how long a failed event waits before its next attempt. Delay is
// called with the number of failed attempts so far, including the one that just failed
// (1 after the first failure). It must be safe for concurrent use.
type RetryPolicy interface {
	Delay(attempt int) time.Duration
}

// RetryPolicyFunc adapts a function to [RetryPolicy].
type RetryPolicyFunc func(attempt int) time.Duration

// Delay calls f.
func (f RetryPolicyFunc) Delay(attempt int) time.Duration { return f(attempt) }

// ExponentialBackoff is the default [RetryPolicy]: after attempt n, min(Max, Base·2^(n-1))
// times a random factor in [0.5, 1.5) unless DisableJitter is set.
type ExponentialBackoff struct {
	// Base is the delay after the first failure. Defaults to DefaultRetryBase.
	Base time.Duration
	// Max caps the delay before jitter is applied. Defaults to DefaultRetryMax.
	Max time.Duration
	// DisableJitter makes delays exact (jitter spreads retries of events that failed together).
	DisableJitter bool
}

var _ RetryPolicy = ExponentialBackoff{}

// Delay returns the wait after attempt failures (at least 1); it never overflows.
func (b ExponentialBackoff) Delay(attempt int) time.Duration {
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = DefaultRetryBase
	}
	if limit <= 0 {
		limit = DefaultRetryMax
	}
	d := limit
	if shift := max(attempt, 1) - 1; shift < 63 && base <= limit>>shift {
		d = min(base<<shift, limit)
	}
	if b.DisableJitter {
		return d
	}
	f := float64(d) * (0.5 + rand.Float64())
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f)
}
