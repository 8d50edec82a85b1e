package anthropic

// Tool use and structured output, against the fake upstream of
// anthropic_test.go, following the documented wire format:
//   - tools, tool_choice (auto, any, tool, none, disable_parallel_tool_use),
//     tool_use and tool_result blocks (results first in their user turn),
//     stop_reason tool_use, parallel calls:
//     https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
//     (testdata/message_tool_use.json follows its response example, with a
//     second, parallel call)
//   - streamed tool_use blocks (content_block_start, input_json_delta with
//     partial_json, an empty first piece): the "Streaming request with tool
//     use" example of https://docs.anthropic.com/en/docs/build-with-claude/streaming
//     (testdata/stream_tools.sse, with a second call that has no input)
//   - metadata.user_id: https://docs.anthropic.com/en/api/messages
//   - forced tool use refused with extended thinking, thinking blocks to be
//     echoed in a tool-use loop:
//     https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking,
//     https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/chat"
)

const weatherSchema = `{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`

var (
	weatherTool = chat.Tool{Name: "get_weather", Description: "Get the current weather", Parameters: json.RawMessage(weatherSchema)}
	timeTool    = chat.Tool{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{}}`), Strict: true}
	// The tools as the upstream must receive them.
	wireTools = `"tools":[
		{"name":"get_weather","description":"Get the current weather","input_schema":` + weatherSchema + `},
		{"name":"get_time","input_schema":{"type":"object","properties":{}}}]`
	hiMessages = `"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]`
)

// toolLoop is a conversation in the middle of a tool-use loop: the
// assistant called two tools, both answered.
func toolLoop() []chat.Message {
	return []chat.Message{
		{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Be brief."}}},
		user("Weather and time in Paris?"),
		{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Let me check."}}, ToolCalls: []chat.ToolCall{
			{ID: "toolu_1", Name: "get_weather", Arguments: `{"location": "Paris"}`},
			{ID: "toolu_2", Name: "get_time", Arguments: ""},
		}},
		{Role: chat.RoleTool, ToolCallID: "toolu_1", ToolName: "get_weather", Parts: []chat.Part{{Text: "18C, "}, {Text: "fog"}}},
		{Role: chat.RoleTool, ToolCallID: "toolu_2", ToolName: "get_time", Parts: []chat.Part{{Text: "14:05"}}},
	}
}

const wireToolLoop = `"system":"Be brief.","messages":[
	{"role":"user","content":[{"type":"text","text":"Weather and time in Paris?"}]},
	{"role":"assistant","content":[{"type":"text","text":"Let me check."},
		{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}},
		{"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]},
	{"role":"user","content":[
		{"type":"tool_result","tool_use_id":"toolu_1","content":"18C, fog"},
		{"type":"tool_result","tool_use_id":"toolu_2","content":"14:05"}]}]`

