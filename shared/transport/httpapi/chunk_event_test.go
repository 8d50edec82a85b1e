package httpapi

import (
	"testing"
)

// FuzzChunkEvent: a chat chunk event written directly (appendEvent) is
// byte for byte what encoding/json makes of the same chunk
// (appendEventJSON), for any meta, delta and finish reason.
//
//	go test ./shared/transport/httpapi -run '^$' -fuzz FuzzChunkEvent -fuzztime 60s
func FuzzChunkEvent(f *testing.F) {
	f.Add("chatcmpl-x", int64(1), "openai/gpt-4o-mini", "", true, "hello", "", false, 0, "", "", "", "", false, "")
	f.Add("chatcmpl-x", int64(-5), "m<&>", "assistant", true, "", "", false, 0, "", "", "", "", true, "stop")
	f.Add("id\"\\", int64(1<<40), "m\u2028", "", false, "", "thinking\n\xff", true, 3, "call_1", "function", "lookup", `{"a":"<b>"}`, false, "")
	f.Add("", int64(0), "", "", false, "", "", true, -1, "", "", "", "", true, "tool_calls")
	f.Fuzz(func(t *testing.T, id string, created int64, model, role string, hasContent bool, content, reasoning string,
		hasCall bool, index int, callID, typ, name, args string, hasFinish bool, finish string) {
		d := chunkDelta{Role: role, ReasoningContent: reasoning}
		if hasContent {
			d.Content = &content
		}
		if hasCall {
			d.ToolCalls = []chunkToolCall{{Index: index, ID: callID, Type: typ, Function: toolFunction{Name: name, Arguments: args}}}
		}
		var fin *string
		if hasFinish {
			fin = &finish
		}
		meta := chunkMeta{ID: id, Created: created, Model: model}
		fast := &chunkEncoder{meta: meta}
		slow := &chunkEncoder{meta: meta}
		for range 2 { // the second event reuses the prefix and the encoder
			got := fast.appendEvent([]byte("x"), d, fin)
			want := slow.appendEventJSON([]byte("x"), d, fin, nil)
			if string(got) != string(want) {
				t.Fatalf("appendEvent:\n%s\nencoding/json:\n%s", got, want)
			}
		}
		fast.model(model + "-2")
		slow.model(model + "-2")
		if got, want := fast.appendEvent(nil, d, fin), slow.appendEventJSON(nil, d, fin, nil); string(got) != string(want) {
			t.Fatalf("after model: appendEvent:\n%s\nencoding/json:\n%s", got, want)
		}
	})
}
