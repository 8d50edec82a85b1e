package anthropic

// The fake upstream below speaks the Messages API as documented:
//   - request shape, headers and error bodies: https://docs.anthropic.com/en/api/messages,
//     https://docs.anthropic.com/en/api/errors
//   - SSE fixtures (testdata/stream_basic.sse, stream_thinking.sse and the
//     error event): the examples of https://docs.anthropic.com/en/docs/build-with-claude/streaming
//     ("Basic streaming request", "Streaming request with extended thinking",
//     "Error events"); stream_max_tokens_cached.sse follows the web search
//     example's usage shape (cumulative message_delta usage with input_tokens).
//   - thinking: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
//     ({"type":"enabled","budget_tokens":N}, temperature not allowed) and the
//     adaptive thinking / effort pages ({"type":"adaptive"} with
//     output_config.effort, https://platform.claude.com/docs/en/build-with-claude/effort).

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

// upstream is a fake Messages API. It records the last request and answers
// with status, headers and body.
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
	method, path string
	header       http.Header
	body         map[string]any
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
		u.reqs = append(u.reqs, recorded{r.Method, r.URL.Path, r.Header.Clone(), body})
		status, header, resp := u.status, u.header, u.body
		u.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		if w.Header().Get("Content-Type") == "" {
			if stream, _ := body["stream"].(bool); stream && status == http.StatusOK {
				w.Header().Set("Content-Type", "text/event-stream")
			} else {
				w.Header().Set("Content-Type", "application/json")
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
	return New(Config{Name: "anthropic", BaseURL: u.srv.URL + "/", APIKey: "sk-test", HTTPClient: u.srv.Client()})
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonValue decodes s, for comparing with a recorded request body.
func jsonValue(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

var (
	sonnet = &catalog.Model{ID: "anthropic/claude-sonnet-4-5", Upstream: "claude-sonnet-4-5", Chat: catalog.Chat{MaxTokens: 64000, Thinking: catalog.ThinkingBudget}}
	opus   = &catalog.Model{ID: "anthropic/claude-opus-4-6", Upstream: "claude-opus-4-6", Chat: catalog.Chat{MaxTokens: 128000, Thinking: catalog.ThinkingAdaptive}}
	small  = &catalog.Model{ID: "anthropic/small", Upstream: "small", Chat: catalog.Chat{MaxTokens: 4096}}
)

func ptr[T any](v T) *T { return &v }

func user(s string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Text: s}}}
}