func TestToolRequestShape(t *testing.T) {
	tools := []chat.Tool{weatherTool, timeTool}
	tests := []bodyCase{
		{
			name: "tools, default choice: no tool_choice",
			req:  &chat.Request{Model: small, Tools: tools, Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,` + hiMessages + `}`,
		},
		{
			name: "tool_choice auto, parallel calls allowed",
			req: &chat.Request{Model: small, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolAuto},
				ParallelToolCalls: ptr(true), Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,` + hiMessages + `}`,
		},
		{
			name: "parallel_tool_calls false",
			req:  &chat.Request{Model: small, Tools: tools, ParallelToolCalls: ptr(false), Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,"tool_choice":{"type":"auto","disable_parallel_tool_use":true},` + hiMessages + `}`,
		},
		{
			name: "tool_choice none",
			req: &chat.Request{Model: small, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolNone},
				ParallelToolCalls: ptr(false), Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,"tool_choice":{"type":"none"},` + hiMessages + `}`,
		},
		{
			name: "tool_choice required",
			req: &chat.Request{Model: small, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolRequired},
				Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,"tool_choice":{"type":"any"},` + hiMessages + `}`,
		},
		{
			name: "tool_choice function, one call",
			req: &chat.Request{Model: small, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolFunction, Name: "get_time"},
				ParallelToolCalls: ptr(false), Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,"tool_choice":{"type":"tool","name":"get_time","disable_parallel_tool_use":true},` + hiMessages + `}`,
		},
		{
			name: "tool_choice without tools is dropped",
			req: &chat.Request{Model: small, ToolChoice: chat.ToolChoice{Mode: chat.ToolNone}, ParallelToolCalls: ptr(false),
				Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,` + hiMessages + `}`,
		},
		{
			name: "tool turns: calls, results merged into one user turn",
			req:  &chat.Request{Model: small, Tools: tools, Messages: toolLoop()},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,` + wireToolLoop + `}`,
		},
		{
			name: "tool results go before user text in their turn",
			req: &chat.Request{Model: small, Tools: tools, Messages: []chat.Message{
				user("Weather?"),
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"location":"Paris"}`}}},
				user("In Celsius please."),
				{Role: chat.RoleTool, ToolCallID: "toolu_1", ToolName: "get_weather", Parts: []chat.Part{{Text: "18C"}}},
				user("Thanks."),
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "It is 18C."}}},
				user("And tomorrow?"),
			}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,"messages":[
				{"role":"user","content":[{"type":"text","text":"Weather?"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},
					{"type":"text","text":"In Celsius please."},{"type":"text","text":"Thanks."}]},
				{"role":"assistant","content":[{"type":"text","text":"It is 18C."}]},
				{"role":"user","content":[{"type":"text","text":"And tomorrow?"}]}]}`,
		},
		{
			name: "empty tool result",
			req: &chat.Request{Model: small, Tools: tools, Messages: []chat.Message{
				user("Time?"),
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "toolu_2", Name: "get_time", Arguments: "{}"}}},
				{Role: chat.RoleTool, ToolCallID: "toolu_2", ToolName: "get_time"},
			}},
			want: `{"model":"small","max_tokens":4096,` + wireTools + `,"messages":[
				{"role":"user","content":[{"type":"text","text":"Time?"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"get_time","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2"}]}]}`,
		},
		{
			name: "user goes to metadata",
			req:  &chat.Request{Model: small, User: "user-42", Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,"metadata":{"user_id":"user-42"},` + hiMessages + `}`,
		},
		{
			name: "thinking kept with tool_choice auto",
			req:  &chat.Request{Model: sonnet, ReasoningEffort: "low", Tools: tools, Messages: []chat.Message{user("hi")}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"thinking":{"type":"enabled","budget_tokens":1024},` +
				wireTools + `,` + hiMessages + `}`,
		},
		{
			name: "thinking dropped when tool use is forced",
			req: &chat.Request{Model: sonnet, ReasoningEffort: "high", Temperature: ptr(0.3), Tools: tools,
				ToolChoice: chat.ToolChoice{Mode: chat.ToolRequired}, Messages: []chat.Message{user("hi")}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":8192,"temperature":0.3,` + wireTools + `,"tool_choice":{"type":"any"},` + hiMessages + `}`,
		},
		{
			name: "adaptive thinking dropped inside a tool-use loop",
			req:  &chat.Request{Model: opus, ReasoningEffort: "medium", Tools: tools, Messages: toolLoop()},
			want: `{"model":"claude-opus-4-6","max_tokens":8192,` + wireTools + `,` + wireToolLoop + `}`,
		},
		{
			name: "adaptive thinking kept once the loop is closed",
			req: &chat.Request{Model: opus, ReasoningEffort: "medium", Tools: tools, Messages: append(toolLoop(),
				chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Foggy, 14:05."}}}, user("Thanks"))},
			want: `{"model":"claude-opus-4-6","max_tokens":8192,"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"},` +
				wireTools + `,` + wireToolLoop[:len(wireToolLoop)-1] + `,
				{"role":"assistant","content":[{"type":"text","text":"Foggy, 14:05."}]},
				{"role":"user","content":[{"type":"text","text":"Thanks"}]}]}`,
		},
		{
			name: "response_format json_schema: a forced tool, thinking dropped",
			req: &chat.Request{Model: sonnet, ReasoningEffort: "low", Messages: []chat.Message{user("hi")},
				ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "weather_report",
					Description: "A weather report", Schema: json.RawMessage(weatherSchema), Strict: true}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":8192,
				"tools":[{"name":"weather_report","description":"A weather report","input_schema":` + weatherSchema + `}],
				"tool_choice":{"type":"tool","name":"weather_report"},` + hiMessages + `}`,
		},
		{
			name: "response_format json_object",
			req: &chat.Request{Model: small, Messages: []chat.Message{user("hi")}, ParallelToolCalls: ptr(false),
				ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONObject}},
			want: `{"model":"small","max_tokens":4096,
				"tools":[{"name":"json","description":"Give your whole answer as this tool's input: a JSON object.","input_schema":{"type":"object"}}],
				"tool_choice":{"type":"tool","name":"json"},` + hiMessages + `}`,
		},
	}
	checkBodies(t, tests)
}

func TestToolRequestRefused(t *testing.T) {
	tests := []struct {
		name string
		req  *chat.Request
	}{
		{"arguments not JSON", &chat.Request{Model: small, Tools: []chat.Tool{weatherTool}, Messages: []chat.Message{
			user("x"), {Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "t", Name: "get_weather", Arguments: `{"location":`}}}}}},
		{"arguments not an object", &chat.Request{Model: small, Tools: []chat.Tool{weatherTool}, Messages: []chat.Message{
			user("x"), {Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "t", Name: "get_weather", Arguments: `["Paris"]`}}}}}},
		{"tools with response_format", &chat.Request{Model: small, Tools: []chat.Tool{weatherTool}, Messages: []chat.Message{user("x")},
			ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONObject}}},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Complete(context.Background(), tt.req)
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest {
				t.Errorf("Complete() = %v; want UpstreamBadRequest", err)
			}
		})
	}
	if len(u.reqs) != 0 {
		t.Errorf("upstream got %d requests; want 0", len(u.reqs))
	}
}

func TestToolComplete(t *testing.T) {
	tests := []struct {
		name string
		file string
		rf   *chat.ResponseFormat
		want chat.Response
	}{
		{
			name: "parallel tool calls",
			file: "message_tool_use.json",
			want: chat.Response{Content: "I'll check the weather and the time in San Francisco.", ToolCalls: []chat.ToolCall{
				{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location":"San Francisco, CA","unit":"celsius"}`},
				{ID: "toolu_01B2c3d4e5f6g7h8i9j0k1l2m", Name: "get_time", Arguments: `{}`},
			}, FinishReason: "tool_calls", Usage: chat.Usage{PromptTokens: 472, CompletionTokens: 91, TotalTokens: 563}},
		},
		{
			name: "structured output: the tool input is the content",
			file: "message_format.json",
			rf:   &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "weather_report", Schema: json.RawMessage(weatherSchema)},
			want: chat.Response{Content: `{"location":"San Francisco, CA","temperature":18,"conditions":["fog","wind"]}`,
				FinishReason: "stop", Usage: chat.Usage{PromptTokens: 510, CompletionTokens: 40, TotalTokens: 550}},
		},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			req := &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}, ResponseFormat: tt.rf}
			if tt.rf == nil {
				req.Tools = []chat.Tool{weatherTool, timeTool}
			}
			got, err := p.Complete(context.Background(), req)
			if err != nil {
				t.Fatalf("Complete() error %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Complete() = %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestToolStream(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		rf         *chat.ResponseFormat
		wantDeltas []chat.Delta
		want       *chat.Response
	}{
		{
			name: "text then two tool calls",
			file: "stream_tools.sse",
			wantDeltas: []chat.Delta{
				{Content: "Okay, let me check."},
				{ToolCall: &chat.ToolCallDelta{Index: 0, ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather"}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `{"location":`}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: ` "San Francisco, CA"}`}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, ID: "toolu_01VbvXkNZbp4xXYRG2vy6uDN", Name: "get_time"}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, Arguments: `{}`}},
			},
			want: &chat.Response{Content: "Okay, let me check.", ToolCalls: []chat.ToolCall{
				{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: `{"location": "San Francisco, CA"}`},
				{ID: "toolu_01VbvXkNZbp4xXYRG2vy6uDN", Name: "get_time", Arguments: `{}`},
			}, FinishReason: "tool_calls", Usage: chat.Usage{PromptTokens: 472, CompletionTokens: 89, TotalTokens: 561}},
		},
		{
			name:       "structured output streamed as content",
			file:       "stream_format.sse",
			rf:         &chat.ResponseFormat{Type: chat.FormatJSONObject},
			wantDeltas: []chat.Delta{{Content: `{"answer": `}, {Content: `42}`}},
			want: &chat.Response{Content: `{"answer": 42}`, FinishReason: "stop",
				Usage: chat.Usage{PromptTokens: 510, CompletionTokens: 12, TotalTokens: 522}},
		},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			req := &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}, ResponseFormat: tt.rf}
			if tt.rf == nil {
				req.Tools = []chat.Tool{weatherTool, timeTool}
			}
			var deltas []chat.Delta
			got, err := p.Stream(context.Background(), req,
				chat.WriterFunc(func(d chat.Delta) error { deltas = appendDelta(deltas, d); return nil }))
			if err != nil {
				t.Fatalf("Stream() error %v", err)
			}
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas:\n%s\nwant:\n%s", deltaList(deltas), deltaList(tt.wantDeltas))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Stream() = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestToolStreamMalformed: a tool_use block must name its call.
func TestToolStreamMalformed(t *testing.T) {
	u := newUpstream(t)
	u.respond(http.StatusOK, []byte("event: content_block_start\n"+
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"","name":"get_time","input":{}}}`+"\n\n"), nil)
	_, err := u.provider().Stream(context.Background(), &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}},
		chat.WriterFunc(func(d chat.Delta) error {
			t.Errorf("delta %+v written", d)
			return nil
		}))
	var ue *chat.UpstreamError
	if !errors.As(err, &ue) || ue.Kind != chat.UpstreamFailed {
		t.Errorf("Stream() = %v; want UpstreamFailed", err)
	}
}

func TestFeatures(t *testing.T) {
	want := chat.Features{Tools: true, ToolChoiceNone: true, ParallelToolCalls: true, ResponseFormat: true, TopK: true}
	if got := New(Config{}).Features(); got != want {
		t.Errorf("Features() = %+v; want %+v", got, want)
	}
}

// deltaList formats deltas one a line, tool call pieces spelled out.
func deltaList(ds []chat.Delta) string {
	var s string
	for _, d := range ds {
		b, _ := json.Marshal(d)
		s += string(b) + "\n"
	}
	return s
}
