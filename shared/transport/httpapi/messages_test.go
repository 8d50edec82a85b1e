package httpapi

// The Messages API's translation, against Anthropic's documented wire
// format (https://docs.anthropic.com/en/api/messages: the request's
// fields and content blocks; .../build-with-claude/streaming: the named
// events; .../api/errors: the envelope and statuses), the types of
// @anthropic-ai/sdk 1.14.0 (resources/messages/messages.d.ts), and the
// requests Claude Code 2.1.332 and the SDK really sent
// (testdata/messages/*.json: captured by the agents research, long
// strings trimmed).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/providers/synthetic"
)

// messagesServer serves the Messages API's routes for account "acct", as
// genway serve mounts them behind auth.
func messagesServer(t testing.TB, gw *chat.Gateway, opts ...ChatOption) *httptest.Server {
	t.Helper()
	withAcct := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), "acct")))
		})
	}
	mux := NewMux(nil,
		Route{Method: http.MethodPost, Pattern: "/v1/messages", Handler: withAcct(Messages(gw, nil, opts...))},
		Route{Method: http.MethodPost, Pattern: "/v1/messages/count_tokens", Handler: withAcct(CountMessageTokens(gw, nil))})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// postMessages posts body to path of url with headers h.
func postMessages(t testing.TB, url, path, body string, h map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// recorder is a chat provider that records each request and answers as
// its inner provider does (synthetic, if nil); it has the features f.
type recorder struct {
	inner chat.Provider
	f     chat.Features
	mu    sync.Mutex
	reqs  []*chat.Request
}

func (r *recorder) Features() chat.Features { return r.f }

// CacheRules takes every breakpoint, as Anthropic does.
func (r *recorder) CacheRules(*catalog.Model) chat.CacheRules {
	return chat.CacheRules{Breakpoints: 4, Tools: true, TTL1h: true}
}

func (r *recorder) record(req *chat.Request) chat.Provider {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if r.inner == nil {
		return synthetic.NewChat()
	}
	return r.inner
}

func (r *recorder) Complete(ctx context.Context, req *chat.Request) (*chat.Response, error) {
	return r.record(req).Complete(ctx, req)
}

func (r *recorder) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	return r.record(req).Stream(ctx, req, w)
}

func (r *recorder) last(t testing.TB) *chat.Request {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("no request reached the provider")
	}
	return r.reqs[len(r.reqs)-1]
}

// describe renders the parts of a chat request the Messages translation
// decides, one line each, for table tests.
func describe(req *chat.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "max %d", req.MaxTokens)
	if req.ReasoningEffort != "" {
		fmt.Fprintf(&b, " effort %s", req.ReasoningEffort)
	}
	if req.ReasoningBudget > 0 || req.ReasoningDisplay != "" {
		fmt.Fprintf(&b, " budget %d display %q", req.ReasoningBudget, req.ReasoningDisplay)
	}
	if req.Temperature != nil {
		fmt.Fprintf(&b, " temperature %g", *req.Temperature)
	}
	if req.TopK != nil {
		fmt.Fprintf(&b, " top_k %d", *req.TopK)
	}
	if len(req.Stop) > 0 {
		fmt.Fprintf(&b, " stop %q", req.Stop)
	}
	if req.User != "" {
		fmt.Fprintf(&b, " user %q", req.User)
	}
	if len(req.APIHeaders) > 0 {
		fmt.Fprintf(&b, " headers %v", req.APIHeaders)
	}
	if rf := req.ResponseFormat; rf != nil {
		fmt.Fprintf(&b, " format %s %s %s", rf.Type, rf.Name, rf.Schema)
	}
	b.WriteString("\n")
	for _, m := range req.Messages {
		b.WriteString(m.Role + ":")
		for _, th := range m.Thoughts {
			fmt.Fprintf(&b, " thought(%s %q sig=%q red=%q)", th.Provider, th.Text, th.Signature, th.Redacted)
		}
		for _, p := range m.Parts {
			switch {
			case p.Image != nil && p.Image.URL != "":
				fmt.Fprintf(&b, " image(%s)", p.Image.URL)
			case p.Image != nil:
				fmt.Fprintf(&b, " image(%s %d bytes)", p.Image.MediaType, len(p.Image.Data))
			default:
				fmt.Fprintf(&b, " %q", p.Text)
			}
			if p.Cache != nil {
				fmt.Fprintf(&b, "[cache %s]", p.Cache.TTL)
			}
		}
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, " call(%s %s %s", tc.ID, tc.Name, tc.Arguments)
			if tc.Signature != "" {
				fmt.Fprintf(&b, " signed %s %s", tc.SignedBy, tc.Signature)
			}
			b.WriteString(")")
		}
		if m.Cache != nil {
			fmt.Fprintf(&b, " [cache %s]", m.Cache.TTL)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " answers %s", m.ToolCallID)
		}
		if m.ToolError {
			b.WriteString(" error")
		}
		b.WriteString("\n")
	}
	for _, tl := range req.Tools {
		fmt.Fprintf(&b, "tool %s %s", tl.Name, tl.Parameters)
		if tl.Cache != nil {
			fmt.Fprintf(&b, " [cache %s]", tl.Cache.TTL)
		}
		b.WriteString("\n")
	}
	if req.ToolChoice.Mode != "" {
		fmt.Fprintf(&b, "choice %s %s\n", req.ToolChoice.Mode, req.ToolChoice.Name)
	}
	if req.ParallelToolCalls != nil {
		fmt.Fprintf(&b, "parallel %v\n", *req.ParallelToolCalls)
	}
	return b.String()
}

