package route

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/genway/genway/shared/ctxtime"
	"github.com/genway/genway/shared/metrics"
)

// Target is one candidate of a request: a model on its provider.
type Target struct {
	Model    string   // the catalog model id: the breaker's name and the attempts header's
	Provider string   // the catalog provider name (metrics, logs)
	Keys     []string // KeyIDs of the provider's key pool; none or one: no pool
}

// Try is one attempt, as Run hands it to the caller's function.
type Try struct {
	Target int    // the index of the target in Run's targets
	Key    string // the KeyID chosen from the pool (ctx carries it: WithKey); "" without a pool
	Retry  int    // 0 for the first attempt on this target
	// FirstToken is when the attempt must have produced its first token
	// (a stream's first delta, a whole answer) or be abandoned as a
	// stall; zero when it may run on (no other target remains, or the
	// budget leaves no time for one).
	FirstToken time.Time
	// Attempts are the attempts made before this one.
	Attempts []Attempt
}

// Attempt is the record of one attempt.
type Attempt struct {
	Model   string
	Outcome string // "200" for an answer, else Failure.Outcome
}

// FormatAttempts writes attempts as the x-genway-attempts header shows
// them: "openai/gpt-4o-mini=503, anthropic/claude-haiku-4-5=200".
func FormatAttempts(attempts []Attempt) string {
	var b strings.Builder
	for i, a := range attempts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.Model)
		b.WriteByte('=')
		b.WriteString(a.Outcome)
	}
	return b.String()
}

// Result is what Run did.
type Result struct {
	Attempts []Attempt
	Target   int // the index of the target that answered; -1 if none did
}

// AttemptsError is the error of a request that no target answered, with
// the attempts made (none if the request was refused before any call):
// the HTTP edge shows them in the x-genway-attempts header.
type AttemptsError struct {
	Attempts []Attempt
	Err      error
}

func (e *AttemptsError) Error() string { return e.Err.Error() }

// Unwrap returns the last attempt's error.
func (e *AttemptsError) Unwrap() error { return e.Err }

// ErrNoTarget is Run's error when it made no attempt: no target, or every
// target was skipped.
var ErrNoTarget = errors.New("route: no target could be tried")

// Router runs a request's attempts by the policy, keeping the breakers of
// its targets and the rests of its keys. It is safe for concurrent use;
// one Router serves a process (a Lambda container).
type Router struct {
	policy Policy
	log    *slog.Logger
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) bool
	jitter func() float64 // in [0, 1)

	mu       sync.Mutex
	breakers map[string]*breaker
	keys     map[string]*keyState
	rr       atomic.Uint64 // spreads attempts over a pool's keys
}

// New returns a Router with policy p (zero fields: DefaultPolicy's) that
// logs key refusals to log (nil: discard). It registers its breaker
// states as the genway_route_breaker_open gauge of metrics.Default.
func New(p Policy, log *slog.Logger) *Router {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Router{policy: p.withDefaults(), log: log, now: time.Now, sleep: ctxtime.Sleep, jitter: rand.Float64,
		breakers: map[string]*breaker{}, keys: map[string]*keyState{}}
	metrics.Default.Gauge("genway_route_breaker_open", "Routing: 1 while a target's circuit breaker is open or half open, by model.",
		[]string{"model"}, r.breakerSamples)
	return r
}

// Policy returns the router's policy, defaults applied.
func (r *Router) Policy() Policy { return r.policy }

