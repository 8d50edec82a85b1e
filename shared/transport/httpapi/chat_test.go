package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/synthetic"
	"github.com/genway/genway/shared/providers/upstreams"
)

// guard bounds every wait in these tests: reaching it is a failure (a
// hang), never a timing assertion.
const guard = 10 * time.Second

// chatServer serves ChatCompletions for account "acct" at
// /v1/chat/completions, as genway serve mounts it behind auth.
func chatServer(t testing.TB, gw *chat.Gateway, opts ...ChatOption) *httptest.Server {
	t.Helper()
	h := ChatCompletions(gw, nil, opts...)
	mux := NewMux(nil, Route{Method: http.MethodPost, Pattern: "/v1/chat/completions",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), "acct")))
		})})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func syntheticGateway(t testing.TB) *chat.Gateway {
	return chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"synthetic": synthetic.NewChat()}})
}

func client(srv *httptest.Server) oai.Client {
	return oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk_live_test"), option.WithMaxRetries(0))
}

// pngDataURI returns a data URI of a w x h PNG and the PNG's size.
func pngDataURI(t *testing.T, w, h int) (string, int) {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes()), b.Len()
}

// TestChatOpenAIClient drives the synthetic models with the official client.
func TestChatOpenAIClient(t *testing.T) {
	srv := chatServer(t, syntheticGateway(t))
	c := client(srv)
	img, imgSize := pngDataURI(t, 4, 3)
	tests := []struct {
		name        string
		params      oai.ChatCompletionNewParams
		wantContent string
		wantFinish  string
		wantUsage   [3]int64
		wantStatus  int    // for errors
		wantCode    string // for errors
	}{
		{
			name:        "echo",
			params:      oai.ChatCompletionNewParams{Model: "synthetic/echo", Messages: []oai.ChatCompletionMessageParamUnion{oai.DeveloperMessage("be brief"), oai.UserMessage("hello world")}},
			wantContent: "You said: hello world", wantFinish: "stop", wantUsage: [3]int64{4, 4, 8},
		},
		{
			name:        "max completion tokens",
			params:      oai.ChatCompletionNewParams{Model: "synthetic/echo", MaxCompletionTokens: oai.Int(3), Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("a b c d")}},
			wantContent: "You said: a", wantFinish: "length", wantUsage: [3]int64{4, 3, 7},
		},
		{
			name: "vision",
			params: oai.ChatCompletionNewParams{Model: "synthetic/thinker", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{
				oai.TextContentPart("look"), oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: img}),
			})}},
			wantContent: fmt.Sprintf("You said: look Image 1 is image/png, 4x3 pixels, %d bytes.", imgSize),
			wantFinish:  "stop", wantUsage: [3]int64{1 + synthetic.ImageTokens, 11, 1 + synthetic.ImageTokens + 11},
		},
		{
			name:        "reasoning stays out of content",
			params:      oai.ChatCompletionNewParams{Model: "synthetic/thinker", ReasoningEffort: oai.ReasoningEffortLow, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}},
			wantContent: "You said: hi", wantFinish: "stop", wantUsage: [3]int64{1, 9 + 3, 13},
		},
		{
			name:       "unknown model",
			params:     oai.ChatCompletionNewParams{Model: "synthetic/nope", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}},
			wantStatus: 404, wantCode: "model_not_found",
		},
		{
			name: "image to a text model",
			params: oai.ChatCompletionNewParams{Model: "synthetic/echo", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{
				oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: img}),
			})}},
			wantStatus: 400, wantCode: "model_not_vision_capable",
		},
		{
			name:       "upstream failure",
			params:     oai.ChatCompletionNewParams{Model: "synthetic/echo", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("fail: now")}},
			wantStatus: 502, wantCode: "upstream_error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/complete", func(t *testing.T) {
			resp, err := c.Chat.Completions.New(context.Background(), tt.params)
			if tt.wantStatus != 0 {
				var ae *oai.Error
				if !errors.As(err, &ae) || ae.StatusCode != tt.wantStatus || ae.Code != tt.wantCode {
					t.Fatalf("New = %v; want status %d code %s", err, tt.wantStatus, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("New = %v", err)
			}
			if resp.Object != "chat.completion" || resp.Model != tt.params.Model || !strings.HasPrefix(resp.ID, "chatcmpl-") {
				t.Errorf("New = object %q model %q id %q; want chat.completion, %s, chatcmpl-...", resp.Object, resp.Model, resp.ID, tt.params.Model)
			}
			ch := resp.Choices[0]
			got := [3]int64{resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens}
			if ch.Message.Content != tt.wantContent || ch.FinishReason != tt.wantFinish || got != tt.wantUsage {
				t.Errorf("New = %q %s %v; want %q %s %v", ch.Message.Content, ch.FinishReason, got, tt.wantContent, tt.wantFinish, tt.wantUsage)
			}
		})
		t.Run(tt.name+"/stream", func(t *testing.T) {
			p := tt.params
			p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			stream := c.Chat.Completions.NewStreaming(context.Background(), p)
			defer stream.Close()
			var acc oai.ChatCompletionAccumulator
			var content, reasoning strings.Builder
			chunks := 0
			for stream.Next() && chunks < 1000 {
				chunk := stream.Current()
				acc.AddChunk(chunk)
				if chunks == 0 && (len(chunk.Choices) != 1 || chunk.Choices[0].Delta.Role != "assistant") {
					t.Errorf("first chunk = %s; want delta.role assistant", chunk.RawJSON())
				}
				chunks++
				if len(chunk.Choices) > 0 {
					content.WriteString(chunk.Choices[0].Delta.Content)
					if f, ok := chunk.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
						var s string
						_ = json.Unmarshal([]byte(f.Raw()), &s)
						reasoning.WriteString(s)
					}
				}
			}
			if tt.wantStatus != 0 {
				var ae *oai.Error
				if tt.wantStatus == 502 { // a mid-stream failure after the first content chunk
					if stream.Err() == nil || content.String() != "You" {
						t.Errorf("stream = %q, %v; want the first word then an error", content.String(), stream.Err())
					}
					return
				}
				if !errors.As(stream.Err(), &ae) || ae.StatusCode != tt.wantStatus {
					t.Errorf("stream error = %v; want status %d", stream.Err(), tt.wantStatus)
				}
				return
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream = %v", err)
			}
			if content.String() != tt.wantContent {
				t.Errorf("streamed content = %q; want %q", content.String(), tt.wantContent)
			}
			if tt.params.ReasoningEffort != "" && reasoning.Len() == 0 {
				t.Errorf("streamed reasoning_content empty; want reasoning")
			}
			got := [3]int64{acc.Usage.PromptTokens, acc.Usage.CompletionTokens, acc.Usage.TotalTokens}
			if got != tt.wantUsage || acc.Choices[0].FinishReason != tt.wantFinish {
				t.Errorf("stream usage, finish = %v, %s; want %v, %s", got, acc.Choices[0].FinishReason, tt.wantUsage, tt.wantFinish)
			}
		})
	}
}

