// Package fuzztally counts the inputs of `go test -fuzz` runs. The fuzz targets of
// several packages call Record once per input. No script sets Env yet: the bad-input
// table of docs/RELIABILITY.md comes from internal/chaos's own bad-input runs.
package fuzztally

import (
	"os"
	"sync"
)

// Env names a file to which Record appends one byte per input: 'r' when the input was
// rejected cleanly (with the documented error), 'a' when it was accepted. A
// `go test -fuzz` run with it set reports how many inputs it tried and how many were
// rejected; crashes stop the run. Plain `go test` leaves it unset, and Record does
// nothing.
const Env = "OUTBOX_FUZZ_TALLY"

var file = sync.OnceValue(func() *os.File {
	path := os.Getenv(Env)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	return f
})

// Record records one input of a fuzz run; see Env.
func Record(rejected bool) {
	if f := file(); f != nil {
		b := byte('a')
		if rejected {
			b = 'r'
		}
		_, _ = f.Write([]byte{b})
	}
}
