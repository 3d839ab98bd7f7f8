package outbox_test

import (
	"fmt"
	"time"
)

// storeQueryTimeout is SQLStoreConfig.QueryTimeout's default, the bound of every
// statement of the stores setupStore builds.
const storeQueryTimeout = 10 * time.Second

// waitProgress polls state until it reports done, and returns an error only when the
// progress count it returns has not grown for stall. The tests that wait for a backlog
// to be delivered use it instead of a fixed deadline: how long a backlog takes depends
// on the machine (a loaded 2-core host under -race is many times slower than an idle
// one), while stall comes from the configuration (a bound every step of the work must
// meet, such as a query timeout or a claim's TTL), so the test fails on work that
// stopped, not on work that is slow. The caller fails the test with the error, after
// stopping what it runs.
func waitProgress(what string, stall time.Duration, state func() (done bool, progress int64)) error {
	best := int64(-1)
	since := time.Now()
	for {
		done, progress := state()
		if done {
			return nil
		}
		if progress > best {
			best, since = progress, time.Now()
		} else if time.Since(since) > stall {
			return fmt.Errorf("%s: no progress for %s (stuck at %d)", what, stall, best)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
