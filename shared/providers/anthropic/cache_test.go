package anthropic

// Prompt caching as documented at
// https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching:
// cache_control {"type": "ephemeral"} (optional "ttl": "5m" | "1h") on a
// tool, a system text block, a message's text, image or tool_result
// block; at most 4 in a request.

import (
	"context"
	"net/http"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

var (
	cache5m = &chat.CacheControl{TTL: chat.CacheTTL5m}
	cache1h = &chat.CacheControl{TTL: chat.CacheTTL1h}
)

func TestRequestCacheControl(t *testing.T) {
	tests := []bodyCase{
		{
			name: "system text becomes blocks, each part's breakpoint on its block",
			req: &chat.Request{Model: sonnet, Messages: []chat.Message{
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "You are a coding agent."}, {Text: "<the whole style guide>", Cache: cache1h}}},
				user("Hello"),
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Answer in French."}}},
			}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"system":[
				{"type":"text","text":"You are a coding agent."},
				{"type":"text","text":"<the whole style guide>","cache_control":{"type":"ephemeral","ttl":"1h"}},
				{"type":"text","text":"Answer in French."}],
				"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`,
		},
		{
			name: "text and image blocks of user and assistant turns",
			req: &chat.Request{Model: sonnet, MaxTokens: 50, Messages: []chat.Message{
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Be brief."}}},
				{Role: chat.RoleUser, Parts: []chat.Part{
					{Text: "What is in this image?"},
					{Image: &chat.Image{MediaType: "image/png", Data: []byte("\x89PNG")}, Cache: cache5m},
				}},
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "A cat.", Cache: cache5m}}},
				{Role: chat.RoleUser, Parts: []chat.Part{{Image: &chat.Image{URL: "https://upload.wikimedia.org/a.jpg"}, Cache: cache5m}, {Text: "And this?"}}},
			}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":50,"system":"Be brief.","messages":[
				{"role":"user","content":[{"type":"text","text":"What is in this image?"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="},"cache_control":{"type":"ephemeral"}}]},
				{"role":"assistant","content":[{"type":"text","text":"A cat.","cache_control":{"type":"ephemeral"}}]},
				{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://upload.wikimedia.org/a.jpg"},"cache_control":{"type":"ephemeral"}},
					{"type":"text","text":"And this?"}]}]}`,
		},
		{
			name: "tools, after an assistant's tool calls, a tool result",
			req: &chat.Request{Model: sonnet, MaxTokens: 50,
				Tools: []chat.Tool{
					{Name: "get_weather", Parameters: []byte(`{"type":"object"}`)},
					{Name: "search", Parameters: []byte(`{"type":"object"}`), Cache: cache1h},
				},
				Messages: []chat.Message{
					user("Weather in Paris?"),
					{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Let me look."}}, Cache: cache5m,
						ToolCalls: []chat.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "toolu_2", Name: "get_weather", Arguments: `{"city":"Lyon"}`}}},
					{Role: chat.RoleTool, ToolCallID: "toolu_1", ToolName: "get_weather", Parts: []chat.Part{{Text: "18C, "}, {Text: "sunny", Cache: cache5m}}},
					{Role: chat.RoleTool, ToolCallID: "toolu_2", ToolName: "get_weather", Parts: []chat.Part{{Text: "rain"}}},
				}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":50,
				"tools":[{"name":"get_weather","input_schema":{"type":"object"}},
					{"name":"search","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}],
				"messages":[
				{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},
				{"role":"assistant","content":[{"type":"text","text":"Let me look."},
					{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},
					{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Lyon"},"cache_control":{"type":"ephemeral"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C, sunny","cache_control":{"type":"ephemeral"}},
					{"type":"tool_result","tool_use_id":"toolu_2","content":"rain"}]}]}`,
		},
	}
	checkBodies(t, tests)
}

// TestCacheBetaHeader checks that a request with a one-hour breakpoint
// names the extended cache TTL beta, and one without does not.
func TestCacheBetaHeader(t *testing.T) {
	u := newUpstream(t)
	u.respond(http.StatusOK, fixture(t, "message.json"), nil)
	p := u.provider()
	tests := []struct {
		name  string
		cache *chat.CacheControl
		want  string
	}{
		{"no breakpoint", nil, ""},
		{"five minutes", cache5m, ""},
		{"one hour", cache1h, BetaExtendedCacheTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &chat.Request{Model: sonnet, Messages: []chat.Message{{Role: chat.RoleUser, Parts: []chat.Part{{Text: "hi", Cache: tt.cache}}}}}
			if _, err := p.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := u.last().header.Get("Anthropic-Beta"); got != tt.want {
				t.Errorf("anthropic-beta = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestCacheRules(t *testing.T) {
	got := New(Config{}).CacheRules(&catalog.Model{Upstream: "claude-haiku-4-5"})
	if want := (chat.CacheRules{Breakpoints: 4, Tools: true, TTL1h: true}); got != want {
		t.Errorf("CacheRules() = %+v; want %+v", got, want)
	}
}
