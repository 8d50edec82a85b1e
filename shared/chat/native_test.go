package chat_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// nativeCatalog has a priced OpenAI model that falls back to a free
// synthetic one.
const nativeCatalog = `{
  "providers": [{"name": "openai", "kind": "openai", "native": ["responses"]}, {"name": "synthetic", "kind": "synthetic"}],
  "models": [
    {"id": "openai/gpt", "type": "chat", "provider": "openai", "upstream": "gpt-up", "max_tokens": 1000,
     "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_output_tokens": 2000000}, "fallbacks": ["synthetic/free"]},
    {"id": "synthetic/free", "type": "chat", "provider": "synthetic", "capabilities": {"streaming": true, "tools": true}}
  ]
}`

// nativeProvider speaks the Responses API: it writes events, then ends
// with err (and cut, the usage so far) if err is set, else with final and
// tail; a whole answer is final with body.
type nativeProvider struct {
	mu     sync.Mutex
	got    []*chat.Request
	events []chat.NativeEvent
	tail   []chat.NativeEvent
	body   string
	final  chat.Response
	err    error
	cut    *chat.Response
}

func (p *nativeProvider) Speaks(api string) bool { return api == chat.APIResponses }

func (p *nativeProvider) Complete(context.Context, *chat.Request) (*chat.Response, error) {
	return nil, errors.New("the native provider was asked for a translated answer")
}

func (p *nativeProvider) Stream(context.Context, *chat.Request, chat.Writer) (*chat.Response, error) {
	return nil, errors.New("the native provider was asked for a translated answer")
}

func (p *nativeProvider) NativeStream(ctx context.Context, req *chat.Request, w chat.NativeWriter) (*chat.Response, error) {
	p.mu.Lock()
	p.got = append(p.got, req)
	p.mu.Unlock()
	for _, e := range p.events {
		if err := w.Event(e); err != nil {
			return p.cut, err
		}
		if err := w.Flush(); err != nil {
			return p.cut, err
		}
	}
	if p.err != nil {
		return p.cut, p.err
	}
	r := p.final
	r.Native = &chat.NativeAnswer{Tail: p.tail}
	return &r, nil
}

func (p *nativeProvider) NativeComplete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	p.mu.Lock()
	p.got = append(p.got, req)
	p.mu.Unlock()
	if p.err != nil {
		return p.cut, p.err
	}
	r := p.final
	r.Native = &chat.NativeAnswer{Body: []byte(p.body)}
	return &r, nil
}

// nativeSink records its calls, native events by name.
type nativeSink struct{ sink }

func (s *nativeSink) Begin(a chat.Answer) error {
	s.calls = append(s.calls, fmt.Sprintf("begin %s native=%t", a.Model, a.Native))
	return nil
}

func (s *nativeSink) Event(e chat.NativeEvent) error {
	s.calls = append(s.calls, "event "+e.Name+" "+string(e.Data))
	return nil
}

func (s *nativeSink) End(r *chat.Response) error {
	end := fmt.Sprintf("end %s %d", r.FinishReason, r.Usage.TotalTokens)
	if n := r.Native; n != nil {
		for _, e := range n.Tail {
			end += " " + e.Name
		}
		end += string(n.Body)
	}
	s.calls = append(s.calls, end)
	return nil
}

// responsesParams are the Params the Responses edge makes of body: a
// translation (here, only its model and input) and the request itself.
func responsesParams(model, body string, stream bool, refusal error) *chat.Params {
	return &chat.Params{Model: model, Stream: stream, ID: "resp_1", Kind: credits.KindResponses,
		Messages: []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hello there, how are you"`)}},
		Native:   &chat.Native{API: chat.APIResponses, Body: []byte(body), Refusal: refusal}}
}