// pixel is a 1x1 PNG, base64.
const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="

// TestMessagesTranslation: what the model's provider is asked for a
// Messages request, field by field.
func TestMessagesTranslation(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		want    string
	}{
		{
			name: "system string, user string",
			body: `{"model":"synthetic/thinker","max_tokens":100,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`,
			want: "max 100\nsystem: \"Be brief.\"\nuser: \"Hi\"\n",
		},
		{
			name: "system blocks with cache_control, a system turn among messages, the request's cache_control on the last block",
			body: `{"model":"synthetic/thinker","max_tokens":100,"cache_control":{"type":"ephemeral"},
				"system":[{"type":"text","text":"billing"},{"type":"text","text":"You are Claude.","cache_control":{"type":"ephemeral","ttl":"1h"}}],
				"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]},
					{"role":"system","content":[{"type":"text","text":"# Environment","cache_control":{"type":"ephemeral"}}],"output_config":{"effort":"medium"}},
					{"role":"user","content":"Go"}]}`,
			want: "max 100\nsystem: \"billing\" \"You are Claude.\"[cache 1h]\nuser: \"Hi\"\nsystem: \"# Environment\"[cache 5m]\nuser: \"Go\"[cache 5m]\n",
		},
		{
			name: "images (base64, URL), text documents, a user turn with tool results first and their images after",
			body: `{"model":"synthetic/thinker","max_tokens":100,"messages":[
				{"role":"user","content":[{"type":"text","text":"Look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pixel + `"}},
					{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},
					{"type":"document","title":"Notes","context":"from the user","source":{"type":"text","media_type":"text/plain","data":"abc"}},
					{"type":"document","source":{"type":"content","content":[{"type":"text","text":"p1"},{"type":"text","text":"p2"}]}}]},
				{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/a.png"}},
					{"type":"tool_use","id":"call_2","name":"Bash","input":{"command":"ls"},"cache_control":{"type":"ephemeral"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"an image:"},
						{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pixel + `"}}]},
					{"type":"text","text":"and?"},
					{"type":"tool_result","tool_use_id":"call_2","content":"denied","is_error":true,"cache_control":{"type":"ephemeral"}}]}]}`,
			want: "max 100\n" +
				"user: \"Look\" image(image/png 67 bytes) image(https://example.com/a.png) \"Notes\\n\\nfrom the user\\n\\nabc\" \"p1\\n\\np2\"\n" +
				"assistant: \"Reading.\" call(toolu_1 Read {\"file_path\":\"/a.png\"}) call(call_2 Bash {\"command\":\"ls\"}) [cache 5m]\n" +
				"tool: \"an image:\" answers toolu_1\n" +
				"tool: \"denied\"[cache 5m] answers call_2 error\n" +
				"user: image(image/png 67 bytes) \"and?\"\n",
		},
		{
			name: "thinking blocks, redacted, unsigned, foreign and a signed call, back as thoughts",
			body: `{"model":"synthetic/thinker","max_tokens":100,"thinking":{"type":"adaptive"},"messages":[
				{"role":"user","content":"Go"},
				{"role":"assistant","content":[{"type":"thinking","thinking":"Hm.","signature":"EqQB"},{"type":"redacted_thinking","data":"EmwK"},
					{"type":"thinking","thinking":"plain","signature":""},{"type":"thinking","thinking":"","signature":"genway:gemini:gsig"},
					{"type":"thinking","thinking":"","signature":"genway:call.gemini:csig"},{"type":"tool_use","id":"call_1","name":"Bash","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"tool_reference","tool_name":"WebFetch"}]}]}]}`,
			want: "max 100 effort high\nuser: \"Go\"\n" +
				"assistant: thought(anthropic \"Hm.\" sig=\"EqQB\" red=\"\") thought(anthropic \"\" sig=\"\" red=\"EmwK\") thought(anthropic \"plain\" sig=\"\" red=\"\") thought(gemini \"\" sig=\"gsig\" red=\"\") call(call_1 Bash {} signed gemini csig)\n" +
				"tool: \"Tool loaded: WebFetch\" answers call_1\n",
		},
		{
			name:    "thinking enabled: its budget and display, the effort by budget; temperature, top_k, stop, user, betas under 2023-06-01",
			headers: map[string]string{"anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14"},
			body: `{"model":"synthetic/thinker","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":2048,"display":"omitted"},
				"temperature":0.5,"top_k":5,"stop_sequences":["END"],"metadata":{"user_id":"{\"device_id\":\"d\"}"},
				"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"service_tier":"auto","inference_geo":"us","speed":"fast",
				"messages":[{"role":"user","content":"Go"}]}`,
			want: "max 8192 effort low budget 2048 display \"omitted\" temperature 0.5 top_k 5 stop [\"END\"] user \"{\\\"device_id\\\":\\\"d\\\"}\" " +
				"headers map[anthropic-beta:interleaved-thinking-2025-05-14 anthropic-version:2023-06-01]\nuser: \"Go\"\n",
		},
		{
			name: "output_config: effort max is high, format a json_schema",
			body: `{"model":"synthetic/thinker","max_tokens":100,"thinking":{"type":"adaptive"},"output_config":{"effort":"max","format":{"type":"json_schema","schema":{"type":"object"}}},
				"messages":[{"role":"user","content":"Go"}]}`,
			want: "max 100 effort high format json_schema output {\"type\":\"object\"}\nuser: \"Go\"\n",
		},
		{
			name: "a model that does not reason gets no thinking",
			body: `{"model":"synthetic/echo","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":4096},"messages":[{"role":"user","content":"Go"}]}`,
			want: "max 100\nuser: \"Go\"\n",
		},
		{
			name: "thinking disabled wins over effort; effort alone is reasoning",
			body: `{"model":"synthetic/thinker","max_tokens":100,"thinking":{"type":"disabled"},"output_config":{"effort":"low"},"messages":[{"role":"user","content":"Go"}]}`,
			want: "max 100\nuser: \"Go\"\n",
		},
		{
			name:    "effort alone is reasoning; the SDK's 2026-10-21 request",
			headers: map[string]string{"anthropic-version": "2026-10-21"},
			body:    `{"model":"synthetic/thinker","max_tokens":100,"output_config":{"effort":"medium"},"messages":[{"role":"user","content":"Go"}]}`,
			want:    "max 100 effort medium headers map[anthropic-version:2026-10-21]\nuser: \"Go\"\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{f: chat.Features{Tools: true, ToolChoiceNone: true, ParallelToolCalls: true, ResponseFormat: true, TopK: true}}
			gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"synthetic": rec}})
			srv := messagesServer(t, gw)
			resp := postMessages(t, srv.URL, "/v1/messages", tt.body, tt.headers)
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("POST /v1/messages = %d %s", resp.StatusCode, b)
			}
			if got := describe(rec.last(t)); got != tt.want {
				t.Errorf("the provider was asked\n%s\nwant\n%s", got, tt.want)
			}
		})
	}

	t.Run("tools", func(t *testing.T) {
		rec := &recorder{f: chat.Features{Tools: true, ToolChoiceNone: true, ParallelToolCalls: true, ResponseFormat: true}}
		gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"synthetic": rec}})
		srv := messagesServer(t, gw)
		tools := `"tools":[
			{"name":"Bash","description":"Run","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},
			{"type":"custom","name":"Read","input_schema":{"type":"object","properties":{}},"strict":true},
			{"name":"WebFetch","input_schema":{"type":"object"},"defer_loading":true},
			{"name":"DeferredToolPlaceholder","input_schema":{"type":"object","properties":{}},"defer_loading":true},
			{"type":"web_search_20250305","name":"web_search","max_uses":3},
			{"type":"code_execution_20250825","name":"code_execution"}]`
		loaded := `[{"role":"user","content":"Fetch"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ToolSearch","input":{"query":"select:WebFetch"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"WebFetch"}]},{"type":"text","text":"Tool loaded."}]}]`
		for _, c := range []struct {
			name, choice, messages string
			want                   string
		}{
			{"not loaded", `{"type":"auto"}`, `[{"role":"user","content":"Go"}]`,
				"tool Bash {\"type\":\"object\"} [cache 5m]\ntool Read {\"type\":\"object\",\"properties\":{}}\nchoice auto \n"},
			{"loaded, forced, one call", `{"type":"tool","name":"WebFetch","disable_parallel_tool_use":true}`, loaded,
				"tool Bash {\"type\":\"object\"} [cache 5m]\ntool Read {\"type\":\"object\",\"properties\":{}}\ntool WebFetch {\"type\":\"object\"}\nchoice function WebFetch\nparallel false\n"},
			{"any", `{"type":"any"}`, `[{"role":"user","content":"Go"}]`,
				"tool Bash {\"type\":\"object\"} [cache 5m]\ntool Read {\"type\":\"object\",\"properties\":{}}\nchoice required \n"},
			{"none", `{"type":"none"}`, `[{"role":"user","content":"Go"}]`,
				"tool Bash {\"type\":\"object\"} [cache 5m]\ntool Read {\"type\":\"object\",\"properties\":{}}\nchoice none \n"},
		} {
			resp := postMessages(t, srv.URL, "/v1/messages", `{"model":"synthetic/thinker","max_tokens":100,"tool_choice":`+c.choice+`,`+tools+`,"messages":`+c.messages+`}`, nil)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: POST /v1/messages = %d %s", c.name, resp.StatusCode, b)
			}
			if got := resp.Header.Get(OmittedToolsHeader); got != "web_search, code_execution" {
				t.Errorf("%s: %s = %q; want the server tools", c.name, OmittedToolsHeader, got)
			}
			got := describe(rec.last(t))
			if _, tail, _ := strings.Cut(got, "\ntool "); "tool "+tail != c.want {
				t.Errorf("%s: tools asked for\n%s\nwant\n%s", c.name, "tool "+tail, c.want)
			}
		}
	})
}