// sseEvents reads a raw SSE body into its lines that are not blank.
func sseLines(t *testing.T, body io.Reader) []string {
	t.Helper()
	var lines []string
	sc := bufio.NewScanner(body)
	for sc.Scan() && len(lines) < 10000 {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestChatStreamWire checks the exact event sequence of a stream.
func TestChatStreamWire(t *testing.T) {
	srv := chatServer(t, syntheticGateway(t))
	tests := []struct {
		name string
		body string
		want []string // each line: a JSON shape to match (fields compared), or a literal
	}{
		{
			name: "without include_usage",
			body: `{"model":"synthetic/echo","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			want: []string{
				`{"object":"chat.completion.chunk","model":"synthetic/echo","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"content":"You"},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"content":" said:"},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"content":" hi"},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}`,
				`[DONE]`,
			},
		},
		{
			name: "with include_usage and reasoning",
			body: `{"model":"synthetic/thinker","stream":true,"reasoning_effort":"low","max_tokens":2,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			want: []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"reasoning_content":"The"},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"reasoning_content":" last"},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
				`[DONE]`,
			},
		},
		{
			name: "mid-stream failure",
			body: `{"model":"synthetic/echo","stream":true,"messages":[{"role":"user","content":"fail: x"}]}`,
			want: []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"content":"You"},"finish_reason":null}]}`,
				`{"error":{"type":"api_error","code":"upstream_error","param":null}}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv.URL, tt.body)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
				t.Fatalf("response = %d %q %q; want 200 text/event-stream no-cache", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
			}
			lines := sseLines(t, resp.Body)
			if len(lines) != len(tt.want) {
				t.Fatalf("stream = %d events:\n%s\nwant %d", len(lines), strings.Join(lines, "\n"), len(tt.want))
			}
			var id string
			for i, l := range lines {
				data, ok := strings.CutPrefix(l, "data: ")
				if !ok {
					t.Fatalf("line %d = %q; want data: ...", i, l)
				}
				if tt.want[i] == "[DONE]" {
					if data != "[DONE]" {
						t.Errorf("event %d = %s; want [DONE]", i, data)
					}
					continue
				}
				if !jsonContains(t, data, tt.want[i]) {
					t.Errorf("event %d = %s; want it to contain %s", i, data, tt.want[i])
				}
				var meta struct{ ID string }
				_ = json.Unmarshal([]byte(data), &meta)
				if meta.ID != "" && id != "" && meta.ID != id {
					t.Errorf("event %d id %q; want the stream's id %q", i, meta.ID, id)
				}
				if id == "" {
					id = meta.ID
				}
			}
		})
	}
}

// jsonContains reports whether every field of the JSON object want is in
// got with an equal value (arrays compared element by element).
func jsonContains(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("not JSON: %s", got)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s", want)
	}
	return contains(g, w)
}

func contains(g, w any) bool {
	switch w := w.(type) {
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok || (len(w) == 0 && len(gm) != 0) {
			return false
		}
		for k, wv := range w {
			gv, ok := gm[k]
			if !ok || !contains(gv, wv) {
				return false
			}
		}
		return true
	case []any:
		ga, ok := g.([]any)
		if !ok || len(ga) != len(w) {
			return false
		}
		for i := range w {
			if !contains(ga[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(g) == fmt.Sprint(w)
	}
}

// fakeUpstream is an OpenAI chat completions server driven by the test.
type fakeUpstream struct {
	handler func(w http.ResponseWriter, r *http.Request)
}

// ServeHTTP reads the whole request first: net/http notices a client that
// went away (and cancels r.Context()) only once the body is consumed.
func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.handler(w, r)
}

// openaiGateway is a gateway whose openai provider talks to upstreamURL
// through the HTTP client serve and the chat Lambda use (upstreams.NewHTTPClient),
// so that streaming, cancellation and errors are tested over it.
func openaiGateway(t testing.TB, upstreamURL string, timeout time.Duration) *chat.Gateway {
	t.Helper()
	hc := upstreams.NewHTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	return chat.NewGateway(chat.Config{Catalog: testCatalog(t), Timeout: timeout, Providers: map[string]chat.Provider{
		"openai": openai.New(openai.Config{Name: "openai", BaseURL: upstreamURL, APIKey: "k", HTTPClient: hc}),
	}})
}

func chunkLine(content string) string {
	return `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":` + fmt.Sprintf("%q", content) + `},"finish_reason":null}]}` + "\n\n"
}

const finishLines = `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
	`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}` + "\n\n" +
	"data: [DONE]\n\n"

// TestChatIncremental: the upstream sends its chunks 200 ms apart, and
// sends chunk i+1 only once the client has received chunk i. A gateway that
// buffered the answer would never deliver chunk 0 (the test would hit the
// guard); the order of events proves that each chunk reached the client
// before the upstream produced the next.
func TestChatIncremental(t *testing.T) {
	const n = 4
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	received := make(chan int, n)
	up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			if i > 0 {
				time.Sleep(200 * time.Millisecond)
				select {
				case <-received:
				case <-time.After(guard):
					return // the client never saw chunk i-1: fails below
				}
			}
			note(fmt.Sprintf("sent %d", i))
			io.WriteString(w, chunkLine(fmt.Sprintf("w%d ", i)))
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, finishLines)
	}})
	defer up.Close()
	srv := chatServer(t, openaiGateway(t, up.URL, 0))
	c := client(srv)
	stream := c.Chat.Completions.NewStreaming(context.Background(), oai.ChatCompletionNewParams{
		Model: "openai/gpt-4o-mini", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("count")}})
	defer stream.Close()
	got := 0
	for stream.Next() && got < n+10 {
		ch := stream.Current()
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			note(fmt.Sprintf("recv %d", got))
			received <- got
			got++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream = %v", err)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("sent %d", i), fmt.Sprintf("recv %d", i))
	}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("order = %v; want %v", order, want)
	}
}

// TestChatDisconnect: when the client goes away mid-stream, the upstream
// request is cancelled.
func TestChatDisconnect(t *testing.T) {
	upstreamCancelled := make(chan struct{})
	up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("first"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(upstreamCancelled)
		case <-time.After(guard):
		}
	}})
	defer up.Close()
	srv := chatServer(t, openaiGateway(t, up.URL, 0), ChatHeartbeat(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client(srv)
	stream := c.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{
		Model: "openai/gpt-4o-mini", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("x")}})
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 && ch.Choices[0].Delta.Content == "first" {
			break
		}
	}
	cancel()
	stream.Close()
	select {
	case <-upstreamCancelled:
	case <-time.After(guard):
		t.Fatal("upstream request not cancelled after the client went away")
	}
}

// TestChatHeartbeat: while the upstream is silent the client gets
// ": keep-alive" comments, and the stream then completes normally.
func TestChatHeartbeat(t *testing.T) {
	heartbeatSeen := make(chan struct{})
	up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
		select { // silent until the client has seen a heartbeat
		case <-heartbeatSeen:
		case <-time.After(guard):
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("late"))
		io.WriteString(w, finishLines)
	}})
	defer up.Close()
	srv := chatServer(t, openaiGateway(t, up.URL, 0), ChatHeartbeat(20*time.Millisecond))
	resp := post(t, srv.URL, `{"model":"openai/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d; want 200", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	once := sync.Once{}
	for sc.Scan() && len(lines) < 1000 {
		l := sc.Text()
		if l == "" {
			continue
		}
		if l == ": keep-alive" {
			once.Do(func() { close(heartbeatSeen) })
			continue
		}
		lines = append(lines, l)
	}
	once.Do(func() { t.Error("no heartbeat seen"); close(heartbeatSeen) })
	if len(lines) != 4 || !strings.Contains(lines[1], `"late"`) || lines[3] != "data: [DONE]" {
		t.Errorf("stream after heartbeats = %q; want role, late, final, [DONE]", lines)
	}
}

// TestChatUpstreamErrors: upstream failures map to the statuses of
// docs/api.md ("Requests and errors"), before the first byte as JSON, for
// stream and non-stream.
func TestChatUpstreamErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		hang       bool
		wantStatus int
		wantCode   string
		wantMsg    string
		wantRetry  string
	}{
		{"400 passes through", 400, nil, `{"error":{"message":"Invalid 'messages': too long."}}`, false, 400, "upstream_invalid_request", "Invalid 'messages': too long.", ""},
		{"429 with retry-after", 429, map[string]string{"Retry-After": "12"}, `{"error":{"message":"Rate limit"}}`, false, 429, "upstream_rate_limited", "", "12"},
		{"500 is 502", 500, nil, `{"error":{"message":"secret internals"}}`, false, 502, "upstream_error", "", ""},
		{"401 is 502", 401, nil, `{"error":{"message":"bad key sk-..."}}`, false, 502, "upstream_error", "", ""},
		{"503", 503, nil, `{"error":{"message":"overloaded"}}`, false, 503, "upstream_unavailable", "", ""},
		{"timeout is 504", 200, nil, ``, true, 504, "upstream_timeout", "", ""},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
					if tt.hang {
						select {
						case <-r.Context().Done():
						case <-time.After(guard):
						}
						return
					}
					for k, v := range tt.header {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tt.status)
					io.WriteString(w, tt.body)
				}})
				defer up.Close()
				srv := chatServer(t, openaiGateway(t, up.URL, 100*time.Millisecond), ChatHeartbeat(time.Hour))
				resp := post(t, srv.URL, fmt.Sprintf(`{"model":"openai/gpt-4o-mini","stream":%v,"messages":[{"role":"user","content":"x"}]}`, stream))
				var env struct {
					Error struct {
						Message, Type string
						Code          *string
					}
				}
				b, _ := io.ReadAll(resp.Body)
				if err := json.Unmarshal(b, &env); err != nil {
					t.Fatalf("body %s: %v", b, err)
				}
				code := ""
				if env.Error.Code != nil {
					code = *env.Error.Code
				}
				if resp.StatusCode != tt.wantStatus || code != tt.wantCode || resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("response = %d %s %q; want %d %s application/json", resp.StatusCode, code, resp.Header.Get("Content-Type"), tt.wantStatus, tt.wantCode)
				}
				if tt.wantMsg != "" && env.Error.Message != tt.wantMsg {
					t.Errorf("message = %q; want %q", env.Error.Message, tt.wantMsg)
				}
				if strings.Contains(string(b), "secret") || strings.Contains(string(b), "sk-") {
					t.Errorf("body %s leaks the upstream's message", b)
				}
				if got := resp.Header.Get("Retry-After"); got != tt.wantRetry {
					t.Errorf("Retry-After = %q; want %q", got, tt.wantRetry)
				}
			})
		}
	}
}

