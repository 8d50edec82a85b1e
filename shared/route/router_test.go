package route

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/metrics"
)

// failed is an attempt's error carrying its classification.
type failed struct{ f Failure }

func (e failed) Error() string { return "failed: " + e.f.Outcome() }

func classify(err error) Failure {
	var f failed
	if errors.As(err, &f) {
		return f.f
	}
	return Failure{Class: Transient, Reason: "connection"}
}

func status(code int) error { return failed{Failure{Class: StatusClass(code), Status: code}} }

func retryAfter(code int, d time.Duration) error {
	return failed{Failure{Class: StatusClass(code), Status: code, RetryAfter: d}}
}

var skip = failed{Failure{Class: Skip, Reason: "skipped"}}

// clock is a fake time: sleeping moves it on.
type clock struct {
	t     time.Time
	waits []time.Duration
}

func (c *clock) now() time.Time { return c.t }

func (c *clock) sleep(_ context.Context, d time.Duration) bool {
	c.waits = append(c.waits, d)
	c.t = c.t.Add(d)
	return true
}

func newTestRouter(p Policy) (*Router, *clock, *bytes.Buffer) {
	var logs bytes.Buffer
	r := New(p, slog.New(slog.NewTextHandler(&logs, nil)))
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	r.now, r.sleep = c.now, c.sleep
	r.jitter = func() float64 { return 0.5 }
	return r, c, &logs
}

// script answers each target's attempts in turn from its list (nil: an
// answer); past the end of a list, the last entry repeats.
type script map[string][]error

func (s script) do(targets []Target, keys *[]string, took time.Duration, c *clock) func(context.Context, Try) error {
	n := map[string]int{}
	return func(ctx context.Context, t Try) error {
		m := targets[t.Target].Model
		*keys = append(*keys, KeyFrom(ctx))
		c.t = c.t.Add(took)
		list := s[m]
		if len(list) == 0 {
			return nil
		}
		i := min(n[m], len(list)-1)
		n[m]++
		return list[i]
	}
}

func targets(models ...string) []Target {
	out := make([]Target, len(models))
	for i, m := range models {
		p, _, _ := strings.Cut(m, "/")
		out[i] = Target{Model: m, Provider: p}
	}
	return out
}

func TestStatusClass(t *testing.T) {
	tests := []struct {
		status int
		want   Class
	}{
		{400, Final}, {401, KeyRefused}, {403, KeyRefused}, {404, Unsupported}, {408, Transient},
		{409, Final}, {413, Final}, {422, Final}, {429, RateLimited}, {500, Transient},
		{502, Transient}, {503, Transient}, {504, Transient}, {529, Transient},
	}
	for _, tt := range tests {
		if got := StatusClass(tt.status); got != tt.want {
			t.Errorf("StatusClass(%d) = %v; want %v", tt.status, got, tt.want)
		}
	}
}

