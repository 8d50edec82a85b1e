package route

import (
	"context"
	"errors"
	"testing"
	"time"
)

// refusal is a submit's error carrying its classification.
type refusal struct {
	f       Failure
	refused bool
}

func (e refusal) Error() string { return "refusal: " + e.f.Outcome() }

func classifySubmit(err error) (Failure, bool) {
	var r refusal
	if errors.As(err, &r) {
		return r.f, r.refused
	}
	return Failure{Class: Transient, Reason: "connection"}, false
}

// TestSubmit: one submit outside Run, decided as a job's worker needs:
// another key at once while the pool has one, the policy's retries capped
// by the caller's, a move on only after a definite refusal with a target
// to move to, and Stop (not Next) when there is none.
func TestSubmit(t *testing.T) {
	s503 := refusal{Failure{Class: Transient, Status: 503}, true}
	s502 := refusal{Failure{Class: Transient, Status: 502}, false}
	s401 := refusal{Failure{Class: KeyRefused, Status: 401}, true}
	s429 := refusal{Failure{Class: RateLimited, Status: 429, RetryAfter: 5 * time.Second}, true}
	long := refusal{Failure{Class: Transient, Status: 503, RetryAfter: time.Minute}, true}
	bad := refusal{Failure{Class: Final, Status: 400}, false}
	one := Target{Model: "s/one", Provider: "s"}
	pool := Target{Model: "s/pool", Provider: "s", Keys: []string{"k1", "k2"}}
	tests := []struct {
		name      string
		nilRouter bool
		s         Submission
		errs      []error // each attempt's answer in turn (nil: an answer)
		want      Action
		wait      time.Duration
		keys      int // distinct keys used; 0: none
		calls     int // breaker calls recorded (a router only)
	}{
		{"an answer", false, Submission{Target: one, MaxRetries: 3}, []error{nil}, Stop, 0, 0, 1},
		{"transient, retries left: again", false, Submission{Target: one, MaxRetries: 3}, []error{s503}, Again, 187500 * time.Microsecond, 0, 1},
		{"transient, the caller's retries spent, no target after: stop", false, Submission{Target: one, Retry: 3, MaxRetries: 3}, []error{s503}, Stop, 0, 0, 1},
		{"transient with a target after: the policy's retries (2) within the caller's", false, Submission{Target: one, Retry: 2, More: true, MaxRetries: 3}, []error{s503}, Next, 0, 0, 1},
		{"not refused: decided as if no target followed", false, Submission{Target: one, Retry: 2, More: true, MaxRetries: 3}, []error{s502}, Again, 750 * time.Millisecond, 0, 1},
		{"no retries allowed", false, Submission{Target: one, MaxRetries: 0}, []error{s503}, Stop, 0, 0, 1},
		{"a refused key with a target after: next", false, Submission{Target: one, More: true, MaxRetries: 3}, []error{s401}, Next, 0, 0, 1},
		{"a refused key, the last target: stop", false, Submission{Target: one, MaxRetries: 3}, []error{s401}, Stop, 0, 0, 1},
		{"the request's fault: stop, no call counted", false, Submission{Target: one, More: true, MaxRetries: 3}, []error{bad}, Stop, 0, 0, 0},
		{"a wait past the time left: stop", false, Submission{Target: one, MaxRetries: 3, Left: func() time.Duration { return time.Second }}, []error{long}, Stop, 0, 0, 1},
		{"a wait longer than MaxWait with a target after: next", false, Submission{Target: one, More: true, MaxRetries: 3}, []error{long}, Next, 0, 0, 1},
		{"429 on a pool: the other key at once", false, Submission{Target: pool, MaxRetries: 3}, []error{s429, nil}, Stop, 0, 2, 2},
		{"every key of the pool refused: next", false, Submission{Target: pool, More: true, MaxRetries: 3}, []error{s401, s401}, Next, 0, 2, 2},
		{"nil router: an answer, no key", true, Submission{Target: pool, MaxRetries: 3}, []error{nil}, Stop, 0, 0, 0},
		{"nil router: 429 without a pool waits its Retry-After", true, Submission{Target: pool, MaxRetries: 3}, []error{s429}, Again, 5 * time.Second, 0, 0},
		{"nil router: a refused key moves on", true, Submission{Target: pool, More: true, MaxRetries: 3}, []error{s401}, Next, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *Router
			if !tt.nilRouter {
				r, _, _ = newTestRouter(Policy{})
			}
			var keys []string
			n := 0
			v, err := r.Submit(context.Background(), tt.s, classifySubmit, func(ctx context.Context) error {
				keys = append(keys, KeyFrom(ctx))
				n++
				return tt.errs[min(n, len(tt.errs))-1]
			})
			last := tt.errs[len(tt.errs)-1]
			if n != len(tt.errs) || !errors.Is(err, last) && err != last {
				t.Fatalf("Submit made %d attempts, error %v; want %d, %v", n, err, len(tt.errs), last)
			}
			if err != nil && (v.Action != tt.want || v.Wait != tt.wait) {
				t.Errorf("Submit = %v after %v; want %v after %v", v.Action, v.Wait, tt.want, tt.wait)
			}
			if fails := len(tt.errs); last == nil && len(v.Failed) != fails-1 || last != nil && len(v.Failed) != fails || v.Ended {
				t.Errorf("Submit: %d failed attempts (ended %v); want %d", len(v.Failed), v.Ended, len(tt.errs))
			}
			distinct := map[string]bool{}
			for _, k := range keys {
				if k != "" {
					distinct[k] = true
				}
			}
			if len(distinct) != tt.keys || v.Key != keys[len(keys)-1] {
				t.Errorf("keys %v, verdict's %q; want %d distinct keys, the last one's in the verdict", keys, v.Key, tt.keys)
			}
			if r != nil {
				if s := r.State(tt.s.Target.Model); s.Calls != tt.calls {
					t.Errorf("breaker %+v; want %d calls", s, tt.calls)
				}
			}
		})
	}
}

// TestSubmitEnded: an attempt cut by the end of its context is returned
// at once, neither recorded nor decided.
func TestSubmitEnded(t *testing.T) {
	r, _, _ := newTestRouter(Policy{})
	ctx, cancel := context.WithCancel(context.Background())
	target := Target{Model: "s/cut", Provider: "s", Keys: []string{"k1", "k2"}}
	v, err := r.Submit(ctx, Submission{Target: target, More: true, MaxRetries: 3}, classifySubmit, func(context.Context) error {
		cancel()
		return refusal{Failure{Class: KeyRefused, Status: 401}, true}
	})
	if err == nil || !v.Ended || len(v.Failed) != 0 {
		t.Errorf("Submit with its context ended = %+v, %v; want ended, nothing failed, the attempt's error", v, err)
	}
	if s := r.State(target.Model); s.Calls != 0 {
		t.Errorf("breaker %+v; want no call recorded", s)
	}
	if !r.KeyFree(target, nil) {
		t.Errorf("KeyFree = false; want no key rested")
	}
}
