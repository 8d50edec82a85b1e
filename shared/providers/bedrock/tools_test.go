package bedrock

// Tool calling and structured outputs, against the fake Bedrock runtime of
// bedrock_test.go, in the documented Converse wire format:
//   - toolConfig {tools: [{toolSpec: {name, description, inputSchema: {json}}}],
//     toolChoice: {auto: {}} | {any: {}} | {tool: {name}}}:
//     https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolConfiguration.html
//     and API_runtime_ToolChoice.html
//   - content blocks {toolUse: {toolUseId, name, input}} and
//     {toolResult: {toolUseId, content: [{text} | {image}]}}, stopReason
//     "tool_use": https://docs.aws.amazon.com/bedrock/latest/userguide/tool-use-inference-call.html
//     and API_runtime_ToolUseBlock.html, API_runtime_ToolResultBlock.html
//   - streamed: contentBlockStart {contentBlockIndex, start: {toolUse:
//     {toolUseId, name}}}, contentBlockDelta {contentBlockIndex, delta:
//     {toolUse: {input: "<piece of JSON text>"}}}, contentBlockStop:
//     API_runtime_ContentBlockStartEvent.html, API_runtime_ToolUseBlockDelta.html
//   - a toolConfig is required when messages hold toolUse/toolResult blocks
//     ("The toolConfig field must be defined when using toolUse and
//     toolResult content blocks").

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
)

