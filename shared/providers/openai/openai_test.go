package openai

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
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

func model(t testing.TB, id string) *catalog.Model {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := cat.Model(id)
	if !ok {
		t.Fatalf("catalog has no %s", id)
	}
	return m
}

// upstream is a fake OpenAI server: it records each request body and
// answers with status, headers and body.
type upstream struct {
	status  int
	header  map[string]string
	body    string
	gotBody map[string]any
	gotHdr  http.Header
	gotPath string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.gotPath, u.gotHdr = r.URL.Path, r.Header.Clone()
	b, _ := io.ReadAll(r.Body)
	u.gotBody = nil
	_ = json.Unmarshal(b, &u.gotBody)
	for k, v := range u.header {
		w.Header().Set(k, v)
	}
	if u.status == 0 {
		u.status = 200
	}
	w.WriteHeader(u.status)
	io.WriteString(w, u.body)
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRequestShape(t *testing.T) {
	temp := 0.5
	seed := int64(7)
	tests := []struct {
		name   string
		req    chat.Request
		stream bool
		want   string // the JSON body the upstream must get
	}{
		{
			name: "plain",
			req: chat.Request{Model: model(t, "openai/gpt-4o-mini"), MaxTokens: 50, ReasoningEffort: "", Temperature: &temp, Seed: &seed, Stop: []string{"END"},
				Messages: []chat.Message{{Role: "system", Parts: []chat.Part{{Text: "Be brief."}}}, {Role: "user", Parts: []chat.Part{{Text: "Hi"}}}}},
			want: `{"max_completion_tokens":50,"messages":[{"content":"Be brief.","role":"system"},{"content":"Hi","role":"user"}],"model":"gpt-4o-mini","seed":7,"stop":["END"],"temperature":0.5}`,
		},
		{
			name: "reasoning effort to an effort model, streamed",
			req: chat.Request{Model: model(t, "openai/o4-mini"), ReasoningEffort: "high",
				Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "Hi"}}}}},
			stream: true,
			want:   `{"messages":[{"content":"Hi","role":"user"}],"model":"o4-mini","reasoning_effort":"high","stream":true,"stream_options":{"include_usage":true}}`,
		},
		{
			name: "no reasoning effort to a budget model",
			req: chat.Request{Model: &catalog.Model{ID: "vllm/x", Upstream: "x", Chat: catalog.Chat{Thinking: catalog.ThinkingBudget}}, ReasoningEffort: "low",
				Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "Hi"}}}}},
			want: `{"messages":[{"content":"Hi","role":"user"}],"model":"x"}`,
		},
		{
			name: "images",
			req: chat.Request{Model: model(t, "openai/gpt-4o"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
				{Text: "What?"},
				{Image: &chat.Image{URL: "https://example.com/cat.png"}},
				{Image: &chat.Image{MediaType: "image/png", Data: []byte("\x89PNG")}},
			}}}},
			want: `{"messages":[{"content":[{"text":"What?","type":"text"},{"image_url":{"url":"https://example.com/cat.png"},"type":"image_url"},{"image_url":{"url":"data:image/png;base64,iVBORw=="},"type":"image_url"}],"role":"user"}],"model":"gpt-4o"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &upstream{body: `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`}
			if tt.stream {
				up.body = fixture(t, "stream_basic.sse")
			}
			srv := httptest.NewServer(up)
			defer srv.Close()
			p := New(Config{Name: "openai", BaseURL: srv.URL + "/v1/", APIKey: "sk-test"})
			var err error
			if tt.stream {
				_, err = p.Stream(context.Background(), &tt.req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				_, err = p.Complete(context.Background(), &tt.req)
			}
			if err != nil {
				t.Fatalf("call = %v", err)
			}
			if got := jsonOf(t, up.gotBody); got != tt.want {
				t.Errorf("request body = %s; want %s", got, tt.want)
			}
			if up.gotPath != "/v1/chat/completions" || up.gotHdr.Get("Authorization") != "Bearer sk-test" || up.gotHdr.Get("Content-Type") != "application/json" {
				t.Errorf("request = %s auth %q type %q; want /v1/chat/completions, bearer, json", up.gotPath, up.gotHdr.Get("Authorization"), up.gotHdr.Get("Content-Type"))
			}
		})
	}
}

func TestNoKeyNoAuthorization(t *testing.T) {
	up := &upstream{body: `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`}
	srv := httptest.NewServer(up)
	defer srv.Close()
	p := New(Config{Name: "ollama", BaseURL: srv.URL})
	if _, err := p.Complete(context.Background(), &chat.Request{Model: model(t, "ollama/llama3.2"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}); err != nil {
		t.Fatal(err)
	}
	if h := up.gotHdr.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q; want none without a key", h)
	}
}

func TestComplete(t *testing.T) {
	tests := []struct {
		name    string
		up      upstream
		want    *chat.Response
		wantErr *chat.UpstreamError // Kind, Status, Message, RetryAfter compared
	}{
		{
			name: "ok",
			up:   upstream{body: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`},
			want: &chat.Response{Content: "Hello!", FinishReason: "stop", Usage: chat.Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11}},
		},
		{
			name: "reasoning content and length",
			up:   upstream{body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"4","reasoning_content":"2+2"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`},
			want: &chat.Response{Content: "4", Reasoning: "2+2", FinishReason: "length", Usage: chat.Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8}},
		},
		{
			name: "refusal",
			up:   upstream{body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`},
			want: &chat.Response{Content: "I can't help with that.", FinishReason: "stop", Usage: chat.Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8}},
		},
		{
			name:    "400 passes the message",
			up:      upstream{status: 400, body: `{"error":{"message":"Invalid 'messages[0].content': string too long.","type":"invalid_request_error","param":"messages[0].content","code":"string_above_max_length"}}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamBadRequest, Status: 400, Message: "Invalid 'messages[0].content': string too long."},
		},
		{
			name:    "404 unknown model",
			up:      upstream{status: 404, body: `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamBadRequest, Status: 404, Message: "The model 'gpt-9' does not exist or you do not have access to it."},
		},
		{
			name:    "422 fastapi detail",
			up:      upstream{status: 422, body: `{"detail":"max_tokens must be at least 1"}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamBadRequest, Status: 422, Message: "max_tokens must be at least 1"},
		},
		{
			name:    "429 retry after",
			up:      upstream{status: 429, header: map[string]string{"Retry-After": "7"}, body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamRateLimited, Status: 429, Message: "Rate limit reached", RetryAfter: 7 * time.Second},
		},
		{
			name:    "429 retry after ms",
			up:      upstream{status: 429, header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"}, body: `{"error":{"message":"slow down"}}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamRateLimited, Status: 429, Message: "slow down", RetryAfter: 1500 * time.Millisecond},
		},
		{
			name:    "401 is ours",
			up:      upstream{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamFailed, Status: 401, Message: "Incorrect API key provided: sk-test."},
		},
		{
			name:    "500",
			up:      upstream{status: 500, body: `{"error":{"message":"The server had an error","type":"server_error"}}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamFailed, Status: 500, Message: "The server had an error"},
		},
		{
			name:    "502 html",
			up:      upstream{status: 502, body: `<html>bad gateway</html>`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamFailed, Status: 502},
		},
		{
			name:    "503 overloaded",
			up:      upstream{status: 503, body: `{"error":{"message":"The engine is currently overloaded"}}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamUnavailable, Status: 503, Message: "The engine is currently overloaded"},
		},
		{
			name:    "504",
			up:      upstream{status: 504, body: ``},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamTimeout, Status: 504},
		},
		{
			name:    "garbage 200",
			up:      upstream{body: `not json`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamFailed, Message: "malformed response"},
		},
		{
			name:    "no choices",
			up:      upstream{body: `{"choices":[]}`},
			wantErr: &chat.UpstreamError{Kind: chat.UpstreamFailed, Message: "malformed response"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&tt.up)
			defer srv.Close()
			p := New(Config{Name: "openai", BaseURL: srv.URL, APIKey: "k"})
			got, err := p.Complete(context.Background(), &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}})
			checkResult(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func checkResult(t *testing.T, got *chat.Response, err error, want *chat.Response, wantErr *chat.UpstreamError) {
	t.Helper()
	if wantErr != nil {
		var ue *chat.UpstreamError
		if !errors.As(err, &ue) {
			t.Fatalf("error = %v; want *chat.UpstreamError", err)
		}
		if ue.Provider != "openai" || ue.Kind != wantErr.Kind || ue.Status != wantErr.Status || (wantErr.Message != "" && ue.Message != wantErr.Message) || ue.RetryAfter != wantErr.RetryAfter {
			t.Errorf("error = %+v; want %+v", ue, wantErr)
		}
		if wantErr.Kind == chat.UpstreamBadRequest && ue.Message == "" {
			t.Errorf("error message empty; want the upstream's message")
		}
		return
	}
	if err != nil {
		t.Fatalf("error = %v; want nil", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("response = %+v; want %+v", got, want)
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		fixture    string
		wantDeltas []chat.Delta
		want       *chat.Response
		wantErr    *chat.UpstreamError
	}{
		{"stream_basic.sse", []chat.Delta{{Content: "Hello"}, {Content: " there"}},
			&chat.Response{FinishReason: "stop", Usage: chat.Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11}}, nil},
		{"stream_reasoning.sse", []chat.Delta{{Reasoning: "Think"}, {Reasoning: " hard."}, {Content: "42"}},
			&chat.Response{FinishReason: "length", Usage: chat.Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12, ReasoningTokens: 6}}, nil},
		{"stream_no_done.sse", []chat.Delta{{Content: "Yes"}},
			&chat.Response{FinishReason: "stop", Usage: chat.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}}, nil},
		{"stream_error.sse", []chat.Delta{{Content: "Hi"}}, nil,
			&chat.UpstreamError{Kind: chat.UpstreamFailed, Status: 500}},
		{"stream_truncated.sse", []chat.Delta{{Content: "Hi"}, {Content: " the"}}, nil,
			&chat.UpstreamError{Kind: chat.UpstreamFailed, Message: "stream ended early"}},
		{"stream_garbage.sse", []chat.Delta{{Content: "Hi"}}, nil,
			&chat.UpstreamError{Kind: chat.UpstreamFailed, Message: "malformed stream chunk"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			up := &upstream{header: map[string]string{"Content-Type": "text/event-stream"}, body: fixture(t, tt.fixture)}
			srv := httptest.NewServer(up)
			defer srv.Close()
			p := New(Config{Name: "openai", BaseURL: srv.URL, APIKey: "k"})
			var deltas []chat.Delta
			got, err := p.Stream(context.Background(), &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}},
				chat.WriterFunc(func(d chat.Delta) error { deltas = appendDelta(deltas, d); return nil }))
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas = %+v; want %+v", deltas, tt.wantDeltas)
			}
			checkResult(t, got, err, tt.want, tt.wantErr)
		})
	}
}