func TestRun(t *testing.T) {
	ab := targets("a/one", "b/two")
	tests := []struct {
		name     string
		targets  []Target
		script   script
		want     string // the attempts header
		answered int
		waits    []time.Duration
		wantErr  string
	}{
		{"first answers", ab, script{}, "a/one=200", 0, nil, ""},
		{"retries then falls back", ab, script{"a/one": {status(503)}}, "a/one=503, a/one=503, a/one=503, b/two=200", 1,
			[]time.Duration{187500 * time.Microsecond, 375 * time.Millisecond}, ""},
		{"a retry answers", ab, script{"a/one": {status(500), nil}}, "a/one=500, a/one=200", 0, []time.Duration{187500 * time.Microsecond}, ""},
		{"529 and 408 are retried", ab, script{"a/one": {status(529), status(408), nil}}, "a/one=529, a/one=408, a/one=200", 0,
			[]time.Duration{187500 * time.Microsecond, 375 * time.Millisecond}, ""},
		{"a connection error is retried", ab, script{"a/one": {errors.New("dial tcp: refused"), nil}}, "a/one=connection, a/one=200", 0,
			[]time.Duration{187500 * time.Microsecond}, ""},
		{"a short Retry-After is honoured", ab, script{"a/one": {retryAfter(429, time.Second), nil}}, "a/one=429, a/one=200", 0,
			[]time.Duration{time.Second}, ""},
		{"a long Retry-After moves on at once", ab, script{"a/one": {retryAfter(429, 10*time.Second)}}, "a/one=429, b/two=200", 1, nil, ""},
		{"the last target waits a Retry-After that fits the budget", targets("a/one"), script{"a/one": {retryAfter(503, 10*time.Second), nil}},
			"a/one=503, a/one=200", 0, []time.Duration{10 * time.Second}, ""},
		{"a Retry-After beyond the budget ends it", targets("a/one"), script{"a/one": {retryAfter(429, 100*time.Second)}},
			"a/one=429", -1, nil, "failed: 429"},
		{"401 moves on at once", ab, script{"a/one": {status(401)}}, "a/one=401, b/two=200", 1, nil, ""},
		{"403 moves on at once", ab, script{"a/one": {status(403)}}, "a/one=403, b/two=200", 1, nil, ""},
		{"404 moves on at once", ab, script{"a/one": {status(404)}}, "a/one=404, b/two=200", 1, nil, ""},
		{"400 is final", ab, script{"a/one": {status(400)}}, "a/one=400", -1, nil, "failed: 400"},
		{"a skipped target is not an attempt", ab, script{"a/one": {skip}}, "b/two=200", 1, nil, ""},
		{"every target skipped: the first one's error", ab, script{"a/one": {failed{Failure{Class: Skip, Reason: "vision"}}}, "b/two": {skip}}, "", -1, nil, "failed: vision"},
		{"all fail: the last error", ab, script{"a/one": {status(401)}, "b/two": {status(502)}}, "a/one=401, b/two=502, b/two=502, b/two=502", -1,
			[]time.Duration{187500 * time.Microsecond, 375 * time.Millisecond}, "failed: 502"},
		{"stalls are retried", ab, script{"a/one": {failed{Failure{Class: Transient, Reason: "stall"}}, nil}}, "a/one=stall, a/one=200", 0,
			[]time.Duration{187500 * time.Microsecond}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c, _ := newTestRouter(Policy{})
			var keys []string
			res, err := r.Run(context.Background(), tt.targets, classify, tt.script.do(tt.targets, &keys, 0, c))
			if got := FormatAttempts(res.Attempts); got != tt.want {
				t.Errorf("attempts = %q; want %q", got, tt.want)
			}
			if res.Target != tt.answered {
				t.Errorf("answered by %d; want %d", res.Target, tt.answered)
			}
			if !slices.Equal(c.waits, tt.waits) {
				t.Errorf("waits = %v; want %v", c.waits, tt.waits)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("err = %v; want %q", err, tt.wantErr)
			}
		})
	}
}

