package bedrock

// Prompt caching in Converse, as documented at
// https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
// and API_runtime_CachePointBlock.html: a {"cachePoint": {"type":
// "default"}} block (with "ttl": "1h" for the hour) after the cached
// content, in system, in a message's content and in toolConfig.tools.

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

var (
	cache5m = &chat.CacheControl{TTL: chat.CacheTTL5m}
	cache1h = &chat.CacheControl{TTL: chat.CacheTTL1h}
)

func TestRequestCachePoints(t *testing.T) {
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{
			name: "system prompt a block per part, a cache point after the marked one",
			req: &chat.Request{Model: claude, MaxTokens: 100, Messages: []chat.Message{
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "You are a coding agent."}, {Text: "<the style guide>", Cache: cache1h}}},
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Answer in French."}}},
				user("Hi"),
			}},
			want: `{"system":[{"text":"You are a coding agent."},{"text":"<the style guide>"},{"cachePoint":{"type":"default","ttl":"1h"}},{"text":"Answer in French."}],
				"messages":[{"role":"user","content":[{"text":"Hi"}]}],"inferenceConfig":{"maxTokens":100}}`,
		},
		{
			name: "text and image blocks, merged turns",
			req: &chat.Request{Model: nova, MaxTokens: 100, Messages: []chat.Message{
				{Role: chat.RoleUser, Parts: []chat.Part{{Text: "What is this?"}, {Image: &chat.Image{MediaType: "image/webp", Data: []byte("RIFF")}, Cache: cache5m}}},
				{Role: chat.RoleUser, Parts: []chat.Part{{Text: "Be brief.", Cache: cache5m}}},
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "A cat.", Cache: cache5m}}},
				user("Thanks"),
			}},
			want: `{"messages":[
				{"role":"user","content":[{"text":"What is this?"},{"image":{"format":"webp","source":{"bytes":"UklGRg=="}}},{"cachePoint":{"type":"default"}},
					{"text":"Be brief."},{"cachePoint":{"type":"default"}}]},
				{"role":"assistant","content":[{"text":"A cat."},{"cachePoint":{"type":"default"}}]},
				{"role":"user","content":[{"text":"Thanks"}]}],
				"inferenceConfig":{"maxTokens":100}}`,
		},
		{
			name: "tools, after an assistant's tool calls, a tool result",
			req: &chat.Request{Model: claude, MaxTokens: 100,
				Tools: []chat.Tool{
					{Name: "get_weather", Parameters: []byte(`{"type":"object"}`), Cache: cache1h},
					{Name: "search", Parameters: []byte(`{"type":"object"}`)},
				},
				Messages: []chat.Message{
					user("Weather in Paris?"),
					{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "t1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Cache: cache5m},
					{Role: chat.RoleTool, ToolCallID: "t1", ToolName: "get_weather", Parts: []chat.Part{{Text: "18C, "}, {Text: "sunny", Cache: cache5m}}},
				}},
			want: `{"messages":[
				{"role":"user","content":[{"text":"Weather in Paris?"}]},
				{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"get_weather","input":{"city":"Paris"}}},{"cachePoint":{"type":"default"}}]},
				{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"18C, sunny"}]}},{"cachePoint":{"type":"default"}}]}],
				"toolConfig":{"tools":[
					{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object"}}}},{"cachePoint":{"type":"default","ttl":"1h"}},
					{"toolSpec":{"name":"search","inputSchema":{"json":{"type":"object"}}}}]},
				"inferenceConfig":{"maxTokens":100}}`,
		},
	}
	f := newFake(t)
	answer, err := os.ReadFile("testdata/converse.json")
	if err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeBedrock) { f.converse = answer })
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.Complete(context.Background(), tt.req); err != nil {
				t.Fatalf("Complete() error %v", err)
			}
			if got, want := f.last().body, jsonValue(t, tt.want); !reflect.DeepEqual(got, want) {
				gb, _ := json.Marshal(got)
				t.Errorf("request body = %s\nwant %s", gb, tt.want)
			}
		})
	}
}

func TestCacheRules(t *testing.T) {
	claudeRules := chat.CacheRules{Breakpoints: 4, Tools: true}
	claude1h := chat.CacheRules{Breakpoints: 4, Tools: true, TTL1h: true}
	tests := []struct {
		upstream string
		want     chat.CacheRules
	}{
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", claude1h},
		{"anthropic.claude-haiku-4-5-20251001-v1:0", claude1h},
		{"global.anthropic.claude-opus-4-6-v1", claude1h},
		{"anthropic.claude-opus-5", claude1h},
		{"us.anthropic.claude-opus-4-1-20250805-v1:0", claudeRules},
		{"us.anthropic.claude-sonnet-4-20250514-v1:0", claudeRules},
		{"anthropic.claude-3-7-sonnet-20250219-v1:0", claudeRules},
		{"us.amazon.nova-lite-v1:0", chat.CacheRules{Breakpoints: 4}},
		{"amazon.nova-pro-v1:0", chat.CacheRules{Breakpoints: 4}},
		{"meta.llama3-3-70b-instruct-v1:0", chat.CacheRules{}},
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc", chat.CacheRules{}},
	}
	p := New(nil)
	for _, tt := range tests {
		if got := p.CacheRules(&catalog.Model{Upstream: tt.upstream}); got != tt.want {
			t.Errorf("CacheRules(%q) = %+v; want %+v", tt.upstream, got, tt.want)
		}
	}
}
