package chat_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
)

// aliasCatalog has three deployments on providers a, b and c (a 1 credit
// per token, b 2, c free), the alias fast over a (weight 3) and b (weight 1) that
// falls back to c, and the alias solo over c.
const aliasCatalog = `{
  "providers": [{"name": "a", "kind": "openai"}, {"name": "b", "kind": "openai"}, {"name": "c", "kind": "openai"}],
  "models": [
    {"id": "a/m", "type": "chat", "provider": "a", "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_output_tokens": 1000000}},
    {"id": "b/m", "type": "chat", "provider": "b", "price": {"credits_per_million_input_tokens": 2000000, "credits_per_million_output_tokens": 2000000}},
    {"id": "c/m", "type": "chat", "provider": "c", "price": {"free": true}},
    {"id": "fast", "type": "chat", "targets": [{"model": "a/m", "weight": 3}, {"model": "b/m", "weight": 1}], "fallbacks": ["c/m"]},
    {"id": "solo", "type": "chat", "targets": [{"model": "c/m", "weight": 1}]}
  ]
}`

// aliasRig is a gateway over aliasCatalog whose providers answer "ok"
// (2 + 3 tokens), or fail with err.
type aliasRig struct {
	gw    *chat.Gateway
	provs map[string]*fakeProvider
	usage *recorder
}

func newAliasRig(t *testing.T, intn func(int) int, err error) *aliasRig {
	t.Helper()
	cat, perr := catalog.Parse([]byte(aliasCatalog), catalog.Pricing{})
	if perr != nil {
		t.Fatal(perr)
	}
	rig := &aliasRig{provs: map[string]*fakeProvider{}, usage: &recorder{}}
	provs := map[string]chat.Provider{}
	for _, name := range []string{"a", "b", "c"} {
		p := &fakeProvider{resp: chat.Response{Content: "ok", Usage: chat.Usage{PromptTokens: 2, CompletionTokens: 3}}, err: err}
		rig.provs[name], provs[name] = p, p
	}
	rig.gw = chat.NewGateway(chat.Config{Catalog: cat, Providers: provs, Usage: rig.usage, Rand: intn,
		Router: route.New(route.Policy{Backoff: time.Millisecond}, nil)})
	return rig
}