// TestRunDemotesOpenBreakers: a target whose breaker is open is tried
// after the others, never dropped: a request that some target can answer
// is answered, whatever the breakers say.
func TestRunDemotesOpenBreakers(t *testing.T) {
	ab, abc := targets("a/one", "b/two"), targets("a/one", "b/two", "c/three")
	tests := []struct {
		name      string
		targets   []Target
		open      []string // breakers open for another minute
		halfOpen  []string // breakers open past their time: the next call is the probe
		script    script
		want      string // the attempts header
		answered  int
		wantErr   string
		wantState map[string]string // breaker states after the request
	}{
		{"the lead fails, its open fallback answers", ab, []string{"b/two"}, nil, script{"a/one": {status(503)}},
			"a/one=503, a/one=503, a/one=503, b/two=200", 1, "", map[string]string{"b/two": Open}},
		{"the lead refused, its open fallback answers", ab, []string{"b/two"}, nil, script{"a/one": {status(401)}},
			"a/one=401, b/two=200", 1, "", nil},
		{"an open lead goes to the back", ab, []string{"a/one"}, nil, script{},
			"b/two=200", 1, "", map[string]string{"a/one": Open}},
		{"an open lead answers when the others fail", ab, []string{"a/one"}, nil, script{"b/two": {status(404)}},
			"b/two=404, a/one=200", 0, "", map[string]string{"a/one": Open}},
		{"every breaker open: tried in order", ab, []string{"a/one", "b/two"}, nil, script{"a/one": {status(404)}},
			"a/one=404, b/two=200", 1, "", nil},
		{"the open middle target is tried last", abc, []string{"b/two"}, nil, script{"a/one": {status(404)}, "c/three": {status(404)}},
			"a/one=404, c/three=404, b/two=200", 1, "", nil},
		{"open targets keep their order at the back", abc, []string{"a/one", "b/two"}, nil, script{"c/three": {status(404)}, "a/one": {status(404)}},
			"c/three=404, a/one=404, b/two=200", 1, "", nil},
		{"a half-open lead keeps its place: the probe", ab, nil, []string{"a/one"}, script{},
			"a/one=200", 0, "", map[string]string{"a/one": Closed}},
		{"a failed probe, then the fallback", ab, nil, []string{"a/one"}, script{"a/one": {status(404)}},
			"a/one=404, b/two=200", 1, "", map[string]string{"a/one": Open}},
		{"the lead's 400 is final: the open fallback is not tried", ab, []string{"b/two"}, nil, script{"a/one": {status(400)}},
			"a/one=400", -1, "failed: 400", nil},
		{"a skipped lead, an open fallback answers", ab, []string{"b/two"}, nil, script{"a/one": {skip}},
			"b/two=200", 1, "", nil},
		{"all fail: the last error, the open one's", ab, []string{"a/one"}, nil, script{"a/one": {status(404)}, "b/two": {status(401)}},
			"b/two=401, a/one=404", -1, "failed: 404", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, c, _ := newTestRouter(Policy{})
			for _, m := range tt.open {
				b := r.breaker(m)
				b.open, b.openTill = true, c.t.Add(time.Minute)
			}
			for _, m := range tt.halfOpen {
				b := r.breaker(m)
				b.open, b.openTill = true, c.t.Add(-time.Second)
			}
			var keys []string
			res, err := r.Run(context.Background(), tt.targets, classify, tt.script.do(tt.targets, &keys, 0, c))
			if got := FormatAttempts(res.Attempts); got != tt.want {
				t.Errorf("attempts = %q; want %q", got, tt.want)
			}
			if res.Target != tt.answered {
				t.Errorf("answered by %d; want %d", res.Target, tt.answered)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("err = %v; want %q", err, tt.wantErr)
			}
			for m, want := range tt.wantState {
				if got := r.State(m).State; got != want {
					t.Errorf("State(%q) = %s; want %s", m, got, want)
				}
			}
		})
	}
}

// TestDemotedTargetFirstToken: a target before a demoted one is not the
// last to be tried, so a stall on it is cut at the first-token limit.
func TestDemotedTargetFirstToken(t *testing.T) {
	r, c, _ := newTestRouter(Policy{FirstToken: 5 * time.Second})
	ts := targets("a/one", "b/two")
	b := r.breaker("a/one")
	b.open, b.openTill = true, c.t.Add(time.Minute)
	var limits []time.Duration
	r.Run(context.Background(), ts, classify, func(_ context.Context, t Try) error {
		d := time.Duration(0)
		if !t.FirstToken.IsZero() {
			d = t.FirstToken.Sub(c.t)
		}
		limits = append(limits, d)
		if ts[t.Target].Model == "b/two" {
			return status(404)
		}
		return nil
	})
	if want := []time.Duration{5 * time.Second, 0}; !slices.Equal(limits, want) {
		t.Errorf("first-token limits (b, then the demoted a) = %v; want %v", limits, want)
	}
}

func TestFirstTokenDeadline(t *testing.T) {
	r, c, _ := newTestRouter(Policy{FirstToken: 5 * time.Second, Budget: 12 * time.Second})
	ts := targets("a/one", "b/two", "c/three")
	var deadlines []time.Duration
	var keys []string
	do := script{"a/one": {status(503)}, "b/two": {status(503)}}.do(ts, &keys, 3*time.Second, c)
	start := c.t
	_, err := r.Run(context.Background(), ts, classify, func(ctx context.Context, t Try) error {
		d := time.Duration(0)
		if !t.FirstToken.IsZero() {
			d = t.FirstToken.Sub(c.t)
		}
		deadlines = append(deadlines, d)
		return do(ctx, t)
	})
	// a: three attempts of 3 s (with backoffs) fit with a deadline; b's
	// begins near the budget's end: no time for c after it, so b is not
	// cut, and c is not tried.
	if err == nil || len(deadlines) != 4 {
		t.Fatalf("Run = %v after %d attempts; want b's failure after 4", err, len(deadlines))
	}
	if deadlines[0] != 5*time.Second {
		t.Errorf("first attempt's first-token limit = %v; want 5s (another target remains)", deadlines[0])
	}
	if last := deadlines[len(deadlines)-1]; last != 0 {
		t.Errorf("last attempt's limit = %v; want none (the last target is never cut)", last)
	}
	if c.t.Sub(start) > 30*time.Second {
		t.Errorf("took %v", c.t.Sub(start))
	}
}