// TestUsageDetails reads the usage details and the service tier of
// documented answers: OpenAI's cached input and reasoning tokens and
// the tier it served at (whole and streamed), DeepSeek's cache hits in
// their own field, OpenRouter's cache writes.
func TestUsageDetails(t *testing.T) {
	tests := []struct {
		fixture string
		stream  bool
		want    chat.Usage
		tier    string
	}{
		{"complete_usage_details.json", false,
			chat.Usage{PromptTokens: 2006, CompletionTokens: 300, TotalTokens: 2306, CachedTokens: 1920, ReasoningTokens: 256}, "priority"},
		{"stream_usage_details.sse", true,
			chat.Usage{PromptTokens: 1500, CompletionTokens: 900, TotalTokens: 2400, CachedTokens: 1024, ReasoningTokens: 832}, "flex"},
		{"complete_deepseek_cache.json", false,
			chat.Usage{PromptTokens: 1616, CompletionTokens: 10, TotalTokens: 1626, CachedTokens: 1536}, ""},
		{"complete_openrouter_cache.json", false,
			chat.Usage{PromptTokens: 3194, CompletionTokens: 2, TotalTokens: 3196, CacheWriteTokens: 3100}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := httptest.NewServer(&upstream{body: fixture(t, tt.fixture)})
			defer srv.Close()
			p := New(Config{Name: "openai", BaseURL: srv.URL, APIKey: "k"})
			req := &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}
			var got *chat.Response
			var err error
			if tt.stream {
				got, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
			} else {
				got, err = p.Complete(context.Background(), req)
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.fixture, err)
			}
			if got.Usage != tt.want || got.ServiceTier != tt.tier {
				t.Errorf("%s: usage = %+v, service tier %q; want %+v, %q", tt.fixture, got.Usage, got.ServiceTier, tt.want, tt.tier)
			}
		})
	}
}

