package bedrock

// These tests run the real aws-sdk-go-v2 bedrockruntime client (SigV4,
// serialization, the event stream decoder) against a fake Bedrock runtime
// on 127.0.0.1 that speaks the documented wire format:
//   - POST /model/{modelId}/converse and /model/{modelId}/converse-stream
//     with the JSON request bodies of
//     https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
//     and API_runtime_ConverseStream.html (messages, system, inferenceConfig,
//     additionalModelRequestFields; image blocks {format, source: {bytes}}).
//   - ConverseStream answers in the AWS event stream binary encoding
//     (application/vnd.amazon.eventstream), one message per event with
//     headers :message-type=event, :event-type=<member of
//     ConverseStreamOutput>, :content-type=application/json; exceptions have
//     :message-type=exception, :exception-type=<member>.
//     The testdata/stream_*.json scripts list those events with the payload
//     shapes of API_runtime_ConverseStreamOutput.html (messageStart,
//     contentBlockDelta {text | reasoningContent {text | signature}},
//     contentBlockStop, messageStop {stopReason}, metadata {usage, metrics}).
//   - Claude thinking via additionalModelRequestFields:
//     https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-extended-thinking.html
//   - Errors: HTTP status with X-Amzn-ErrorType and {"message": ...}.

import (
	"bytes"
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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// scriptEvent is one event stream message of a testdata script.
type scriptEvent struct {
	Event     string          `json:"event"`     // :event-type, for an event
	Exception string          `json:"exception"` // :exception-type, for an exception
	Payload   json.RawMessage `json:"payload"`
}

// encodeScript encodes events in the AWS event stream format.
func encodeScript(t *testing.T, events []scriptEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, ev := range events {
		var msg eventstream.Message
		if ev.Exception != "" {
			msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
			msg.Headers.Set(":exception-type", eventstream.StringValue(ev.Exception))
		} else {
			msg.Headers.Set(":message-type", eventstream.StringValue("event"))
			msg.Headers.Set(":event-type", eventstream.StringValue(ev.Event))
		}
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Payload = ev.Payload
		if err := enc.Encode(&buf, msg); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func loadScript(t *testing.T, name string) []scriptEvent {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var evs []scriptEvent
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return evs
}

// fakeBedrock is a Bedrock runtime endpoint: it records requests and answers
// Converse with JSON and ConverseStream with an event stream.
type fakeBedrock struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []recorded
	status   int
	errType  string // X-Amzn-ErrorType for errors
	converse []byte // Converse answer
	stream   []byte // ConverseStream answer (encoded)
}

type recorded struct {
	path   string
	header http.Header
	body   map[string]any
}

func newFake(t *testing.T) *fakeBedrock {
	f := &fakeBedrock{t: t, status: http.StatusOK}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body %q is not JSON: %v", b, err)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.URL.Path, r.Header.Clone(), body})
		status, errType, converse, stream := f.status, f.errType, f.converse, f.stream
		f.mu.Unlock()
		if r.Method != http.MethodPost {
			t.Errorf("method = %s; want POST", r.Method)
		}
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", errType)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"message":"`+errType+` happened"}`)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/converse-stream"):
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			_, _ = w.Write(stream)
		case strings.HasSuffix(r.URL.Path, "/converse"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(converse)
		default:
			t.Errorf("unexpected path %s", r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeBedrock) set(fn func(f *fakeBedrock)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeBedrock) last() recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		f.t.Fatal("no request reached the upstream")
	}
	return f.reqs[len(f.reqs)-1]
}

// newClient returns a real bedrockruntime client for the test server, with
// dummy credentials and no retries; it never reads the machine's AWS config.
func newClient(t *testing.T, url string, hc *http.Client) *bedrockruntime.Client {
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", Source: "test"}, nil
		}),
		RetryMaxAttempts: 1,
		HTTPClient:       hc,
	})
}

func (f *fakeBedrock) provider(t *testing.T) *Provider {
	return New(newClient(t, f.srv.URL, f.srv.Client()))
}

var (
	claude = &catalog.Model{ID: "bedrock/claude-sonnet-4-5", Upstream: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", Chat: catalog.Chat{MaxTokens: 64000, Thinking: catalog.ThinkingBudget}}
	nova   = &catalog.Model{ID: "bedrock/nova-lite", Upstream: "us.amazon.nova-lite-v1:0", Chat: catalog.Chat{MaxTokens: 5000}}
)

func ptr[T any](v T) *T { return &v }

func user(s string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Text: s}}}
}