func TestChatRequestErrors(t *testing.T) {
	srv := chatServer(t, syntheticGateway(t))
	tests := []struct {
		name, body string
		wantStatus int
		wantParam  string
	}{
		{"not json", `{`, 400, ""},
		{"effort", `{"model":"synthetic/thinker","reasoning_effort":"max","messages":[{"role":"user","content":"x"}]}`, 400, "reasoning_effort"},
		{"image param", `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:image/png;base64,@@"}}]}]}`, 400, "messages[0].content[1].image_url.url"},
		{"unknown fields ignored, stream error still JSON", `{"model":"nope/nope","stream":true,"n":1,"user":"u","messages":[{"role":"user","content":"x"}]}`, 404, "model"},
		// What chat.ScanParams declines, encoding/json decodes as before.
		{"wrong type", `{"model":"synthetic/echo","temperature":"hot","messages":[{"role":"user","content":"x"}]}`, 400, "temperature"},
		{"fractional seed", `{"model":"synthetic/echo","seed":1.5,"messages":[{"role":"user","content":"x"}]}`, 400, "seed"},
		{"name in another case", `{"MODEL":"nope/nope","messages":[{"role":"user","content":"x"}]}`, 404, "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv.URL, tt.body)
			var env struct{ Error struct{ Param *string } }
			b, _ := io.ReadAll(resp.Body)
			_ = json.Unmarshal(b, &env)
			param := ""
			if env.Error.Param != nil {
				param = *env.Error.Param
			}
			if resp.StatusCode != tt.wantStatus || param != tt.wantParam {
				t.Errorf("POST %s = %d param %q; want %d %q (%s)", tt.body, resp.StatusCode, param, tt.wantStatus, tt.wantParam, b)
			}
		})
	}
}