var weatherTool = chat.Tool{Name: "get_weather", Description: "Weather of a city.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":100}},"required":["city"]}`)}

var timeTool = chat.Tool{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}

const weatherSpec = `{"toolSpec":{"name":"get_weather","description":"Weather of a city.","inputSchema":{"json":
	{"type":"object","properties":{"city":{"type":"string","maxLength":100}},"required":["city"]}}}}`

const timeSpec = `{"toolSpec":{"name":"get_time","inputSchema":{"json":{"type":"object","properties":{}}}}}`

// toolTurns is a conversation in a tool loop: an assistant message with
// text and two calls, their two results (one empty), and a user message.
func toolTurns() []chat.Message {
	return []chat.Message{
		user("Weather in Paris and Oslo?"),
		{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Checking."}}, ToolCalls: []chat.ToolCall{
			{ID: "tooluse_a", Name: "get_weather", Arguments: `{"city": "Paris", "id": 12345678901234567890}`},
			{ID: "tooluse_b", Name: "get_time", Arguments: ""},
		}},
		{Role: chat.RoleTool, ToolCallID: "tooluse_a", ToolName: "get_weather", Parts: []chat.Part{{Text: "18C, "}, {Text: "sunny"}}},
		{Role: chat.RoleTool, ToolCallID: "tooluse_b", ToolName: "get_time"},
	}
}

const toolTurnsWire = `
	{"role":"user","content":[{"text":"Weather in Paris and Oslo?"}]},
	{"role":"assistant","content":[{"text":"Checking."},
		{"toolUse":{"toolUseId":"tooluse_a","name":"get_weather","input":{"city":"Paris","id":12345678901234567890}}},
		{"toolUse":{"toolUseId":"tooluse_b","name":"get_time","input":{}}}]},
	{"role":"user","content":[
		{"toolResult":{"toolUseId":"tooluse_a","content":[{"text":"18C, sunny"}]}},
		{"toolResult":{"toolUseId":"tooluse_b","content":[{"text":"(no output)"}]}}]}`

func TestFeatures(t *testing.T) {
	var fp chat.FeatureProvider = New(nil)
	want := chat.Features{Tools: true, ResponseFormat: true, TopK: true}
	if got := fp.Features(); got != want {
		t.Errorf("Features() = %+v; want %+v", got, want)
	}
}

func TestToolRequestShape(t *testing.T) {
	personSchema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"born":{"type":"integer"}},"required":["name"]}`)
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{
			name: "tools, auto is the default: no toolChoice",
			req: &chat.Request{Model: nova, Tools: []chat.Tool{weatherTool, timeTool}, ToolChoice: chat.ToolChoice{Mode: chat.ToolAuto},
				Messages: []chat.Message{user("Weather?")}},
			want: `{"messages":[{"role":"user","content":[{"text":"Weather?"}]}],"inferenceConfig":{"maxTokens":5000},
				"toolConfig":{"tools":[` + weatherSpec + `,` + timeSpec + `]}}`,
		},
		{
			name: "tool_choice required is any",
			req: &chat.Request{Model: nova, Tools: []chat.Tool{weatherTool}, ToolChoice: chat.ToolChoice{Mode: chat.ToolRequired},
				Messages: []chat.Message{user("Weather?")}},
			want: `{"messages":[{"role":"user","content":[{"text":"Weather?"}]}],"inferenceConfig":{"maxTokens":5000},
				"toolConfig":{"tools":[` + weatherSpec + `],"toolChoice":{"any":{}}}}`,
		},
		{
			name: "tool_choice function is tool, thinking dropped for a forced tool",
			req: &chat.Request{Model: claude, ReasoningEffort: "high", Temperature: ptr(0.5), Tools: []chat.Tool{weatherTool, timeTool},
				ToolChoice: chat.ToolChoice{Mode: chat.ToolFunction, Name: "get_time"}, Messages: []chat.Message{user("Time?")}},
			want: `{"messages":[{"role":"user","content":[{"text":"Time?"}]}],"inferenceConfig":{"maxTokens":8192,"temperature":0.5},
				"toolConfig":{"tools":[` + weatherSpec + `,` + timeSpec + `],"toolChoice":{"tool":{"name":"get_time"}}}}`,
		},
		{
			name: "tools with auto keep thinking",
			req: &chat.Request{Model: claude, ReasoningEffort: "low", Tools: []chat.Tool{timeTool},
				Messages: []chat.Message{user("Time?")}},
			want: `{"messages":[{"role":"user","content":[{"text":"Time?"}]}],"inferenceConfig":{"maxTokens":8192},
				"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},
				"toolConfig":{"tools":[` + timeSpec + `]}}`,
		},
		{
			name: "tool turns: toolUse blocks, results merged into one user turn, thinking dropped in the tool loop",
			req: &chat.Request{Model: claude, ReasoningEffort: "medium", Tools: []chat.Tool{weatherTool, timeTool},
				Messages: append(toolTurns(), user("And tomorrow?"))},
			want: `{"messages":[` + strings.Replace(toolTurnsWire, `"content":[{"text":"(no output)"}]}}]}`,
				`"content":[{"text":"(no output)"}]}},{"text":"And tomorrow?"}]}`, 1) + `],
				"inferenceConfig":{"maxTokens":8192},
				"toolConfig":{"tools":[` + weatherSpec + `,` + timeSpec + `]}}`,
		},
		{
			name: "tool turns without tools declare the tools used, with an empty object schema",
			req:  &chat.Request{Model: nova, Messages: toolTurns()},
			want: `{"messages":[` + toolTurnsWire + `],"inferenceConfig":{"maxTokens":5000},
				"toolConfig":{"tools":[
					{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object","properties":{}}}}},
					{"toolSpec":{"name":"get_time","inputSchema":{"json":{"type":"object","properties":{}}}}}]}}`,
		},
		{
			name: "tool turns with some tools declare only the others",
			req:  &chat.Request{Model: nova, Tools: []chat.Tool{weatherTool}, Messages: toolTurns()},
			want: `{"messages":[` + toolTurnsWire + `],"inferenceConfig":{"maxTokens":5000},
				"toolConfig":{"tools":[` + weatherSpec + `,
					{"toolSpec":{"name":"get_time","inputSchema":{"json":{"type":"object","properties":{}}}}}]}}`,
		},
		{
			name: "json_schema is a forced tool; thinking dropped",
			req: &chat.Request{Model: claude, ReasoningEffort: "low", Messages: []chat.Message{user("Who wrote the first program?")},
				ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "person", Description: "A person.", Schema: personSchema, Strict: true}},
			want: `{"messages":[{"role":"user","content":[{"text":"Who wrote the first program?"}]}],"inferenceConfig":{"maxTokens":8192},
				"toolConfig":{"tools":[{"toolSpec":{"name":"person","description":"A person.","inputSchema":{"json":` + string(personSchema) + `}}}],
					"toolChoice":{"tool":{"name":"person"}}}}`,
		},
		{
			name: "json_object is a forced tool named json, with the tools of the conversation",
			req: &chat.Request{Model: nova, Messages: toolTurns(),
				ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONObject}},
			want: `{"messages":[` + toolTurnsWire + `],"inferenceConfig":{"maxTokens":5000},
				"toolConfig":{"tools":[
					{"toolSpec":{"name":"json","description":"Give your answer as the input of this tool.","inputSchema":{"json":{"type":"object"}}}},
					{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object","properties":{}}}}},
					{"toolSpec":{"name":"get_time","inputSchema":{"json":{"type":"object","properties":{}}}}}],
					"toolChoice":{"tool":{"name":"json"}}}}`,
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
				wb, _ := json.Marshal(want)
				t.Errorf("request body =\n%s\nwant\n%s", gb, wb)
			}
		})
	}
}