// messagesEvent is one event of a Messages stream: its name and data.
type messagesEvent struct {
	name string
	data map[string]any
}

// readEvents reads a Messages stream; every data line must follow an
// event line that names it (as the SDK needs), comments are skipped.
func readEvents(t testing.TB, body io.Reader) []messagesEvent {
	t.Helper()
	var evs []messagesEvent
	name := ""
	for _, line := range sseLines(t.(*testing.T), body) {
		switch {
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if name == "" {
				t.Fatalf("data line without an event line: %s", line)
			}
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			if d["type"] != name {
				t.Errorf("event %s carries type %v", name, d["type"])
			}
			evs = append(evs, messagesEvent{name, d})
			name = ""
		default:
			t.Fatalf("unexpected stream line %q", line)
		}
	}
	return evs
}

// TestMessagesSynthetic: a whole answer and a stream of synthetic/echo,
// through the handler: the Message object and the event sequence, with
// the model that answered and the usage.
func TestMessagesSynthetic(t *testing.T) {
	srv := messagesServer(t, syntheticGateway(t))
	body := `{"model":"synthetic/echo","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`
	resp := postMessages(t, srv.URL, "/v1/messages?beta=true", body, map[string]string{"anthropic-version": "2023-06-01"})
	var m struct {
		ID, Type, Role, Model string
		Content               []struct{ Type, Text string }
		StopReason            string  `json:"stop_reason"`
		StopSequence          *string `json:"stop_sequence"`
		Usage                 map[string]any
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /v1/messages = %d, %v", resp.StatusCode, err)
	}
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model != "synthetic/echo" ||
		len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text != "You said: hello there" || m.StopReason != "end_turn" {
		t.Errorf("message = %+v", m)
	}
	if resp.Header.Get("request-id") == "" {
		t.Errorf("no request-id header")
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation", "cost"} {
		if _, ok := m.Usage[k]; !ok {
			t.Errorf("usage has no %s: %v", k, m.Usage)
		}
	}

	resp = postMessages(t, srv.URL, "/v1/messages", strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readEvents(t, resp.Body)
	var names []string
	var text strings.Builder
	for _, ev := range evs {
		names = append(names, ev.name)
		if d, ok := ev.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			text.WriteString(d["text"].(string))
		}
	}
	want := []string{"message_start", "content_block_start"}
	for range 4 { // You, said:, hello, there
		want = append(want, "content_block_delta")
	}
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	if !slices.Equal(names, want) || text.String() != "You said: hello there" {
		t.Errorf("events %v, text %q; want %v, %q", names, text.String(), want, "You said: hello there")
	}
	start := evs[0].data["message"].(map[string]any)
	if start["model"] != "synthetic/echo" || !strings.HasPrefix(start["id"].(string), "msg_") {
		t.Errorf("message_start = %v", start)
	}
	md := evs[len(evs)-2].data
	if d := md["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Errorf("message_delta = %v; want stop_reason end_turn", md)
	}
	if u := md["usage"].(map[string]any); u["output_tokens"].(float64) == 0 || u["input_tokens"].(float64) == 0 {
		t.Errorf("message_delta usage = %v; want the answer's counts", u)
	}
}

