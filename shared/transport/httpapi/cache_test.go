package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// cachingUpstream is a chat.Provider that takes cache breakpoints by
// Anthropic's rules and records the requests it gets.
type cachingUpstream struct {
	mu  sync.Mutex
	got []*chat.Request
}

func (u *cachingUpstream) CacheRules(*catalog.Model) chat.CacheRules {
	return chat.CacheRules{Breakpoints: 4, Tools: true, TTL1h: true}
}

func (u *cachingUpstream) Complete(_ context.Context, req *chat.Request) (*chat.Response, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, req)
	return &chat.Response{Content: "ok", Usage: chat.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

func (u *cachingUpstream) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	resp, err := u.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := w.Delta(chat.Delta{Content: resp.Content}); err != nil {
		return nil, err
	}
	return resp, w.Flush()
}

func (u *cachingUpstream) last() *chat.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got[len(u.got)-1]
}

// requestBreakpoints lists req's breakpoints: "tools[0] 1h",
// "messages[1].content[0] 5m".
func requestBreakpoints(req *chat.Request) []string {
	var out []string
	for i, t := range req.Tools {
		if t.Cache != nil {
			out = append(out, fmt.Sprintf("tools[%d] %s", i, t.Cache.TTL))
		}
	}
	for i, m := range req.Messages {
		for j, p := range m.Parts {
			if p.Cache != nil {
				out = append(out, fmt.Sprintf("messages[%d].content[%d] %s", i, j, p.Cache.TTL))
			}
		}
		if m.Cache != nil {
			out = append(out, fmt.Sprintf("messages[%d].tool_calls %s", i, m.Cache.TTL))
		}
	}
	return out
}