func nativeGateway(t *testing.T, np *nativeProvider, rec chat.UsageRecorder) *chat.Gateway {
	t.Helper()
	cat, err := catalog.Parse([]byte(nativeCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	return chat.NewGateway(chat.Config{Catalog: cat, Usage: rec, Providers: map[string]chat.Provider{"openai": np,
		"synthetic": &fakeProvider{resp: chat.Response{Content: "translated", FinishReason: chat.FinishStop, Usage: chat.Usage{PromptTokens: 2, CompletionTokens: 1}}}}})
}

var (
	created   = chat.NativeEvent{Name: "response.created", Data: []byte(`{"n":0}`)}
	itemAdded = chat.NativeEvent{Name: "response.output_item.added", Data: []byte(`{"n":1}`)}
	hello     = chat.NativeEvent{Name: "response.output_text.delta", Data: []byte(`{"n":2}`), Content: true, Text: 5}
	world     = chat.NativeEvent{Name: "response.output_text.delta", Data: []byte(`{"n":3}`), Content: true, Text: 6}
	completed = chat.NativeEvent{Name: "response.completed", Data: []byte(`{"n":4}`)}
)

// TestRunNative: a request whose model's provider speaks its API is sent
// natively: the provider gets the request itself (the body, the upstream
// model, max_tokens bound by the model's), nothing of the translation is checked
// (an effort the translation refuses passes); the events before the
// first content event wait for it, and reach the sink after a Begin
// that says the answer is native; the tail comes to End, priced; the
// record is the request's (its id, its kind) with the provider's usage.
func TestRunNative(t *testing.T) {
	final := chat.Response{FinishReason: chat.FinishStop, Usage: chat.Usage{PromptTokens: 3, CompletionTokens: 2}}
	body := `{"model":"openai/gpt","input":"hi","reasoning":{"effort":"max"}}`
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			np := &nativeProvider{events: []chat.NativeEvent{created, itemAdded, hello, world}, tail: []chat.NativeEvent{completed},
				body: `{"whole":true}`, final: final}
			rec := &recorder{}
			gw := nativeGateway(t, np, rec)
			p := responsesParams("openai/gpt", body, stream, nil)
			effort := "max"
			p.ReasoningEffort, p.MaxCompletionTokens = &effort, []byte("5000") // above the model's 1000
			s := &nativeSink{}
			if err := gw.Run(context.Background(), "acct", p, s); err != nil {
				t.Fatalf("Run = %v", err)
			}
			want := []string{"start", "begin openai/gpt native=true", `event response.created {"n":0}`, `event response.output_item.added {"n":1}`,
				`event response.output_text.delta {"n":2}`, "flush", `event response.output_text.delta {"n":3}`, "flush", "end stop 5 response.completed", "flush"}
			if !stream {
				want = []string{"start", "begin openai/gpt native=true", `end stop 5{"whole":true}`, "flush"}
			}
			if got := strings.Join(s.calls, "|"); got != strings.Join(want, "|") {
				t.Errorf("sink calls\n%s\nwant\n%s", got, strings.Join(want, "|"))
			}
			if len(np.got) != 1 {
				t.Fatalf("the native provider was called %d times; want once", len(np.got))
			}
			req := np.got[0]
			if string(req.Native.Body) != body || req.Model.Upstream != "gpt-up" || req.MaxTokens != 1000 || req.Messages != nil {
				t.Errorf("native request: body %s, upstream %s, max tokens %d, %d messages; want the client's body, gpt-up, 1000 and no translation",
					req.Native.Body, req.Model.Upstream, req.MaxTokens, len(req.Messages))
			}
			if len(rec.records) != 1 || rec.calls[0] != "acct openai/gpt 3 2 7" {
				t.Fatalf("recorded %q; want the provider's usage, priced", rec.calls)
			}
			if r := rec.records[0]; r.ID != "resp_1" || r.Kind != credits.KindResponses || r.Status != credits.StatusCompleted || r.Stream != stream {
				t.Errorf("record %+v; want resp_1, kind responses, completed", r)
			}
		})
	}
}

// TestRunNativeFallback: a native attempt that fails before its first
// content event (its response.created held) moves on to the next
// candidate, translated: the sink never sees the failed attempt's events.
func TestRunNativeFallback(t *testing.T) {
	np := &nativeProvider{events: []chat.NativeEvent{created, itemAdded},
		err: &chat.UpstreamError{Provider: "openai", Kind: chat.UpstreamFailed, Status: 500, Message: "server_error"}}
	rec := &recorder{}
	gw := nativeGateway(t, np, rec)
	s := &nativeSink{}
	if err := gw.Run(context.Background(), "acct", responsesParams("openai/gpt", `{}`, true, nil), s); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := "start|begin synthetic/free native=false|delta translated|flush|end stop 3|flush"
	if got := strings.Join(s.calls, "|"); got != want {
		t.Errorf("sink calls %s; want %s", got, want)
	}
	if len(rec.records) != 1 || rec.records[0].Model != "synthetic/free" || !strings.HasPrefix(rec.records[0].Attempts, "openai/gpt=500") {
		t.Errorf("records %+v; want synthetic/free's, after openai/gpt's 500", rec.records)
	}
}

