package main

import (
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
)

// keyCreditsOf is GET /v1/credits's "key" member.
type keyCreditsOf struct {
	Key *struct {
		CreditLimit, Spent, Held, Left int64 `json:",omitempty"`
		Reset, Period                  string
		ResetsAt                       int64 `json:"resets_at"`
	}
}

// TestServeKeyReset runs genway serve with a key made by `genway keys
// create --credit-limit 2 --reset monthly`: two 1-credit jobs use its
// month, a third is the key's 402, GET /v1/credits shows the reset and
// the period; then genway serve again over the same data with
// GENWAY_TEST_CLOCK_OFFSET (tests only) shifting its clock into the next
// month: the key's first request rolls it, its spend is 0 and jobs pass
// again, and `genway keys list` shows the new period.
func TestServeKeyReset(t *testing.T) { testServeKeyReset(t, t.TempDir(), nil) }

// TestServeKeyResetAWS is TestServeKeyReset on the AWS-backed local mode
// (moto): the roll is the conditional UpdateItem of the key's item.
func TestServeKeyResetAWS(t *testing.T) {
	_, env, dir := awsServe(t)
	testServeKeyReset(t, dir, env)
}

func testServeKeyReset(t *testing.T, dir string, env map[string]string) {
	s := startServer(t, dir, env)
	key := cliKeyEnv(t, dir, env, "--account", "dev", "--name", "monthly", "--credit-limit", "2", "--reset", "monthly")
	ks := &server{base: s.base, key: key}
	now := time.Now()
	month := auth.Period(auth.ResetMonthly, now)
	job := map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": "rain", "duration": 1}
	for i := range 2 {
		var out struct{ ID string }
		if code, _ := ks.do(t, "POST", "/v1/jobs", job, nil, &out); code != 200 {
			t.Fatalf("job #%d on a key limited to 2 a month = %d; want 200", i, code)
		}
	}
	var e chatErr
	if code, _ := ks.do(t, "POST", "/v1/jobs", job, nil, &e); code != 402 || e.Error.Code != "key_credit_limit" {
		t.Fatalf("a third job = %d %+v; want 402 key_credit_limit", code, e.Error)
	}
	// Bounded wait for the two jobs to be settled: 2 spent, none held.
	var cr keyCreditsOf
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cr = keyCreditsOf{}
		ks.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Key != nil && cr.Key.Spent == 2 && cr.Key.Held == 0 {
			break
		}
	}
	next := auth.NextReset(auth.ResetMonthly, now)
	if k := cr.Key; k == nil || k.Spent != 2 || k.Held != 0 || k.Left != 0 || k.Reset != "monthly" || k.Period != month || k.ResetsAt != next.Unix() {
		t.Fatalf("GET /v1/credits key = %+v; want spent 2 of 2, reset monthly, period %s, resets_at %d", cr.Key, month, next.Unix())
	}
	if list := cliEnv(t, dir, env, "keys", "list", "--account", "dev"); !strings.Contains(list, "2/2 monthly, "+month) {
		t.Errorf("keys list = %q; want the key's 2/2 monthly, %s", list, month)
	}
	s.stop()

	// The next month, an hour in.
	offset := next.Sub(now) + time.Hour
	later := auth.Period(auth.ResetMonthly, now.Add(offset))
	env2 := maps.Clone(env)
	if env2 == nil {
		env2 = map[string]string{}
	}
	env2["GENWAY_TEST_CLOCK_OFFSET"] = offset.String()
	s2 := startServer(t, dir, env2)
	ks = &server{base: s2.base, key: key}
	cr = keyCreditsOf{}
	ks.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if k := cr.Key; k == nil || k.Spent != 0 || k.Left != 2 || k.Period != later {
		t.Fatalf("GET /v1/credits key in the next month = %+v; want spent 0, 2 left, period %s", cr.Key, later)
	}
	var out struct{ ID string }
	if code, _ := ks.do(t, "POST", "/v1/jobs", job, nil, &out); code != 200 {
		t.Fatalf("a job in the next month = %d; want 200", code)
	}
	if list := cliEnv(t, dir, env, "keys", "list", "--account", "dev"); !strings.Contains(list, " monthly, "+later) {
		t.Errorf("keys list = %q; want the key's period %s", list, later)
	}
	// Removing the reset is audited like the other controls.
	if got := cliEnv(t, dir, env, "keys", "update", key[:12], "--reset", "none"); !strings.Contains(got, "credit_limit=2") || strings.Contains(got, "reset=") {
		t.Errorf("keys update --reset none = %q; want credit_limit=2 and no reset", got)
	}
}

// TestKeyResetFlags: --reset is checked before any server is asked.
func TestKeyResetFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"keys", "create", "--account", "dev", "--reset", "monthly"}, // no limit
		{"keys", "create", "--account", "dev", "--credit-limit", "5", "--reset", "yearly"},
		{"keys", "update", "sk_live_abcd", "--reset", "hourly"},
	} {
		err := run(t.Context(), args, testEnv(dir, nil), io.Discard, io.Discard)
		var ue usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "--reset") {
			t.Errorf("genway %s = %v; want a usage error about --reset", strings.Join(args, " "), err)
		}
	}
}
