//go:build race

package exampletest

// raceEnabled reports whether this test binary has the race detector; [Run] then builds
// the example with -race too.
const raceEnabled = true
