// Command node is the chaos node program (see internal/chaos's node.go) as a binary of
// its own, so that it can be built with -tags outboxchaos: then the crash points of core
// kill it where OUTBOX_CRASH_POINT says. The crash-point scenarios build it with
// "go build -tags outboxchaos" (and -race when the test binary has it).
package main

import (
	"cmp"
	"os"

	"github.com/outboxkit/outbox/internal/chaos"
)

func main() {
	os.Exit(chaos.RunRole(cmp.Or(os.Getenv(chaos.EnvRole), chaos.RoleNode)))
}