func TestStreamErrorStatus(t *testing.T) {
	up := &upstream{status: 429, header: map[string]string{"Retry-After": "3"}, body: `{"error":{"message":"Rate limit reached"}}`}
	srv := httptest.NewServer(up)
	defer srv.Close()
	p := New(Config{Name: "openai", BaseURL: srv.URL})
	_, err := p.Stream(context.Background(), &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}},
		chat.WriterFunc(func(chat.Delta) error { t.Error("emit called for a 429"); return nil }))
	checkResult(t, nil, err, nil, &chat.UpstreamError{Kind: chat.UpstreamRateLimited, Status: 429, RetryAfter: 3 * time.Second})
}

func TestStreamEmitError(t *testing.T) {
	srv := httptest.NewServer(&upstream{body: fixture(t, "stream_basic.sse")})
	defer srv.Close()
	p := New(Config{Name: "openai", BaseURL: srv.URL})
	stop := errors.New("client gone")
	_, err := p.Stream(context.Background(), &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}},
		chat.WriterFunc(func(chat.Delta) error { return stop }))
	if err != stop {
		t.Errorf("Stream with failing emit = %v; want %v as is", err, stop)
	}
}

// TestTimeoutAndCancel: a deadline is an UpstreamTimeout; a cancelled
// context (the client left) is the context's error, not an upstream failure.
func TestTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	p := New(Config{Name: "openai", BaseURL: srv.URL})
	req := &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Complete(ctx, req)
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamTimeout {
		t.Errorf("Complete past deadline = %v; want UpstreamTimeout", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = p.Stream(ctx, req, chat.WriterFunc(func(chat.Delta) error { return nil }))
	if !errors.Is(err, context.Canceled) || errors.As(err, &ue) {
		t.Errorf("Stream cancelled = %v; want context.Canceled, not an UpstreamError", err)
	}
}

// FuzzDecodeStream feeds arbitrary bytes to the stream decoder: it must not
// panic or loop, must emit only non-empty deltas, and on success must have
// a finish reason. The seed corpus is testdata/fuzz/FuzzDecodeStream.
func FuzzDecodeStream(f *testing.F) {
	for _, name := range []string{"stream_basic.sse", "stream_tools.sse", "stream_reasoning.sse"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		resp, err := decodeStream(strings.NewReader(string(b)), func(d chat.Delta) error {
			n++
			if d.Content == "" && d.Reasoning == "" && d.ToolCall == nil {
				t.Errorf("empty delta emitted")
			}
			if tc := d.ToolCall; tc != nil && tc.Index < 0 {
				t.Errorf("tool call delta with index %d", tc.Index)
			}
			return nil
		})
		if n > len(b) {
			t.Errorf("%d deltas from %d bytes", n, len(b))
		}
		if err == nil && resp.FinishReason == "" {
			t.Errorf("decodeStream = %+v, nil; want a finish reason on success", resp)
		}
		if err != nil {
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) {
				// Only the upstream's own classification or a read error
				// (ErrTooLarge) may come out of an in-memory reader.
				if !strings.Contains(err.Error(), "too large") {
					t.Errorf("decodeStream error = %v; want *chat.UpstreamError", err)
				}
			}
		}
	})
}

// appendDelta appends d to ds unless it carries no text.
func appendDelta(ds []chat.Delta, d chat.Delta) []chat.Delta {
	if d.Content == "" && d.Reasoning == "" {
		return ds
	}
	return append(ds, d)
}
