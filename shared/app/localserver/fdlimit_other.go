//go:build !unix

package localserver

// fdLimit returns the process's limit on open files: 0, unknown on this
// system.
func fdLimit() uint64 { return 0 }