func TestBudgetStopsNewTargets(t *testing.T) {
	r, c, _ := newTestRouter(Policy{Budget: 10 * time.Second})
	ts := targets("a/one", "b/two")
	var keys []string
	res, err := r.Run(context.Background(), ts, classify, script{"a/one": {errors.New("timeout")}}.do(ts, &keys, 11*time.Second, c))
	if err == nil || res.Target != -1 || FormatAttempts(res.Attempts) != "a/one=connection" {
		t.Errorf("Run = %v, %+v; want a/one's failure alone: the budget was spent", err, res)
	}
}

func TestKeyPool(t *testing.T) {
	r, c, logs := newTestRouter(Policy{})
	ts := []Target{{Model: "a/one", Provider: "a", Keys: []string{"k1", "k2", "k3"}}, {Model: "b/two", Provider: "b"}}
	refused := map[string]error{"k1": retryAfter(429, 20*time.Second), "k2": status(401)}
	var used []string
	do := func(ctx context.Context, t Try) error {
		k := KeyFrom(ctx)
		if k != t.Key {
			return fmt.Errorf("ctx key %q, try key %q", k, t.Key)
		}
		used = append(used, ts[t.Target].Model+":"+k)
		if ts[t.Target].Model == "a/one" {
			return refused[k]
		}
		return nil
	}
	for range 3 {
		res, err := r.Run(context.Background(), ts, classify, do)
		if err != nil || res.Target != 0 {
			t.Fatalf("Run = %v, %+v; want a/one to answer with k3", err, res)
		}
	}
	// k1 and k2 were tried once each, at once (no wait), then rested:
	// every later request goes to k3.
	if len(c.waits) != 0 {
		t.Errorf("waits %v; want none (another key at once)", c.waits)
	}
	n := map[string]int{}
	for _, u := range used {
		n[u]++
	}
	if n["a/one:k1"] != 1 || n["a/one:k2"] != 1 || n["a/one:k3"] != 3 || n["b/two:"] != 0 {
		t.Errorf("keys used %v; want k1 and k2 once, then k3 only", used)
	}
	if used[0] != "a/one:k1" {
		t.Errorf("first key used %s; want the pool's first, k1", used[0])
	}
	if got := strings.Count(logs.String(), "refused"); got != 1 || strings.Contains(logs.String(), "sk-") {
		t.Errorf("log %q; want one line about the refused key, by its id", logs.String())
	}
	// After the 429's Retry-After k1 is back; k2 stays benched 5 minutes.
	c.t = c.t.Add(21 * time.Second)
	used = nil
	for range 4 {
		r.Run(context.Background(), ts, classify, do)
	}
	if slices.Contains(used, "a/one:k2") {
		t.Errorf("the benched key was used again: %v", used)
	}
}

func TestKeyPoolAllResting(t *testing.T) {
	// Every key rate-limited: the target is retried with backoff (the key
	// whose rest ends first), then the next target.
	r, _, _ := newTestRouter(Policy{})
	ts := []Target{{Model: "a/one", Provider: "a", Keys: []string{"k1", "k2"}}, {Model: "b/two", Provider: "b"}}
	var keys []string
	c := &clock{}
	res, err := r.Run(context.Background(), ts, classify, script{"a/one": {status(429)}}.do(ts, &keys, 0, c))
	if err != nil || res.Target != 1 {
		t.Fatalf("Run = %v, %+v", err, res)
	}
	// k1, then k2 at once; both resting, the retries take the one whose
	// rest ends first.
	if got := FormatAttempts(res.Attempts); got != "a/one=429, a/one=429, a/one=429, a/one=429, b/two=200" {
		t.Errorf("attempts %q", got)
	}
}

