package outbox_test

import (
	"math"
	"testing"
	"time"

	outbox "github.com/outboxkit/outbox/core"
)

func TestExponentialBackoffDelay(t *testing.T) {
	t.Parallel()
	exact := func(base, max time.Duration) outbox.ExponentialBackoff {
		return outbox.ExponentialBackoff{Base: base, Max: max, DisableJitter: true}
	}
	tests := []struct {
		name    string
		b       outbox.ExponentialBackoff
		attempt int
		want    time.Duration
	}{
		{"first", exact(100*time.Millisecond, time.Second), 1, 100 * time.Millisecond},
		{"second doubles", exact(100*time.Millisecond, time.Second), 2, 200 * time.Millisecond},
		{"fourth", exact(100*time.Millisecond, time.Second), 4, 800 * time.Millisecond},
		{"capped", exact(100*time.Millisecond, time.Second), 5, time.Second},
		{"zero attempt is the first", exact(100*time.Millisecond, time.Second), 0, 100 * time.Millisecond},
		{"negative attempt is the first", exact(100*time.Millisecond, time.Second), -7, 100 * time.Millisecond},
		{"shift of 62", exact(time.Nanosecond, math.MaxInt64), 63, 1 << 62},
		{"shift of 63 does not overflow", exact(time.Nanosecond, math.MaxInt64), 64, math.MaxInt64},
		{"huge attempt", exact(100*time.Millisecond, time.Second), math.MaxInt, time.Second},
		{"base near the limit", exact(1<<62, math.MaxInt64), 2, math.MaxInt64},
		{"base above max", exact(time.Minute, time.Second), 1, time.Second},
		{"defaults: first", outbox.ExponentialBackoff{DisableJitter: true}, 1, outbox.DefaultRetryBase},
		{"defaults: ninth", outbox.ExponentialBackoff{DisableJitter: true}, 9, 51200 * time.Millisecond},
		{"defaults: tenth is capped", outbox.ExponentialBackoff{DisableJitter: true}, 10, outbox.DefaultRetryMax},
		{"negative fields are defaults", exact(-1, -1), 2, 2 * outbox.DefaultRetryBase},
	}
	for _, tt := range tests {
		if got := tt.b.Delay(tt.attempt); got != tt.want {
			t.Errorf("%s: Delay(%d) = %s, want %s", tt.name, tt.attempt, got, tt.want)
		}
	}
}

func TestExponentialBackoffJitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		b       outbox.ExponentialBackoff
		attempt int
		center  time.Duration
	}{
		{"zero value, first", outbox.ExponentialBackoff{}, 1, outbox.DefaultRetryBase},
		{"zero value, third", outbox.ExponentialBackoff{}, 3, 4 * outbox.DefaultRetryBase},
		{"zero value, capped", outbox.ExponentialBackoff{}, 50, outbox.DefaultRetryMax},
		{"custom", outbox.ExponentialBackoff{Base: time.Second, Max: time.Hour}, 5, 16 * time.Second},
	}
	for _, tt := range tests {
		lo, hi := tt.center/2, tt.center+tt.center/2
		seen := map[time.Duration]bool{}
		for range 500 {
			got := tt.b.Delay(tt.attempt)
			if got < lo || got >= hi {
				t.Fatalf("%s: Delay = %s, want in [%s, %s)", tt.name, got, lo, hi)
			}
			seen[got] = true
		}
		if len(seen) < 100 {
			t.Errorf("%s: only %d distinct delays in 500 draws; jitter looks broken", tt.name, len(seen))
		}
	}
}

func TestExponentialBackoffJitterNeverOverflows(t *testing.T) {
	t.Parallel()
	b := outbox.ExponentialBackoff{Base: time.Hour, Max: math.MaxInt64}
	for _, attempt := range []int{1, 30, 62, 63, 64, 1000, math.MaxInt} {
		for range 200 {
			if got := b.Delay(attempt); got <= 0 {
				t.Fatalf("Delay(%d) = %s, want positive", attempt, got)
			}
		}
	}
}