func jsonValue(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func TestProviderNeedsImageBytes(t *testing.T) {
	var p interface{ NeedsImageBytes() bool } = New(nil)
	if !p.NeedsImageBytes() {
		t.Errorf("NeedsImageBytes() = false; want true")
	}
}

func TestRequestShape(t *testing.T) {
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{
			name: "system blocks, merged roles, default max tokens",
			req: &chat.Request{Model: nova, Messages: []chat.Message{
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Be brief."}}},
				user("Hi"), user("there"),
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Hello."}}},
				user("Bye"),
			}},
			want: `{"system":[{"text":"Be brief."}],"messages":[
				{"role":"user","content":[{"text":"Hi"},{"text":"there"}]},
				{"role":"assistant","content":[{"text":"Hello."}]},
				{"role":"user","content":[{"text":"Bye"}]}],
				"inferenceConfig":{"maxTokens":5000}}`,
		},
		{
			name: "inference config and image bytes",
			req: &chat.Request{Model: nova, MaxTokens: 300, Temperature: ptr(0.5), TopP: ptr(0.25), Stop: []string{"END"},
				Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{
					{Text: "What is this?"}, {Image: &chat.Image{MediaType: "image/webp", Data: []byte("RIFF")}},
				}}}},
			want: `{"messages":[{"role":"user","content":[{"text":"What is this?"},{"image":{"format":"webp","source":{"bytes":"UklGRg=="}}}]}],
				"inferenceConfig":{"maxTokens":300,"temperature":0.5,"topP":0.25,"stopSequences":["END"]}}`,
		},
		{
			name: "claude thinking, high",
			req:  &chat.Request{Model: claude, ReasoningEffort: "high", Temperature: ptr(0.5), Messages: []chat.Message{user("27*453?")}},
			want: `{"messages":[{"role":"user","content":[{"text":"27*453?"}]}],
				"inferenceConfig":{"maxTokens":24576},
				"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":16384}}}`,
		},
		{
			name: "claude thinking, low, default max tokens above the budget",
			req:  &chat.Request{Model: claude, ReasoningEffort: "low", Messages: []chat.Message{user("x")}},
			want: `{"messages":[{"role":"user","content":[{"text":"x"}]}],
				"inferenceConfig":{"maxTokens":8192},
				"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}}}`,
		},
		{
			name: "effort ignored for a model without thinking",
			req:  &chat.Request{Model: nova, ReasoningEffort: "medium", Messages: []chat.Message{user("x")}},
			want: `{"messages":[{"role":"user","content":[{"text":"x"}]}],"inferenceConfig":{"maxTokens":5000}}`,
		},
	}
	f := newFake(t)
	f.set(func(f *fakeBedrock) { f.stream = encodeScript(t, loadScript(t, "stream_text.json")) })
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.Stream(context.Background(), tt.req, chat.WriterFunc(func(chat.Delta) error { return nil })); err != nil {
				t.Fatalf("Stream() error %v", err)
			}
			got := f.last()
			if want := jsonValue(t, tt.want); !reflect.DeepEqual(got.body, want) {
				gb, _ := json.Marshal(got.body)
				t.Errorf("request body = %s; want %s", gb, tt.want)
			}
			wantPath := "/model/" + tt.req.Model.Upstream + "/converse-stream"
			if got.path != wantPath {
				t.Errorf("path = %q; want %q", got.path, wantPath)
			}
			if a := got.header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(a, "/us-east-1/bedrock/aws4_request") {
				t.Errorf("Authorization = %q; want a SigV4 signature for bedrock in us-east-1", a)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		msgs []chat.Message
	}{
		{"no messages", []chat.Message{{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "sys"}}}}},
		{"image URL", []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Image: &chat.Image{URL: "https://example.com/a.png"}}}}}},
		{"image type", []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Image: &chat.Image{MediaType: "image/tiff", Data: []byte("II*")}}}}}},
	}
	f := newFake(t)
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Complete(context.Background(), &chat.Request{Model: nova, Messages: tt.msgs})
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest {
				t.Errorf("Complete() = %v; want UpstreamBadRequest", err)
			}
		})
	}
	if len(f.reqs) != 0 {
		t.Errorf("upstream got %d requests; want 0", len(f.reqs))
	}
}