func TestRequestShape(t *testing.T) {
	tests := []bodyCase{
		{
			name: "system collected, roles merged, default max_tokens capped",
			req: &chat.Request{Model: sonnet, Messages: []chat.Message{
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Be brief."}}},
				user("Hello"),
				user("Are you there?"),
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Answer in French."}}},
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Oui."}}},
				user("Merci"),
			}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"system":"Be brief.\n\nAnswer in French.","messages":[
				{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":"Are you there?"}]},
				{"role":"assistant","content":[{"type":"text","text":"Oui."}]},
				{"role":"user","content":[{"type":"text","text":"Merci"}]}]}`,
		},
		{
			name: "model maximum below the default cap",
			req:  &chat.Request{Model: small, Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		},
		{
			name: "sampling parameters",
			req: &chat.Request{Model: sonnet, Messages: []chat.Message{user("hi")}, MaxTokens: 100,
				Temperature: ptr(0.5), TopP: ptr(0.9), Stop: []string{"\n\nHuman:", "END"}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":100,"temperature":0.5,"top_p":0.9,"stop_sequences":["\n\nHuman:","END"],
				"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		},
		{
			name: "images from bytes and URL",
			req: &chat.Request{Model: sonnet, MaxTokens: 50, Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
				{Text: "What is in these images?"},
				{Image: &chat.Image{MediaType: "image/png", Data: []byte("\x89PNG")}},
				{Image: &chat.Image{URL: "https://upload.wikimedia.org/a.jpg"}},
				{Text: ""},
			}}}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":[
				{"type":"text","text":"What is in these images?"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},
				{"type":"image","source":{"type":"url","url":"https://upload.wikimedia.org/a.jpg"}}]}]}`,
		},
		{
			name: "budget thinking, low: default max_tokens kept, temperature dropped",
			req: &chat.Request{Model: sonnet, ReasoningEffort: "low", Temperature: ptr(0.2), TopP: ptr(0.5),
				Messages: []chat.Message{user("27*453?")}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"thinking":{"type":"enabled","budget_tokens":1024},
				"messages":[{"role":"user","content":[{"type":"text","text":"27*453?"}]}]}`,
		},
		{
			name: "budget thinking, high: max_tokens raised above the budget",
			req:  &chat.Request{Model: sonnet, ReasoningEffort: "high", Messages: []chat.Message{user("27*453?")}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":24576,"thinking":{"type":"enabled","budget_tokens":16384},
				"messages":[{"role":"user","content":[{"type":"text","text":"27*453?"}]}]}`,
		},
		{
			name: "budget thinking, medium with a small max_tokens",
			req:  &chat.Request{Model: sonnet, ReasoningEffort: "medium", MaxTokens: 300, Messages: []chat.Message{user("x")}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":4396,"thinking":{"type":"enabled","budget_tokens":4096},
				"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		},
		{
			name: "adaptive thinking with effort",
			req: &chat.Request{Model: opus, ReasoningEffort: "medium", Temperature: ptr(1.0),
				Messages: []chat.Message{user("x")}},
			want: `{"model":"claude-opus-4-6","max_tokens":8192,"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"},
				"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		},
		{
			name: "effort ignored for a model without thinking",
			req:  &chat.Request{Model: small, ReasoningEffort: "high", Messages: []chat.Message{user("x")}},
			want: `{"model":"small","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		},
	}
	checkBodies(t, tests)
}

func TestRequestHeaders(t *testing.T) {
	u := newUpstream(t)
	p := u.provider()
	tests := []struct {
		name   string
		stream bool
		body   string
		accept string
	}{
		{"complete", false, "message.json", "application/json"},
		{"stream", true, "stream_basic.sse", "text/event-stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.body), nil)
			req := &chat.Request{Model: sonnet, Messages: []chat.Message{user("Hello")}}
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
			checks := map[string]string{
				"method": got.method, "path": got.path,
				"x-api-key": got.header.Get("X-Api-Key"), "anthropic-version": got.header.Get("Anthropic-Version"),
				"content-type": got.header.Get("Content-Type"), "accept": got.header.Get("Accept"),
			}
			want := map[string]string{"method": "POST", "path": "/v1/messages", "x-api-key": "sk-test",
				"anthropic-version": "2023-06-01", "content-type": "application/json", "accept": tt.accept}
			if !reflect.DeepEqual(checks, want) {
				t.Errorf("request = %v; want %v", checks, want)
			}
			if s, _ := got.body["stream"].(bool); s != tt.stream {
				t.Errorf("body stream = %v; want %v", got.body["stream"], tt.stream)
			}
		})
	}
}

func TestRequestWithoutMessages(t *testing.T) {
	u := newUpstream(t)
	_, err := u.provider().Complete(context.Background(), &chat.Request{Model: sonnet,
		Messages: []chat.Message{{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "only system"}}}}})
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest {
		t.Fatalf("Complete(system only) = %v; want UpstreamBadRequest", err)
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
		{"message.json", chat.Response{Content: "Hi! My name is Claude.", FinishReason: "stop",
			Usage: chat.Usage{PromptTokens: 2095, CompletionTokens: 503, TotalTokens: 2598}}},
		{"message_thinking.json", chat.Response{Content: "Based on my analysis...", Reasoning: "Let me analyze this step by step...",
			Thoughts: []chat.Thought{
				{Provider: "anthropic", Text: "Let me analyze this step by step...", Signature: "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL...."},
				{Provider: "anthropic", Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP..."}},
			FinishReason: "content_filter", Usage: chat.Usage{PromptTokens: 60, CompletionTokens: 300, TotalTokens: 360, CachedTokens: 10}}},
		{"message_cache.json", chat.Response{Content: "The contract's term is five years.", FinishReason: "stop", ServiceTier: "default",
			Usage: chat.Usage{PromptTokens: 4512, CompletionTokens: 200, TotalTokens: 4712, CachedTokens: 1500, CacheWriteTokens: 1000, CacheWrite1hTokens: 2000}}},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			got, err := p.Complete(context.Background(), &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}})
			if err != nil {
				t.Fatalf("Complete() error %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Complete() = %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		file       string
		wantDeltas []chat.Delta
		want       *chat.Response
		wantKind   chat.UpstreamKind // when want is nil
	}{
		{
			file:       "stream_basic.sse",
			wantDeltas: []chat.Delta{{Content: "Hello"}, {Content: "!"}},
			want: &chat.Response{Content: "Hello!", FinishReason: "stop",
				Usage: chat.Usage{PromptTokens: 25, CompletionTokens: 15, TotalTokens: 40}},
		},
		{
			file: "stream_thinking.sse",
			// The thinking block's signature closes it: a Thought with its
			// whole text.
			wantDeltas: []chat.Delta{
				{Reasoning: "Let me solve this step by step:\n\n1. First break down 27 * 453"},
				{Reasoning: "\n2. 453 = 400 + 50 + 3"},
				{Thought: &streamedThought},
				{Content: "27 * 453 = 12,231"},
			},
			want: &chat.Response{Content: "27 * 453 = 12,231", Reasoning: "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3",
				Thoughts: []chat.Thought{streamedThought}, FinishReason: "stop"},
		},
		{
			// message_start's cache reads and 1-hour writes; message_delta
			// carries only the output tokens.
			file:       "stream_cache.sse",
			wantDeltas: []chat.Delta{{Content: "Cached."}},
			want: &chat.Response{Content: "Cached.", FinishReason: "stop", ServiceTier: "priority",
				Usage: chat.Usage{PromptTokens: 6165, CompletionTokens: 42, TotalTokens: 6207, CachedTokens: 4096, CacheWrite1hTokens: 2048}},
		},
		{
			// message_delta's input-side counts replace message_start's.
			file:       "stream_max_tokens_cached.sse",
			wantDeltas: []chat.Delta{{Content: "I'll check"}},
			want: &chat.Response{Content: "I'll check", FinishReason: "length",
				Usage: chat.Usage{PromptTokens: 10682, CompletionTokens: 510, TotalTokens: 11192}},
		},
		{file: "stream_overloaded.sse", wantDeltas: []chat.Delta{{Content: "Okay"}}, wantKind: chat.UpstreamUnavailable},
		{file: "stream_truncated.sse", wantDeltas: []chat.Delta{{Content: "Okay"}}, wantKind: chat.UpstreamFailed},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			var deltas []chat.Delta
			got, err := p.Stream(context.Background(), &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}},
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
		{"invalid request", 400, nil, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`,
			chat.UpstreamBadRequest, "max_tokens: Field required", 0, 400},
		{"not found", 404, nil, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`,
			chat.UpstreamBadRequest, "model: claude-nope", 0, 404},
		{"too large", 413, nil, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`,
			chat.UpstreamBadRequest, "Request exceeds the maximum allowed number of bytes.", 0, 413},
		{"rate limited", 429, http.Header{"Retry-After": {"17"}}, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			chat.UpstreamRateLimited, "Number of request tokens has exceeded your per-minute rate limit", 17 * time.Second, 429},
		{"overloaded", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			chat.UpstreamUnavailable, "Overloaded", 0, 529},
		{"unavailable", 503, nil, `upstream connect error`, chat.UpstreamUnavailable, "", 0, 503},
		{"api error", 500, nil, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			chat.UpstreamFailed, "Internal server error", 0, 500},
		{"bad key", 401, nil, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			chat.UpstreamFailed, "invalid x-api-key", 0, 401},
		{"forbidden", 403, nil, `{"type":"error","error":{"type":"permission_error","message":"no access"}}`,
			chat.UpstreamFailed, "no access", 0, 403},
		{"garbage gateway", 502, nil, `<html>Bad Gateway</html>`, chat.UpstreamFailed, "", 0, 502},
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
				req := &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}}
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
				if got != want || ue.Provider != "anthropic" {
					t.Errorf("error = %+v; want kind/message/retry/status %v from anthropic", ue, want)
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
		{"error object in 200", false, `{"type":"error","error":{"type":"api_error","message":"boom"}}`},
		{"stream not sse", true, "<html>hello</html>"},
		{"stream bad json", true, "event: message_start\ndata: {nope\n\n"},
		{"stream empty", true, ""},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u.respond(http.StatusOK, []byte(tt.body), http.Header{"Content-Type": {"text/plain"}})
			req := &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}}
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

// blockingUpstream sends the first events of a stream, then holds the
// response open until the client goes away, and reports that on gone.
func blockingUpstream(t *testing.T) (srv *httptest.Server, gone <-chan struct{}) {
	ch := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"first\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ch)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

// waitGone waits, bounded, for the upstream to see its request cancelled.
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
		cancel  bool // cancel ctx in emit; otherwise emit fails
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
			_, err := p.Stream(ctx, &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(d chat.Delta) error {
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
	_, err := p.Stream(ctx, &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(chat.Delta) error { return nil }))
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamTimeout {
		t.Errorf("Stream() past the deadline = %v; want UpstreamTimeout", err)
	}
	waitGone(t, gone)
}

func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := New(Config{BaseURL: url, APIKey: "k"})
	_, err := p.Complete(context.Background(), &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}})
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamFailed {
		t.Errorf("Complete() on a closed port = %v; want UpstreamFailed", err)
	}
}

// FuzzReadStream feeds arbitrary bytes to the stream parser, plainly and
// with a structured output tool ("json"): it must not panic, must report
// failures as *chat.UpstreamError, and on success the emitted deltas must
// add up to the returned content and tool calls (the first piece of each
// call, in order, naming it). It reads the input in small pieces, so that
// deltas are batched and flushed in between.
func FuzzReadStream(f *testing.F) {
	for _, name := range []string{"stream_basic.sse", "stream_thinking.sse", "stream_overloaded.sse", "stream_truncated.sse",
		"stream_tools.sse", "stream_format.sse", "stream_redacted.sse"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	p := New(Config{})
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, format := range []string{"", "json"} {
			var content, reasoning strings.Builder
			var calls []chat.ToolCall
			var thoughts []chat.Thought
			got, err := p.readStream(context.Background(), iotest.HalfReader(strings.NewReader(string(in))), chat.WriterFunc(func(d chat.Delta) error {
				if d.Content == "" && d.Reasoning == "" && d.ToolCall == nil && d.Thought == nil {
					t.Error("empty delta written")
				}
				if d.Thought != nil {
					thoughts = append(thoughts, *d.Thought)
				}
				content.WriteString(d.Content)
				reasoning.WriteString(d.Reasoning)
				if tc := d.ToolCall; tc != nil {
					switch {
					case tc.Index == len(calls) && tc.ID != "" && tc.Name != "":
						calls = append(calls, chat.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
					case tc.Index >= 0 && tc.Index < len(calls) && tc.ID == "" && tc.Name == "":
						calls[tc.Index].Arguments += tc.Arguments
					default:
						t.Errorf("tool call delta %+v after %d calls", *tc, len(calls))
					}
				}
				return nil
			}), format)
			if err != nil {
				var ue *chat.UpstreamError
				if !errors.As(err, &ue) {
					t.Fatalf("readStream error %v is not an UpstreamError", err)
				}
				continue
			}
			if got.Content != content.String() || got.Reasoning != reasoning.String() {
				t.Errorf("response %q/%q != emitted %q/%q", got.Content, got.Reasoning, content.String(), reasoning.String())
			}
			if len(got.ToolCalls) != len(calls) || len(calls) > 0 && !reflect.DeepEqual(got.ToolCalls, calls) {
				t.Errorf("response tool calls %+v != emitted %+v", got.ToolCalls, calls)
			}
			if len(got.Thoughts) != len(thoughts) || len(thoughts) > 0 && !reflect.DeepEqual(got.Thoughts, thoughts) {
				t.Errorf("response thoughts %+v != emitted %+v", got.Thoughts, thoughts)
			}
			switch got.FinishReason {
			case chat.FinishStop, chat.FinishLength, chat.FinishContentFilter:
			case chat.FinishToolCalls:
				if len(calls) == 0 {
					t.Error("finish reason tool_calls without tool calls")
				}
			default:
				t.Errorf("finish reason %q", got.FinishReason)
			}
		}
	})
}

// appendDelta appends d to ds unless it carries nothing (a flush).
// streamedThought is the Thought of stream_thinking.sse.
var streamedThought = chat.Thought{Provider: "anthropic", Text: "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3",
	Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."}

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
	u.respond(http.StatusOK, fixture(t, "message.json"), nil)
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

// TestUsageDelta checks how message_delta's cumulative usage updates
// message_start's: what it carries replaces, zeros on the input side are
// not taken for counts, and the split of writes by lifetime holds.
func TestUsageDelta(t *testing.T) {
	start := usage{InputTokens: 100, CacheReadInputTokens: 50, CacheCreationInputTokens: 30,
		CacheCreation: &cacheCreation{Ephemeral5m: 10, Ephemeral1h: 20}, OutputTokens: 1}
	tests := []struct {
		name  string
		delta string
		want  chat.Usage
	}{
		{"output only", `{"output_tokens":9}`,
			chat.Usage{PromptTokens: 180, CompletionTokens: 9, TotalTokens: 189, CachedTokens: 50, CacheWriteTokens: 10, CacheWrite1hTokens: 20}},
		{"zeros on the input side", `{"input_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"output_tokens":9}`,
			chat.Usage{PromptTokens: 180, CompletionTokens: 9, TotalTokens: 189, CachedTokens: 50, CacheWriteTokens: 10, CacheWrite1hTokens: 20}},
		{"input grew", `{"input_tokens":300,"cache_read_input_tokens":50,"cache_creation_input_tokens":30,"output_tokens":9}`,
			chat.Usage{PromptTokens: 380, CompletionTokens: 9, TotalTokens: 389, CachedTokens: 50, CacheWriteTokens: 10, CacheWrite1hTokens: 20}},
		{"new split", `{"input_tokens":100,"cache_creation_input_tokens":40,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":40},"output_tokens":9}`,
			chat.Usage{PromptTokens: 190, CompletionTokens: 9, TotalTokens: 199, CachedTokens: 50, CacheWrite1hTokens: 40}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d usageDelta
			if err := json.Unmarshal([]byte(tt.delta), &d); err != nil {
				t.Fatal(err)
			}
			u := start
			u.apply(&d)
			if got := u.chat(); got != tt.want {
				t.Errorf("apply(%s).chat() = %+v; want %+v", tt.delta, got, tt.want)
			}
		})
	}
}
