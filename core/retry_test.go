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
