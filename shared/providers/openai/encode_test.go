package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

func ptr[T any](v T) *T { return &v }

func text(role string, parts ...string) chat.Message {
	m := chat.Message{Role: role}
	for _, p := range parts {
		m.Parts = append(m.Parts, chat.Part{Text: p})
	}
	return m
}

var (
	plainModel  = &catalog.Model{ID: "openai/gpt-4o-mini", Upstream: "gpt-4o-mini"}
	effortModel = &catalog.Model{ID: "openai/o4-mini", Upstream: "o4-mini", Chat: catalog.Chat{Thinking: catalog.ThinkingEffort}}
	budgetModel = &catalog.Model{ID: "vllm/x", Upstream: "x", Chat: catalog.Chat{Thinking: catalog.ThinkingBudget}}
	oddModel    = &catalog.Model{ID: "odd", Upstream: "m<&>\"\u2028\xff", Chat: catalog.Chat{Thinking: catalog.ThinkingEffort}}
)

// encodeRequests are requests over every field and escaping rule.
var encodeRequests = []struct {
	name string
	req  chat.Request
}{
	{"text only", chat.Request{Model: plainModel, Messages: []chat.Message{text("system", "Be brief."), text("user", "Hi")}}},
	{"no messages", chat.Request{Model: plainModel}},
	{"empty messages", chat.Request{Model: plainModel, Messages: []chat.Message{}}},
	{"message without parts", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user"}}}},
	{"empty text", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", ""), text("", "", "")}}},
	{"text parts joined", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", "one ", "two ", "three")}}},
	{"invalid UTF-8 split across parts", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", "euro \xe2\x82", "\xac!"), text("user", "\xf0\x9f", "\x99\x82", "\xff")}}},
	{"escapes", chat.Request{Model: oddModel, ReasoningEffort: "<high>", Messages: []chat.Message{
		text("user\"", "quote \" backslash \\ <script>&amp;</script> \n\r\t\b\f \x00\x1f\x7f"),
		text("assistant", "unicode é 日本語 🙂 separators \u2028 \u2029 invalid \xff\xc3 truncated \xe2\x82 surrogate \xed\xa0\x80"),
	}}},
	{"images", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
		{Text: "What?"},
		{Image: &chat.Image{URL: "https://example.com/cat.png?a=1&b=<2>"}},
		{Image: &chat.Image{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")}},
		{Text: ""},
		{Image: &chat.Image{MediaType: "image/jpeg", Data: []byte{}}},
		{Image: &chat.Image{}},
		{Image: &chat.Image{URL: "https://example.com/\u2028\xff"}},
	}}, text("assistant", "A cat.")}}},
	{"image media type to escape", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
		{Image: &chat.Image{MediaType: "image/<x>&\"\xff\u2029", Data: []byte{0xfb, 0xff, 0xfe}}},
		{Image: &chat.Image{MediaType: "", Data: []byte("x")}},
	}}}}},
	{"image only", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
		{Image: &chat.Image{MediaType: "image/webp", Data: make([]byte, 1000)}},
	}}}}},
	{"every optional field", chat.Request{Model: effortModel, Messages: []chat.Message{text("user", "Hi")},
		MaxTokens: 4096, ReasoningEffort: "medium", Temperature: ptr(0.7), TopP: ptr(0.95),
		Stop: []string{"\n\n", "END", "<|end|>", ""}, Seed: ptr(int64(42))}},
	{"zero values set", chat.Request{Model: effortModel, Messages: []chat.Message{text("user", "Hi")},
		Temperature: ptr(0.0), TopP: ptr(math.Copysign(0, -1)), Seed: ptr(int64(0)), Stop: []string{}}},
	{"small and large floats", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", "Hi")},
		Temperature: ptr(1e-7), TopP: ptr(1e21)}},
	{"temperature 1.5", chat.Request{Model: plainModel, Temperature: ptr(1.5), TopP: ptr(1.0)}},
	{"temperature just below 1e-6", chat.Request{Model: plainModel, Temperature: ptr(math.Nextafter(1e-6, 0)), TopP: ptr(1e-6)}},
	{"negative numbers", chat.Request{Model: plainModel, MaxTokens: -1, Seed: ptr(int64(math.MinInt64)), Temperature: ptr(-2.5)}},
	{"large numbers", chat.Request{Model: plainModel, MaxTokens: math.MaxInt32, Seed: ptr(int64(math.MaxInt64)), Temperature: ptr(math.MaxFloat64)}},
	{"stop unset", chat.Request{Model: plainModel, Stop: nil, Seed: ptr(int64(-7))}},
	{"one stop", chat.Request{Model: plainModel, Stop: []string{"\u2028<&>\xff"}}},
	{"effort to an effort model", chat.Request{Model: effortModel, ReasoningEffort: "high", Messages: []chat.Message{text("user", "Hi")}}},
	{"no effort to an effort model", chat.Request{Model: effortModel, ReasoningEffort: "", Messages: []chat.Message{text("user", "Hi")}}},
	{"no effort to a budget model", chat.Request{Model: budgetModel, ReasoningEffort: "low", Messages: []chat.Message{text("user", "Hi")}}},
	{"no effort to a plain model", chat.Request{Model: plainModel, ReasoningEffort: "low", Messages: []chat.Message{text("user", "Hi")}}},
}

