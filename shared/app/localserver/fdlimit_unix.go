//go:build unix

package localserver

import "syscall"

// fdLimit returns the process's limit on open files (RLIMIT_NOFILE, which
// the Go runtime raises to its hard limit at start); 0 if unknown.
func fdLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
