package synthetic

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
)

func TestToolsAndFormats(t *testing.T) {
	weather := chat.Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]},"days":{"type":"integer"}},"required":["city"]}`)}
	clock := chat.Tool{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
	closeAgent := chat.Tool{Name: "multi_agent_v1__close_agent", Parameters: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}`)}
	nested := chat.Tool{Name: "ask", Parameters: json.RawMessage(`{"type":"object","properties":{"questions":{"type":"array"},"note":{"type":"string"},
		"who":{"type":"object","properties":{"id":{"type":"string"},"age":{"type":"integer"}},"required":["id"]}},"required":["questions","who"]}`)}
	user := func(s string) chat.Message { return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Text: s}}} }
	no := false
	tests := []struct {
		name        string
		req         chat.Request
		wantCalls   []chat.ToolCall
		wantContent string
		wantFinish  string
	}{
		{"named in message", chat.Request{Tools: []chat.Tool{weather, clock}, Messages: []chat.Message{user("What is get_weather in Paris?")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "get_weather", Arguments: `{"city":"synthetic"}`}}, "", chat.FinishToolCalls},
		{"two named, parallel", chat.Request{Tools: []chat.Tool{weather, clock}, Messages: []chat.Message{user("get_time and get_weather")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "get_weather", Arguments: `{"city":"synthetic"}`}, {ID: "call_1_1", Name: "get_time", Arguments: `{}`}}, "", chat.FinishToolCalls},
		{"two named, not parallel", chat.Request{Tools: []chat.Tool{weather, clock}, ParallelToolCalls: &no, Messages: []chat.Message{user("get_time and get_weather")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "get_weather", Arguments: `{"city":"synthetic"}`}}, "", chat.FinishToolCalls},
		{"CALL_TOOL with arguments", chat.Request{Tools: []chat.Tool{weather, clock}, Messages: []chat.Message{user(`please CALL_TOOL get_weather {"city": "Paris", "days": 2} now`)}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "get_weather", Arguments: `{"city":"Paris","days":2}`}}, "", chat.FinishToolCalls},
		{"CALL_TOOL twice, in the message's order", chat.Request{Tools: []chat.Tool{weather, clock}, Messages: []chat.Message{user("CALL_TOOL get_time\nCALL_TOOL get_weather")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "get_time", Arguments: `{}`}, {ID: "call_1_1", Name: "get_weather", Arguments: `{"city":"synthetic"}`}}, "", chat.FinishToolCalls},
		{"CALL_TOOL of a tool not offered", chat.Request{Tools: []chat.Tool{weather}, Messages: []chat.Message{user("CALL_TOOL get_weather_forecast")}},
			nil, "You said: CALL_TOOL get_weather_forecast", chat.FinishStop},
		{"CALL_TOOL namespaced", chat.Request{Tools: []chat.Tool{weather, closeAgent}, Messages: []chat.Message{user(`CALL_TOOL multi_agent_v1.close_agent {"target":"a1"}`)}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "multi_agent_v1__close_agent", Arguments: `{"target":"a1"}`}}, "", chat.FinishToolCalls},
		{"namespaced function named", chat.Request{Tools: []chat.Tool{weather, closeAgent}, Messages: []chat.Message{user("call close_agent")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "multi_agent_v1__close_agent", Arguments: `{"target":"synthetic"}`}}, "", chat.FinishToolCalls},
		{"required properties only, nested", chat.Request{Tools: []chat.Tool{nested}, Messages: []chat.Message{user("CALL_TOOL ask")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "ask", Arguments: `{"questions":[],"who":{"id":"synthetic"}}`}}, "", chat.FinishToolCalls},
		{"not named", chat.Request{Tools: []chat.Tool{weather}, Messages: []chat.Message{user("hello")}}, nil, "You said: hello", chat.FinishStop},
		{"required", chat.Request{Tools: []chat.Tool{clock, weather}, ToolChoice: chat.ToolChoice{Mode: chat.ToolRequired}, Messages: []chat.Message{user("hello")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "get_time", Arguments: `{}`}}, "", chat.FinishToolCalls},
		{"function", chat.Request{Tools: []chat.Tool{clock, weather}, ToolChoice: chat.ToolChoice{Mode: chat.ToolFunction, Name: "get_weather"}, Messages: []chat.Message{user("get_time")}},
			[]chat.ToolCall{{ID: "call_1_0", Name: "get_weather", Arguments: `{"city":"synthetic"}`}}, "", chat.FinishToolCalls},
		{"none", chat.Request{Tools: []chat.Tool{weather}, ToolChoice: chat.ToolChoice{Mode: chat.ToolNone}, Messages: []chat.Message{user("get_weather")}}, nil, "You said: get_weather", chat.FinishStop},
		{"tool result", chat.Request{Tools: []chat.Tool{weather}, Messages: []chat.Message{user("get_weather"),
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1_0", Name: "get_weather", Arguments: "{}"}}},
			{Role: chat.RoleTool, ToolCallID: "call_1_0", ToolName: "get_weather", Parts: []chat.Part{{Text: "18 degrees"}}}}},
			nil, "Tool get_weather returned: 18 degrees", chat.FinishStop},
		{"json schema", chat.Request{ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONSchema, Name: "p",
			Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}},"home":{"$ref":"#/$defs/addr"}},"$defs":{"addr":{"type":"object","properties":{"zip":{"type":["string","null"]}}}}}`)},
			Messages: []chat.Message{user("hi")}}, nil, `{"home":{"zip":"synthetic"},"name":"synthetic","tags":[]}`, chat.FinishStop},
		{"json object", chat.Request{ResponseFormat: &chat.ResponseFormat{Type: chat.FormatJSONObject}, Messages: []chat.Message{user("hi there")}},
			nil, `{"answer":"You said: hi there"}`, chat.FinishStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChat()
			got, err := c.Complete(context.Background(), &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.ToolCalls, tt.wantCalls) || got.Content != tt.wantContent || got.FinishReason != tt.wantFinish {
				t.Errorf("Complete = calls %+v content %q finish %q; want %+v %q %q", got.ToolCalls, got.Content, got.FinishReason, tt.wantCalls, tt.wantContent, tt.wantFinish)
			}
			// The stream carries the same answer in pieces.
			var content strings.Builder
			var calls []chat.ToolCall
			sr, err := c.Stream(context.Background(), &tt.req, chat.WriterFunc(func(d chat.Delta) error {
				content.WriteString(d.Content)
				if tc := d.ToolCall; tc != nil {
					if tc.ID != "" {
						calls = append(calls, chat.ToolCall{ID: tc.ID, Name: tc.Name})
					}
					calls[tc.Index].Arguments += tc.Arguments
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(calls, tt.wantCalls) || content.String() != tt.wantContent || sr.FinishReason != tt.wantFinish || sr.Usage != got.Usage {
				t.Errorf("Stream = calls %+v content %q finish %q usage %+v; want %+v %q %q %+v", calls, content.String(), sr.FinishReason, sr.Usage, tt.wantCalls, tt.wantContent, tt.wantFinish, got.Usage)
			}
		})
	}
}
