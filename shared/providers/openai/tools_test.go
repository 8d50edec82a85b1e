package openai

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/chat"
)

// The wire shapes below follow the Chat Completions reference,
// https://platform.openai.com/docs/api-reference/chat/create (tools,
// tool_choice, response_format, assistant tool_calls, tool messages) and
// the function calling guide's streaming section
// (https://platform.openai.com/docs/guides/function-calling#streaming).

func TestToolRequestShape(t *testing.T) {
	weather := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	tests := []struct {
		name string
		req  chat.Request
		want map[string]string // top-level field -> its JSON
	}{
		{"tools auto", chat.Request{Tools: []chat.Tool{{Name: "get_weather", Description: "Weather.", Parameters: weather, Strict: true}}},
			map[string]string{
				"tools":       `[{"function":{"description":"Weather.","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"},"strict":true},"type":"function"}]`,
				"tool_choice": `null`,
			}},
		{"tool choice required, no parallel", chat.Request{Tools: []chat.Tool{{Name: "f", Parameters: weather}}, ToolChoice: chat.ToolChoice{Mode: chat.ToolRequired}, ParallelToolCalls: ptr(false)},
			map[string]string{"tool_choice": `"required"`, "parallel_tool_calls": `false`}},
		{"named tool choice", chat.Request{Tools: []chat.Tool{{Name: "f", Parameters: weather}}, ToolChoice: chat.ToolChoice{Mode: chat.ToolFunction, Name: "f"}},
			map[string]string{"tool_choice": `{"function":{"name":"f"},"type":"function"}`}},
		{"json schema", chat.Request{ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "count", Schema: schema, Strict: true}},
			map[string]string{"response_format": `{"json_schema":{"name":"count","schema":{"properties":{"n":{"type":"integer"}},"type":"object"},"strict":true},"type":"json_schema"}`}},
		{"json object", chat.Request{ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONObject}},
			map[string]string{"response_format": `{"type":"json_object"}`}},
		{"sampling and openai fields", chat.Request{PresencePenalty: ptr(0.5), FrequencyPenalty: ptr(-1.0), LogitBias: map[string]float64{"50256": -100}, User: "u1",
			ServiceTier: "flex", Verbosity: "low", PromptCacheKey: "k", SafetyIdentifier: "s"},
			map[string]string{"presence_penalty": `0.5`, "frequency_penalty": `-1`, "logit_bias": `{"50256":-100}`, "user": `"u1"`,
				"service_tier": `"flex"`, "verbosity": `"low"`, "prompt_cache_key": `"k"`, "safety_identifier": `"s"`}},
		{"tool turns", chat.Request{Messages: []chat.Message{
			text("user", "Weather?"),
			{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{Role: "tool", ToolCallID: "call_1", ToolName: "get_weather", Parts: []chat.Part{{Text: "18C"}}},
		}}, map[string]string{"messages": `[{"content":"Weather?","role":"user"},` +
			`{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"call_1","type":"function"}]},` +
			`{"content":"18C","role":"tool","tool_call_id":"call_1"}]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &upstream{body: `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`}
			srv := httptest.NewServer(up)
			defer srv.Close()
			req := tt.req
			req.Model = model(t, "openai/gpt-4o-mini")
			if req.Messages == nil {
				req.Messages = []chat.Message{text("user", "x")}
			}
			if _, err := New(Config{BaseURL: srv.URL}).Complete(context.Background(), &req); err != nil {
				t.Fatal(err)
			}
			for field, want := range tt.want {
				if got := jsonOf(t, up.gotBody[field]); got != want {
					t.Errorf("%s = %s; want %s", field, got, want)
				}
			}
		})
	}
}

func TestCompleteToolCalls(t *testing.T) {
	up := &upstream{body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}`}
	srv := httptest.NewServer(up)
	defer srv.Close()
	got, err := New(Config{BaseURL: srv.URL}).Complete(context.Background(), &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{text("user", "x")}})
	want := &chat.Response{FinishReason: chat.FinishToolCalls, Usage: chat.Usage{PromptTokens: 20, CompletionTokens: 9, TotalTokens: 29},
		ToolCalls: []chat.ToolCall{{ID: "call_a", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "call_b", Name: "get_time", Arguments: "{}"}}}
	checkResult(t, got, err, want, nil)
	if !reflect.DeepEqual(got.ToolCalls, want.ToolCalls) {
		t.Errorf("tool calls = %+v; want %+v", got.ToolCalls, want.ToolCalls)
	}
}

func TestStreamToolCalls(t *testing.T) {
	up := &upstream{header: map[string]string{"Content-Type": "text/event-stream"}, body: fixture(t, "stream_tools.sse")}
	srv := httptest.NewServer(up)
	defer srv.Close()
	var deltas []chat.Delta
	got, err := New(Config{BaseURL: srv.URL}).Stream(context.Background(), &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{text("user", "x")}},
		chat.WriterFunc(func(d chat.Delta) error { deltas = append(deltas, d); return nil }))
	checkResult(t, got, err, &chat.Response{FinishReason: chat.FinishToolCalls, Usage: chat.Usage{PromptTokens: 20, CompletionTokens: 9, TotalTokens: 29}}, nil)
	want := []chat.Delta{
		{ToolCall: &chat.ToolCallDelta{Index: 0, ID: "call_a", Name: "get_weather"}},
		{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `{"city":`}},
		{ToolCall: &chat.ToolCallDelta{Index: 0, Arguments: `"Paris"}`}},
		{ToolCall: &chat.ToolCallDelta{Index: 1, ID: "call_b", Name: "get_time", Arguments: "{}"}},
	}
	if !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas:\n got %s\nwant %s", jsonOf(t, deltas), jsonOf(t, want))
	}
}