// Run tries targets in order until one answers, by the policy: do makes
// one attempt (with ctx carrying the chosen key) and returns nil when the
// target answered; classify says what a failed attempt was (the
// adapter's classification). A target whose breaker is open is demoted,
// not dropped: it is tried after every other target, in its place among
// the demoted ones, so that a breaker changes the order of the targets and
// never turns a request that a target could answer into an error. Run
// returns what it did and, if no target answered, the error of the last
// attempt (ErrNoTarget if none was made). When ctx ends, Run returns at
// once with the attempt's error or ctx's.
func (r *Router) Run(ctx context.Context, targets []Target, classify func(error) Failure, do func(context.Context, Try) error) (Result, error) {
	res := Result{Target: -1}
	budgetEnd := r.now().Add(r.policy.Budget)
	var last, skipped error // the last call's error; the first skipped target's
	var demoted []int       // targets whose breaker was open when their turn came
	// k runs over the targets in order, then over the demoted ones.
	for k := 0; k < len(targets)+len(demoted); k++ {
		i, late := k, k >= len(targets)
		if late {
			i = demoted[k-len(targets)]
		}
		if last != nil && !r.now().Before(budgetEnd) {
			return res, last
		}
		b := r.breaker(targets[i].Model)
		if !late && !r.policy.NoBreakers && !b.allow(r.now()) {
			demoted = append(demoted, i)
			continue
		}
		more := k+1 < len(targets)+len(demoted)
		ok, made, err := r.target(ctx, targets, i, more, late, b, budgetEnd, &res, classify, do)
		if ok {
			res.Target = i
			return res, nil
		}
		switch {
		case made:
			last = err
		case skipped == nil:
			skipped = err
		}
		if ctx.Err() != nil || isFinal(err) {
			return res, err
		}
		if more && made {
			r.count("genway_route_fallbacks_total", "Routing: moves from a target that failed to the next one, by the target left.", &targets[i], "")
		}
	}
	switch {
	case last != nil:
		return res, last
	case skipped != nil:
		return res, skipped
	}
	return res, ErrNoTarget
}

// finalError marks the error of a Final failure, so that Run stops.
type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }

func isFinal(err error) bool {
	var f finalError
	return errors.As(err, &f)
}

// target makes the attempts on targets[i]: ok if it answered; made if a
// call was made; err the last attempt's error (wrapped in finalError when
// the policy says to stop). more says another target remains after it;
// late that it was demoted (its breaker was open, and it is not the
// probe): its calls are counted in the breaker's window but neither open
// nor close it, and it holds no probe to give back.
func (r *Router) target(ctx context.Context, targets []Target, i int, more, late bool, b *breaker, budgetEnd time.Time, res *Result,
	classify func(error) Failure, do func(context.Context, Try) error) (ok, made bool, err error) {
	p := &r.policy
	t := &targets[i]
	record := func(failed bool) {
		if late {
			b.tally(p, failed)
			return
		}
		b.record(p, failed, r.now())
	}
	release := func() {
		if !late {
			b.release()
		}
	}
	pool := len(t.Keys) > 1
	var tried map[string]bool // keys tried since the last wait
	for retry := 0; ; {
		try := Try{Target: i, Retry: retry, Attempts: res.Attempts}
		actx := ctx
		if pool {
			if tried == nil {
				tried = make(map[string]bool, len(t.Keys))
			}
			try.Key = r.pickKey(t.Keys, tried)
			if try.Key == "" {
				release()
				return false, made, err
			}
			tried[try.Key] = true
			actx = WithKey(ctx, try.Key)
		}
		now := r.now()
		if more && now.Add(p.FirstToken).Before(budgetEnd) {
			try.FirstToken = now.Add(p.FirstToken)
		}
		err = do(actx, try)
		if err == nil {
			record(false)
			res.Attempts = append(res.Attempts, Attempt{Model: t.Model, Outcome: "200"})
			r.count("genway_route_attempts_total", "Routing: attempts by provider, model and outcome.", t, "ok")
			return true, true, nil
		}
		if ctx.Err() != nil { // the client went away: nobody's failure
			release()
			return false, made, err
		}
		f := classify(err)
		if f.Class == Skip {
			release()
			return false, made, err
		}
		made = true
		res.Attempts = append(res.Attempts, Attempt{Model: t.Model, Outcome: f.Outcome()})
		r.count("genway_route_attempts_total", "Routing: attempts by provider, model and outcome.", t, f.Outcome())
		if f.Class == Final {
			release() // the target answered; the request was at fault
			return false, true, finalError{err}
		}
		record(true)
		r.restKey(t, try.Key, f) // a key refused or rate-limited rests, whatever comes next
		act, wait := p.Decide(f, State{Retry: retry, More: more, KeyFree: pool && r.freeKey(t.Keys, tried),
			Left: budgetEnd.Sub(r.now()), Jitter: r.jitter()})
		switch act {
		case OtherKey:
			continue
		case Next:
			return false, true, err
		}
		if !r.sleep(ctx, wait) {
			return false, true, err
		}
		retry++
		tried = nil
		r.count("genway_route_retries_total", "Routing: retries of the same target, by provider and model.", t, "")
	}
}

