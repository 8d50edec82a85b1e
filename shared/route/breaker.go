package route

import (
	"sync"
	"time"
)

// Breaker states.
const (
	Closed   = "closed"
	Open     = "open"
	HalfOpen = "half_open"
)

// breaker is one target's circuit breaker. It opens after BreakerRun
// failures in a row, or when more than half of its last BreakerWindow
// calls failed; open, it demotes its target for BreakerOpen (Run tries it
// after every other target), then lets one probe through in the target's
// own place (half open): the probe's success closes it, its failure opens
// it again. Failures the client caused (Final) and skipped targets are not
// calls.
type breaker struct {
	mu       sync.Mutex
	run      int    // failures in a row
	window   []bool // the last calls, true for a failure (a ring)
	next     int    // where the next call goes in window
	calls    int    // calls in window (<= len(window))
	failures int    // failures in window
	openTill time.Time
	open     bool
	probing  bool // a half-open probe is out
}

// allow reports whether the target may be called now: closed, or open
// past its time with no probe out (the caller is then the probe).
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true
	}
	if now.Before(b.openTill) || b.probing {
		return false
	}
	b.probing = true
	return true
}

// record counts a call's outcome and opens or closes the breaker (with
// breakers off, it only counts).
func (b *breaker) record(p *Policy, failed bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.count(p, failed)
	wasProbe := b.probing
	b.probing = false
	switch {
	case p.NoBreakers: // the window is kept for the error rate; nothing opens
	case failed && (wasProbe || b.run >= p.BreakerRun || 2*b.failures > len(b.window)):
		b.open, b.openTill = true, now.Add(p.BreakerOpen)
	case !failed && wasProbe:
		// The probe succeeded: closed, with a clean slate.
		b.open, b.run, b.calls, b.failures, b.next = false, 0, 0, 0, 0
		clear(b.window)
	}
}

// tally counts the outcome of a call made while the breaker was open
// (a demoted target, tried after the others): in the window, for the
// error rate, without opening, closing or extending it, and without
// touching a probe that another request may have out. Only the probe
// closes an open breaker.
func (b *breaker) tally(p *Policy, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.count(p, failed)
}

// count adds a call's outcome to the window and the run; b.mu is held.
func (b *breaker) count(p *Policy, failed bool) {
	if len(b.window) != p.BreakerWindow {
		b.window, b.next, b.calls, b.failures = make([]bool, p.BreakerWindow), 0, 0, 0
	}
	if b.calls == len(b.window) && b.window[b.next] {
		b.failures--
	}
	b.window[b.next] = failed
	b.next = (b.next + 1) % len(b.window)
	b.calls = min(b.calls+1, len(b.window))
	if failed {
		b.failures++
		b.run++
	} else {
		b.run = 0
	}
}

// observe records a call made without asking allow first (an attempt
// made outside Run): made while the breaker is half open, it is the
// probe, so that its success closes the breaker.
func (b *breaker) observe(p *Policy, failed bool, now time.Time) {
	b.allow(now)
	b.record(p, failed, now)
}

// release gives back a probe that made no call (the client went away,
// or the target was skipped).
func (b *breaker) release() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// state returns the breaker's state and its error rate over its window.
func (b *breaker) state(now time.Time) (state string, calls, failures int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state = Closed
	if b.open {
		state = Open
		if !now.Before(b.openTill) {
			state = HalfOpen
		}
	}
	return state, b.calls, b.failures
}
