package route

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Submission is a submit made outside Run: one target's turn in a
// request whose attempts are spread over separate runs (a job's, one
// per queue delivery), so that no wait is taken here: the caller
// schedules what Submit decides.
type Submission struct {
	Target Target
	// Retry is the retries of Target so far (0 at its first attempt).
	Retry int
	// More says another target follows Target.
	More bool
	// MaxRetries is the caller's bound on the retries of Target (0 or
	// less: none). While the request may move on (More, after a definite
	// refusal) the policy's Retries are capped at it; when it may not (no
	// other target, or a failure the target may have taken the request
	// with) it replaces them.
	MaxRetries int
	// Left returns what is left of the caller's time (its deadline), read
	// when a failure is decided; nil: no bound.
	Left func() time.Duration
}

// Verdict is what Submit did.
type Verdict struct {
	// Key is the KeyID of the last attempt ("" without one): on an
	// answer, the key that submitted.
	Key string
	// Ended says ctx ended during the last attempt, which was then
	// neither recorded nor decided (Action means nothing).
	Ended bool
	// Action is what comes after a failure: Again after Wait, Next (to
	// the target after this one), or Stop. Never OtherKey: Submit tries
	// another key itself.
	Action Action
	Wait   time.Duration
	// Failed are the failed attempts, oldest first: the keys refused
	// before the last attempt, then the last one if it failed.
	Failed []Failed
}

// Failed is one failed attempt of a Submit.
type Failed struct {
	Key     string
	Failure Failure
	// Refused is classify's: the target definitely did not take the
	// request.
	Refused bool
	// Action is what the policy decided after it (Next even with no
	// target to move to: Verdict.Action says Stop then).
	Action Action
	Err    error
}

// Submit makes one submit of s.Target outside Run: do makes the
// attempt (with ctx carrying the key chosen from the target's keys:
// WithKey) and returns nil when the target answered; classify says what
// a failed attempt was and whether the target definitely refused it
// (did not take the request). Every attempt is recorded as Observe
// records it (counters, the breaker, a refused or rate-limited key's
// rest); a failure is decided by the policy (Decide), with another key
// of the pool tried at once while the policy says OtherKey. Only a
// definite refusal may move the request on (Next); any other failure is
// decided as if no target followed, since the target may have the
// request. When ctx ends during an attempt, Submit returns its error at
// once, recording nothing. The error is the last attempt's, nil if the
// target answered.
//
// A nil Router makes the attempts with no key, records nothing, and
// decides by DefaultPolicy.
func (r *Router) Submit(ctx context.Context, s Submission, classify func(error) (f Failure, refused bool), do func(context.Context) error) (Verdict, error) {
	var v Verdict
	tried := map[string]bool{}
	for {
		actx := ctx
		v.Key = ""
		if r != nil {
			v.Key = r.Key(s.Target, tried)
		}
		if v.Key != "" {
			tried[v.Key] = true
			actx = WithKey(ctx, v.Key)
		}
		err := do(actx)
		if err == nil {
			if r != nil {
				r.Observe(s.Target, v.Key, nil)
			}
			return v, nil
		}
		if ctx.Err() != nil {
			v.Ended = true
			return v, err
		}
		f, refused := classify(err)
		if r != nil {
			r.Observe(s.Target, v.Key, &f)
		}
		keyFree := r != nil && refused && r.KeyFree(s.Target, tried)
		more := refused && s.More
		act, wait := r.decide(s, f, more, keyFree)
		v.Failed = append(v.Failed, Failed{Key: v.Key, Failure: f, Refused: refused, Action: act, Err: err})
		switch {
		case act == OtherKey:
			continue
		case act == Next && !more:
			act = Stop
		}
		v.Action, v.Wait = act, wait
		return v, err
	}
}

// decide applies the policy to failure f of submission s: the router's
// policy (DefaultPolicy without a router) with s.MaxRetries applied, and
// the time s.Left says is left.
func (r *Router) decide(s Submission, f Failure, more, keyFree bool) (Action, time.Duration) {
	p, jitter := DefaultPolicy, rand.Float64
	if r != nil {
		p, jitter = r.policy, r.jitter
	}
	if more {
		p.Retries = min(p.Retries, s.MaxRetries)
	} else {
		p.Retries = s.MaxRetries
	}
	if p.Retries <= 0 {
		p.Retries = -1 // none (0 is the default's)
	}
	left := time.Duration(math.MaxInt64)
	if s.Left != nil {
		left = s.Left()
	}
	return p.Decide(f, State{Retry: s.Retry, More: more, KeyFree: keyFree, Left: left, Jitter: jitter()})
}
