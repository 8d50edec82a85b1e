// Package route is Genway's routing policy, in one place: the order in
// which a request's targets are tried, and what happens when an attempt
// fails: the same target again after a backoff, the next target, or the
// answer to the client. Chat completions and the Responses API run their
// attempts through Router.Run; a job's submits, one per worker run across
// queue deliveries, go through Router.Submit (and a move to the next
// target is counted with Router.Moved), sharing the router's keys,
// breakers and counters. Provider adapters only classify their own failures
// (a Failure: an HTTP status, an in-band stream error, a dropped or
// stalled stream).
//
// Around the policy sit the two kinds of state a router keeps per process
// (per container on Lambda): circuit breakers per target (a model on its
// provider), and the cooldowns of the keys of a provider's key pool
// (KeySet). Neither is shared between processes.
//
// The policy (see Decide and Policy):
//
//	failure                                   action
//	connection error, dropped stream,         the same target again, up to Retries
//	timeout or stall before the first token,  times, after an exponential backoff with
//	408, 429, 5xx, 529, in-band overload       jitter (or the upstream's Retry-After);
//	                                          then the next target
//	429 with another key in the pool          another key at once (the key cools down)
//	401, 403 (the operator's key is bad)      another key at once, else the next target
//	404 (the provider lacks the model)        the next target at once
//	the client's own error (400, refusals),   answered as it is, never retried
//	or a failure after content was sent
package route

import (
	"fmt"
	"net/http"
	"time"
)

// Class is what an adapter says a failed attempt was.
type Class int

// Failure classes.
const (
	// Final is the client's own error (an invalid request, an unsupported
	// parameter, a content refusal) or a failure after the answer was
	// committed to the client: it is answered as it is, never retried.
	Final Class = iota
	// Transient is a failure another attempt may not meet: a connection
	// error, a dropped stream or a stall before the first token, 408, 5xx,
	// 529, an in-band overload. The same target again after a backoff,
	// up to Policy.Retries times; then the next target.
	Transient
	// RateLimited is a 429 (or an in-band rate limit, RESOURCE_EXHAUSTED):
	// the key cools down for RetryAfter (Policy.KeyCooldown without one)
	// and another key of the pool is tried at once; with no other key it
	// is Transient, honouring RetryAfter.
	RateLimited
	// KeyRefused is a 401 or 403: the operator's key is bad. The key is
	// benched for Policy.KeyBench and another key of the pool is tried at
	// once; with no other key, the next target.
	KeyRefused
	// Unsupported is a 404: the provider lacks the model. The next target
	// at once.
	Unsupported
	// Skip is a target that cannot serve the request as sent (a
	// capability it lacks, a provider that is not configured, credits the
	// account lacks for its price): the next target, with no call made and
	// nothing counted against the target.
	Skip
)

var classNames = [...]string{"final", "transient", "rate_limited", "key_refused", "unsupported", "skip"}

