package httpapi

import (
	"testing"

	"github.com/genway/genway/shared/credits"
)

// chunkEventJSON is what encoding/json makes of a chat chunk event: the
// reference that chunkEncoder.appendEvent writes directly.
func chunkEventJSON(t *testing.T, meta chunkMeta, d chunkDelta, finish *string, u *usageJSON) []byte {
	t.Helper()
	b, err := marshal(chunk{chunkMeta: meta, Object: "chat.completion.chunk",
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}, Usage: u})
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// FuzzChunkEvent: a chat chunk event written directly (appendEvent) is
// byte for byte what encoding/json makes of the same chunk, for any meta,
// delta, finish reason and usage.
//
//	go test ./shared/transport/httpapi -run '^$' -fuzz FuzzChunkEvent -fuzztime 60s
func FuzzChunkEvent(f *testing.F) {
	f.Add("chatcmpl-x", int64(1), "openai/gpt-4o-mini", "", true, "hello", "", false, 0, "", "", "", "", false, "", false, 0, int64(0))
	f.Add("chatcmpl-x", int64(-5), "m<&>", "assistant", true, "", "", false, 0, "", "", "", "", true, "stop", true, 7, int64(1234567))
	f.Add("id\"\\", int64(1<<40), "m\u2028", "", false, "", "thinking\n\xff", true, 3, "call_1", "function", "lookup", `{"a":"<b>"}`, false, "", false, 0, int64(0))
	f.Add("", int64(0), "", "", false, "", "", true, -1, "", "", "", "", true, "tool_calls", true, -2, int64(-1))
	f.Fuzz(func(t *testing.T, id string, created int64, model, role string, hasContent bool, content, reasoning string,
		hasCall bool, index int, callID, typ, name, args string, hasFinish bool, finish string, hasUsage bool, tokens int, cost int64) {
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
		var u *usageJSON
		if hasUsage {
			u = &usageJSON{PromptTokens: tokens, CompletionTokens: tokens + 1, TotalTokens: 2*tokens + 1,
				PromptTokensDetails:     inputTokensDetails{CachedTokens: tokens / 2, CacheWriteTokens: tokens / 3, CacheWrite1hTokens: tokens / 4},
				CompletionTokensDetails: outputTokensDetails{ReasoningTokens: tokens / 5}, Cost: credits.Amount(cost)}
		}
		meta := chunkMeta{ID: id, Created: created, Model: model}
		c := &chunkEncoder{meta: meta}
		for range 2 { // the second event reuses the prefix
			got := c.appendEvent([]byte("x"), d, fin, u)
			if want := append([]byte("x"), chunkEventJSON(t, meta, d, fin, u)...); string(got) != string(want) {
				t.Fatalf("appendEvent:\n%s\nencoding/json:\n%s", got, want)
			}
		}
		c.model(model + "-2")
		meta.Model = model + "-2"
		if got, want := c.appendEvent(nil, d, fin, u), chunkEventJSON(t, meta, d, fin, u); string(got) != string(want) {
			t.Fatalf("after model: appendEvent:\n%s\nencoding/json:\n%s", got, want)
		}
	})
}

// FuzzCompletionJSON: a chat.completion written directly (appendJSON) is
// byte for byte what marshal makes of it.
//
//	go test ./shared/transport/httpapi -run '^$' -fuzz FuzzCompletionJSON -fuzztime 60s
func FuzzCompletionJSON(f *testing.F) {
	f.Add("chatcmpl-x", int64(1), "openai/gpt-4o-mini", true, "hello", "", 0, "", "", "", "stop", 5, int64(0))
	f.Add("id\"\\", int64(-1), "m<&>\u2029", false, "", "why\n\xff", 2, "call_1", "lookup", `{"a":"<b>"}`, "tool_calls", -3, int64(-1234567))
	f.Add("", int64(0), "", true, "", "", 1, "", "", "", "", 0, int64(1<<62))
	f.Fuzz(func(t *testing.T, id string, created int64, model string, hasContent bool, content, reasoning string,
		calls int, callID, name, args, finish string, tokens int, cost int64) {
		msg := completionMessage{Role: "assistant", ReasoningContent: reasoning}
		if hasContent {
			msg.Content = &content
		}
		for i := range calls % 4 {
			msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: callID, Type: "function", Function: toolFunction{Name: name[:min(i, len(name))], Arguments: args}})
		}
		c := &completion{ID: id, Object: "chat.completion", Created: created, Model: model,
			Choices: []completionChoice{{Index: calls, Message: msg, FinishReason: finish}},
			Usage: usageJSON{PromptTokens: tokens, CompletionTokens: -tokens, TotalTokens: 0,
				PromptTokensDetails:     inputTokensDetails{CachedTokens: tokens, CacheWriteTokens: 1, CacheWrite1hTokens: 2},
				CompletionTokensDetails: outputTokensDetails{ReasoningTokens: 3}, Cost: credits.Amount(cost)}}
		if calls < 0 {
			c.Choices = nil
		}
		want, err := marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.appendJSON(nil); string(got) != string(want) {
			t.Fatalf("appendJSON:\n%s\nmarshal:\n%s", got, want)
		}
	})
}
