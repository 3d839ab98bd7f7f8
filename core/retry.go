package outbox

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy gives the wait before the next attempt after attempt failures (1 after the
// first). It must be safe for concurrent use.
type RetryPolicy interface {
	Delay(attempt int) time.Duration
}

// RetryPolicyFunc adapts a function to [RetryPolicy].
type RetryPolicyFunc func(attempt int) time.Duration

// Delay calls f.
func (f RetryPolicyFunc) Delay(attempt int) time.Duration { return f(attempt) }

// ExponentialBackoff is the default [RetryPolicy]: min(Max, Base·Multiplier^(n-1))
// after n failures, times a random [0.5, 1.5) unless DisableJitter.
type ExponentialBackoff struct {
	// Base is the delay after the first failure. Defaults to DefaultRetryBase.
	Base time.Duration
	// Max caps the delay before jitter is applied. Defaults to DefaultRetryMax.
	Max time.Duration
	// Multiplier is the growth from one delay to the next; below 1 means 2, the default.
	Multiplier float64
	// DisableJitter makes delays exact.
	DisableJitter bool
}

var _ RetryPolicy = ExponentialBackoff{}

// Delay returns the wait after attempt failures; it never overflows.
func (b ExponentialBackoff) Delay(attempt int) time.Duration {
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = DefaultRetryBase
	}
	if limit <= 0 {
		limit = DefaultRetryMax
	}
	n := max(attempt, 1) - 1
	d := limit
	if b.Multiplier < 1 || b.Multiplier == 2 {
		if n < 63 && base <= limit>>n {
			d = min(base<<n, limit)
		}
	} else if f := float64(base) * math.Pow(b.Multiplier, float64(n)); f < float64(limit) {
		d = time.Duration(f)
	}
	if b.DisableJitter {
		return d
	}
	return jitter(d, 0.5)
}

// FixedBackoff waits Wait, varied at random by the fraction Jitter (≤ 1).
type FixedBackoff struct {
	Wait   time.Duration
	Jitter float64
}

// Delay returns b.Wait with its jitter; a negative Wait means 0.
func (b FixedBackoff) Delay(int) time.Duration { return jitter(max(b.Wait, 0), b.Jitter) }

// LinearBackoff waits Step·n after the n-th failure, at most Max (0: DefaultRetryMax),
// varied at random by the fraction Jitter (≤ 1).
type LinearBackoff struct {
	Step   time.Duration
	Max    time.Duration
	Jitter float64
}

// Delay returns the wait after attempt failures; it never overflows.
func (b LinearBackoff) Delay(attempt int) time.Duration {
	limit, step, n := b.Max, max(b.Step, 0), time.Duration(max(attempt, 1))
	if limit <= 0 {
		limit = DefaultRetryMax
	}
	d := limit
	if step <= limit/n {
		d = min(step*n, limit)
	}
	return jitter(d, b.Jitter)
}

// jitter returns d times a random factor in [1-f, 1+f), f clamped to [0, 1]; it never
// overflows.
func jitter(d time.Duration, f float64) time.Duration {
	f = min(max(f, 0), 1)
	if f == 0 || d <= 0 {
		return d
	}
	v := float64(d) * (1 - f + 2*f*rand.Float64())
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(v)
}