func TestComplete(t *testing.T) {
	f := newFake(t)
	b, err := os.ReadFile("testdata/converse.json")
	if err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeBedrock) { f.converse = b })
	got, err := f.provider(t).Complete(context.Background(), &chat.Request{Model: claude, ReasoningEffort: "medium",
		Messages: []chat.Message{{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "sys"}}}, user("Hello")}})
	if err != nil {
		t.Fatalf("Complete() error %v", err)
	}
	want := &chat.Response{Content: "Hello! How can I help?", Reasoning: "The user greets me.", FinishReason: "stop",
		Thoughts: []chat.Thought{{Provider: "bedrock", Text: "The user greets me.", Signature: "EqoBCkgIARABGAIiQL2"}},
		Usage:    chat.Usage{PromptTokens: 10, CompletionTokens: 25, TotalTokens: 35}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Complete() = %+v; want %+v", got, want)
	}
	req := f.last()
	wantBody := jsonValue(t, `{"system":[{"text":"sys"}],"messages":[{"role":"user","content":[{"text":"Hello"}]}],
		"inferenceConfig":{"maxTokens":8192},"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":4096}}}`)
	if !reflect.DeepEqual(req.body, wantBody) || req.path != "/model/"+claude.Upstream+"/converse" {
		t.Errorf("request %s %v; want /converse %v", req.path, req.body, wantBody)
	}
}

// TestUsageDetails reads cache reads, cache writes by lifetime and the
// service tier from a Converse answer and a ConverseStream metadata
// event: inputTokens excludes the cache, so the prompt adds it back.
func TestUsageDetails(t *testing.T) {
	f := newFake(t)
	p := f.provider(t)
	req := &chat.Request{Model: claude, Messages: []chat.Message{user("x")}}

	b, err := os.ReadFile("testdata/converse_cache.json")
	if err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeBedrock) { f.converse = b })
	got, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("Complete() error %v", err)
	}
	want := chat.Usage{PromptTokens: 3615, CompletionTokens: 30, TotalTokens: 3645, CachedTokens: 1200, CacheWriteTokens: 400, CacheWrite1hTokens: 2000}
	if got.Usage != want || got.ServiceTier != "priority" {
		t.Errorf("Complete(converse_cache.json) usage = %+v, tier %q; want %+v, priority", got.Usage, got.ServiceTier, want)
	}

	f.set(func(f *fakeBedrock) { f.stream = encodeScript(t, loadScript(t, "stream_cache.json")) })
	got, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
	if err != nil {
		t.Fatalf("Stream() error %v", err)
	}
	want = chat.Usage{PromptTokens: 1608, CompletionTokens: 3, TotalTokens: 1611, CachedTokens: 1000, CacheWriteTokens: 600}
	if got.Usage != want || got.ServiceTier != "flex" {
		t.Errorf("Stream(stream_cache.json) usage = %+v, tier %q; want %+v, flex", got.Usage, got.ServiceTier, want)
	}
}

