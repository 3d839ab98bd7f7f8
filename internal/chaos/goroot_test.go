package chaos

import "runtime"

func runtimeGOROOT() string { return runtime.GOROOT() } //nolint:staticcheck // a fallback when go is not on PATH
