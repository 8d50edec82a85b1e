package bedrock

// Claude's signed reasoning both ways, against the fake runtime of
// bedrock_test.go, in the documented wire format
// (API_runtime_ReasoningContentBlock.html: reasoningText {text,
// signature} or redactedContent (a blob, base64 in JSON);
// API_runtime_ReasoningContentBlockDelta.html: text, signature,
// redactedContent deltas; API_runtime_ToolResultBlock.html: status
// "error"); thinking display and top_k through
// additionalModelRequestFields, as Claude's Messages API takes them
// (claude-messages-extended-thinking.html, model-parameters-anthropic-claude-messages-request-response.html).

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
)

var bashTool = chat.Tool{Name: "Bash", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}

const bashSpec = `{"toolSpec":{"name":"Bash","inputSchema":{"json":{"type":"object","properties":{}}}}}`

// bashLoop is a tool-use loop whose assistant turn carries thoughts.
func bashLoop(thoughts ...chat.Thought) []chat.Message {
	return []chat.Message{
		user("List the files."),
		{Role: chat.RoleAssistant, Thoughts: thoughts, ToolCalls: []chat.ToolCall{{ID: "tooluse_1", Name: "Bash", Arguments: `{"command":"ls"}`}}},
		{Role: chat.RoleTool, ToolCallID: "tooluse_1", ToolName: "Bash", Parts: []chat.Part{{Text: "a.txt"}}},
	}
}

func TestThinkingRequestShape(t *testing.T) {
	signed := chat.Thought{Provider: "anthropic", Text: "Let me think.", Signature: "EqQBsig"}
	redacted := chat.Thought{Provider: "bedrock", Redacted: "AQID"}
	left := []chat.Thought{{Provider: "bedrock", Text: "unsigned"}, {Provider: "gemini", Signature: "g"}, {Provider: "anthropic", Redacted: "not base64!"}}
	call := `{"toolUse":{"toolUseId":"tooluse_1","name":"Bash","input":{"command":"ls"}}}`
	result := `{"role":"user","content":[{"toolResult":{"toolUseId":"tooluse_1","content":[{"text":"a.txt"}]}}]}`
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{
			name: "a loop with signed thinking keeps thinking on, the thoughts first",
			req: &chat.Request{Model: claude, ReasoningEffort: "medium", ReasoningDisplay: "omitted", Tools: []chat.Tool{bashTool},
				Messages: bashLoop(append(left, redacted, signed)...)},
			want: `{"messages":[{"role":"user","content":[{"text":"List the files."}]},
				{"role":"assistant","content":[{"reasoningContent":{"redactedContent":"AQID"}},
					{"reasoningContent":{"reasoningText":{"text":"Let me think.","signature":"EqQBsig"}}},` + call + `]},` + result + `],
				"inferenceConfig":{"maxTokens":8192},"toolConfig":{"tools":[` + bashSpec + `]},
				"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":4096,"display":"omitted"}}}`,
		},
		{
			name: "a loop without signed thinking: none, and no thoughts",
			req:  &chat.Request{Model: claude, ReasoningEffort: "medium", Tools: []chat.Tool{bashTool}, Messages: bashLoop(left...)},
			want: `{"messages":[{"role":"user","content":[{"text":"List the files."}]},
				{"role":"assistant","content":[` + call + `]},` + result + `],
				"inferenceConfig":{"maxTokens":8192},"toolConfig":{"tools":[` + bashSpec + `]}}`,
		},
		{
			name: "thinking off: the thoughts left out",
			req:  &chat.Request{Model: claude, Tools: []chat.Tool{bashTool}, Messages: bashLoop(signed)},
			want: `{"messages":[{"role":"user","content":[{"text":"List the files."}]},
				{"role":"assistant","content":[` + call + `]},` + result + `],
				"inferenceConfig":{"maxTokens":8192},"toolConfig":{"tools":[` + bashSpec + `]}}`,
		},
		{
			name: "the client's budget; top_k without thinking; is_error; ids digested alike",
			req: &chat.Request{Model: claude, MaxTokens: 100, TopK: ptr(3), Tools: []chat.Tool{bashTool}, Messages: []chat.Message{
				user("ls"),
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "functions.Bash:0", Name: "Bash", Arguments: `{}`}}},
				{Role: chat.RoleTool, ToolCallID: "functions.Bash:0", ToolName: "Bash", ToolError: true, Parts: []chat.Part{{Text: "denied"}}},
			}},
			want: `{"messages":[{"role":"user","content":[{"text":"ls"}]},
				{"role":"assistant","content":[{"toolUse":{"toolUseId":"` + chat.SafeCallID("functions.Bash:0") + `","name":"Bash","input":{}}}]},
				{"role":"user","content":[{"toolResult":{"toolUseId":"` + chat.SafeCallID("functions.Bash:0") + `","content":[{"text":"denied"}],"status":"error"}}]}],
				"inferenceConfig":{"maxTokens":100},"toolConfig":{"tools":[` + bashSpec + `]},"additionalModelRequestFields":{"top_k":3}}`,
		},
		{
			name: "budget of the client's",
			req:  &chat.Request{Model: claude, MaxTokens: 32000, ReasoningEffort: "high", ReasoningBudget: 31999, TopK: ptr(3), Messages: []chat.Message{user("x")}},
			want: `{"messages":[{"role":"user","content":[{"text":"x"}]}],"inferenceConfig":{"maxTokens":32000},
				"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":31999}}}`,
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
			if got, want := f.last().body, jsonValue(t, tt.want); !reflect.DeepEqual(got, want) {
				gb, _ := json.Marshal(got)
				t.Errorf("request body = %s\nwant %s", gb, tt.want)
			}
		})
	}

	// top_k is Claude's only.
	_, err := p.Stream(context.Background(), &chat.Request{Model: nova, TopK: ptr(3), Messages: []chat.Message{user("x")}},
		chat.WriterFunc(func(chat.Delta) error { return nil }))
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest || !strings.Contains(ue.Message, "top_k") {
		t.Errorf("Stream(nova, top_k) = %v; want a bad request naming top_k", err)
	}
}

// TestStreamThoughts: a redacted reasoning block is a Thought with its
// bytes in base64, a signed one a Thought with its text and signature,
// each at its contentBlockStop.
func TestStreamThoughts(t *testing.T) {
	f := newFake(t)
	f.set(func(f *fakeBedrock) { f.stream = encodeScript(t, loadScript(t, "stream_redacted.json")) })
	var deltas []chat.Delta
	got, err := f.provider(t).Stream(context.Background(), &chat.Request{Model: claude, Messages: []chat.Message{user("x")}},
		chat.WriterFunc(func(d chat.Delta) error { deltas = append(deltas, d); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	red := chat.Thought{Provider: "bedrock", Redacted: "AQID"}
	signed := chat.Thought{Provider: "bedrock", Text: "Run ls.", Signature: "EqoBsig2"}
	want := []chat.Delta{{Thought: &red}, {Reasoning: "Run ls."}, {Thought: &signed},
		{ToolCall: &chat.ToolCallDelta{ID: "tooluse_1", Name: "Bash"}}, {ToolCall: &chat.ToolCallDelta{Arguments: `{"command":"ls"}`}}}
	if !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %+v; want %+v", deltas, want)
	}
	if wantT := []chat.Thought{red, signed}; !reflect.DeepEqual(got.Thoughts, wantT) || got.FinishReason != chat.FinishToolCalls {
		t.Errorf("Stream() = %+v; want thoughts %+v, finish reason tool_calls", got, wantT)
	}
}