func TestStream(t *testing.T) {
	tests := []struct {
		script     string
		wantDeltas []chat.Delta
		want       *chat.Response
		wantKind   chat.UpstreamKind
		wantMsg    string
	}{
		{
			script:     "stream_text.json",
			wantDeltas: []chat.Delta{{Content: "Hello"}, {Content: ", world."}},
			want: &chat.Response{Content: "Hello, world.", FinishReason: "stop",
				Usage: chat.Usage{PromptTokens: 12, CompletionTokens: 4, TotalTokens: 16}},
		},
		{
			script: "stream_reasoning.json",
			// The reasoning block's signature closes it: a Thought at its stop.
			wantDeltas: []chat.Delta{{Reasoning: "27 * 453: 27*400=10800, "}, {Reasoning: "27*53=1431."},
				{Thought: &chat.Thought{Provider: "bedrock", Text: "27 * 453: 27*400=10800, 27*53=1431.", Signature: "EqoBCkgIARABGAIiQL2"}}, {Content: "12,231"}},
			want: &chat.Response{Content: "12,231", Reasoning: "27 * 453: 27*400=10800, 27*53=1431.", FinishReason: "length",
				Thoughts: []chat.Thought{{Provider: "bedrock", Text: "27 * 453: 27*400=10800, 27*53=1431.", Signature: "EqoBCkgIARABGAIiQL2"}},
				Usage:    chat.Usage{PromptTokens: 50, CompletionTokens: 300, TotalTokens: 350, CachedTokens: 10}},
		},
		{
			script:     "stream_guardrail.json",
			wantDeltas: []chat.Delta{{Content: "Sorry"}},
			want: &chat.Response{Content: "Sorry", FinishReason: "content_filter",
				Usage: chat.Usage{PromptTokens: 5, CompletionTokens: 1, TotalTokens: 6}},
		},
		{script: "stream_throttled.json", wantDeltas: []chat.Delta{{Content: "Hel"}}, wantKind: chat.UpstreamRateLimited,
			wantMsg: "Too many tokens, please wait before trying again."},
		{script: "stream_model_error.json", wantKind: chat.UpstreamFailed, wantMsg: "Model stream error"},
		{script: "stream_validation.json", wantKind: chat.UpstreamBadRequest, wantMsg: "The model returned the following errors: prompt is too long"},
		{script: "stream_truncated.json", wantDeltas: []chat.Delta{{Content: "Hel"}}, wantKind: chat.UpstreamFailed, wantMsg: "stream ended before messageStop"},
	}
	f := newFake(t)
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			f.set(func(f *fakeBedrock) { f.stream = encodeScript(t, loadScript(t, tt.script)) })
			var deltas []chat.Delta
			got, err := p.Stream(context.Background(), &chat.Request{Model: claude, Messages: []chat.Message{user("x")}},
				chat.WriterFunc(func(d chat.Delta) error { deltas = append(deltas, d); return nil }))
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas = %+v; want %+v", deltas, tt.wantDeltas)
			}
			if tt.want == nil {
				var ue *chat.UpstreamError
				if !errors.As(err, &ue) || ue.Kind != tt.wantKind || ue.Message != tt.wantMsg {
					t.Fatalf("Stream() error = %v; want kind %v, message %q", err, tt.wantKind, tt.wantMsg)
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
		status     int
		errType    string
		wantKind   chat.UpstreamKind
		wantStatus int
	}{
		{400, "ValidationException", chat.UpstreamBadRequest, 400},
		{400, "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/", chat.UpstreamBadRequest, 400},
		{404, "ResourceNotFoundException", chat.UpstreamBadRequest, 404},
		{429, "ThrottlingException", chat.UpstreamRateLimited, 429},
		{400, "ServiceQuotaExceededException", chat.UpstreamRateLimited, 429}, // a quota: stands for 429
		{503, "ServiceUnavailableException", chat.UpstreamUnavailable, 503},
		{429, "ModelNotReadyException", chat.UpstreamUnavailable, 429},
		{408, "ModelTimeoutException", chat.UpstreamTimeout, 408},
		{403, "AccessDeniedException", chat.UpstreamFailed, 403},
		{500, "InternalServerException", chat.UpstreamFailed, 500},
		{424, "ModelErrorException", chat.UpstreamFailed, 502}, // the model failed, with no status of its own
		{502, "", chat.UpstreamFailed, 502},
	}
	f := newFake(t)
	p := f.provider(t)
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.errType
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				f.set(func(f *fakeBedrock) { f.status, f.errType = tt.status, tt.errType })
				req := &chat.Request{Model: nova, Messages: []chat.Message{user("x")}}
				var err error
				if stream {
					_, err = p.Stream(context.Background(), req, chat.WriterFunc(func(chat.Delta) error { return nil }))
				} else {
					_, err = p.Complete(context.Background(), req)
				}
				var ue *chat.UpstreamError
				if !errors.As(err, &ue) {
					t.Fatalf("error = %v; want *chat.UpstreamError", err)
				}
				if ue.Kind != tt.wantKind || ue.Status != tt.wantStatus || ue.Provider != "bedrock" {
					t.Errorf("error = %+v; want kind %v, status %d", ue, tt.wantKind, tt.wantStatus)
				}
				if tt.wantKind == chat.UpstreamBadRequest && !strings.Contains(ue.Message, "happened") {
					t.Errorf("message = %q; want the upstream's", ue.Message)
				}
			})
		}
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
			first := encodeScript(t, []scriptEvent{
				{Event: "messageStart", Payload: json.RawMessage(`{"role":"assistant"}`)},
				{Event: "contentBlockDelta", Payload: json.RawMessage(`{"contentBlockIndex":0,"delta":{"text":"first"}}`)},
			})
			gone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
				_, _ = w.Write(first)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				close(gone)
			}))
			defer srv.Close()
			p := New(newClient(t, srv.URL, srv.Client()))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var deltas []chat.Delta
			_, err := p.Stream(ctx, &chat.Request{Model: nova, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(d chat.Delta) error {
				deltas = append(deltas, d)
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
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream request was not cancelled")
			}
		})
	}
}
