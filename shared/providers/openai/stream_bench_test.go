package openai

import (
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
)

// BenchmarkDecodeStream measures decoding one short streamed completion (a
// role chunk, five content chunks, a finish chunk, a usage chunk and
// [DONE], as the chat gateway benchmark's upstream sends them): the
// per-stream parsing cost on the gateway's hot path.
//
//	go test ./shared/providers/openai -run '^$' -bench DecodeStream -benchmem
func BenchmarkDecodeStream(b *testing.B) {
	chunk := func(c string) string {
		return `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + c + `"},"finish_reason":null}]}` + "\n\n"
	}
	var sb strings.Builder
	sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for _, w := range []string{"w1", " w2", " w3", " w4", " w5"} {
		sb.WriteString(chunk(w))
	}
	sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}` + "\n\n")
	sb.WriteString("data: [DONE]\n\n")
	body := sb.String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeStream(strings.NewReader(body), func(chat.Delta) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeToolStream is BenchmarkDecodeStream for a 100-piece
// answer: content deltas, and one tool call's arguments in as many pieces.
//
//	go test ./shared/providers/openai -run '^$' -bench DecodeToolStream -benchmem
func BenchmarkDecodeToolStream(b *testing.B) {
	for _, tool := range []bool{false, true} {
		var sb strings.Builder
		for i := range 100 {
			w := " w" + strings.Repeat("x", i%3)
			if tool {
				sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + w + `"}}]},"finish_reason":null}]}` + "\n\n")
			} else {
				sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + w + `"},"finish_reason":null}]}` + "\n\n")
			}
		}
		sb.WriteString("data: [DONE]\n\n")
		body := sb.String()
		b.Run(map[bool]string{false: "content", true: "tool"}[tool], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeStream(strings.NewReader(body), func(chat.Delta) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