// TestCacheControlRequests sends cache_control on chat completions and on
// the Responses API (input message parts, a function_call_output's parts,
// tools): the breakpoints reach the provider where the client put them,
// and every refusal names the field of the request as sent.
func TestCacheControlRequests(t *testing.T) {
	up := &cachingUpstream{}
	gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"anthropic": up}})
	srv := apiServer(t, gw)
	const (
		eph   = `"cache_control":{"type":"ephemeral"}`
		eph1h = `"cache_control":{"type":"ephemeral","ttl":"1h"}`
		model = `"model":"anthropic/claude-sonnet-4-5"`
	)
	tool := `{"type":"function","name":"get_weather","parameters":{"type":"object"},` + eph1h + `}`
	tests := []struct {
		name, path, body string
		want             []string // the breakpoints upstream
		lastParts        int      // if set: the parts of the last message upstream
		code, param      string   // or the 400
	}{
		{
			name: "chat", path: "/v1/chat/completions",
			body: `{` + model + `,"tools":[{"type":"function","function":{"name":"get_weather"},` + eph1h + `}],"messages":[
				{"role":"system","content":[{"type":"text","text":"long",` + eph1h + `}]},
				{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b",` + eph + `}]}]}`,
			want: []string{"tools[0] 1h", "messages[0].content[0] 1h", "messages[1].content[1] 5m"},
		},
		{
			name: "responses", path: "/v1/responses",
			body: `{` + model + `,"instructions":"be brief","tools":[` + tool + `],"input":[
				{"role":"developer","content":[{"type":"input_text","text":"long",` + eph1h + `}]},
				{"role":"user","content":[{"type":"input_text","text":"weather?"}]},
				{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"sunny",` + eph + `}]},
				{"role":"user","content":[{"type":"input_text","text":"and"},{"type":"input_text","text":"tomorrow?",` + eph + `}]}]}`,
			// instructions are messages[0]; the function call and its output messages[3] and [4].
			want: []string{"tools[0] 1h", "messages[1].content[0] 1h", "messages[4].content[0] 5m", "messages[5].content[1] 5m"},
		},
		{
			name: "responses, output without breakpoints stays one string", path: "/v1/responses",
			body: `{` + model + `,"input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`,
			lastParts: 1,
		},
		{
			name: "chat, over the limit", path: "/v1/chat/completions",
			body: `{` + model + `,"tools":[{"type":"function","function":{"name":"f"},` + eph + `}],"messages":[{"role":"user","content":[
				{"type":"text","text":"a",` + eph + `},{"type":"text","text":"b",` + eph + `},{"type":"text","text":"c",` + eph + `},{"type":"text","text":"d",` + eph + `}]}]}`,
			code: "invalid_value", param: "messages[0].content[3].cache_control",
		},
		{
			name: "responses, over the limit", path: "/v1/responses",
			body: `{` + model + `,"tools":[` + tool + `],"input":[{"role":"user","content":[
				{"type":"input_text","text":"a",` + eph + `},{"type":"input_text","text":"b",` + eph + `},{"type":"input_text","text":"c",` + eph + `},{"type":"input_text","text":"d",` + eph + `}]}]}`,
			code: "invalid_value", param: "input[0].content[3].cache_control",
		},
		{
			name: "responses, one hour after five minutes", path: "/v1/responses",
			body: `{` + model + `,"input":[{"role":"system","content":[{"type":"input_text","text":"s",` + eph + `}]},{"role":"user","content":[{"type":"input_text","text":"a",` + eph1h + `}]}]}`,
			code: "invalid_value", param: "input[1].content[0].cache_control",
		},
		{
			name: "responses, a bad ttl on an input part", path: "/v1/responses",
			body: `{` + model + `,"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]}`,
			code: "invalid_value", param: "input[0].content[1].cache_control.ttl",
		},
		{
			name: "responses, a bad type on a tool", path: "/v1/responses",
			body: `{` + model + `,"tools":[{"type":"function","name":"f","cache_control":{"type":"forever"}}],"input":"hi"}`,
			code: "invalid_value", param: "tools[0].cache_control.type",
		},
		{
			name: "responses, a bad ttl on an output part", path: "/v1/responses",
			body: `{` + model + `,"input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"a","cache_control":{"type":"ephemeral","ttl":1}}]}]}`,
			code: "invalid_value", param: "input[1].output[0].cache_control.ttl",
		},
		{
			name: "responses, on items", path: "/v1/responses",
			body: `{` + model + `,"input":[{"role":"user","content":"weather?",` + eph1h + `},
				{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
				{"type":"function_call","call_id":"c2","name":"get_weather","arguments":"{}",` + eph + `},
				{"type":"function_call_output","call_id":"c1","output":"sunny",` + eph + `},
				{"type":"function_call_output","call_id":"c2","output":"rainy"}]}`,
			want: []string{"messages[0].content[0] 1h", "messages[1].tool_calls 5m", "messages[2].content[0] 5m"},
		},
		{
			name: "responses, a bad one on a later function call", path: "/v1/responses",
			body: `{` + model + `,"input":[{"role":"user","content":"weather?"},
				{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
				{"type":"function_call","call_id":"c2","name":"get_weather","arguments":"{}","cache_control":{"type":"ephemeral","ttl":"1d"}},
				{"type":"function_call_output","call_id":"c1","output":"sunny"},{"type":"function_call_output","call_id":"c2","output":"rainy"}]}`,
			code: "invalid_value", param: "input[2].cache_control.ttl",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up.mu.Lock()
			up.got = nil
			up.mu.Unlock()
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Error struct {
					Code  string `json:"code"`
					Param string `json:"param"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
				t.Fatal(err)
			}
			if tt.param != "" {
				if resp.StatusCode != 400 || env.Error.Code != tt.code || env.Error.Param != tt.param {
					t.Errorf("POST %s %s = %d %q %q; want 400 %q %q", tt.path, tt.body, resp.StatusCode, env.Error.Code, env.Error.Param, tt.code, tt.param)
				}
				if len(up.got) != 0 {
					t.Errorf("the upstream got %d requests; want none", len(up.got))
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("POST %s %s = %d %+v", tt.path, tt.body, resp.StatusCode, env.Error)
			}
			req := up.last()
			if got := requestBreakpoints(req); !slices.Equal(got, tt.want) {
				t.Errorf("upstream breakpoints %q; want %q", got, tt.want)
			}
			if last := req.Messages[len(req.Messages)-1]; tt.lastParts != 0 && len(last.Parts) != tt.lastParts {
				t.Errorf("the last message upstream has %d parts; want %d", len(last.Parts), tt.lastParts)
			}
		})
	}
}
