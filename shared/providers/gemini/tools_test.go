package gemini

// Tool calling and structured output against the documented wire format:
//   - tools, toolConfig, functionCall / functionResponse parts:
//     https://ai.google.dev/gemini-api/docs/function-calling (REST examples:
//     tools [{functionDeclarations: [{name, description, parameters or
//     parametersJsonSchema}]}], toolConfig.functionCallingConfig {mode
//     AUTO|ANY|NONE, allowedFunctionNames}, model parts {functionCall: {name,
//     args}}, user parts {functionResponse: {name, response}}) and
//     https://ai.google.dev/api/caching#Tool (FunctionCall.id,
//     FunctionResponse.id).
//   - structured output: https://ai.google.dev/gemini-api/docs/structured-output
//     (generationConfig.responseMimeType "application/json" and
//     responseJsonSchema; the JSON comes back as text parts).
//   - generationConfig.presencePenalty / frequencyPenalty / seed:
//     https://ai.google.dev/api/generate-content#generationconfig
//   - thoughtSignature on parts (kept, and sent back where it came):
//     https://ai.google.dev/gemini-api/docs/thought-signatures

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/genway/genway/shared/chat"
)

var weatherTool = chat.Tool{Name: "get_weather", Description: "Current weather for a city.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}`)}

var timeTool = chat.Tool{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}

const toolsJSON = `"tools":[{"functionDeclarations":[
	{"name":"get_weather","description":"Current weather for a city.","parametersJsonSchema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}},
	{"name":"get_time","parametersJsonSchema":{"type":"object","properties":{}}}]}]`

func TestFeatures(t *testing.T) {
	var fp chat.FeatureProvider = New(Config{})
	want := chat.Features{Tools: true, ToolChoiceNone: true, ResponseFormat: true, Seed: true, Penalties: true}
	if got := fp.Features(); got != want {
		t.Errorf("Features() = %+v; want %+v", got, want)
	}
}

func TestToolRequestShape(t *testing.T) {
	tools := []chat.Tool{weatherTool, timeTool}
	tests := []bodyCase{
		{
			name: "tools, auto by default",
			req:  &chat.Request{Model: flash, Tools: tools, Messages: []chat.Message{user("Weather in Paris?")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]}],` + toolsJSON + `}`,
		},
		{
			name: "tool_choice auto",
			req:  &chat.Request{Model: flash, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolAuto}, Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],` + toolsJSON + `}`,
		},
		{
			name: "tool_choice none",
			req:  &chat.Request{Model: flash, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolNone}, Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],` + toolsJSON + `,
				"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`,
		},
		{
			name: "tool_choice required",
			req:  &chat.Request{Model: flash, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolRequired}, Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],` + toolsJSON + `,
				"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`,
		},
		{
			name: "tool_choice function",
			req: &chat.Request{Model: flash, Tools: tools, ToolChoice: chat.ToolChoice{Mode: chat.ToolFunction, Name: "get_time"},
				Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],` + toolsJSON + `,
				"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_time"]}}}`,
		},
		{
			name: "tool turns",
			req: &chat.Request{Model: flash, Tools: tools, Messages: []chat.Message{
				{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Be brief."}}},
				user("Weather in Paris and the time?"),
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Checking."}}, ToolCalls: []chat.ToolCall{
					{ID: "call_abc_0", Name: "get_weather", Arguments: `{"location": "Paris"}`},
					{ID: "call_abc_1", Name: "get_time", Arguments: `{}`},
				}},
				{Role: chat.RoleTool, ToolCallID: "call_abc_0", ToolName: "get_weather", Parts: []chat.Part{{Text: `{"temp": 21, "sky": "clear"}`}}},
				{Role: chat.RoleTool, ToolCallID: "call_abc_1", ToolName: "get_time", Parts: []chat.Part{{Text: "14:05"}}},
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "21°C and clear; it is 14:05."}}},
				user("Thanks. And Tokyo?"),
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "8f2kx1qa", Name: "get_weather", Arguments: `{"location":"Tokyo"}`}}},
				{Role: chat.RoleTool, ToolCallID: "8f2kx1qa", ToolName: "get_weather", Parts: []chat.Part{{Text: "[1, 2]"}}},
				user("Hm?"),
			}},
			want: `{"systemInstruction":{"parts":[{"text":"Be brief."}]},"contents":[
				{"role":"user","parts":[{"text":"Weather in Paris and the time?"}]},
				{"role":"model","parts":[{"text":"Checking."},
					{"functionCall":{"id":"call_abc_0","name":"get_weather","args":{"location":"Paris"}}},
					{"functionCall":{"id":"call_abc_1","name":"get_time","args":{}}}]},
				{"role":"user","parts":[
					{"functionResponse":{"id":"call_abc_0","name":"get_weather","response":{"temp":21,"sky":"clear"}}},
					{"functionResponse":{"id":"call_abc_1","name":"get_time","response":{"result":"14:05"}}}]},
				{"role":"model","parts":[{"text":"21°C and clear; it is 14:05."}]},
				{"role":"user","parts":[{"text":"Thanks. And Tokyo?"}]},
				{"role":"model","parts":[{"functionCall":{"id":"8f2kx1qa","name":"get_weather","args":{"location":"Tokyo"}}}]},
				{"role":"user","parts":[
					{"functionResponse":{"id":"8f2kx1qa","name":"get_weather","response":{"result":"[1, 2]"}}},
					{"text":"Hm?"}]}],` + toolsJSON + `}`,
		},
		{
			// Signed turns go back signed where Gemini put the signatures:
			// a thought with text as a thought part, one without on the last
			// text part, a call's on its functionCall part; what another
			// provider signed goes back unsigned.
			name: "thought signatures",
			req: &chat.Request{Model: flash, Tools: tools, Messages: []chat.Message{
				user("Weather in Paris?"),
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Checking."}},
					Thoughts: []chat.Thought{{Provider: "gemini", Text: "The user wants weather.", Signature: "sig-a"},
						{Provider: "anthropic", Text: "not mine", Signature: "sig-x"}},
					ToolCalls: []chat.ToolCall{
						{ID: "c0", Name: "get_weather", Arguments: `{"location":"Paris"}`, Signature: "sig-b", SignedBy: "gemini"},
						{ID: "c1", Name: "get_time", Arguments: `{}`, Signature: "sig-y", SignedBy: "anthropic"},
					}},
				{Role: chat.RoleTool, ToolCallID: "c0", ToolName: "get_weather", Parts: []chat.Part{{Text: "sunny"}}},
				{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "get_time", Parts: []chat.Part{{Text: "noon"}}},
				{Role: chat.RoleAssistant, Parts: []chat.Part{{Text: "Sunny"}, {Text: " at noon."}},
					Thoughts: []chat.Thought{{Provider: "gemini", Signature: "sig-c"}}},
				user("Thanks."),
			}},
			want: `{"contents":[
				{"role":"user","parts":[{"text":"Weather in Paris?"}]},
				{"role":"model","parts":[{"text":"The user wants weather.","thought":true,"thoughtSignature":"sig-a"},{"text":"Checking."},
					{"functionCall":{"id":"c0","name":"get_weather","args":{"location":"Paris"}},"thoughtSignature":"sig-b"},
					{"functionCall":{"id":"c1","name":"get_time","args":{}}}]},
				{"role":"user","parts":[
					{"functionResponse":{"id":"c0","name":"get_weather","response":{"result":"sunny"}}},
					{"functionResponse":{"id":"c1","name":"get_time","response":{"result":"noon"}}}]},
				{"role":"model","parts":[{"text":"Sunny"},{"text":" at noon.","thoughtSignature":"sig-c"}]},
				{"role":"user","parts":[{"text":"Thanks."}]}],` + toolsJSON + `}`,
		},
		{
			name: "json_object",
			req:  &chat.Request{Model: flash, ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONObject}, Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json"}}`,
		},
		{
			name: "json_schema",
			req: &chat.Request{Model: flash, ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "city", Strict: true,
				Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"population":{"type":"integer"}},"required":["name","population"],"additionalProperties":false}`)},
				Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json",
				"responseJsonSchema":{"type":"object","properties":{"name":{"type":"string"},"population":{"type":"integer"}},"required":["name","population"],"additionalProperties":false}}}`,
		},
		{
			name: "penalties and seed",
			req: &chat.Request{Model: old, PresencePenalty: ptr(0.5), FrequencyPenalty: ptr(-0.25), Seed: ptr(int64(7)),
				Messages: []chat.Message{user("x")}},
			want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"seed":7,"presencePenalty":0.5,"frequencyPenalty":-0.25}}`,
		},
	}
	checkBodies(t, tests)
}

func TestToolRequestRefused(t *testing.T) {
	tests := []struct {
		name    string
		msgs    []chat.Message
		wantMsg string
	}{
		{"arguments not JSON", []chat.Message{user("x"),
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a": `}}}},
			`the arguments of tool call "c1" are not a JSON object`},
		{"arguments not an object", []chat.Message{user("x"),
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c2", Name: "f", Arguments: `[1]`}}}},
			`the arguments of tool call "c2" are not a JSON object`},
		{"tool message without a name", []chat.Message{user("x"),
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c3", Name: "f", Arguments: `{}`}}},
			{Role: chat.RoleTool, ToolCallID: "c3", Parts: []chat.Part{{Text: "ok"}}}},
			`the tool message answering "c3" has no function name`},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Complete(context.Background(), &chat.Request{Model: flash, Messages: tt.msgs})
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) || ue.Kind != chat.UpstreamBadRequest || ue.Message != tt.wantMsg {
				t.Errorf("Complete() = %v; want UpstreamBadRequest %q", err, tt.wantMsg)
			}
		})
	}
	if len(u.reqs) != 0 {
		t.Errorf("upstream got %d requests; want 0", len(u.reqs))
	}
}