// TestEncodeRequest: every request of encodeRequests encodes to valid
// JSON whose fields say what the request says.
func TestEncodeRequest(t *testing.T) {
	for _, tt := range encodeRequests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tt.name, stream), func(t *testing.T) {
				b, err := encodeRequest(&tt.req, stream)
				if err != nil {
					t.Fatalf("encodeRequest = %v", err)
				}
				var got struct {
					Model           string            `json:"model"`
					Messages        []json.RawMessage `json:"messages"`
					ReasoningEffort string            `json:"reasoning_effort"`
					Stream          bool              `json:"stream"`
					StreamOptions   *streamOptions    `json:"stream_options"`
				}
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatalf("encodeRequest = %s: %v", b, err)
				}
				wantEffort := ""
				if tt.req.Model.Thinking == catalog.ThinkingEffort {
					wantEffort = tt.req.ReasoningEffort
				}
				if got.Model != strings.ToValidUTF8(tt.req.Model.Upstream, "\uFFFD") || len(got.Messages) != len(tt.req.Messages) ||
					got.ReasoningEffort != wantEffort || got.Stream != stream || (got.StreamOptions != nil) != stream {
					t.Errorf("encodeRequest(%+v, %v) = %s", tt.req, stream, b)
				}
			})
		}
	}
}