// TestChatHeartbeatThenFailure: once a heartbeat has committed the
// response's status, an upstream failure is an error event, without
// [DONE]; the role chunk was never sent (it waits for the first token).
func TestChatHeartbeatThenFailure(t *testing.T) {
	heartbeatSeen := make(chan struct{})
	up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-heartbeatSeen:
		case <-time.After(guard):
		}
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"internal details"}}`)
	}})
	defer up.Close()
	srv := chatServer(t, openaiGateway(t, up.URL, 0), ChatHeartbeat(20*time.Millisecond))
	resp := post(t, srv.URL, `{"model":"openai/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	once := sync.Once{}
	for sc.Scan() && len(lines) < 1000 {
		switch l := sc.Text(); l {
		case "":
		case ": keep-alive":
			once.Do(func() { close(heartbeatSeen) })
		default:
			lines = append(lines, l)
		}
	}
	once.Do(func() { t.Error("no heartbeat seen"); close(heartbeatSeen) })
	if len(lines) != 1 || !jsonContains(t, strings.TrimPrefix(lines[0], "data: "), `{"error":{"type":"api_error","code":"upstream_error"}}`) {
		t.Errorf("stream = %q; want one upstream_error event, no role chunk", lines)
	}
}

// flushRecorder records what a handler flushes, write by write.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushes []string      // the body written since the previous flush, per flush
	flushed chan struct{} // gets a value at each flush
	at      int
}