// TestRunNativeRefusal: the translation's refusal refuses the candidates
// that would serve the request translated, not a native one: a request
// led by a native model is served; one whose candidates are all
// translated gets the refusal itself.
func TestRunNativeRefusal(t *testing.T) {
	refusal := chat.Refuse("tool_choice", "tool_choice forces a hosted tool.")
	np := &nativeProvider{events: []chat.NativeEvent{hello}, final: chat.Response{Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}}
	gw := nativeGateway(t, np, &recorder{})
	if err := gw.Run(context.Background(), "acct", responsesParams("openai/gpt", `{}`, true, refusal), &nativeSink{}); err != nil {
		t.Errorf("Run(native lead) = %v; want it served", err)
	}
	err := gw.Run(context.Background(), "acct", responsesParams("synthetic/free", `{}`, true, refusal), &nativeSink{})
	if e := apierr.As(err); e == nil || error(e) != refusal {
		t.Errorf("Run(translated lead) = %v; want the translation's refusal", err)
	}
	if err := gw.Run(context.Background(), "acct", responsesParams("openai/gpt", `{}`, true, nil), &sink{}); err == nil {
		t.Error("Run(native params, a sink without Event) = nil; want an error")
	}
}

// TestRunNativeCut: a native stream cut after its first content event is
// charged as a translated one is: the input the provider reported, the
// output estimated from the events' text ("Hello", " world": 11 bytes, 3
// tokens); partial, and no End.
func TestRunNativeCut(t *testing.T) {
	broke := &chat.UpstreamError{Provider: "openai", Kind: chat.UpstreamFailed, Reason: chat.ReasonDropped, Message: "stream ended early"}
	np := &nativeProvider{events: []chat.NativeEvent{created, hello, world}, err: broke, cut: &chat.Response{Usage: chat.Usage{PromptTokens: 30}}}
	rec := &recorder{}
	gw := nativeGateway(t, np, rec)
	s := &nativeSink{}
	err := gw.Run(context.Background(), "acct", responsesParams("openai/gpt", `{}`, true, nil), s)
	var ae *chat.AttemptsError
	if !errors.As(err, &ae) {
		t.Fatalf("Run = %v; want an *AttemptsError", err)
	}
	if calls := strings.Join(s.calls, "|"); strings.Contains(calls, "end") || !strings.Contains(calls, "event response.created") {
		t.Errorf("sink calls %q; want the events and no End", calls)
	}
	if len(rec.records) != 1 || rec.calls[0] != "acct openai/gpt 30 3 36" {
		t.Fatalf("recorded %q; want 30 input and 3 output tokens", rec.calls)
	}
	if r := rec.records[0]; !r.Partial || r.Status != credits.StatusUpstreamError || !r.Estimated {
		t.Errorf("record %+v; want partial, upstream_error, estimated", r)
	}
}

// TestHoldNative: a key with a credit limit holds a native request for
// at least the client's body (what the translation could not carry is
// in it), a translated candidate for its translation only; the native
// provider is asked for no more output than was held (openai/gpt's 1,000
// tokens at 2 credits each, 2,000 credits, and 1 an input token).
func TestHoldNative(t *testing.T) {
	const cr = credits.Credit
	big := `{"input":"` + strings.Repeat("x", 10000) + `"}` // 10,013 bytes: 10,013 credits of input
	for _, tt := range []struct {
		name, body string
		limit      credits.Amount
		ok         bool
	}{
		{"small body", `{"input":"hello"}`, 3000 * cr, true},
		{"large body", big, 3000 * cr, false},
		{"large body within the limit", big, 13000 * cr, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, pr := holdStore(t, 100000*cr, tt.limit)
			np := &nativeProvider{events: []chat.NativeEvent{hello}, final: chat.Response{Usage: chat.Usage{PromptTokens: 5, CompletionTokens: 1}}}
			cat, err := catalog.Parse([]byte(nativeCatalog), catalog.Pricing{})
			if err != nil {
				t.Fatal(err)
			}
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"openai": np, "synthetic": &fakeProvider{}},
				Balances: s, Holds: s, Usage: failingRecorder{t}})
			p := responsesParams("openai/gpt", tt.body, true, nil)
			p.ID = "resp_held_" + strings.ReplaceAll(tt.name, " ", "_")
			err = gw.Run(auth.WithPrincipal(context.Background(), pr), "acct", p, &nativeSink{})
			if !tt.ok {
				if !errors.Is(err, credits.ErrKeyLimit) || len(np.got) != 0 {
					t.Fatalf("Run = %v (%d calls); want the key's 402 before any call", err, len(np.got))
				}
				return
			}
			if err != nil || len(np.got) != 1 || np.got[0].MaxTokens != 1000 {
				t.Fatalf("Run = %v; the provider got %d requests; want one, with max_tokens 1000 (the held bound)", err, len(np.got))
			}
			if spent, held, _ := keyState(t, s, pr.KeyID); spent != 7*cr || held != 0 {
				t.Errorf("key spent %s, held %s; want 7 (5 input and 1 output token), nothing held", spent, held)
			}
		})
	}
}
