//go:build race

package chaos

// raceEnabled: the chaos node binary is built with -race too.
const raceEnabled = true
