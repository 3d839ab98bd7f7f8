package chaos

import "runtime"

//lint:ignore SA1019 a fallback when go is not on PATH
func runtimeGOROOT() string { return runtime.GOROOT() }
