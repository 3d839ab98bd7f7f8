//go:build !linux

package testdb

import (
	"errors"
	"os"
)

// processFD is Linux only (pidfd_getfd(2)).
func processFD(pid, fd int) (*os.File, error) {
	return nil, errors.New("duplicating another process's file descriptor needs Linux")
}
