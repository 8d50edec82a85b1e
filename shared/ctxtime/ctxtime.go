// Package ctxtime has waits that end with their context: Sleep is the pause
// of a poll or retry loop (the job worker, the router, the DynamoDB stream
// and SQS readers, the store's transaction retries) that must stop as soon
// as its context ends. It imports only the standard library, so any
// package can use it without an import cycle.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends if that comes first. It reports whether
// d passed: false means ctx ended, and the caller should stop. If ctx ends
// just as d passes (or d <= 0 and ctx has already ended), either answer may
// come.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