func TestBreaker(t *testing.T) {
	r, c, _ := newTestRouter(Policy{Retries: -1})
	ts := targets("a/one", "b/two")
	calls := map[string]int{}
	aFails := true
	do := func(_ context.Context, t Try) error {
		m := ts[t.Target].Model
		calls[m]++
		if m == "a/one" && aFails {
			return status(500)
		}
		return nil
	}
	for range 5 {
		r.Run(context.Background(), ts, classify, do)
	}
	if s := r.State("a/one"); s.State != Open || s.Calls != 5 || s.Failures != 5 {
		t.Fatalf("after 5 failures in a row: %+v; want open", s)
	}
	calls = map[string]int{}
	res, _ := r.Run(context.Background(), ts, classify, do)
	if calls["a/one"] != 0 || res.Target != 1 {
		t.Errorf("open breaker: a called %d times, answered by %d; want a skipped", calls["a/one"], res.Target)
	}
	// Every breaker open: tried anyway.
	for _, m := range []string{"b/two"} {
		b := r.breaker(m)
		b.mu.Lock()
		b.open, b.openTill = true, c.t.Add(time.Minute)
		b.mu.Unlock()
	}
	calls = map[string]int{}
	if res, err := r.Run(context.Background(), ts, classify, do); err != nil || calls["a/one"] != 1 || calls["b/two"] != 1 || res.Target != 1 {
		t.Errorf("all open: calls %v, %+v, %v; want both tried anyway", calls, res, err)
	}
	// Half open after BreakerOpen: one probe; its success closes it.
	c.t = c.t.Add(31 * time.Second)
	if s := r.State("a/one"); s.State != HalfOpen {
		t.Fatalf("after 30 s: %+v; want half open", s)
	}
	aFails = false
	calls = map[string]int{}
	if res, _ := r.Run(context.Background(), ts, classify, do); res.Target != 0 || calls["a/one"] != 1 {
		t.Errorf("probe: %+v, calls %v; want a to answer", res, calls)
	}
	if s := r.State("a/one"); s.State != Closed || s.Calls != 0 {
		t.Errorf("after a good probe: %+v; want closed, a clean window", s)
	}
}

func TestBreakerHalfOfWindow(t *testing.T) {
	b := &breaker{}
	p := DefaultPolicy
	now := time.Unix(0, 0)
	// Two failures and a success, again and again, never make 5 in a
	// row; the 11th failure of the last 20 calls is more than half.
	for i := range 21 {
		b.record(&p, i%3 != 2, now)
		if s, _, f := b.state(now); s == Open {
			if f != 11 {
				t.Errorf("opened with %d failures; want 11 of the last 20", f)
			}
			return
		}
	}
	t.Error("breaker never opened")
}

func TestHalfOpenOneProbe(t *testing.T) {
	b := &breaker{}
	p := DefaultPolicy
	now := time.Unix(0, 0)
	for range 5 {
		b.record(&p, true, now)
	}
	later := now.Add(p.BreakerOpen)
	if !b.allow(later) {
		t.Fatal("half open: the first caller is the probe")
	}
	if b.allow(later) {
		t.Error("half open: a second caller while the probe is out")
	}
	b.record(&p, true, later)
	if b.allow(later.Add(time.Second)) {
		t.Error("a failed probe opens the breaker again")
	}
	b.release()
}

func TestClientGone(t *testing.T) {
	r, _, _ := newTestRouter(Policy{})
	ts := targets("a/one", "b/two")
	ctx, cancel := context.WithCancel(context.Background())
	res, err := r.Run(ctx, ts, classify, func(context.Context, Try) error {
		cancel()
		return context.Canceled
	})
	if !errors.Is(err, context.Canceled) || len(res.Attempts) != 0 {
		t.Errorf("Run = %v, %+v; want the client's cancellation, no attempt recorded", err, res)
	}
	if s := r.State("a/one"); s.Calls != 0 {
		t.Errorf("breaker counted a cancelled call: %+v", s)
	}
}