// TestNotFiniteRequest: a NaN or infinite temperature or top_p, which
// json.Marshal refused, is an error and nothing is sent.
func TestNotFiniteRequest(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL})
	tests := []struct {
		name string
		req  chat.Request
	}{
		{"NaN temperature", chat.Request{Model: plainModel, Temperature: ptr(math.NaN())}},
		{"infinite temperature", chat.Request{Model: plainModel, Temperature: ptr(math.Inf(1))}},
		{"NaN top_p", chat.Request{Model: plainModel, TopP: ptr(math.NaN())}},
		{"negative infinite top_p", chat.Request{Model: plainModel, Temperature: ptr(1.0), TopP: ptr(math.Inf(-1))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := json.Marshal(wireRequestFor(&tt.req, false)); err == nil {
				t.Fatalf("json.Marshal(wireRequestFor(%+v)) succeeded; want an error", tt.req)
			}
			if _, err := p.Complete(context.Background(), &tt.req); err == nil {
				t.Errorf("Complete(%+v) = nil error; want an error", tt.req)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("upstream got %d requests; want 0", n)
	}
	// The same provider still sends a finite request.
	if _, err := p.Complete(context.Background(), &chat.Request{Model: plainModel, Temperature: ptr(1.0)}); err != nil {
		t.Errorf("Complete(finite) = %v; want nil", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("upstream got %d requests; want 1", n)
	}
}

// benchRequest is a typical streamed chat request: a system prompt, a
// few turns of a conversation and sampling parameters.
func benchRequest() *chat.Request {
	turn := strings.Repeat("Tell me more about the history of the <b>printing press</b> & its effects. ", 4)
	return &chat.Request{Model: effortModel, MaxTokens: 1024, ReasoningEffort: "low", Temperature: ptr(0.7), TopP: ptr(0.95),
		Stop: []string{"\n\nUser:"}, Seed: ptr(int64(12345)),
		Messages: []chat.Message{
			text("system", "You are a helpful assistant. Answer concisely, in plain text, in the user's language."),
			text("user", turn), text("assistant", turn+"\n\u2014 caf\u00e9 \U0001F642"), text("user", "And after 1500?"),
		}}
}

func BenchmarkEncodeRequest(b *testing.B) {
	reqs := []struct {
		name string
		req  *chat.Request
	}{
		{"chat", benchRequest()},
		{"image", &chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
			{Text: "What is in this picture?"},
			{Image: &chat.Image{MediaType: "image/png", Data: make([]byte, 32<<10)}},
		}}}}},
	}
	for _, r := range reqs {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				body, err := encodeRequest(r.req, true)
				if err != nil || len(body) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzRequestJSON: a request body written directly (wireRequest.appendJSON)
// is byte for byte what json.Marshal makes of it, wherever appendJSON
// takes it.
//
//	go test ./shared/providers/openai -run '^$' -fuzz FuzzRequestJSON -fuzztime 60s
func FuzzRequestJSON(f *testing.F) {
	f.Add("gpt-4o-mini", "user", "hello there", "", "", "", 16, 0.7, true, 1e-7, false, int64(42), true, "", 3)
	f.Add("m<&>", "assistant", "", "call_1", "lookup", `{"q":"<x>"}`, 0, 1e21, false, -0.0, true, int64(-1), false, "high", 0)
	f.Add("m", "tool", "\u2028\xff\n", "", "", "", -5, math.NaN(), true, 0.5, true, int64(0), true, "", 1)
	f.Add("m", "user", "x", "", "", "", 1, 1e-7, true, 1e21, true, int64(7), false, "", 0)
	f.Add("m", "user", "x", "", "", "", 1, 123456.789, true, -2.5e-300, true, int64(7), false, "", 2)
	f.Fuzz(func(t *testing.T, model, role, content, callID, name, args string, maxTokens int, temp float64, hasTemp bool,
		topP float64, hasTopP bool, seed int64, stream bool, effort string, shape int) {
		w := &wireRequest{Model: model, MaxCompletionTokens: maxTokens, ReasoningEffort: effort, User: name, ServiceTier: effort,
			Verbosity: role, PromptCacheKey: callID, SafetyIdentifier: args}
		if hasTemp {
			w.Temperature = &temp
		}
		if hasTopP {
			w.TopP, w.PresencePenalty, w.FrequencyPenalty = &topP, &temp, &topP
		}
		if shape%2 == 0 {
			w.Seed = &seed
			w.Stop = []string{content, name}
			w.ParallelToolCalls = &stream
		}
		if stream {
			w.Stream, w.StreamOptions = true, &streamOptions{IncludeUsage: true}
		}
		m := wireMessage{Role: role, Content: content, Name: name, ToolCallID: callID}
		switch shape % 4 {
		case 1:
			m.Content = nil
			tc := wireToolCall{Index: maxTokens % 3, ID: callID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = name, args
			m.ToolCalls = []wireToolCall{tc, {Type: "function"}}
		case 2:
			m.Content = []wirePart{{Type: "text", Text: &content}}
		case 3:
			w.Messages = nil
		}
		if shape%4 != 3 {
			w.Messages = []wireMessage{m, {Role: "user", Content: args}}
		}
		want, err := json.Marshal(w)
		got, ok := w.appendJSON(nil)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("appendJSON took a request json.Marshal refuses (%v): %s", err, got)
		}
		if string(got) != string(want) {
			t.Fatalf("appendJSON:\n%s\njson.Marshal:\n%s", got, want)
		}
	})
}