func TestRetryPolicyFunc(t *testing.T) {
	t.Parallel()
	var p outbox.RetryPolicy = outbox.RetryPolicyFunc(func(n int) time.Duration { return time.Duration(n) * time.Second })
	if got := p.Delay(3); got != 3*time.Second {
		t.Errorf("Delay(3) = %s, want 3s", got)
	}
}

func TestBuiltInPoliciesExact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		p       outbox.RetryPolicy
		attempt int
		want    time.Duration
	}{
		{"exponential ×3", outbox.ExponentialBackoff{Base: time.Second, Max: time.Hour, Multiplier: 3, DisableJitter: true}, 3, 9 * time.Second},
		{"exponential ×1.5", outbox.ExponentialBackoff{Base: time.Second, Max: time.Hour, Multiplier: 1.5, DisableJitter: true}, 3, 2250 * time.Millisecond},
		{"exponential ×1 is constant", outbox.ExponentialBackoff{Base: time.Second, Max: time.Hour, Multiplier: 1, DisableJitter: true}, 40, time.Second},
		{"exponential ×3 capped", outbox.ExponentialBackoff{Base: time.Second, Max: time.Minute, Multiplier: 3, DisableJitter: true}, 5, time.Minute},
		{"exponential ×10 huge attempt", outbox.ExponentialBackoff{Base: time.Second, Max: math.MaxInt64, Multiplier: 10, DisableJitter: true}, math.MaxInt, math.MaxInt64},
		{"exponential below 1 means 2", outbox.ExponentialBackoff{Base: time.Second, Max: time.Hour, Multiplier: 0.5, DisableJitter: true}, 3, 4 * time.Second},
		{"fixed", outbox.FixedBackoff{Wait: 3 * time.Second}, 7, 3 * time.Second},
		{"fixed negative", outbox.FixedBackoff{Wait: -time.Second}, 1, 0},
		{"linear", outbox.LinearBackoff{Step: 2 * time.Second, Max: time.Minute}, 4, 8 * time.Second},
		{"linear capped", outbox.LinearBackoff{Step: 2 * time.Second, Max: time.Minute}, 40, time.Minute},
		{"linear default max", outbox.LinearBackoff{Step: time.Hour}, 2, outbox.DefaultRetryMax},
		{"linear huge attempt", outbox.LinearBackoff{Step: time.Hour, Max: math.MaxInt64}, math.MaxInt, math.MaxInt64},
		{"linear zero attempt is the first", outbox.LinearBackoff{Step: time.Second}, 0, time.Second},
	}
	for _, tt := range tests {
		if got := tt.p.Delay(tt.attempt); got != tt.want {
			t.Errorf("%s: Delay(%d) = %s, want %s", tt.name, tt.attempt, got, tt.want)
		}
	}
}

func TestBuiltInPoliciesJitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		p      outbox.RetryPolicy
		center time.Duration
		frac   float64
	}{
		{"fixed ±20%", outbox.FixedBackoff{Wait: 10 * time.Second, Jitter: 0.2}, 10 * time.Second, 0.2},
		{"fixed jitter above 1 is 1", outbox.FixedBackoff{Wait: 10 * time.Second, Jitter: 7}, 10 * time.Second, 1},
		{"linear ±50%", outbox.LinearBackoff{Step: time.Second, Jitter: 0.5}, 3 * time.Second, 0.5},
		{"exponential ×3 ±50%", outbox.ExponentialBackoff{Base: time.Second, Max: time.Hour, Multiplier: 3}, 9 * time.Second, 0.5},
	}
	for _, tt := range tests {
		lo := time.Duration(float64(tt.center) * (1 - tt.frac))
		hi := time.Duration(float64(tt.center) * (1 + tt.frac))
		seen := map[time.Duration]bool{}
		for range 500 {
			got := tt.p.Delay(3)
			if got < lo || got >= hi {
				t.Fatalf("%s: Delay = %s, want in [%s, %s)", tt.name, got, lo, hi)
			}
			seen[got] = true
		}
		if len(seen) < 100 {
			t.Errorf("%s: only %d distinct delays in 500 draws; jitter looks broken", tt.name, len(seen))
		}
	}
	if got := (outbox.FixedBackoff{Wait: time.Second, Jitter: -1}).Delay(1); got != time.Second {
		t.Errorf("negative jitter: %s, want exactly 1s", got)
	}
}