// restKey rests key id of t's pool after failure f: a refused key
// (KeyRefused) for KeyBench, a rate-limited one for its RetryAfter or
// KeyCooldown; any other failure, or no key, leaves it as it is.
func (r *Router) restKey(t *Target, id string, f Failure) {
	switch {
	case id == "":
	case f.Class == KeyRefused:
		r.rest(t, id, r.policy.KeyBench, true)
	case f.Class == RateLimited:
		r.rest(t, id, cmp(f.RetryAfter, r.policy.KeyCooldown), false)
	}
}

// Attempts made outside Run. A job's submit is one attempt per worker
// run, the runs spread over queue deliveries (see package jobs): Submit
// makes it with these, sharing the router's state with chat: the keys'
// rests, the breakers and the genway_route_* counters.

// Key returns the key (a KeyID) for an attempt on t made outside Run: a
// key of t.Keys not in tried that is not resting, spreading attempts over
// them, else the one whose rest ends first; "" if t has no keys or every
// one is in tried.
func (r *Router) Key(t Target, tried map[string]bool) string {
	if len(t.Keys) == 0 {
		return ""
	}
	return r.pickKey(t.Keys, tried)
}

// KeyFree reports whether t has a pool (more than one key) with a key
// not in tried that is not resting: State.KeyFree for Decide after an
// attempt made outside Run.
func (r *Router) KeyFree(t Target, tried map[string]bool) bool {
	return len(t.Keys) > 1 && r.freeKey(t.Keys, tried)
}

// Observe records an attempt on t made outside Run with key (a KeyID, ""
// for none): f is nil for an answer, else the attempt's failure. It does
// what Run does after an attempt: genway_route_attempts_total counts it;
// the target's breaker counts it as a call unless f is Final (the request
// was at fault) or Skip (no call was made), and an attempt made while the
// breaker is half open is its probe; a key refused or rate-limited rests.
// It does not decide what comes next: that is Policy.Decide's.
func (r *Router) Observe(t Target, key string, f *Failure) {
	now := r.now()
	b := r.breaker(t.Model)
	switch {
	case f == nil:
		b.observe(&r.policy, false, now)
		r.count("genway_route_attempts_total", "Routing: attempts by provider, model and outcome.", &t, "ok")
		return
	case f.Class == Skip:
		return
	}
	r.count("genway_route_attempts_total", "Routing: attempts by provider, model and outcome.", &t, f.Outcome())
	if f.Class == Final {
		return
	}
	b.observe(&r.policy, true, now)
	r.restKey(&t, key, *f)
}

// Moved counts a move from target t, which failed, to the next target
// made outside Run (genway_route_fallbacks_total, as Run counts its own).
// A nil Router counts nothing.
func (r *Router) Moved(t Target) {
	if r == nil {
		return
	}
	r.count("genway_route_fallbacks_total", "Routing: moves from a target that failed to the next one, by the target left.", &t, "")
}

// cmp returns a if it is positive, else b.
func cmp(a, b time.Duration) time.Duration {
	if a > 0 {
		return a
	}
	return b
}

// breaker returns the breaker of target model, made on first use.
func (r *Router) breaker(model string) *breaker {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.breakers[model]
	if b == nil {
		b = &breaker{}
		r.breakers[model] = b
	}
	return b
}