// TestMessagesAuth: a key in x-api-key or Authorization: Bearer; with
// both, x-api-key's; a bad key is a 401 authentication_error in
// Anthropic's envelope, as is a missing one.
func TestMessagesAuth(t *testing.T) {
	store, err := localstore.Open(filepath.Join(t.TempDir(), "genway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	good := "sk_live_" + strings.Repeat("a", 32)
	bad := "sk_live_" + strings.Repeat("b", 32)
	if err := store.PutKey(context.Background(), auth.NewRecord(auth.Key(good), "acct", time.Now())); err != nil {
		t.Fatal(err)
	}
	authn := auth.NewAuthenticator(store, 0)
	h := Authenticated(authn, nil, nil, Messages(syntheticGateway(t), nil))
	srv := httptest.NewServer(NewMux(nil, Route{Method: http.MethodPost, Pattern: "/v1/messages", Handler: h}))
	t.Cleanup(srv.Close)
	body := `{"model":"synthetic/echo","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"x-api-key", map[string]string{"x-api-key": good}, 200},
		{"bearer", map[string]string{"Authorization": "Bearer " + good}, 200},
		{"both: x-api-key wins", map[string]string{"x-api-key": good, "Authorization": "Bearer " + bad}, 200},
		{"both: x-api-key wins, bad", map[string]string{"x-api-key": bad, "Authorization": "Bearer " + good}, 401},
		{"bad", map[string]string{"x-api-key": bad}, 401},
		{"none", nil, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postMessages(t, srv.URL, "/v1/messages", body, tt.headers)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d %s; want %d", resp.StatusCode, b, tt.status)
			}
			if tt.status == 401 {
				checkEnvelope(t, resp, b, "authentication_error")
			}
		})
	}
}

// checkEnvelope checks an error answer's Anthropic envelope and its
// request id.
func checkEnvelope(t *testing.T, resp *http.Response, body []byte, typ string) anthropicEnvelope {
	t.Helper()
	var e anthropicEnvelope
	if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.Error.Type != typ || e.Error.Message == "" {
		t.Errorf("error body = %s; want Anthropic's envelope of %s", body, typ)
	}
	if rid := resp.Header.Get("request-id"); rid == "" || e.RequestID != rid {
		t.Errorf("request-id header %q, body's %q; want the same", rid, e.RequestID)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return e
}

// TestMessagesErrors: refusals and failures in Anthropic's envelope, with
// its statuses and types, naming the Messages request's field (not the
// chat request's it was translated into).
func TestMessagesErrors(t *testing.T) {
	srv := messagesServer(t, syntheticGateway(t))
	v2026 := map[string]string{"anthropic-version": "2026-10-21"}
	user := func(content string) string {
		return `{"model":"synthetic/echo","max_tokens":100,"messages":[{"role":"user","content":` + content + `}]}`
	}
	tests := []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		typ     string
		prefix  string // how the message begins: the field at fault
	}{
		{"no max_tokens", nil, `{"model":"synthetic/echo","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "max_tokens: "},
		{"unknown model", nil, `{"model":"nope/x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error", "model: "},
		{"temperature under 2026-10-21", v2026, `{"model":"synthetic/echo","max_tokens":5,"temperature":0.2,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "temperature: "},
		{"temperature under a later version", map[string]string{"anthropic-version": "2027-01-01"}, `{"model":"synthetic/echo","max_tokens":5,"top_p":0.9,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "top_p: "},
		{"top_k under 2026-10-21", v2026, `{"model":"synthetic/echo","max_tokens":5,"top_k":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "top_k: "},
		{"top_k to a provider without it", nil, `{"model":"synthetic/echo","max_tokens":5,"top_k":2,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "top_k: "},
		{"temperature over 1", nil, `{"model":"synthetic/echo","max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "temperature: "},
		{"a server tool forced", nil, `{"model":"synthetic/echo","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],
			"tool_choice":{"type":"tool","name":"web_search"},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "tool_choice.name: "},
		{"a PDF", nil, user(`[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]`), 400, "invalid_request_error", "messages[0].content[0].source: "},
		{"an image to a model without vision", nil, user(`[{"type":"text","text":"see"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pixel + `"}}]`),
			400, "invalid_request_error", "messages[0].content[1]: "},
		{"a bad image URL", nil, `{"model":"synthetic/thinker","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"ftp://x"}}]}]}`,
			400, "invalid_request_error", "messages[0].content[0].source: "},
		{"a result of no call", nil, user(`[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]`), 400, "invalid_request_error", "messages[0].content[0].tool_use_id: "},
		{"a bad cache_control on a tool_use", nil, `{"model":"synthetic/echo","max_tokens":5,"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{},"cache_control":{"type":"forever"}}]}]}`,
			400, "invalid_request_error", "messages[1].content[0].cache_control.type: "},
		{"a bad tool name", nil, `{"model":"synthetic/echo","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"a b","input_schema":{"type":"object"}}],
			"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "tools[1].name: "},
		{"a server tool block", nil, `{"model":"synthetic/echo","max_tokens":5,"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}]}]}`, 400, "invalid_request_error", "messages[1].content[0].type: "},
		{"a bad role", nil, `{"model":"synthetic/echo","max_tokens":5,"messages":[{"role":"robot","content":"hi"}]}`, 400, "invalid_request_error", "messages[0].role: "},
		{"a bad thinking type", nil, `{"model":"synthetic/echo","max_tokens":5,"thinking":{"type":"deep"},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "thinking.type: "},
		{"a small budget", nil, `{"model":"synthetic/echo","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":10},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "thinking.budget_tokens: "},
		{"container", nil, `{"model":"synthetic/echo","max_tokens":5,"container":"c1","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "container: "},
		{"an empty turn", nil, user(`[]`), 400, "invalid_request_error", "messages[0].content: "},
		{"the upstream overloaded (503)", nil, user(`"fail:503 now"`), 529, "overloaded_error", ""},
		{"the upstream rate-limits", nil, user(`"fail:429 now"`), 429, "rate_limit_error", ""},
		{"the upstream fails", nil, user(`"fail: now"`), 502, "api_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postMessages(t, srv.URL, "/v1/messages", tt.body, tt.headers)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d %s; want %d", resp.StatusCode, b, tt.status)
			}
			e := checkEnvelope(t, resp, b, tt.typ)
			if !strings.HasPrefix(e.Error.Message, tt.prefix) {
				t.Errorf("message %q; want it to begin %q", e.Error.Message, tt.prefix)
			}
		})
	}

	t.Run("method", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/v1/messages")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 405 {
			t.Fatalf("GET /v1/messages = %d", resp.StatusCode)
		}
		checkEnvelope(t, resp, b, "invalid_request_error")
	})

	t.Run("too large", func(t *testing.T) {
		big := strings.Repeat("a", DefaultTextBodyBytes)
		resp := postMessages(t, srv.URL, "/v1/messages", user(`"`+big+`"`), nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 {
			t.Fatalf("status = %d; want 413", resp.StatusCode)
		}
		checkEnvelope(t, resp, b, "request_too_large")
	})

	t.Run("mid-stream", func(t *testing.T) {
		resp := postMessages(t, srv.URL, "/v1/messages", `{"model":"synthetic/echo","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"fail: now"}]}`, nil)
		evs := readEvents(t, resp.Body)
		if len(evs) < 2 || evs[0].name != "message_start" || evs[len(evs)-1].name != "error" {
			t.Fatalf("events = %v; want message_start ... error", evs)
		}
		e := evs[len(evs)-1].data["error"].(map[string]any)
		if e["type"] != "api_error" || e["message"] == "" {
			t.Errorf("error event = %v; want an api_error", e)
		}
	})
}

// TestAnthropicError: every status Genway answers, in Anthropic's types.
func TestAnthropicError(t *testing.T) {
	tests := []struct {
		status     int
		overloaded bool
		wantStatus int
		typ        string
	}{
		{400, false, 400, "invalid_request_error"}, {401, false, 401, "authentication_error"}, {402, false, 402, "billing_error"},
		{403, false, 403, "permission_error"}, {404, false, 404, "not_found_error"}, {405, false, 405, "invalid_request_error"},
		{413, false, 413, "request_too_large"}, {415, false, 415, "invalid_request_error"}, {429, false, 429, "rate_limit_error"},
		{500, false, 500, "api_error"}, {502, false, 502, "api_error"}, {503, false, 503, "api_error"},
		{503, true, 529, "overloaded_error"}, {504, false, 504, "timeout_error"},
	}
	for _, tt := range tests {
		param := "tools[0].name"
		status, a := anthropicError(envelope{Error: errorBody{Message: "bad", Param: &param}, status: tt.status, overloaded: tt.overloaded})
		if status != tt.wantStatus || a.Type != "error" || a.Error.Type != tt.typ || a.Error.Message != "tools[0].name: bad" {
			t.Errorf("anthropicError(%d, overloaded %v) = %d %+v; want %d %s", tt.status, tt.overloaded, status, a, tt.wantStatus, tt.typ)
		}
	}
}

// encodeStream runs deltas through a messagesEncoder (started, ended
// with resp) and returns its events, one "name data" line each.
func encodeStream(t *testing.T, omit bool, deltas []chat.Delta, resp *chat.Response) []string {
	t.Helper()
	e := &messagesEncoder{meta: messageMeta{id: "msg_1", model: "m", omitThinking: omit}}
	b := e.start(nil)
	for _, d := range deltas {
		b = e.delta(b, d)
	}
	b = e.end(b, resp)
	var out []string
	for _, ev := range readEvents(t, bytes.NewReader(b)) {
		if ev.name == "message_start" || ev.name == "message_stop" {
			out = append(out, ev.name)
			continue
		}
		d, _ := json.Marshal(ev.data)
		s := strings.TrimPrefix(string(d), `{`)
		out = append(out, ev.name+" "+s)
	}
	return out
}

// TestMessagesEncoder: how deltas become events: thoughts before and
// after reasoning, redacted, signed by another provider, with the
// thinking text omitted; signed calls; calls streamed interleaved.
func TestMessagesEncoder(t *testing.T) {
	usage := &chat.Response{FinishReason: chat.FinishStop}
	tests := []struct {
		name   string
		omit   bool
		deltas []chat.Delta
		resp   *chat.Response
		want   []string
	}{
		{
			name: "reasoning closed by its signature, then text",
			deltas: []chat.Delta{{Reasoning: "a"}, {Reasoning: "b"}, {Thought: &chat.Thought{Provider: "anthropic", Text: "ab", Signature: "S"}},
				{Content: "hi"}},
			resp: usage,
			want: []string{"message_start",
				`content_block_start "content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}`,
				`content_block_delta "delta":{"thinking":"a","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
				`content_block_delta "delta":{"thinking":"b","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
				`content_block_delta "delta":{"signature":"S","type":"signature_delta"},"index":0,"type":"content_block_delta"}`,
				`content_block_stop "index":0,"type":"content_block_stop"}`,
				`content_block_start "content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}`,
				`content_block_delta "delta":{"text":"hi","type":"text_delta"},"index":1,"type":"content_block_delta"}`,
				`content_block_stop "index":1,"type":"content_block_stop"}`,
				`message_delta "delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta","usage":{"cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost":0,"input_tokens":0,"output_tokens":0}}`,
				"message_stop"},
		},
		{
			name: "redacted, a signature without text, another provider's signature; display omitted",
			omit: true,
			deltas: []chat.Delta{{Thought: &chat.Thought{Provider: "anthropic", Redacted: "R"}},
				{Reasoning: "hidden"}, {Thought: &chat.Thought{Provider: "anthropic", Text: "hidden", Signature: "S"}},
				{Reasoning: "gem"}, {Thought: &chat.Thought{Provider: "gemini", Signature: "G"}}},
			resp: &chat.Response{FinishReason: chat.FinishLength, Usage: chat.Usage{PromptTokens: 10, CachedTokens: 4, CacheWrite1hTokens: 2, CompletionTokens: 5}},
			want: []string{"message_start",
				`content_block_start "content_block":{"data":"R","type":"redacted_thinking"},"index":0,"type":"content_block_start"}`,
				`content_block_stop "index":0,"type":"content_block_stop"}`,
				`content_block_start "content_block":{"signature":"","thinking":"","type":"thinking"},"index":1,"type":"content_block_start"}`,
				`content_block_delta "delta":{"signature":"S","type":"signature_delta"},"index":1,"type":"content_block_delta"}`,
				`content_block_stop "index":1,"type":"content_block_stop"}`,
				`content_block_start "content_block":{"signature":"","thinking":"","type":"thinking"},"index":2,"type":"content_block_start"}`,
				`content_block_delta "delta":{"signature":"genway:gemini:G","type":"signature_delta"},"index":2,"type":"content_block_delta"}`,
				`content_block_stop "index":2,"type":"content_block_stop"}`,
				`message_delta "delta":{"stop_reason":"max_tokens","stop_sequence":null},"type":"message_delta","usage":{"cache_creation":{"ephemeral_1h_input_tokens":2,"ephemeral_5m_input_tokens":0},"cache_creation_input_tokens":2,"cache_read_input_tokens":4,"cost":0,"input_tokens":4,"output_tokens":5}}`,
				"message_stop"},
		},
		{
			name: "a signed call, then a second call streamed interleaved with the first",
			deltas: []chat.Delta{
				{ToolCall: &chat.ToolCallDelta{Index: 0, ID: "call_1", Name: "f", Signature: "GS", SignedBy: "gemini"}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `{"a":`}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, ID: "call_2", Name: "g", Arguments: `{}`}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `1}`}}},
			resp: usage,
			want: []string{"message_start",
				`content_block_start "content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}`,
				`content_block_delta "delta":{"signature":"genway:call.gemini:GS","type":"signature_delta"},"index":0,"type":"content_block_delta"}`,
				`content_block_stop "index":0,"type":"content_block_stop"}`,
				`content_block_start "content_block":{"id":"call_1","input":{},"name":"f","type":"tool_use"},"index":1,"type":"content_block_start"}`,
				`content_block_delta "delta":{"partial_json":"","type":"input_json_delta"},"index":1,"type":"content_block_delta"}`,
				`content_block_delta "delta":{"partial_json":"{\"a\":","type":"input_json_delta"},"index":1,"type":"content_block_delta"}`,
				`content_block_stop "index":1,"type":"content_block_stop"}`,
				`content_block_start "content_block":{"id":"call_2","input":{},"name":"g","type":"tool_use"},"index":2,"type":"content_block_start"}`,
				`content_block_delta "delta":{"partial_json":"","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
				`content_block_delta "delta":{"partial_json":"{}","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
				`content_block_delta "delta":{"partial_json":"1}","type":"input_json_delta"},"index":1,"type":"content_block_delta"}`,
				`content_block_stop "index":2,"type":"content_block_stop"}`,
				`message_delta "delta":{"stop_reason":"tool_use","stop_sequence":null},"type":"message_delta","usage":{"cache_creation":{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":0},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cost":0,"input_tokens":0,"output_tokens":0}}`,
				"message_stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeStream(t, tt.omit, tt.deltas, tt.resp)
			if !slices.Equal(got, tt.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestMessagesThoughtsRoundTrip: the thinking blocks of an answer, sent
// back by the client as they came, are the answer's Thoughts and signed
// calls again, each of its own provider kind.
func TestMessagesThoughtsRoundTrip(t *testing.T) {
	resp := &chat.Response{Reasoning: "r", FinishReason: chat.FinishToolCalls, Thoughts: []chat.Thought{
		{Provider: "anthropic", Text: "r", Signature: "S"}, {Provider: "anthropic", Redacted: "R"},
		{Provider: "gemini", Signature: "G"}, {Provider: "openai", Text: "sum", Signature: "enc"}},
		ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a":1}`, Signature: "CS", SignedBy: "gemini"}}}
	rec := httptest.NewRecorder()
	js := &messageJSONSink{jsonSink: jsonSink{w: rec}, meta: messageMeta{id: "msg_1", model: "m"}}
	if err := js.End(resp); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	rq := &recorder{f: chat.AllFeatures}
	gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"synthetic": rq}})
	srv := messagesServer(t, gw)
	body := `{"model":"synthetic/thinker","max_tokens":100,"messages":[{"role":"user","content":"Go"},{"role":"assistant","content":` + string(m.Content) + `},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"ok"}]}]}`
	if resp := postMessages(t, srv.URL, "/v1/messages", body, nil); resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/messages = %d %s", resp.StatusCode, b)
	}
	a := rq.last(t).Messages[1]
	if !slices.Equal(a.Thoughts, resp.Thoughts) {
		t.Errorf("thoughts sent back = %+v; want %+v", a.Thoughts, resp.Thoughts)
	}
	if len(a.ToolCalls) != 1 || a.ToolCalls[0] != resp.ToolCalls[0] {
		t.Errorf("tool calls sent back = %+v; want %+v", a.ToolCalls, resp.ToolCalls)
	}
}

// TestCountMessageTokens: Anthropic's count for an Anthropic model (the
// request as the adapter would send it), the estimate for another; the
// key's scope applies; nothing is charged.
func TestCountMessageTokens(t *testing.T) {
	f := newFakeAnthropic(t, "", "")
	gw := anthropicGateway(t, f)
	body := func(model string) string {
		return `{"model":"` + model + `","system":"Be brief.","messages":[{"role":"user","content":"hello there"}],
			"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`
	}
	srv := messagesServer(t, gw)
	for _, c := range []struct {
		model string
		want  int
	}{
		{"anthropic/claude-opus-4-6", 64}, // the fake upstream's count
		// The estimate: the system prompt's JSON ("Be brief.", 11 bytes: 3
		// tokens) and the user's (13: 4), 4 a message, the tool's name (3)
		// and schema (17 bytes: 5).
		{"synthetic/echo", 23},
	} {
		resp := postMessages(t, srv.URL, "/v1/messages/count_tokens?beta=true", body(c.model), map[string]string{"anthropic-beta": "token-counting-2024-11-01"})
		var n struct {
			InputTokens int `json:"input_tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || resp.StatusCode != 200 || n.InputTokens != c.want {
			t.Errorf("count_tokens(%s) = %d %+v, %v; want %d", c.model, resp.StatusCode, n, err, c.want)
		}
	}
	up := f.last(t)
	if up.path != "/v1/messages/count_tokens" || up.body["model"] != "claude-opus-4-6" || up.body["max_tokens"] != nil || up.body["system"] != "Be brief." {
		t.Errorf("upstream count_tokens request %s %v", up.path, up.body)
	}

	// A key that may not use the model: 403 permission_error.
	scoped := Route{Method: http.MethodPost, Pattern: "/v1/messages/count_tokens", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := auth.Principal{Account: "acct", KeyID: "key_1", Models: []string{"synthetic/*"}}
		CountMessageTokens(gw, nil).ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})}
	ssrv := httptest.NewServer(NewMux(nil, scoped))
	t.Cleanup(ssrv.Close)
	resp := postMessages(t, ssrv.URL, "/v1/messages/count_tokens", body("anthropic/claude-opus-4-6"), nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 {
		t.Fatalf("count_tokens with a scoped key = %d %s; want 403", resp.StatusCode, b)
	}
	checkEnvelope(t, resp, b, "permission_error")
}

// gatedProvider streams "first", waits for the test to open the gate,
// then "second"; before "first" it waits for the gate too.
type gatedProvider struct{ before, after chan struct{} }

func (g *gatedProvider) Complete(context.Context, *chat.Request) (*chat.Response, error) {
	return nil, fmt.Errorf("not streamed")
}

func (g *gatedProvider) Stream(ctx context.Context, _ *chat.Request, w chat.Writer) (*chat.Response, error) {
	for i, gate := range []chan struct{}{g.before, g.after} {
		select {
		case <-gate:
		case <-time.After(guard):
			return nil, fmt.Errorf("gate %d never opened", i)
		}
		if err := w.Delta(chat.Delta{Content: []string{"first", "second"}[i]}); err != nil {
			return nil, err
		}
		if err := w.Flush(); err != nil {
			return nil, err
		}
	}
	return &chat.Response{FinishReason: chat.FinishStop}, nil
}

// TestMessagesHeartbeat: while the upstream is silent before the first
// token the client gets SSE comments (no event may come before
// message_start for older SDKs); once the message started, Anthropic's
// ping events.
func TestMessagesHeartbeat(t *testing.T) {
	g := &gatedProvider{before: make(chan struct{}), after: make(chan struct{})}
	gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"synthetic": g}})
	srv := messagesServer(t, gw, ChatHeartbeat(20*time.Millisecond))
	resp := postMessages(t, srv.URL, "/v1/messages", `{"model":"synthetic/echo","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"x"}]}`, nil)
	sc := bufio.NewScanner(resp.Body)
	var seen []string
	comment, ping := sync.Once{}, sync.Once{}
	for sc.Scan() && len(seen) < 1000 {
		l := sc.Text()
		switch {
		case l == ": keep-alive":
			if len(seen) > 0 {
				t.Errorf("a comment after %v; want pings once the message started", seen)
			}
			comment.Do(func() { close(g.before) })
			continue
		case l == "event: ping":
			ping.Do(func() { close(g.after) })
		}
		if strings.HasPrefix(l, "event: ") && (len(seen) == 0 || seen[len(seen)-1] != l) {
			seen = append(seen, strings.TrimPrefix(l, "event: "))
		}
	}
	comment.Do(func() { t.Error("no comment before the first token"); close(g.before) })
	ping.Do(func() { t.Error("no ping after message_start"); close(g.after) })
	if len(seen) < 4 || seen[0] != "message_start" || !slices.Contains(seen, "ping") || seen[len(seen)-1] != "message_stop" {
		t.Errorf("events = %v; want message_start, ..., ping, ..., message_stop", seen)
	}
}

// FuzzMessagesRequest feeds arbitrary bodies to the Messages decoder: it
// must not panic, and every refusal is an *apierr.Error whose param,
// rewritten to the Messages request's, does not panic either.
func FuzzMessagesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"genway:call.gemini:x"},{"type":"tool_use","id":"a","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_reference","tool_name":"g"},{"type":"image","source":{"type":"url","url":"u"}}]}]}],
			"tools":[{"name":"g","input_schema":{},"defer_loading":true},{"type":"web_search_20250305","name":"w"}],"tool_choice":{"type":"tool","name":"w"},
			"thinking":{"type":"enabled","budget_tokens":2048},"output_config":{"effort":"max","format":{"type":"json_schema","schema":{}}}}`,
		`{"messages":[{"role":"system","content":[{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"}]}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var mr messagesRequest
		if json.Unmarshal(body, &mr) != nil {
			return
		}
		h := http.Header{"Anthropic-Version": {"2026-10-21"}}
		_, tr, err := mr.chatParams(h)
		if err != nil {
			if apierr.As(err) == nil {
				t.Fatalf("chatParams error %v is not an *apierr.Error", err)
			}
			tr.param(err)
		}
		for _, p := range []string{"messages[0].content[1].image_url.url", "messages[3].tool_calls[0].function.name", "tools[0].function.parameters", "messages[9]"} {
			tr.param(&apierr.Error{Kind: apierr.Invalid, Param: p})
		}
	})
}