// TestToolNumbers checks that numbers in arguments and schemas reach the
// wire as they were written (no float64 round trip).
func TestToolNumbers(t *testing.T) {
	doc, err := jsonDocument(`{"id": 12345678901234567890, "x": 1.50, "n": [-0.0e1, 7]}`, "{}")
	if err != nil {
		t.Fatal(err)
	}
	b, err := doc.MarshalSmithyDocument()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":12345678901234567890,"n":[-0.0e1,7],"x":1.50}`; string(b) != want {
		t.Errorf("document = %s; want %s", b, want)
	}
}

func TestToolBadInput(t *testing.T) {
	tests := []struct {
		name string
		req  *chat.Request
		want string
	}{
		{"arguments not JSON", &chat.Request{Model: nova, Messages: []chat.Message{user("x"),
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "t1", Name: "f", Arguments: `{"a":`}}}}}, `tool call "t1"`},
		{"arguments not an object", &chat.Request{Model: nova, Messages: []chat.Message{user("x"),
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "t1", Name: "f", Arguments: `[1]`}}}}}, `tool call "t1"`},
		{"tool_choice none with tools", &chat.Request{Model: nova, Tools: []chat.Tool{timeTool},
			ToolChoice: chat.ToolChoice{Mode: chat.ToolNone}, Messages: []chat.Message{user("x")}}, `tool_choice "none"`},
		{"format named like a tool", &chat.Request{Model: nova, Tools: []chat.Tool{timeTool}, Messages: []chat.Message{user("x")},
			ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "get_time", Schema: json.RawMessage(`{"type":"object"}`)}}, "name of a tool"},
		{"empty key in a schema", &chat.Request{Model: nova, Messages: []chat.Message{user("x")},
			Tools: []chat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"":{}}}`)}}}, `tool "f"`},
	}
	f := newFake(t)
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Complete(context.Background(), tt.req)
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest || !strings.Contains(ue.Message, tt.want) {
				t.Errorf("Complete() = %v; want UpstreamBadRequest mentioning %q", err, tt.want)
			}
		})
	}
	if len(f.reqs) != 0 {
		t.Errorf("upstream got %d requests; want 0", len(f.reqs))
	}
}

func TestToolComplete(t *testing.T) {
	tests := []struct {
		file     string
		req      *chat.Request
		want     *chat.Response
		wantTool string // the toolConfig sent, as JSON
	}{
		{
			file: "converse_tools.json",
			req:  &chat.Request{Model: claude, Tools: []chat.Tool{weatherTool, timeTool}, Messages: []chat.Message{user("Weather?")}},
			want: &chat.Response{Content: "Let me check both cities.", FinishReason: "tool_calls",
				ToolCalls: []chat.ToolCall{
					{ID: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", Name: "get_weather", Arguments: `{"city":"Paris","days":3}`},
					{ID: "tooluse_9cWm2Y0bTQOs4lN2sO1cHA", Name: "get_weather", Arguments: `{"city":"Oslo","units":{"temp":"C"}}`},
					{ID: "tooluse_Xq1", Name: "get_time", Arguments: `{}`},
				},
				Usage: chat.Usage{PromptTokens: 400, CompletionTokens: 90, TotalTokens: 490}},
			wantTool: `{"tools":[` + weatherSpec + `,` + timeSpec + `]}`,
		},
		{
			file: "converse_format.json",
			req: &chat.Request{Model: claude, Messages: []chat.Message{user("Who?")},
				ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "person", Schema: json.RawMessage(`{"type":"object"}`)}},
			want: &chat.Response{Content: `{"born":1815,"id":12345678901234567890,"name":"Ada"}`, FinishReason: "stop",
				Usage: chat.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}},
			wantTool: `{"tools":[{"toolSpec":{"name":"person","description":"Give your answer as the input of this tool.",
				"inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"tool":{"name":"person"}}}`,
		},
	}
	f := newFake(t)
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			f.set(func(f *fakeBedrock) { f.converse = b })
			got, err := p.Complete(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Complete() error %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Complete() = %+v; want %+v", got, tt.want)
			}
			req := f.last()
			if want := jsonValue(t, tt.wantTool); !reflect.DeepEqual(req.body["toolConfig"], any(want)) || !strings.HasSuffix(req.path, "/converse") {
				gb, _ := json.Marshal(req.body["toolConfig"])
				t.Errorf("%s toolConfig = %s; want %s", req.path, gb, tt.wantTool)
			}
		})
	}
}

