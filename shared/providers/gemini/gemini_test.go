package gemini

// The fake upstream below speaks the Gemini API as documented:
//   - methods, x-goog-api-key, request and response shapes:
//     https://ai.google.dev/api/generate-content (GenerateContentRequest,
//     GenerationConfig, GenerateContentResponse, PromptFeedback,
//     UsageMetadata, FinishReason) and the REST streaming quickstart
//     (streamGenerateContent?alt=sse: each event's data is a whole
//     GenerateContentResponse).
//   - thinking: https://ai.google.dev/gemini-api/docs/thinking
//     (generationConfig.thinkingConfig {thinkingBudget, includeThoughts};
//     thought parts carry "thought": true; usageMetadata.thoughtsTokenCount).
//   - errors: https://ai.google.dev/gemini-api/docs/troubleshooting
//     ({"error": {"code", "message", "status", "details"}}, with
//     google.rpc.ErrorInfo reason API_KEY_INVALID and google.rpc.RetryInfo).
// The SSE fixtures use CRLF line ends (as the API sends) except
// stream_max_tokens.sse, which uses LF.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

type upstream struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []recorded
	status int
	header http.Header
	body   []byte
}

type recorded struct {
	method, path, query string
	header              http.Header
	body                map[string]any
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{t: t, status: http.StatusOK}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body %q is not JSON: %v", b, err)
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		status, header, resp := u.status, u.header, u.body
		u.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		if w.Header().Get("Content-Type") == "" {
			if r.URL.Query().Get("alt") == "sse" && status == http.StatusOK {
				w.Header().Set("Content-Type", "text/event-stream")
			} else {
				w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			}
		}
		w.WriteHeader(status)
		_, _ = w.Write(resp)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) respond(status int, body []byte, header http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status, u.body, u.header = status, body, header
}

func (u *upstream) last() recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		u.t.Fatal("no request reached the upstream")
	}
	return u.reqs[len(u.reqs)-1]
}

func (u *upstream) provider() *Provider {
	return New(Config{BaseURL: u.srv.URL, APIKey: "AIza-test", HTTPClient: u.srv.Client()})
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonValue(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

var (
	flash = &catalog.Model{ID: "gemini/gemini-2.5-flash", Upstream: "gemini-2.5-flash", Chat: catalog.Chat{MaxTokens: 65536, Thinking: catalog.ThinkingBudget}}
	old   = &catalog.Model{ID: "gemini/gemini-2.0-flash", Upstream: "gemini-2.0-flash", Chat: catalog.Chat{MaxTokens: 8192}}
)

func ptr[T any](v T) *T { return &v }

func user(s string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Text: s}}}
}

func TestProviderNeedsImageBytes(t *testing.T) {
	var p interface{ NeedsImageBytes() bool } = New(Config{})
	if !p.NeedsImageBytes() {
		t.Errorf("NeedsImageBytes() = false; want true")
	}
}