func TestKeySet(t *testing.T) {
	k := NewKeySet(" sk-a , sk-b,,")
	if ids := k.KeyIDs(); len(ids) != 2 || ids[0] != KeyID("sk-a") || strings.Contains(ids[0], "sk") {
		t.Errorf("KeyIDs = %v", ids)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		set  KeySet
		ctx  context.Context
		want string
	}{
		{"none named: the first", k, ctx, "sk-a"},
		{"named", k, WithKey(ctx, KeyID("sk-b")), "sk-b"},
		{"unknown id: the first", k, WithKey(ctx, "gone"), "sk-a"},
		{"empty set", KeySet{}, ctx, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.set.Key(tt.ctx); got != tt.want {
				t.Errorf("Key = %q; want %q", got, tt.want)
			}
			h := tt.set.BearerHeader(tt.ctx)
			switch {
			case tt.want == "" && h != nil:
				t.Errorf("BearerHeader = %q; want nil", h)
			case tt.want != "" && (len(h) != 1 || h[0] != "Bearer "+tt.want || cap(h) != 1):
				t.Errorf("BearerHeader = %q (cap %d); want [Bearer %s] of capacity 1", h, cap(h), tt.want)
			}
			// An append (http.Header.Add) copies the shared slice.
			if h != nil {
				_ = append(h, "x")
				if again := tt.set.BearerHeader(tt.ctx); len(again) != 1 {
					t.Errorf("BearerHeader after an append = %q", again)
				}
			}
		})
	}
}

func TestDecide(t *testing.T) {
	p := DefaultPolicy
	fresh := State{More: true, Left: time.Minute, Jitter: 0.5}
	last := State{Left: time.Minute, Jitter: 0.5}
	tests := []struct {
		name string
		f    Failure
		s    State
		want Action
		wait time.Duration
	}{
		{"final", Failure{Class: Final, Status: 400}, fresh, Stop, 0},
		{"skip", Failure{Class: Skip}, fresh, Next, 0},
		{"404", Failure{Class: Unsupported, Status: 404}, fresh, Next, 0},
		{"401 with a free key", Failure{Class: KeyRefused, Status: 401}, State{KeyFree: true, More: true, Left: time.Minute}, OtherKey, 0},
		{"401 without", Failure{Class: KeyRefused, Status: 401}, fresh, Next, 0},
		{"429 with a free key", Failure{Class: RateLimited, Status: 429, RetryAfter: time.Hour}, State{KeyFree: true, Left: time.Minute}, OtherKey, 0},
		{"429 short Retry-After", Failure{Class: RateLimited, Status: 429, RetryAfter: time.Second}, fresh, Again, time.Second},
		{"429 long Retry-After, more targets", Failure{Class: RateLimited, Status: 429, RetryAfter: 5 * time.Second}, fresh, Next, 0},
		{"429 long Retry-After, last target", Failure{Class: RateLimited, Status: 429, RetryAfter: 5 * time.Second}, last, Again, 5 * time.Second},
		{"Retry-After beyond the budget", Failure{Class: Transient, Status: 503, RetryAfter: 2 * time.Minute}, last, Next, 0},
		{"first retry", Failure{Class: Transient, Status: 500}, fresh, Again, 187500 * time.Microsecond},
		{"second retry", Failure{Class: Transient, Status: 500}, State{Retry: 1, More: true, Left: time.Minute, Jitter: 0.5}, Again, 375 * time.Millisecond},
		{"retries spent", Failure{Class: Transient, Status: 500}, State{Retry: 2, More: true, Left: time.Minute}, Next, 0},
		{"no jitter: half the backoff", Failure{Class: Transient, Reason: "stall"}, State{Left: time.Minute}, Again, 125 * time.Millisecond},
		{"budget spent", Failure{Class: Transient, Reason: "connection"}, State{Left: 0}, Next, 0},
	}
	for _, tt := range tests {
		act, wait := p.Decide(tt.f, tt.s)
		if act != tt.want || wait != tt.wait {
			t.Errorf("%s: Decide(%+v, %+v) = %v, %v; want %v, %v", tt.name, tt.f, tt.s, act, wait, tt.want, tt.wait)
		}
	}
}

