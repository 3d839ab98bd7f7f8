package main

import "syscall"

// fsType names the file system of dir where it matters to durability ("tmpfs"), or
// returns "" (unknown, or any other).
func fsType(dir string) string {
	if dir == "" {
		return ""
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	const tmpfsMagic = 0x01021994
	if int64(st.Type) == tmpfsMagic {
		return "tmpfs"
	}
	return ""
}
