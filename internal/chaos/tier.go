package chaos

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// Environment variables that choose the tier and the seed.
const (
	// EnvLong selects the long tier (any non-empty value but "0").
	EnvLong = "OUTBOX_CHAOS_LONG"
	// EnvDuration sets each scenario's fault phase (a time.Duration); it implies the
	// long tier.
	EnvDuration = "OUTBOX_CHAOS_DURATION"
	// EnvSeed replays a run: the seed every scenario prints.
	EnvSeed = "OUTBOX_CHAOS_SEED"
)

// DefaultLongDuration is a scenario's fault phase in the long tier without
// OUTBOX_CHAOS_DURATION.
const DefaultLongDuration = 2 * time.Minute

// Long reports whether the long tier was asked for.
func Long() bool {
	v := os.Getenv(EnvLong)
	return (v != "" && v != "0") || os.Getenv(EnvDuration) != ""
}

// Tier is "long" or "short".
func Tier() string {
	if Long() {
		return "long"
	}
	return "short"
}

// Duration is how long a scenario's fault phase runs: short in the default tier, else
// OUTBOX_CHAOS_DURATION or DefaultLongDuration.
func Duration(tb testing.TB, short time.Duration) time.Duration {
	tb.Helper()
	if v := os.Getenv(EnvDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			tb.Fatalf("%s=%q: want a positive duration", EnvDuration, v)
		}
		return d
	}
	if Long() {
		return DefaultLongDuration
	}
	return short
}

// Seed returns the run's seed (OUTBOX_CHAOS_SEED, or random) and logs how to replay it.
func Seed(tb testing.TB) int64 {
	tb.Helper()
	var seed int64
	if v := os.Getenv(EnvSeed); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			tb.Fatalf("%s=%q: want an integer", EnvSeed, v)
		}
		seed = s
	} else {
		seed = rand.Int64N(1 << 53)
	}
	tb.Logf("seed %d: rerun with %s=%d", seed, EnvSeed, seed)
	return seed
}

// Rand is a generator seeded with seed.
func Rand(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x6f7574626f78))
}