// pickKey returns a key of ids not in tried, spreading calls over them
// (round robin, from the first key of the pool): one that is not resting
// if there is one, else the one whose rest ends first ("" if every key was
// tried).
func (r *Router) pickKey(ids []string, tried map[string]bool) string {
	now := r.now()
	start := int((r.rr.Add(1) - 1) % uint64(len(ids)))
	r.mu.Lock()
	defer r.mu.Unlock()
	best, bestUntil := "", time.Time{}
	for k := range ids {
		id := ids[(start+k)%len(ids)]
		if tried[id] {
			continue
		}
		s := r.keys[id]
		if s == nil || !now.Before(s.until) {
			return id
		}
		if best == "" || s.until.Before(bestUntil) {
			best, bestUntil = id, s.until
		}
	}
	return best
}

// freeKey reports whether a key of ids not in tried is not resting.
func (r *Router) freeKey(ids []string, tried map[string]bool) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if s := r.keys[id]; !tried[id] && (s == nil || !now.Before(s.until)) {
			return true
		}
	}
	return false
}

// rest rests key id of t's pool for d; a refused key (benched) is logged
// once per bench, by its KeyID.
func (r *Router) rest(t *Target, id string, d time.Duration, refused bool) {
	now := r.now()
	r.mu.Lock()
	s := r.keys[id]
	if s == nil {
		s = &keyState{}
		r.keys[id] = s
	}
	if !now.Before(s.until) {
		s.logged = false
	}
	if until := now.Add(d); until.After(s.until) {
		s.until = until
	}
	log := refused && !s.logged
	s.logged = s.logged || refused
	r.mu.Unlock()
	if log {
		r.log.Warn("route: a provider key was refused (401/403); it rests", "provider", t.Provider, "key", id, "for", d.String())
	}
}

// count adds one to a routing counter for t (with outcome, if given).
func (r *Router) count(name, help string, t *Target, outcome string) {
	if outcome == "" {
		metrics.Default.Add(name, help, []string{"provider", "model"}, []string{t.Provider, t.Model}, 1)
		return
	}
	metrics.Default.Add(name, help, []string{"provider", "model", "outcome"}, []string{t.Provider, t.Model, outcome}, 1)
}

// TargetState is a target's breaker as the router sees it.
type TargetState struct {
	Model    string  `json:"model"`
	State    string  `json:"state"` // Closed, Open or HalfOpen
	Calls    int     `json:"calls"` // in the breaker's window (the last BreakerWindow calls)
	Failures int     `json:"failures"`
	Rate     float64 `json:"error_rate"` // Failures / Calls; 0 without calls
}

// States returns the state of every target the router has called, by
// model id.
func (r *Router) States() []TargetState {
	now := r.now()
	r.mu.Lock()
	models := make([]string, 0, len(r.breakers))
	bs := make([]*breaker, 0, len(r.breakers))
	for m, b := range r.breakers {
		models = append(models, m)
		bs = append(bs, b)
	}
	r.mu.Unlock()
	out := make([]TargetState, len(bs))
	for i, b := range bs {
		s, calls, failures := b.state(now)
		out[i] = TargetState{Model: models[i], State: s, Calls: calls, Failures: failures}
		if calls > 0 {
			out[i].Rate = float64(failures) / float64(calls)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// State returns model's target state (closed, no calls, if it was never
// called).
func (r *Router) State(model string) TargetState {
	r.mu.Lock()
	b := r.breakers[model]
	r.mu.Unlock()
	if b == nil {
		return TargetState{Model: model, State: Closed}
	}
	s, calls, failures := b.state(r.now())
	ts := TargetState{Model: model, State: s, Calls: calls, Failures: failures}
	if calls > 0 {
		ts.Rate = float64(failures) / float64(calls)
	}
	return ts
}

func (r *Router) breakerSamples() []metrics.Sample {
	var out []metrics.Sample
	for _, s := range r.States() {
		v := 0.0
		if s.State != Closed {
			v = 1
		}
		out = append(out, metrics.Sample{Labels: []string{s.Model}, Value: v})
	}
	return out
}