func TestRequestShape(t *testing.T) {
	tests := []bodyCase{
		{
			name: "system instruction, roles, merge",
			req: &chat.Request{Model: old, Messages: []chat.Message{
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "You are a cat."}}},
				user("Hello"), user("there"),
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Meow."}}},
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Your name is Neko."}}},
				user("Name?"),
			}},
			want: `{"systemInstruction":{"parts":[{"text":"You are a cat."},{"text":"Your name is Neko."}]},"contents":[
				{"role":"user","parts":[{"text":"Hello"},{"text":"there"}]},
				{"role":"model","parts":[{"text":"Meow."}]},
				{"role":"user","parts":[{"text":"Name?"}]}]}`,
		},
		{
			name: "generation config",
			req: &chat.Request{Model: old, MaxTokens: 200, Temperature: ptr(0.7), TopP: ptr(0.95), Stop: []string{"END"}, Seed: ptr(int64(42)),
				Messages: []chat.Message{user("hi")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],
				"generationConfig":{"maxOutputTokens":200,"temperature":0.7,"topP":0.95,"stopSequences":["END"],"seed":42}}`,
		},
		{
			name: "inline image",
			req: &chat.Request{Model: old, Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
				{Text: "Caption this image."}, {Image: &chat.Image{MediaType: "image/jpeg", Data: []byte{0xff, 0xd8, 0xff}}},
			}}}},
			want: `{"contents":[{"role":"user","parts":[{"text":"Caption this image."},{"inlineData":{"mimeType":"image/jpeg","data":"/9j/"}}]}]}`,
		},
		{
			name: "thinking low",
			req:  &chat.Request{Model: flash, ReasoningEffort: "low", Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],
				"generationConfig":{"thinkingConfig":{"thinkingBudget":1024,"includeThoughts":true}}}`,
		},
		{
			name: "thinking medium with temperature",
			req:  &chat.Request{Model: flash, ReasoningEffort: "medium", Temperature: ptr(0.0), Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],
				"generationConfig":{"temperature":0,"thinkingConfig":{"thinkingBudget":8192,"includeThoughts":true}}}`,
		},
		{
			name: "thinking high raises a small max tokens",
			req:  &chat.Request{Model: flash, ReasoningEffort: "high", MaxTokens: 1000, Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],
				"generationConfig":{"maxOutputTokens":25576,"thinkingConfig":{"thinkingBudget":24576,"includeThoughts":true}}}`,
		},
		{
			name: "effort ignored without budget thinking",
			req:  &chat.Request{Model: old, ReasoningEffort: "high", Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`,
		},
	}
	checkBodies(t, tests)
}

func TestRequestURLAndHeaders(t *testing.T) {
	u := newUpstream(t)
	p := u.provider()
	tests := []struct {
		name      string
		stream    bool
		body      string
		wantPath  string
		wantQuery string
	}{
		{"complete", false, "response.json", "/v1beta/models/gemini-2.5-flash:generateContent", ""},
		{"stream", true, "stream_text.sse", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.body), nil)
			req := &chat.Request{Model: flash, Messages: []chat.Message{user("Hello")}}
			var err error
			if tt.stream {
				_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				_, err = p.Complete(context.Background(), req)
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			got := u.last()
			gotv := [5]string{got.method, got.path, got.query, got.header.Get("X-Goog-Api-Key"), got.header.Get("Content-Type")}
			want := [5]string{"POST", tt.wantPath, tt.wantQuery, "AIza-test", "application/json"}
			if gotv != want {
				t.Errorf("request = %q; want %q", gotv, want)
			}
		})
	}
}

func TestImageURLRefused(t *testing.T) {
	u := newUpstream(t)
	_, err := u.provider().Complete(context.Background(), &chat.Request{Model: flash, Messages: []chat.Message{
		{Role: chat.RoleUser, Parts: []chat.Part{{Image: &chat.Image{URL: "https://example.com/a.png"}}}}}})
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest {
		t.Fatalf("Complete(image URL) = %v; want UpstreamBadRequest", err)
	}
	if len(u.reqs) != 0 {
		t.Errorf("upstream got %d requests; want 0", len(u.reqs))
	}
}

func TestComplete(t *testing.T) {
	tests := []struct {
		file string
		want chat.Response
	}{
		{"response.json", chat.Response{Content: "Hi! How can I help you today?", FinishReason: "stop",
			Usage: chat.Usage{PromptTokens: 2, CompletionTokens: 9, TotalTokens: 11}}},
		{"response_thinking.json", chat.Response{Content: "42", Reasoning: "The user wants a number.", FinishReason: "stop",
			Thoughts: []chat.Thought{{Provider: "gemini", Text: "The user wants a number.", Signature: "CiIBVKhc7oDf"}},
			Usage:    chat.Usage{PromptTokens: 5, CompletionTokens: 31, TotalTokens: 36, ReasoningTokens: 30}}},
		{"response_blocked.json", chat.Response{FinishReason: "content_filter",
			Usage: chat.Usage{PromptTokens: 7, TotalTokens: 7}}},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			got, err := p.Complete(context.Background(), &chat.Request{Model: flash, Messages: []chat.Message{user("x")}})
			if err != nil {
				t.Fatalf("Complete() error %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Complete() = %+v; want %+v", *got, tt.want)
			}
		})
	}
}

// TestUsageDetails reads the cached prompt tokens and the thoughts (part
// of the completion, not of candidatesTokenCount) of whole and streamed
// answers, and the service tier of the x-gemini-service-tier header.
func TestUsageDetails(t *testing.T) {
	tests := []struct {
		file   string
		stream bool
		header string
		want   chat.Usage
		tier   string
	}{
		{"response_cached.json", false, "priority",
			chat.Usage{PromptTokens: 12345, CompletionTokens: 140, TotalTokens: 12485, CachedTokens: 12000, ReasoningTokens: 100}, "priority"},
		{"stream_cached.sse", true, "standard",
			chat.Usage{PromptTokens: 5000, CompletionTokens: 67, TotalTokens: 5067, CachedTokens: 4096, ReasoningTokens: 64}, "default"},
		{"response_thinking.json", false, "",
			chat.Usage{PromptTokens: 5, CompletionTokens: 31, TotalTokens: 36, ReasoningTokens: 30}, ""},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("X-Gemini-Service-Tier", tt.header)
			}
			u.respond(http.StatusOK, fixture(t, tt.file), h)
			req := &chat.Request{Model: flash, Messages: []chat.Message{user("x")}}
			var got *chat.Response
			var err error
			if tt.stream {
				got, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				got, err = p.Complete(context.Background(), req)
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.file, err)
			}
			if got.Usage != tt.want || got.ServiceTier != tt.tier {
				t.Errorf("%s: usage = %+v, tier %q; want %+v, %q", tt.file, got.Usage, got.ServiceTier, tt.want, tt.tier)
			}
		})
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		file       string
		wantDeltas []chat.Delta
		want       *chat.Response
		wantKind   chat.UpstreamKind
	}{
		{
			file:       "stream_text.sse",
			wantDeltas: []chat.Delta{{Content: "Once upon a time, in a cozy"}, {Content: " little house, lived a cat named Whiskers."}, {Content: " The end."}},
			want: &chat.Response{Content: "Once upon a time, in a cozy little house, lived a cat named Whiskers. The end.", FinishReason: "stop",
				Usage: chat.Usage{PromptTokens: 8, CompletionTokens: 17, TotalTokens: 25}},
		},
		{
			file: "stream_thinking.sse",
			wantDeltas: []chat.Delta{{Reasoning: "**Calculating the product**\n\nI need 27 * 453."}, {Content: "27 * 453 = 12,231"},
				{Thought: &chat.Thought{Provider: "gemini", Text: "**Calculating the product**\n\nI need 27 * 453.", Signature: "CiIBVKhc7oDf"}}},
			want: &chat.Response{Content: "27 * 453 = 12,231", Reasoning: "**Calculating the product**\n\nI need 27 * 453.", FinishReason: "stop",
				Thoughts: []chat.Thought{{Provider: "gemini", Text: "**Calculating the product**\n\nI need 27 * 453.", Signature: "CiIBVKhc7oDf"}},
				Usage:    chat.Usage{PromptTokens: 10, CompletionTokens: 259, TotalTokens: 269, ReasoningTokens: 250}},
		},
		{
			file:       "stream_max_tokens.sse",
			wantDeltas: []chat.Delta{{Content: "A very long"}},
			want: &chat.Response{Content: "A very long", FinishReason: "length",
				Usage: chat.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7}},
		},
		{
			file:       "stream_safety.sse",
			wantDeltas: []chat.Delta{{Content: "I can tell you"}},
			want: &chat.Response{Content: "I can tell you", FinishReason: "content_filter",
				Usage: chat.Usage{PromptTokens: 12, CompletionTokens: 4, TotalTokens: 16}},
		},
		{
			file: "stream_blocked.sse",
			want: &chat.Response{FinishReason: "content_filter", Usage: chat.Usage{PromptTokens: 9, TotalTokens: 9}},
		},
		{file: "stream_error.sse", wantDeltas: []chat.Delta{{Content: "Partial"}}, wantKind: chat.UpstreamUnavailable},
		{file: "stream_truncated.sse", wantDeltas: []chat.Delta{{Content: "Partial"}}, wantKind: chat.UpstreamFailed},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			var deltas []chat.Delta
			got, err := p.Stream(context.Background(), &chat.Request{Model: flash, Messages: []chat.Message{user("x")}},
				chat.WriterFunc(func(d chat.Delta) error { deltas = appendDelta(deltas, d); return nil }))
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas = %+v; want %+v", deltas, tt.wantDeltas)
			}
			if tt.want == nil {
				var ue *chat.UpstreamError
				if !errors.As(err, &ue) || ue.Kind != tt.wantKind {
					t.Fatalf("Stream() error = %v; want kind %v", err, tt.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatalf("Stream() error %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Stream() = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     http.Header
		body       string
		wantKind   chat.UpstreamKind
		wantMsg    string
		wantRetry  time.Duration
		wantStatus int
	}{
		{"invalid argument", 400, nil, `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}`,
			chat.UpstreamBadRequest, "* GenerateContentRequest.contents: contents is not specified\n", 0, 400},
		{"bad api key", 400, nil, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT",
			"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`,
			chat.UpstreamFailed, "API key not valid. Please pass a valid API key.", 0, 401}, // stands for 401: our key
		{"not found", 404, nil, `{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}`,
			chat.UpstreamBadRequest, "models/gemini-9 is not found for API version v1beta", 0, 404},
		{"quota with retry info", 429, nil, `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED",
			"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]}}`,
			chat.UpstreamRateLimited, "You exceeded your current quota.", 38 * time.Second, 429},
		{"quota with header", 429, http.Header{"Retry-After": {"5"}}, `{"error":{"code":429,"message":"Resource exhausted.","status":"RESOURCE_EXHAUSTED"}}`,
			chat.UpstreamRateLimited, "Resource exhausted.", 5 * time.Second, 429},
		{"overloaded", 503, nil, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
			chat.UpstreamUnavailable, "The model is overloaded. Please try again later.", 0, 503},
		{"deadline", 504, nil, `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`,
			chat.UpstreamTimeout, "Deadline expired before operation could complete.", 0, 504},
		{"internal", 500, nil, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`,
			chat.UpstreamFailed, "An internal error has occurred.", 0, 500},
		{"permission", 403, nil, `{"error":{"code":403,"message":"Permission denied.","status":"PERMISSION_DENIED"}}`,
			chat.UpstreamFailed, "Permission denied.", 0, 403},
		{"garbage", 502, nil, `<html>502</html>`, chat.UpstreamFailed, "", 0, 502},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				u.respond(tt.status, []byte(tt.body), tt.header)
				req := &chat.Request{Model: flash, Messages: []chat.Message{user("x")}}
				var err error
				if stream {
					_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error {
						t.Error("emit called for an error response")
						return nil
					}))
				} else {
					_, err = p.Complete(context.Background(), req)
				}
				var ue *chat.UpstreamError
				if !errors.As(err, &ue) {
					t.Fatalf("error = %v; want *chat.UpstreamError", err)
				}
				got := [4]any{ue.Kind, ue.Message, ue.RetryAfter, ue.Status}
				want := [4]any{tt.wantKind, tt.wantMsg, tt.wantRetry, tt.wantStatus}
				if got != want || ue.Provider != "gemini" {
					t.Errorf("error = %+v; want kind/message/retry/status %v from gemini", ue, want)
				}
			})
		}
	}
}

func TestGarbageSuccess(t *testing.T) {
	tests := []struct {
		name   string
		stream bool
		body   string
	}{
		{"not json", false, "<html>hello</html>"},
		{"no candidates, no block", false, `{"usageMetadata":{"promptTokenCount":1}}`},
		{"stream not sse", true, "<html>hello</html>"},
		{"stream bad json", true, "data: {nope\n\n"},
		{"stream empty", true, ""},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u.respond(http.StatusOK, []byte(tt.body), http.Header{"Content-Type": {"text/plain"}})
			req := &chat.Request{Model: flash, Messages: []chat.Message{user("x")}}
			var err error
			if tt.stream {
				_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				_, err = p.Complete(context.Background(), req)
			}
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != chat.UpstreamFailed {
				t.Errorf("error = %v; want UpstreamFailed", err)
			}
		})
	}
}

// blockingUpstream sends one chunk, then holds the response open until the
// client goes away, and reports that on gone.
func blockingUpstream(t *testing.T) (srv *httptest.Server, gone <-chan struct{}) {
	ch := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"first\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ch)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func waitGone(t *testing.T, gone <-chan struct{}) {
	t.Helper()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
}

func TestStreamCancel(t *testing.T) {
	emitErr := errors.New("client went away")
	tests := []struct {
		name    string
		cancel  bool
		wantErr error
	}{
		{"context cancelled", true, context.Canceled},
		{"emit fails", false, emitErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, gone := blockingUpstream(t)
			p := New(Config{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client()})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var deltas []chat.Delta
			_, err := p.Stream(ctx, &chat.Request{Model: flash, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(d chat.Delta) error {
				if d.Content == "" && d.Reasoning == "" {
					return nil // a flush: the upstream is about to be waited for
				}
				deltas = appendDelta(deltas, d)
				if tt.cancel {
					cancel()
					return nil
				}
				return emitErr
			}))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Stream() error = %v; want %v", err, tt.wantErr)
			}
			if want := []chat.Delta{{Content: "first"}}; !reflect.DeepEqual(deltas, want) {
				t.Errorf("deltas = %+v; want %+v", deltas, want)
			}
			waitGone(t, gone)
		})
	}
}

func TestStreamDeadline(t *testing.T) {
	srv, gone := blockingUpstream(t)
	p := New(Config{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client()})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.Stream(ctx, &chat.Request{Model: flash, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(chat.Delta) error { return nil }))
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamTimeout {
		t.Errorf("Stream() past the deadline = %v; want UpstreamTimeout", err)
	}
	waitGone(t, gone)
}

// FuzzReadStream feeds arbitrary bytes to the stream parser: it must not
// panic, must report failures as *chat.UpstreamError, and on success the
// emitted deltas must add up to the returned content and tool calls. It reads the input
// in small pieces, so that deltas are batched and flushed in between.
func FuzzReadStream(f *testing.F) {
	for _, name := range []string{"stream_text.sse", "stream_thinking.sse", "stream_blocked.sse", "stream_error.sse", "stream_tools.sse"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	p := New(Config{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var content, reasoning strings.Builder
		var calls []chat.ToolCall
		var thoughts []chat.Thought
		got, err := p.readStream(context.Background(), iotest.HalfReader(strings.NewReader(string(in))), chat.WriterFunc(func(d chat.Delta) error {
			if d.Content == "" && d.Reasoning == "" && d.ToolCall == nil && d.Thought == nil {
				t.Error("empty delta written")
			}
			content.WriteString(d.Content)
			reasoning.WriteString(d.Reasoning)
			if tc := d.ToolCall; tc != nil {
				if tc.Index != len(calls) || tc.ID == "" || !json.Valid([]byte(tc.Arguments)) {
					t.Errorf("tool call delta %+v after %d calls", *tc, len(calls))
				}
				calls = append(calls, chat.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Signature: tc.Signature, SignedBy: tc.SignedBy})
			}
			if th := d.Thought; th != nil {
				if th.Provider != Kind || th.Signature == "" {
					t.Errorf("thought %+v; want a signed gemini thought", *th)
				}
				thoughts = append(thoughts, *th)
			}
			return nil
		}))
		if err != nil {
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) {
				t.Fatalf("readStream error %v is not an UpstreamError", err)
			}
			return
		}
		if got.Content != content.String() || got.Reasoning != reasoning.String() {
			t.Errorf("response %q/%q != emitted %q/%q", got.Content, got.Reasoning, content.String(), reasoning.String())
		}
		if !reflect.DeepEqual(got.ToolCalls, calls) {
			t.Errorf("response tool calls %+v != emitted %+v", got.ToolCalls, calls)
		}
		if !reflect.DeepEqual(got.Thoughts, thoughts) {
			t.Errorf("response thoughts %+v != emitted %+v", got.Thoughts, thoughts)
		}
		ids := map[string]bool{}
		for _, c := range calls {
			if ids[c.ID] {
				t.Errorf("tool call id %q repeated", c.ID)
			}
			ids[c.ID] = true
		}
		if got.FinishReason == chat.FinishToolCalls && len(calls) == 0 {
			t.Error("finish reason tool_calls without tool calls")
		}
		if u := got.Usage; u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("usage %+v does not add up", u)
		}
	})
}

// appendDelta appends d to ds unless it carries no text, no tool call and
// no thought.
func appendDelta(ds []chat.Delta, d chat.Delta) []chat.Delta {
	if d.Content == "" && d.Reasoning == "" && d.ToolCall == nil && d.Thought == nil {
		return ds
	}
	return append(ds, d)
}

// bodyCase is a request and the JSON body the upstream must receive for it
// (stream omitted).
type bodyCase struct {
	name string
	req  *chat.Request
	want string
}

// checkBodies sends each case's request (Complete) to a fake upstream and
// compares the body it received with the case's.
func checkBodies(t *testing.T, tests []bodyCase) {
	t.Helper()
	u := newUpstream(t)
	u.respond(http.StatusOK, fixture(t, "response.json"), nil)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.Complete(context.Background(), tt.req); err != nil {
				t.Fatalf("Complete() error %v", err)
			}
			got := u.last()
			if want := jsonValue(t, tt.want); !reflect.DeepEqual(got.body, want) {
				gb, _ := json.Marshal(got.body)
				t.Errorf("request body = %s\nwant %s", gb, tt.want)
			}
		})
	}
}
