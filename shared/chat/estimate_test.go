package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMeasureInput: the input's estimate is ceil(bytes/4) of each text
// sent, 765 per image and 4 per message and tool call, never above the
// bound a hold reserves (1 token a byte, 8192 an image, 16 a frame, 1024
// for tools).
func TestMeasureInput(t *testing.T) {
	tests := []struct {
		name                string
		body                string
		wantEstimate, bound int
	}{
		// "hi" as sent, quotes included: 4 bytes, 1 token; 1 message.
		{"one short message", `{"messages":[{"role":"user","content":"hi"}]}`, 1 + 4, 4 + 16},
		// 26 bytes: 7 tokens.
		{"one message", `{"messages":[{"role":"user","content":"hello there, how are you"}]}`, 7 + 4, 26 + 16},
		// Each text rounds up on its own: "a" and "bcdef" are 1 and 2.
		{"texts round up each", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"bcdef"}]}]}`, 1 + 2 + 4, 6 + 16},
		{"an image", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			3 + 765 + 4, 10 + 8192 + 16},
		// A tool call is a frame of its own: name (6 bytes, 2) and
		// arguments (11 bytes, 3); the tool message's call id (2 bytes, 1)
		// and content (8 bytes as sent, 2).
		{"tool turn", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"abc\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"\"ok\""}]}`,
			(1 + 4) + (4 + 4 + 2 + 3) + (1 + 2 + 4), (4 + 16) + (16 + 16 + 6 + 11) + (2 + 8 + 16)},
		// A tool: name (6, 2), description (8, 2), parameters (17, 5);
		// the bound adds the provider's tool prompt.
		{"tools", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"lookup","description":"finds it","parameters":{"type":"object"}}}]}`,
			5 + 2 + 2 + 5, 20 + 6 + 8 + 17 + 1024},
		// The estimate never passes the bound: an empty content string
		// is 2 bytes (1 token) and its message 4 tokens, bound at 18.
		{"bounded", `{"messages":[{"role":"user","content":""}]}`, 1 + 4, 2 + 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Params
			if err := json.Unmarshal([]byte(tt.body), &p); err != nil {
				t.Fatal(err)
			}
			s := measureInput(&p)
			if got := s.estimate(); got != tt.wantEstimate {
				t.Errorf("measureInput(%s).estimate() = %d; want %d", tt.body, got, tt.wantEstimate)
			}
			if got := inputBound(&p); got != tt.bound {
				t.Errorf("inputBound(%s) = %d; want %d", tt.body, got, tt.bound)
			}
			if s.estimate() > inputBound(&p) {
				t.Errorf("measureInput(%s): estimate %d above the bound %d", tt.body, s.estimate(), inputBound(&p))
			}
		})
	}
}

// FuzzMeasureInput: whatever a request sends, its estimate is at most its
// bound (a partial charge never passes what a hold reserves).
func FuzzMeasureInput(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`)
	f.Add(`{"messages":[{"role":"user","content":""}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{}}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		var p Params
		if json.Unmarshal([]byte(body), &p) != nil {
			return
		}
		if s := measureInput(&p); s.estimate() > s.bound() || s.estimate() < 0 {
			t.Errorf("measureInput(%s) = %+v: estimate %d, bound %d", body, s, s.estimate(), s.bound())
		}
	})
}

// TestOutputTokens: the output's estimate is ceil(bytes/4) of the text
// (content and tool calls) plus ceil(bytes/4) of the reasoning, which is
// also the reasoning count, at most max_tokens.
func TestOutputTokens(t *testing.T) {
	call := &ToolCallDelta{Index: 0, ID: "call_1", Name: "lookup", Arguments: `{"q":`}
	tests := []struct {
		name                     string
		deltas                   []Delta
		maxTokens                int
		wantTokens, wantReasoned int
	}{
		{"nothing", nil, 0, 0, 0},
		{"content", []Delta{{Content: "Hello"}, {Content: " world"}, {Content: " again"}}, 0, 5, 0},
		// The id is the provider's, not a token: name 6 and arguments 5 bytes.
		{"tool call", []Delta{{ToolCall: call}}, 0, 3, 0},
		{"reasoning", []Delta{{Reasoning: "Let me think"}, {Content: "Yes"}}, 0, 3 + 1, 3},
		{"max_tokens", []Delta{{Content: strings.Repeat("word ", 100)}}, 16, 16, 0},
		{"max_tokens bounds reasoning", []Delta{{Reasoning: strings.Repeat("hmm ", 100)}}, 10, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o outputSize
			for _, d := range tt.deltas {
				o.add(d)
			}
			got, reasoned := o.tokens(tt.maxTokens)
			if got != tt.wantTokens || reasoned != tt.wantReasoned {
				t.Errorf("tokens(%d) of %+v = %d, %d; want %d, %d", tt.maxTokens, tt.deltas, got, reasoned, tt.wantTokens, tt.wantReasoned)
			}
		})
	}
	// A whole answer measures the same as its deltas.
	resp := &Response{Content: "Hello world", Reasoning: "Let me think", ToolCalls: []ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":`}}}
	var o outputSize
	for _, d := range []Delta{{Content: "Hello"}, {Content: " world"}, {Reasoning: "Let me think"}, {ToolCall: call}} {
		o.add(d)
	}
	if got := answerSize(resp); got != o {
		t.Errorf("answerSize(%+v) = %+v; want %+v, as its deltas", resp, got, o)
	}
}

// BenchmarkOutputAdd: counting a delta's output is a few integer adds, no
// allocation (it runs on every delta of every stream).
func BenchmarkOutputAdd(b *testing.B) {
	d := Delta{Content: " word"}
	var o outputSize
	b.ReportAllocs()
	for b.Loop() {
		o.add(d)
	}
	if o.text == 0 {
		b.Fatal("nothing counted")
	}
}