func (f *flushRecorder) Flush() {
	b := f.Body.String()
	f.flushes = append(f.flushes, b[f.at:])
	f.at = len(b)
	f.ResponseRecorder.Flush()
	f.flushed <- struct{}{}
}

// TestChatStreamBatches: deltas that the upstream sends in one write reach
// the client in one flush, and the gateway flushes before it waits for the
// upstream's next write (which the upstream sends only after that flush).
// The final chunk and [DONE] go with the end of the response.
func TestChatStreamBatches(t *testing.T) {
	rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: make(chan struct{}, 10)}
	up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, batch := range [][]string{{"a ", "b "}, {"c ", "d "}} {
			io.WriteString(w, chunkLine(batch[0])+chunkLine(batch[1]))
			w.(http.Flusher).Flush()
			select {
			case <-rec.flushed:
			case <-time.After(guard):
				return // the gateway did not flush the batch: fails below
			}
		}
		io.WriteString(w, finishLines)
	}})
	defer up.Close()
	h := ChatCompletions(openaiGateway(t, up.URL, 0), nil)
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"openai/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	h.ServeHTTP(rec, req.WithContext(auth.WithPrincipal(req.Context(), auth.Principal{Account: "acct"})))

	var got []string
	for _, f := range rec.flushes {
		var words []string
		for _, w := range []string{"a", "b", "c", "d", "[DONE]"} {
			if strings.Contains(f, `"content":"`+w+` "`) || (w == "[DONE]" && strings.Contains(f, w)) {
				words = append(words, w)
			}
		}
		got = append(got, strings.Join(words, "+"))
	}
	if want := []string{"a+b", "c+d"}; !slices.Equal(got, want) {
		t.Errorf("flushes carry %q; want %q (body %q)", got, want, rec.Body.String())
	}
	if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
		t.Errorf("body ends %q; want [DONE]", rec.Body.String())
	}
}