func TestToolStream(t *testing.T) {
	tests := []struct {
		script     string
		req        *chat.Request
		wantDeltas []chat.Delta
		want       *chat.Response
	}{
		{
			script: "stream_tools.json",
			req:    &chat.Request{Model: claude, Tools: []chat.Tool{weatherTool, timeTool}, Messages: []chat.Message{user("Weather?")}},
			wantDeltas: []chat.Delta{
				{Content: "Checking."},
				{ToolCall: &chat.ToolCallDelta{Index: 0, ID: "tooluse_a", Name: "get_weather"}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `{"city": `}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `"Paris"}`}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, ID: "tooluse_b", Name: "get_weather"}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, Arguments: `{"city": "Oslo"}`}},
				{ToolCall: &chat.ToolCallDelta{Index: 2, ID: "tooluse_c", Name: "get_time"}},
				{ToolCall: &chat.ToolCallDelta{Index: 2, Arguments: `{}`}},
			},
			want: &chat.Response{Content: "Checking.", FinishReason: "tool_calls",
				ToolCalls: []chat.ToolCall{
					{ID: "tooluse_a", Name: "get_weather", Arguments: `{"city": "Paris"}`},
					{ID: "tooluse_b", Name: "get_weather", Arguments: `{"city": "Oslo"}`},
					{ID: "tooluse_c", Name: "get_time", Arguments: `{}`},
				},
				Usage: chat.Usage{PromptTokens: 300, CompletionTokens: 60, TotalTokens: 360}},
		},
		{
			// The forced tool's input is the content; a second call of it is dropped.
			script: "stream_format.json",
			req: &chat.Request{Model: claude, Messages: []chat.Message{user("Who?")},
				ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "person", Schema: json.RawMessage(`{"type":"object"}`)}},
			wantDeltas: []chat.Delta{{Content: `{"name": "Ada", `}, {Content: `"born": 1815}`}},
			want: &chat.Response{Content: `{"name": "Ada", "born": 1815}`, FinishReason: "stop",
				Usage: chat.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}},
		},
		{
			// Without response_format a tool named like a format is an ordinary call.
			script: "stream_format.json",
			req: &chat.Request{Model: claude, Messages: []chat.Message{user("Who?")},
				Tools: []chat.Tool{{Name: "person", Parameters: json.RawMessage(`{"type":"object"}`)}}},
			wantDeltas: []chat.Delta{
				{ToolCall: &chat.ToolCallDelta{Index: 0, ID: "tooluse_f1", Name: "person"}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `{"name": "Ada", `}},
				{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `"born": 1815}`}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, ID: "tooluse_f2", Name: "person"}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, Arguments: `{"name": "Bob"}`}},
			},
			want: &chat.Response{FinishReason: "tool_calls",
				ToolCalls: []chat.ToolCall{
					{ID: "tooluse_f1", Name: "person", Arguments: `{"name": "Ada", "born": 1815}`},
					{ID: "tooluse_f2", Name: "person", Arguments: `{"name": "Bob"}`},
				},
				Usage: chat.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120}},
		},
	}
	f := newFake(t)
	p := f.provider(t)
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			f.set(func(f *fakeBedrock) { f.stream = encodeScript(t, loadScript(t, tt.script)) })
			var deltas []chat.Delta
			flushes := 0
			got, err := p.Stream(context.Background(), tt.req, &countingWriter{deltas: &deltas, flushes: &flushes})
			if err != nil {
				t.Fatalf("Stream() error %v", err)
			}
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				gd, _ := json.Marshal(deltas)
				wd, _ := json.Marshal(tt.wantDeltas)
				t.Errorf("deltas = %s; want %s", gd, wd)
			}
			if flushes != len(deltas) {
				t.Errorf("%d flushes for %d deltas; want one each", flushes, len(deltas))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Stream() = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// countingWriter records deltas and counts flushes.
type countingWriter struct {
	deltas  *[]chat.Delta
	flushes *int
}

func (w *countingWriter) Delta(d chat.Delta) error { *w.deltas = append(*w.deltas, d); return nil }
func (w *countingWriter) Flush() error             { *w.flushes++; return nil }