func (rig *aliasRig) run(ctx context.Context, model string, models []string) (*sink, error) {
	s := &sink{}
	p := &chat.Params{Model: model, Models: models, Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`)}}}
	return s, rig.gw.Run(ctx, "acct", p, s)
}

// TestAliasCandidates: an alias, as the model, in models or as a catalog
// fallback's lead, stands for its targets in the order drawn, in its
// place, followed by its fallbacks (or the request's models); a model
// listed twice is tried once. Every provider answers 404 (the next target
// at once), so the attempts are the candidates in order.
func TestAliasCandidates(t *testing.T) {
	first := func(int) int { return 0 }      // the first remaining target is drawn
	last := func(n int) int { return n - 1 } // the last one
	tests := []struct {
		name   string
		intn   func(int) int
		model  string
		models []string
		want   string
	}{
		{"alias then its fallbacks", first, "fast", nil, "a/m, b/m, c/m"},
		{"the other draw", last, "fast", nil, "b/m, a/m, c/m"},
		{"models replace the alias's fallbacks", first, "fast", []string{}, "a/m, b/m"},
		{"an alias in models, in place", first, "c/m", []string{"fast"}, "c/m, a/m, b/m"},
		{"an alias leads from models[0]", last, "", []string{"fast", "c/m"}, "b/m, a/m, c/m"},
		{"a target listed before is tried once", first, "a/m", []string{"fast", "solo"}, "a/m, b/m, c/m"},
		{"an alias of one", last, "solo", nil, "c/m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig := newAliasRig(t, tt.intn, &chat.UpstreamError{Provider: "x", Status: 404, Message: "no such model"})
			_, err := rig.run(context.Background(), tt.model, tt.models)
			var ae *chat.AttemptsError
			if !errors.As(err, &ae) {
				t.Fatalf("Run = %v; want an AttemptsError", err)
			}
			var got []string
			for _, a := range ae.Attempts {
				got = append(got, a.Model)
			}
			if s := strings.Join(got, ", "); s != tt.want {
				t.Errorf("attempts %s; want %s", s, tt.want)
			}
		})
	}
}

// TestAliasKeyScope: a key allowed the alias may use its targets, not the
// catalog fallbacks it is not allowed; a key allowed only a target may not
// use the alias.
func TestAliasKeyScope(t *testing.T) {
	rig := newAliasRig(t, func(int) int { return 0 }, &chat.UpstreamError{Provider: "x", Status: 404})
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Account: "acct", KeyID: "key_1", Models: []string{"fast"}})
	_, err := rig.run(ctx, "fast", nil)
	var ae *chat.AttemptsError
	if !errors.As(err, &ae) || route.FormatAttempts(ae.Attempts) != "a/m=404, b/m=404" {
		t.Errorf("Run(fast) with a key for fast = %v; want a/m and b/m tried, not c/m", err)
	}
	ctx = auth.WithPrincipal(context.Background(), auth.Principal{Account: "acct", KeyID: "key_1", Models: []string{"a/m", "b/m"}})
	if _, err := rig.run(ctx, "fast", nil); !errors.Is(err, auth.ErrModelNotAllowed) {
		t.Errorf("Run(fast) with a key for its targets = %v; want model_not_allowed", err)
	}
}

// TestAliasShares runs an alias of weights 3:1 many times with a seeded
// source and healthy targets: the heavier answers about 3 times in 4, the
// answer is the target's, and usage and credits are recorded for it at
// its price.
func TestAliasShares(t *testing.T) {
	rig := newAliasRig(t, rand.New(rand.NewPCG(1, 2)).IntN, nil)
	const n = 2000
	served := map[string]int{}
	for range n {
		s, err := rig.run(context.Background(), "fast", nil)
		if err != nil {
			t.Fatal(err)
		}
		served[s.calls[1]]++ // "begin <model>"
	}
	if a, b := served["begin a/m"], served["begin b/m"]; a+b != n || a < 1350 || a > 1650 {
		t.Errorf("a/m answered %d, b/m %d of %d; want about %d and %d", a, b, n, n*3/4, n/4)
	}
	got := map[string]int{}
	for _, c := range rig.usage.calls {
		got[c]++
	}
	// a/m: 5 tokens at 1 credit; b/m: 5 at 2.
	if got["acct a/m 2 3 5"] != served["begin a/m"] || got["acct b/m 2 3 10"] != served["begin b/m"] || len(got) != 2 {
		t.Errorf("usage %v; want a/m's and b/m's at their prices, as served %v", got, served)
	}
}

// TestAliasFallback: the first target drawn fails with 503 (retried, then
// left) and the other answers: the answer is its, the attempts name both.
func TestAliasFallback(t *testing.T) {
	rig := newAliasRig(t, func(int) int { return 0 }, nil)
	rig.provs["a"].err = &chat.UpstreamError{Provider: "a", Status: 503, Message: "overloaded"}
	var got chat.Answer
	s := &answerSink{sink: &sink{}, answer: &got}
	p := &chat.Params{Model: "fast", Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`)}}}
	if err := rig.gw.Run(context.Background(), "acct", p, s); err != nil {
		t.Fatal(err)
	}
	if got.Model != "b/m" || route.FormatAttempts(got.Attempts) != "a/m=503, a/m=503, a/m=503, b/m=200" {
		t.Errorf("answer of %q, attempts %q; want b/m after a/m's 503s", got.Model, route.FormatAttempts(got.Attempts))
	}
	if len(rig.usage.calls) != 1 || rig.usage.calls[0] != "acct b/m 2 3 10" {
		t.Errorf("usage %v; want b/m's", rig.usage.calls)
	}
	if r := rig.usage.records[0]; r.ModelAsked != "fast" || r.Model != "b/m" || r.Attempts != "a/m=503, a/m=503, a/m=503, b/m=200" {
		t.Errorf("record = %+v; want fast asked, b/m answering after a/m's 503s", r)
	}
}

// answerSink is a sink that keeps the answer Begin names.
type answerSink struct {
	*sink
	answer *chat.Answer
}

func (s *answerSink) Begin(a chat.Answer) error { *s.answer = a; return s.sink.Begin(a) }
