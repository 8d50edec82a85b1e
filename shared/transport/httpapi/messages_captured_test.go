package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/anthropic"
	"github.com/genway/genway/shared/providers/synthetic"
)

// capturedRequest is a request of testdata/messages: what Claude Code
// 2.1.332 or @anthropic-ai/sdk 1.14.0 sent (long strings trimmed).
type capturedRequest struct {
	Source  string            `json:"source"`
	Path    string            `json:"path"`
	Query   string            `json:"query"`
	Headers map[string]string `json:"headers"`
	Body    map[string]any    `json:"body"`
}

func loadCaptured(t *testing.T) map[string]capturedRequest {
	t.Helper()
	files, err := filepath.Glob("testdata/messages/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured requests: %v", err)
	}
	out := map[string]capturedRequest{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c capturedRequest
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = c
	}
	return out
}

// with returns the body with model set to model, as JSON.
func (c capturedRequest) with(model string) string {
	b := map[string]any{}
	for k, v := range c.Body {
		b[k] = v
	}
	b["model"] = model
	j, _ := json.Marshal(b)
	return string(j)
}

// fakeAnthropic is a Messages API upstream: it records each request and
// answers messages with stream (SSE) or message (JSON), count_tokens
// with count.
type fakeAnthropic struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []upstreamRequest
	stream  string
	message string
	count   int
}

type upstreamRequest struct {
	path   string
	header http.Header
	body   map[string]any
}

func newFakeAnthropic(t testing.TB, stream, message string) *fakeAnthropic {
	f := &fakeAnthropic{stream: stream, message: message, count: 64}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("upstream request %q is not JSON: %v", b, err)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, upstreamRequest{r.URL.Path, r.Header.Clone(), body})
		stream, message, count := f.stream, f.message, f.count
		f.mu.Unlock()
		switch {
		case r.URL.Path == "/v1/messages/count_tokens":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]int{"input_tokens": count})
		case body["stream"] == true:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, message)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAnthropic) last(t testing.TB) upstreamRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request reached the upstream")
	}
	return f.reqs[len(f.reqs)-1]
}

// anthropicGateway is a gateway whose anthropic provider talks to f, and
// whose synthetic provider is the real one.
func anthropicGateway(t testing.TB, f *fakeAnthropic) *chat.Gateway {
	return chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{
		"synthetic": synthetic.NewChat(),
		"anthropic": anthropic.New(anthropic.Config{BaseURL: f.srv.URL, APIKey: "sk-ant-test", HTTPClient: f.srv.Client()}),
	}})
}

// TestMessagesCapturedRequests: every request Claude Code and the SDK
// were seen to send is answered, none refused: by a synthetic model
// (which reasons, sees and calls tools), and by an Anthropic model behind
// a fake upstream, which gets it translated whole: its thinking, system
// prompt (the system turn collected into it), cache breakpoints, the
// tools Claude may call (no deferred placeholder), the client's betas.
func TestMessagesCapturedRequests(t *testing.T) {
	f := newFakeAnthropic(t, anthropicThinkingStream, anthropicThinkingMessage)
	srv := messagesServer(t, anthropicGateway(t, f))
	for name, c := range loadCaptured(t) {
		for _, model := range []string{"synthetic/thinker", "anthropic/claude-opus-4-6"} {
			t.Run(name+"/"+model, func(t *testing.T) {
				path := c.Path
				if c.Query != "" {
					path += "?" + c.Query
				}
				resp := postMessages(t, srv.URL, path, c.with(model), c.Headers)
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
				}
				if strings.HasSuffix(c.Path, "/count_tokens") {
					var n struct {
						InputTokens *int `json:"input_tokens"`
					}
					if err := json.Unmarshal(b, &n); err != nil || n.InputTokens == nil || *n.InputTokens <= 0 {
						t.Errorf("count_tokens = %s; want {\"input_tokens\": N}", b)
					}
					return
				}
				if stream, _ := c.Body["stream"].(bool); stream {
					evs := readEvents(t, strings.NewReader(string(b)))
					if len(evs) < 3 || evs[0].name != "message_start" || evs[len(evs)-1].name != "message_stop" {
						t.Fatalf("events = %v; want message_start ... message_stop", evs)
					}
				} else {
					var m messageObject
					if err := json.Unmarshal(b, &m); err != nil || m.Type != "message" || m.StopReason == nil {
						t.Fatalf("answer = %s; want a Message", b)
					}
				}
				if model == "anthropic/claude-opus-4-6" {
					checkUpstream(t, c, f.last(t))
				}
			})
		}
	}
}

// checkUpstream checks the Anthropic upstream's request for captured
// request c.
func checkUpstream(t *testing.T, c capturedRequest, got upstreamRequest) {
	t.Helper()
	b := got.body
	if b["model"] != "claude-opus-4-6" {
		t.Errorf("upstream model = %v", b["model"])
	}
	if beta := c.Headers["anthropic-beta"]; beta != "" && got.header.Get("anthropic-beta") != strings.ReplaceAll(beta, " ", "") {
		t.Errorf("upstream anthropic-beta = %q; want the client's %q", got.header.Get("anthropic-beta"), beta)
	}
	if th, ok := c.Body["thinking"].(map[string]any); ok && th["type"] != "disabled" {
		want := map[string]any{"type": "adaptive"}
		if d, ok := th["display"]; ok {
			want["display"] = d
		}
		if th, _ := b["thinking"].(map[string]any); !jsonEqual(th, want) {
			t.Errorf("upstream thinking = %v; want %v", th, want)
		}
	}
	if _, ok := c.Body["system"]; ok && b["system"] == nil {
		t.Errorf("upstream has no system prompt")
	}
	// Turns alternate, user first; no role system among them.
	msgs, _ := b["messages"].([]any)
	for i, m := range msgs {
		role := m.(map[string]any)["role"]
		if want := []string{"user", "assistant"}[i%2]; role != want {
			t.Errorf("upstream messages[%d].role = %v; want %s", i, role, want)
		}
	}
	// Claude's tools are the client's, less the deferred ones nothing loaded.
	var want, offered []string
	loaded := strings.Contains(c.Source, "toolsearch/002")
	tools, _ := c.Body["tools"].([]any)
	for _, tl := range tools {
		tm := tl.(map[string]any)
		if d, _ := tm["defer_loading"].(bool); !d || (loaded && tm["name"] == "WebFetch") {
			want = append(want, tm["name"].(string))
		}
	}
	if ts, ok := b["tools"].([]any); ok {
		for _, tl := range ts {
			offered = append(offered, tl.(map[string]any)["name"].(string))
		}
	}
	if !slices.Equal(offered, want) {
		t.Errorf("upstream tools = %v; want %v", offered, want)
	}
	// Breakpoints: at most 4, as the API takes.
	if n := strings.Count(mustJSON(b), `"cache_control"`); n > 4 {
		t.Errorf("upstream request has %d cache breakpoints", n)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonEqual(a, b any) bool { return mustJSON(a) == mustJSON(b) }
