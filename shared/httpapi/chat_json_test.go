package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/chat"
)

func TestAppendChunkEvent(t *testing.T) {
	empty, content, reasoning, stop := "", "Hello <b>\"world\"</b>\n", "think \u2028 hard", "stop"
	meta := chunkMeta{ID: "chatcmpl-ABC", Created: 1700000000, Model: "openai/gpt-4o-mini"}
	tests := []struct {
		name   string
		delta  chunkDelta
		finish *string
		usage  *chat.Usage
	}{
		{"role", chunkDelta{Role: chat.RoleAssistant, Content: &empty}, nil, nil},
		{"content", chunkDelta{Content: &content}, nil, nil},
		{"reasoning", chunkDelta{ReasoningContent: reasoning}, nil, nil},
		{"all fields", chunkDelta{Role: chat.RoleAssistant, Content: &content, ReasoningContent: reasoning}, nil, nil},
		{"final", chunkDelta{}, &stop, &chat.Usage{PromptTokens: 12, CompletionTokens: 345, TotalTokens: 357}},
		{"finish without usage", chunkDelta{}, &stop, nil},
	}
	for _, m := range []chunkMeta{meta, {ID: "odd \"id\" <&>", Created: -1, Model: "ü/\u2029"}} {
		for _, tt := range tests {
			t.Run(m.ID+" "+tt.name, func(t *testing.T) {
				j, err := json.Marshal(chunk{chunkMeta: m, Object: "chat.completion.chunk",
					Choices: []chunkChoice{{Delta: tt.delta, FinishReason: tt.finish}}, Usage: tt.usage})
				if err != nil {
					t.Fatal(err)
				}
				want := "data: " + string(j) + "\n\n"
				got := appendChunkEvent(nil, appendChunkPrefix(nil, &m), tt.delta, tt.finish, tt.usage)
				if string(got) != want {
					t.Errorf("appendChunkEvent(%+v) = %q; want %q", tt.delta, got, want)
				}
			})
		}
	}
}

func TestAppendCompletion(t *testing.T) {
	tests := []struct {
		name string
		c    completion
	}{
		{"plain", completion{ID: "chatcmpl-X", Object: "chat.completion", Created: 1700000000, Model: "openai/gpt-4o-mini",
			Choices: []completionChoice{{Message: completionMessage{Role: "assistant", Content: "w1 w2"}, FinishReason: "stop"}},
			Usage:   chat.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}}},
		{"reasoning and escapes", completion{ID: "chatcmpl-<&>", Object: "chat.completion", Created: 1, Model: "m\"x",
			Choices: []completionChoice{{Index: 0, Message: completionMessage{Role: "assistant", Content: "a\nb\x00\xff", ReasoningContent: "why \u2028"}, FinishReason: "length"}}}},
		{"empty content", completion{Object: "chat.completion", Choices: []completionChoice{{Message: completionMessage{Role: "assistant"}}}}},
		{"two choices", completion{Choices: []completionChoice{{Index: 0}, {Index: 1, FinishReason: "stop"}}}},
		{"no choices", completion{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeJSON(rec, 200, tt.c)
			if got := appendCompletion(nil, &tt.c); string(got) != rec.Body.String() {
				t.Errorf("appendCompletion(%+v) = %q; want %q", tt.c, got, rec.Body.String())
			}
		})
	}
}

// paramsSamples are request bodies: those parseParams decodes itself, and
// those it leaves to encoding/json.
var paramsSamples = []struct {
	body string
	fast bool
}{
	{`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":16}`, true},
	{`{"model":"m","messages":[{"role":"system","content":"be \"brief\"\n"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]},null],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":null,"reasoning_effort":"low","temperature":0.7,"top_p":1,"stop":["\n\n","END"],"seed":-42,"user":"u-1","n":1,"tools":[],"logit_bias":{"50256":-100}}`, true},
	{` { "model" : null , "messages" : [ ] , "stream" : false , "stream_options" : null , "temperature" : 1.5e0 , "seed" : null } `, true},
	{`{}`, true},
	{`{"Model":"m"}`, false},
	{`{"MESSAGES":[]}`, false},
	{`{"mod\u0065l":"m"}`, false},
	{`{"model":"a","model":"b"}`, false},
	{`{"model":"caf\u00e9"}`, false},
	{`{"model":"bad ` + "\xff" + `"}`, false},
	{`{"model":5}`, false},
	{`{"stream":"yes"}`, false},
	{`{"seed":1.5}`, false},
	{`{"temperature":1e400}`, false},
	{`{"messages":{"role":"user"}}`, false},
	{`{"messages":[{"role":"user","content":"x"}]`, false},
	{`{"model":"m"} {}`, false},
	{`[]`, false},
	{`null`, false},
	{``, false},
}

func TestParseParams(t *testing.T) {
	for _, tt := range paramsSamples {
		t.Run(tt.body, func(t *testing.T) {
			var got, want chat.Params
			if ok := parseParams([]byte(tt.body), &got); ok != tt.fast {
				t.Fatalf("parseParams(%q) = %v; want %v", tt.body, ok, tt.fast)
			}
			if !tt.fast {
				return
			}
			if err := json.Unmarshal([]byte(tt.body), &want); err != nil {
				t.Fatalf("json.Unmarshal(%q) error %v", tt.body, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parseParams(%q) = %+v; want %+v", tt.body, got, want)
			}
		})
	}
}

// FuzzParseParams: whenever parseParams decodes a body, encoding/json
// accepts it and decodes the same value.
func FuzzParseParams(f *testing.F) {
	for _, tt := range paramsSamples {
		f.Add([]byte(tt.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want chat.Params
		if !parseParams(body, &got) {
			return
		}
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("parseParams(%q) succeeded; json.Unmarshal error %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("parseParams(%q) = %+v; want %+v", body, got, want)
		}
	})
}