func (c Class) String() string {
	if c >= 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Failure is a failed attempt as its adapter classified it.
type Failure struct {
	Class Class
	// Status is the upstream's HTTP status, or the status an in-band
	// error stands for (Anthropic's overloaded_error: 529); 0 if none.
	Status int
	// RetryAfter is the wait the upstream asked for; 0 if none.
	RetryAfter time.Duration
	// Reason names a failure without a status for the attempts header
	// and metrics: "timeout", "stall", "connection", "dropped", "skipped".
	Reason string
}

// Outcome is the failure's short name in the attempts header and the
// metrics: its status, else its reason.
func (f Failure) Outcome() string {
	if f.Status != 0 {
		return statusText(f.Status)
	}
	if f.Reason != "" {
		return f.Reason
	}
	return "error"
}

// StatusClass classifies an upstream's HTTP error status by the policy:
// 408, 5xx and 529 are Transient, 429 RateLimited, 401 and 403
// KeyRefused, 404 Unsupported, any other 4xx Final (the client's request).
func StatusClass(status int) Class {
	switch {
	case status == http.StatusTooManyRequests:
		return RateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KeyRefused
	case status == http.StatusNotFound:
		return Unsupported
	case status == http.StatusRequestTimeout || status >= 500:
		return Transient
	}
	return Final
}

// Policy is the routing policy's numbers. The zero value of a field means
// its default (DefaultPolicy).
type Policy struct {
	// Retries is how many more times a target is tried after a Transient
	// failure (2; a negative number for none). Another key of a pool
	// after a 429, 401 or 403 is not a retry.
	Retries int
	// Backoff is the wait before the first retry (250 ms); it doubles
	// with each retry, with jitter (between half and all of it).
	Backoff time.Duration
	// MaxWait is the longest wait, backoff or Retry-After, taken before
	// trying a target again while another target remains (2 s): a longer
	// one moves on to the next target at once. With no other target left,
	// any wait that fits the budget is taken.
	MaxWait time.Duration
	// Budget bounds the time from the start of the request to its first
	// token (60 s): no wait and no new attempt begins after it. It does
	// not cut an attempt that runs.
	Budget time.Duration
	// FirstToken is how long an attempt may take to its first token (a
	// stream's first delta, a whole answer's arrival) when another target
	// remains and the budget leaves time for it (30 s); then it is
	// abandoned as a stall. The last target is never cut.
	FirstToken time.Duration
	// KeyCooldown is how long a key answered 429 without a Retry-After
	// rests (30 s).
	KeyCooldown time.Duration
	// KeyBench is how long a key answered 401 or 403 rests (5 min).
	KeyBench time.Duration
	// BreakerRun opens a target's breaker after this many failures in a
	// row (5); BreakerWindow and more than half of it failing (20) too.
	BreakerRun    int
	BreakerWindow int
	// BreakerOpen is how long an open breaker skips its target before a
	// single probe (30 s).
	BreakerOpen time.Duration
	// NoBreakers turns circuit breaking off: every target is always tried.
	NoBreakers bool
}

// DefaultPolicy is the policy with every default.
var DefaultPolicy = Policy{
	Retries:       2,
	Backoff:       250 * time.Millisecond,
	MaxWait:       2 * time.Second,
	Budget:        60 * time.Second,
	FirstToken:    30 * time.Second,
	KeyCooldown:   30 * time.Second,
	KeyBench:      5 * time.Minute,
	BreakerRun:    5,
	BreakerWindow: 20,
	BreakerOpen:   30 * time.Second,
}

// withDefaults returns p with its zero fields set to DefaultPolicy's.
func (p Policy) withDefaults() Policy {
	d := DefaultPolicy
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if p.Retries == 0 {
		p.Retries = d.Retries
	}
	set(&p.Backoff, d.Backoff)
	set(&p.MaxWait, d.MaxWait)
	set(&p.Budget, d.Budget)
	set(&p.FirstToken, d.FirstToken)
	set(&p.KeyCooldown, d.KeyCooldown)
	set(&p.KeyBench, d.KeyBench)
	set(&p.BreakerOpen, d.BreakerOpen)
	if p.BreakerRun <= 0 {
		p.BreakerRun = d.BreakerRun
	}
	if p.BreakerWindow <= 0 {
		p.BreakerWindow = d.BreakerWindow
	}
	return p
}

// Action is what the policy says to do after a failed attempt.
type Action int

// Actions.
const (
	// Stop: answer the client with the failure (Final).
	Stop Action = iota
	// Again: the same target again, after the wait Decide returns.
	Again
	// OtherKey: the same target at once, with another key of its pool
	// (not a retry).
	OtherKey
	// Next: the next target at once (or, with none left, Stop with this
	// failure).
	Next
)

var actionNames = [...]string{"stop", "again", "other_key", "next"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// State is where a request stands when an attempt fails, for Decide.
type State struct {
	Retry   int           // retries of this target so far (0 after its first attempt)
	More    bool          // another target remains after this one
	KeyFree bool          // another key of the target's pool is free (not tried, not resting)
	Left    time.Duration // what is left of the budget
	Jitter  float64       // in [0, 1): where the backoff falls between half and all of it
}

// Decide is the policy, the one place it is written: what to do after
// failure f in state s, and for Again how long to wait first.
//
//   - Final: Stop.
//   - Skip (the target cannot serve the request) and Unsupported (404):
//     Next.
//   - KeyRefused (401/403): OtherKey if one is free, else Next.
//   - RateLimited (429): OtherKey if one is free, else as Transient.
//   - Transient: Again after a backoff (Backoff doubled per retry, with
//     jitter) or the upstream's Retry-After, while retries are left and
//     the wait fits: within the budget left, and within MaxWait while
//     another target remains; else Next.
func (p Policy) Decide(f Failure, s State) (Action, time.Duration) {
	p = p.withDefaults()
	switch f.Class {
	case Final:
		return Stop, 0
	case Skip, Unsupported:
		return Next, 0
	case KeyRefused:
		if s.KeyFree {
			return OtherKey, 0
		}
		return Next, 0
	case RateLimited:
		if s.KeyFree {
			return OtherKey, 0
		}
	}
	if s.Retry >= max(p.Retries, 0) {
		return Next, 0
	}
	wait := f.RetryAfter
	if wait <= 0 {
		d := p.Backoff << min(s.Retry, 10)
		wait = d/2 + time.Duration(s.Jitter*float64(d/2))
	}
	if (s.More && wait > p.MaxWait) || wait > s.Left {
		return Next, 0
	}
	return Again, wait
}

// statusText is a status code as text, without allocating for the common
// ones.
func statusText(status int) string {
	switch status {
	case 200:
		return "200"
	case 429:
		return "429"
	case 500:
		return "500"
	case 502:
		return "502"
	case 503:
		return "503"
	case 504:
		return "504"
	}
	return fmt.Sprint(status)
}
