package chat_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
)

// thoughtSink is a sink that records every call, a Thought delta as
// "thought <redacted or signature>".
type thoughtSink struct{ sink }

func (s *thoughtSink) Delta(d chat.Delta) error {
	if d.Thought != nil {
		s.calls = append(s.calls, "thought "+d.Thought.Redacted+d.Thought.Signature)
		return nil
	}
	return s.sink.Delta(d)
}

// TestRunHoldsThoughts: a Thought that a stream sends before its first
// token (a redacted_thinking block first) does not commit the answer, and
// is not lost: it reaches the sink at the commit, before the delta that
// commits, or, in a stream with no token at all, before the end. An
// attempt that fails before its first token takes its Thoughts with it.
func TestRunHoldsThoughts(t *testing.T) {
	redacted := chat.Delta{Thought: &chat.Thought{Provider: "anthropic", Redacted: "R1"}}
	signed := chat.Delta{Thought: &chat.Thought{Provider: "anthropic", Text: "hm", Signature: "S1"}}
	tests := []struct {
		name   string
		deltas []chat.Delta
		want   []string
	}{
		{"before content", []chat.Delta{redacted, {Content: "hi"}},
			[]string{"start", "begin synthetic/echo", "thought R1", "delta hi", "flush", `end "" stop 0`}},
		{"two, then reasoning", []chat.Delta{redacted, redacted, {Reasoning: "hm"}, signed, {Content: "hi"}},
			[]string{"start", "begin synthetic/echo", "thought R1", "thought R1", "delta ", "flush", "thought S1", "flush", "delta hi", "flush", `end "" stop 0`}},
		{"thoughts alone", []chat.Delta{redacted},
			[]string{"start", "begin synthetic/echo", "thought R1", `end "" stop 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prov := &cutProvider{deltas: tt.deltas, final: chat.Response{FinishReason: chat.FinishStop}}
			gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(t), Providers: map[string]chat.Provider{"synthetic": prov}})
			s := &thoughtSink{}
			p := &chat.Params{Model: "synthetic/echo", Stream: true, Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`)}}}
			if err := gw.Run(context.Background(), "acct", p, s); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.calls, tt.want) {
				t.Errorf("sink calls = %q; want %q", s.calls, tt.want)
			}
		})
	}

	t.Run("failed attempt", func(t *testing.T) {
		cat, err := catalog.Parse([]byte(`{"providers":[{"name":"a","kind":"openai"},{"name":"b","kind":"openai"}],"models":[
			{"id":"a/m","type":"chat","provider":"a","fallbacks":["b/m"],"price":{"free":true}},
			{"id":"b/m","type":"chat","provider":"b","price":{"free":true}}]}`), catalog.Pricing{})
		if err != nil {
			t.Fatal(err)
		}
		a := &cutProvider{deltas: []chat.Delta{redacted}, err: &chat.UpstreamError{Provider: "a", Kind: chat.UpstreamFailed, Status: 500}}
		b := &cutProvider{deltas: []chat.Delta{{Content: "hi"}}, final: chat.Response{FinishReason: chat.FinishStop}}
		gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"a": a, "b": b},
			Router: route.New(route.Policy{Backoff: time.Millisecond}, nil)})
		s := &thoughtSink{}
		p := &chat.Params{Model: "a/m", Stream: true, Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`)}}}
		if err := gw.Run(context.Background(), "acct", p, s); err != nil {
			t.Fatal(err)
		}
		if want := []string{"start", "begin b/m", "delta hi", "flush", `end "" stop 0`}; !slices.Equal(s.calls, want) {
			t.Errorf("sink calls = %q; want %q (a's thought is not b's)", s.calls, want)
		}
	})
}

// topKProvider is a fakeProvider with the given features.
type topKProvider struct {
	fakeProvider
	f chat.Features
}

func (p *topKProvider) Features() chat.Features { return p.f }

// TestPrepareMessagesFields: the fields only the Messages API's edge
// sets: top_k is refused, naming it, by a provider without
// Features.TopK (one that is not a FeatureProvider included: top_k is
// not OpenAI's); thoughts only on assistant messages, is_error only on
// tool results; the thinking budget and display only for a model that
// reasons; the API headers as they are.
func TestPrepareMessagesFields(t *testing.T) {
	k := 5
	user := chat.ParamsMessage{Role: chat.RoleUser, Content: []byte(`"hi"`)}
	thought := []chat.Thought{{Provider: "anthropic", Text: "hm", Signature: "S"}}
	call := chat.ParamsToolCall{ID: "toolu_1", Type: "function"}
	call.Function.Name, call.Function.Arguments = "f", "{}"
	tests := []struct {
		name     string
		features *chat.Features // nil: not a FeatureProvider
		p        chat.Params
		param    string // "" for none: prepared
	}{
		{"top_k, no features", nil, chat.Params{TopK: &k}, "top_k"},
		{"top_k, no TopK", &chat.Features{Tools: true}, chat.Params{TopK: &k}, "top_k"},
		{"top_k", &chat.Features{TopK: true}, chat.Params{TopK: &k}, ""},
		{"thoughts on user", nil, chat.Params{Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`), Thoughts: thought}}}, "messages[0].content"},
		{"is_error on user", nil, chat.Params{Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`), ToolError: true}}}, "messages[0].is_error"},
		{"thoughts and calls", nil, chat.Params{Messages: []chat.ParamsMessage{user,
			{Role: chat.RoleAssistant, Thoughts: thought, ToolCalls: []chat.ParamsToolCall{call}},
			{Role: chat.RoleTool, ToolCallID: "toolu_1", Content: []byte(`"boom"`), ToolError: true}}}, ""},
		{"thoughts alone", nil, chat.Params{Messages: []chat.ParamsMessage{user, {Role: chat.RoleAssistant, Thoughts: thought}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var prov chat.Provider = &fakeProvider{}
			if tt.features != nil {
				prov = &topKProvider{f: *tt.features}
			}
			gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(t), Providers: map[string]chat.Provider{"synthetic": prov}})
			p := tt.p
			p.Model = "synthetic/echo"
			if p.Messages == nil {
				p.Messages = []chat.ParamsMessage{user}
			}
			c, err := gw.Prepare(context.Background(), &p)
			if tt.param == "" {
				if err != nil {
					t.Fatalf("Prepare = %v; want no error", err)
				}
				if p.TopK != nil && (c.Request.TopK == nil || *c.Request.TopK != k) {
					t.Errorf("Request.TopK = %v; want %d", c.Request.TopK, k)
				}
				for i, m := range p.Messages {
					if got := c.Request.Messages[i]; !slices.Equal(got.Thoughts, m.Thoughts) || got.ToolError != m.ToolError {
						t.Errorf("message %d = %+v; want thoughts %v, tool error %v", i, got, m.Thoughts, m.ToolError)
					}
				}
				return
			}
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Kind != apierr.Invalid || ae.Param != tt.param {
				t.Fatalf("Prepare = %v; want a 400 naming %s", err, tt.param)
			}
		})
	}

	t.Run("reasoning", func(t *testing.T) {
		gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}})
		high := "high"
		for _, m := range []struct {
			model  string
			budget int
			disp   string
		}{{"synthetic/thinker", 2048, "omitted"}, {"synthetic/echo", 0, ""}} {
			p := &chat.Params{Model: m.model, Messages: []chat.ParamsMessage{user}, ReasoningEffort: &high, ReasoningBudget: 2048,
				ReasoningDisplay: "omitted", APIHeaders: map[string]string{"anthropic-beta": "b1"}}
			c, err := gw.Prepare(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			r := c.Request
			if got := fmt.Sprint(r.ReasoningBudget, r.ReasoningDisplay); got != fmt.Sprint(m.budget, m.disp) {
				t.Errorf("%s: budget, display = %s; want %d %q", m.model, got, m.budget, m.disp)
			}
			if r.APIHeaders["anthropic-beta"] != "b1" {
				t.Errorf("%s: APIHeaders = %v; want the client's", m.model, r.APIHeaders)
			}
		}
	})
}

// counter is a fakeProvider that counts tokens: n, or err.
type counter struct {
	fakeProvider
	n   int
	err error
}

func (c *counter) CountTokens(_ context.Context, req *chat.Request) (int, error) {
	return c.n, c.err
}

// TestCountTokens: the provider's count when it is a TokenCounter, the
// estimate when it is not or cannot count ("hello there" is 13 bytes as
// its JSON string: 4 tokens, and 4 for the message), the upstream's
// failure as it is; the key's model scope and Prepare's validation
// apply; nothing is run.
func TestCountTokens(t *testing.T) {
	msgs := []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hello there"`)}}
	boom := &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamFailed, Status: 500}
	tests := []struct {
		name string
		prov chat.Provider
		p    chat.Params
		want chat.TokenCount
		err  string // a part of the error; "" for none
	}{
		{"counter", &counter{n: 42}, chat.Params{Model: "synthetic/echo", Messages: msgs}, chat.TokenCount{Model: "synthetic/echo", Input: 42}, ""},
		{"cannot count", &counter{err: chat.ErrNoTokenCount}, chat.Params{Model: "synthetic/echo", Messages: msgs},
			chat.TokenCount{Model: "synthetic/echo", Input: 8, Estimated: true}, ""},
		{"estimate", &fakeProvider{}, chat.Params{Model: "synthetic/echo", Messages: msgs}, chat.TokenCount{Model: "synthetic/echo", Input: 8, Estimated: true}, ""},
		{"upstream fails", &counter{err: boom}, chat.Params{Model: "synthetic/echo", Messages: msgs}, chat.TokenCount{}, "status 500"},
		{"scope", &counter{n: 1}, chat.Params{Model: "synthetic/thinker", Messages: msgs}, chat.TokenCount{}, "synthetic/thinker"},
		{"invalid", &counter{n: 1}, chat.Params{Model: "synthetic/echo"}, chat.TokenCount{}, "messages"},
	}
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Account: "acct", KeyID: "key_1", Models: []string{"synthetic/echo"}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(t), Providers: map[string]chat.Provider{"synthetic": tt.prov}})
			got, err := gw.CountTokens(ctx, &tt.p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("CountTokens = %+v, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("CountTokens = %+v, %v; want %+v", got, err, tt.want)
			}
			if f, ok := tt.prov.(*fakeProvider); ok && len(f.got) > 0 {
				t.Errorf("the provider ran %d requests; want none", len(f.got))
			}
		})
	}
}

func TestSafeCallID(t *testing.T) {
	long := strings.Repeat("a", 65)
	for _, id := range []string{"toolu_01A", "call_abc-1", "c"} {
		if got := chat.SafeCallID(id); got != id {
			t.Errorf("SafeCallID(%q) = %q; want it as it is", id, got)
		}
	}
	seen := map[string]string{}
	for _, id := range []string{"functions.Bash:0", "functions.Bash:1", "a b", long, ""} {
		got := chat.SafeCallID(id)
		if !strings.HasPrefix(got, "toolu_") || len(got) != 30 || chat.SafeCallID(got) != got {
			t.Errorf("SafeCallID(%q) = %q; want toolu_ and a digest", id, got)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("SafeCallID(%q) = SafeCallID(%q) = %q", id, other, got)
		}
		seen[got] = id
		if again := chat.SafeCallID(id); again != got {
			t.Errorf("SafeCallID(%q) = %q, then %q; want the same", id, got, again)
		}
	}
}