func TestCompleteTools(t *testing.T) {
	tests := []struct {
		file string
		want chat.Response
	}{
		{"response_tools.json", chat.Response{Content: "I'll check both cities.", FinishReason: chat.FinishToolCalls,
			ToolCalls: []chat.ToolCall{
				{ID: "call_Xq2laOXkLdSBz7IP2aOa8Qc_0", Name: "get_weather", Arguments: `{"location":"Paris","unit":"celsius"}`, Signature: "CiIBVKhc7oDf", SignedBy: "gemini"},
				{ID: "call_Xq2laOXkLdSBz7IP2aOa8Qc_1", Name: "get_weather", Arguments: `{"location":"Tokyo"}`},
			},
			Usage: chat.Usage{PromptTokens: 40, CompletionTokens: 22, TotalTokens: 62}}},
		{"response_tools_ids.json", chat.Response{FinishReason: chat.FinishToolCalls,
			ToolCalls: []chat.ToolCall{
				{ID: "8f2kx1qa", Name: "list_files", Arguments: `{}`, Signature: "CiIBVKhc7oDf", SignedBy: "gemini"},
				{ID: "p3m9zd7c", Name: "get_time", Arguments: `{}`},
			},
			Usage: chat.Usage{PromptTokens: 30, CompletionTokens: 22, TotalTokens: 52, ReasoningTokens: 12}}},
		{"response_json.json", chat.Response{Content: `{"name": "Paris", "population": 2102650}`, FinishReason: chat.FinishStop,
			Usage: chat.Usage{PromptTokens: 18, CompletionTokens: 14, TotalTokens: 32}}},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			got, err := p.Complete(context.Background(), &chat.Request{Model: flash, Tools: []chat.Tool{weatherTool}, Messages: []chat.Message{user("x")}})
			if err != nil {
				t.Fatalf("Complete() error %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Complete() = %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestStreamTools(t *testing.T) {
	const rid = "call_Xq2laOXkLdSBz7IP2aOa8Qc_"
	tests := []struct {
		file       string
		wantDeltas []chat.Delta
		want       *chat.Response
	}{
		{
			// Two parallel calls in one event, a third in the last one.
			file: "stream_tools.sse",
			wantDeltas: []chat.Delta{
				{Content: "Checking the weather."},
				{ToolCall: &chat.ToolCallDelta{Index: 0, ID: rid + "0", Name: "get_weather", Arguments: `{"location":"Paris","unit":"celsius"}`, Signature: "CiIBVKhc7oDf", SignedBy: "gemini"}},
				{ToolCall: &chat.ToolCallDelta{Index: 1, ID: rid + "1", Name: "get_weather", Arguments: `{"location":"Tokyo"}`}},
				{ToolCall: &chat.ToolCallDelta{Index: 2, ID: rid + "2", Name: "get_time", Arguments: `{"timezone":"Asia/Tokyo"}`}},
			},
			want: &chat.Response{Content: "Checking the weather.", FinishReason: chat.FinishToolCalls,
				ToolCalls: []chat.ToolCall{
					{ID: rid + "0", Name: "get_weather", Arguments: `{"location":"Paris","unit":"celsius"}`, Signature: "CiIBVKhc7oDf", SignedBy: "gemini"},
					{ID: rid + "1", Name: "get_weather", Arguments: `{"location":"Tokyo"}`},
					{ID: rid + "2", Name: "get_time", Arguments: `{"timezone":"Asia/Tokyo"}`},
				},
				Usage: chat.Usage{PromptTokens: 40, CompletionTokens: 30, TotalTokens: 70}},
		},
		{
			file:       "stream_json.sse",
			wantDeltas: []chat.Delta{{Content: `{"name": "Pa`}, {Content: `ris", "population": 2102650}`}},
			want: &chat.Response{Content: `{"name": "Paris", "population": 2102650}`, FinishReason: chat.FinishStop,
				Usage: chat.Usage{PromptTokens: 18, CompletionTokens: 14, TotalTokens: 32}},
		},
	}
	u := newUpstream(t)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u.respond(http.StatusOK, fixture(t, tt.file), nil)
			var deltas []chat.Delta
			got, err := p.Stream(context.Background(), &chat.Request{Model: flash, Messages: []chat.Message{user("x")}},
				chat.WriterFunc(func(d chat.Delta) error { deltas = appendDelta(deltas, d); return nil }))
			if err != nil {
				t.Fatalf("Stream() error %v", err)
			}
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas = %s; want %s", showDeltas(deltas), showDeltas(tt.wantDeltas))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Stream() = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func showDeltas(ds []chat.Delta) string {
	b, _ := json.Marshal(ds)
	return string(b)
}

// TestToolCallIDs checks the ids made for calls Gemini sent without one:
// from the responseId when there is one, unique within the answer.
func TestToolCallIDs(t *testing.T) {
	call := func(id, name, args string) part {
		return part{FunctionCall: &functionCall{ID: id, Name: name, Args: json.RawMessage(args)}}
	}
	tests := []struct {
		name       string
		responseID string
		parts      []part
		want       []chat.ToolCall
	}{
		{"no response id", "", []part{call("", "a", `{"x": 1}`), call("", "b", "")},
			[]chat.ToolCall{{ID: "call_0", Name: "a", Arguments: `{"x":1}`}, {ID: "call_1", Name: "b", Arguments: "{}"}}},
		{"null args", "r1", []part{call("", "a", "null")},
			[]chat.ToolCall{{ID: "call_r1_0", Name: "a", Arguments: "{}"}}},
		{"gemini ids kept", "r1", []part{call("id-1", "a", "{}"), call("", "b", "{}")},
			[]chat.ToolCall{{ID: "id-1", Name: "a", Arguments: "{}"}, {ID: "call_r1_1", Name: "b", Arguments: "{}"}}},
		{"clashes", "", []part{call("call_1", "a", "{}"), call("call_1", "b", "{}"), call("", "c", "{}")},
			[]chat.ToolCall{{ID: "call_1", Name: "a", Arguments: "{}"}, {ID: "call_1_2", Name: "b", Arguments: "{}"}, {ID: "call_2", Name: "c", Arguments: "{}"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st state
			g := &generateResponse{ResponseID: tt.responseID, Candidates: []candidate{{Content: &content{Parts: tt.parts}, FinishReason: "STOP"}}}
			if err := st.add(g, nil); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st.toolCalls, tt.want) {
				t.Errorf("tool calls = %+v; want %+v", st.toolCalls, tt.want)
			}
		})
	}
}

func TestToolResponse(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"temp": 21}`, `{"temp": 21}`},
		{" \n{}\n", " \n{}\n"},
		{"14:05", `{"result":"14:05"}`},
		{"", `{"result":""}`},
		{`[1, 2]`, `{"result":"[1, 2]"}`},
		{`"quoted"`, `{"result":"\"quoted\""}`},
		{`{"broken": `, `{"result":"{\"broken\": "}`},
		{`{"a":1} {"b":2}`, `{"result":"{\"a\":1} {\"b\":2}"}`},
	}
	for _, tt := range tests {
		if got := string(toolResponse(tt.in)); got != tt.want {
			t.Errorf("toolResponse(%q) = %s; want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzToolResponse checks that any tool result becomes a JSON object, and
// that a wrapped one keeps the text.
func FuzzToolResponse(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, "plain", "", "[1]", `{"a":`, " {} "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := toolResponse(in)
		var obj map[string]any
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("toolResponse(%q) = %s, not a JSON object: %v", in, out, err)
		}
		if isJSONObject(in) {
			return
		}
		if r, ok := obj["result"].(string); !ok || len(obj) != 1 || (utf8.ValidString(in) && r != in) {
			t.Errorf("toolResponse(%q) = %s; want {\"result\": text}", in, out)
		}
	})
}

// TestStreamToolsFlushed checks that a tool call delta is flushed like text:
// the writer sees a Flush before the stream waits again.
func TestStreamToolsFlushed(t *testing.T) {
	u := newUpstream(t)
	u.respond(http.StatusOK, fixture(t, "stream_tools.sse"), nil)
	var log []string
	w := &recWriter{log: &log}
	if _, err := u.provider().Stream(context.Background(), &chat.Request{Model: flash, Messages: []chat.Message{user("x")}}, w); err != nil {
		t.Fatal(err)
	}
	s := strings.Join(log, " ")
	if !strings.Contains(s, "tool:get_weather") || !strings.HasSuffix(s, "flush") {
		t.Errorf("writes = %s; want tool deltas followed by a flush", s)
	}
}

type recWriter struct{ log *[]string }

func (w *recWriter) Delta(d chat.Delta) error {
	switch {
	case d.ToolCall != nil:
		*w.log = append(*w.log, "tool:"+d.ToolCall.Name)
	default:
		*w.log = append(*w.log, "text")
	}
	return nil
}

func (w *recWriter) Flush() error { *w.log = append(*w.log, "flush"); return nil }
