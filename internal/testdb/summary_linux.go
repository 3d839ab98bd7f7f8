package testdb

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// processFD duplicates file descriptor fd of process pid with pidfd_getfd(2) (Linux
// 5.6): the copy shares the open file, offset included. The kernel allows it when this
// process may ptrace pid.
func processFD(pid, fd int) (*os.File, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	nfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_getfd: %w", err)
	}
	return os.NewFile(uintptr(nfd), fmt.Sprintf("fd %d of process %d", fd, pid)), nil
}
