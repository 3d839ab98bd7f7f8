package outboxadmin

import (
	"os"
	"sync"
)

// envFuzzTally names a file to which the fuzz targets append one byte per input: 'r'
// when the input was rejected cleanly (with the documented error), 'a' when it was
// accepted. A `go test -fuzz` run with it set reports how many inputs it tried and how
// many were rejected, for the bad-input table of docs/RELIABILITY.md; crashes stop the
// run. Plain `go test` leaves it unset.
const envFuzzTally = "OUTBOX_FUZZ_TALLY"

var fuzzTallyFile = sync.OnceValue(func() *os.File {
	path := os.Getenv(envFuzzTally)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	return f
})

// fuzzTally records one input of a fuzz run; see envFuzzTally.
func fuzzTally(rejected bool) {
	if f := fuzzTallyFile(); f != nil {
		b := byte('a')
		if rejected {
			b = 'r'
		}
		_, _ = f.Write([]byte{b})
	}
}