// TestOutsideRun: the methods for attempts made outside Run (a job's
// submit per worker run) keep the same state as Run: keys rest after a
// 429 or a 401, a Final failure is no call, the breaker opens after a run
// of failures and an attempt made half open is its probe.
func TestOutsideRun(t *testing.T) {
	r, c, _ := newTestRouter(Policy{})
	pool := Target{Model: "v/veo", Provider: "v", Keys: []string{"k1", "k2"}}
	tried := map[string]bool{}
	k := r.Key(pool, tried)
	if k != "k1" && k != "k2" {
		t.Fatalf("Key = %q; want a key of the pool", k)
	}
	tried[k] = true
	if !r.KeyFree(pool, tried) {
		t.Errorf("KeyFree with one of two keys tried = false; want true")
	}
	r.Observe(pool, k, &Failure{Class: RateLimited, Status: 429, RetryAfter: time.Minute})
	other := r.Key(pool, tried)
	if other == k || other == "" {
		t.Errorf("Key after %s was rate-limited = %q; want the other key", k, other)
	}
	// The rested key is passed over by later attempts too (a new run).
	for range 3 {
		if got := r.Key(pool, nil); got == k {
			t.Errorf("Key(no key tried) = the resting key %q", got)
		}
	}
	tried[other] = true
	r.Observe(pool, other, &Failure{Class: KeyRefused, Status: 401})
	if r.KeyFree(pool, nil) {
		t.Errorf("KeyFree with both keys resting = true; want false")
	}
	if r.KeyFree(Target{Model: "x", Keys: []string{"only"}}, nil) {
		t.Errorf("KeyFree of a single key = true; want false (no pool)")
	}
	if got := r.Key(Target{Model: "x"}, nil); got != "" {
		t.Errorf("Key of a target without keys = %q; want \"\"", got)
	}

	one := Target{Model: "f/fal", Provider: "f"}
	r.Observe(one, "", &Failure{Class: Final, Status: 400})
	r.Observe(one, "", &Failure{Class: Skip, Reason: "skipped"})
	if s := r.State("f/fal"); s.Calls != 0 {
		t.Errorf("after a Final and a Skip: %+v; want no call counted", s)
	}
	for range 5 {
		r.Observe(one, "", &Failure{Class: Transient, Status: 503})
	}
	if s := r.State("f/fal"); s.State != Open || s.Failures != 5 {
		t.Fatalf("after 5 failed submits: %+v; want open", s)
	}
	c.t = c.t.Add(31 * time.Second)
	r.Observe(one, "", nil) // half open: this answer is the probe
	if s := r.State("f/fal"); s.State != Closed {
		t.Errorf("after an answer while half open: %+v; want closed", s)
	}
	r.Moved(one)
	if s := r.State("f/fal"); s.State != Closed || s.Calls != 0 {
		t.Errorf("Moved changed the breaker: %+v", s)
	}
	var m bytes.Buffer
	metrics.Default.WriteTo(&m)
	for _, want := range []string{
		`genway_route_fallbacks_total{provider="f",model="f/fal"} 1`,
		`genway_route_attempts_total{provider="f",model="f/fal",outcome="503"} 5`,
		`genway_route_attempts_total{provider="f",model="f/fal",outcome="400"} 1`,
		`genway_route_attempts_total{provider="v",model="v/veo",outcome="429"} 1`,
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

type keyed []string

func (k keyed) KeyIDs() []string { return k }

// TestPoolKeys: a Target's Keys are a pool's, more than one key.
func TestPoolKeys(t *testing.T) {
	for _, tt := range []struct {
		p    any
		want int
	}{{nil, 0}, {"not keyed", 0}, {keyed{"a"}, 0}, {keyed{"a", "b"}, 2}} {
		if got := PoolKeys(tt.p); len(got) != tt.want {
			t.Errorf("PoolKeys(%v) = %v; want %d keys", tt.p, got, tt.want)
		}
	}
}

// TestKeysOf: a Keyed provider's KeyIDs, one key or more; nil for another.
func TestKeysOf(t *testing.T) {
	for _, tt := range []struct {
		p    any
		want int
	}{{nil, 0}, {"not keyed", 0}, {keyed{"a"}, 1}, {keyed{"a", "b"}, 2}} {
		if got := KeysOf(tt.p); len(got) != tt.want {
			t.Errorf("KeysOf(%v) = %v; want %d keys", tt.p, got, tt.want)
		}
	}
}
