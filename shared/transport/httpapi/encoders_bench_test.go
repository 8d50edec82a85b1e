package httpapi

import (
	"fmt"
	"testing"

	"github.com/genway/genway/shared/chat"
)

// BenchmarkStreamEncoders encodes one streamed answer of 5 and of 200
// content deltas (or a tool call in as many pieces) in each wire format:
// what the encoders alone cost, without the network. The Responses
// format's fixed part (the response object three times, the items'
// added/done events) weighs on a short answer; per delta it costs about
// what a chat chunk does.
//
//	go test ./shared/transport/httpapi -run '^$' -bench StreamEncoders
func BenchmarkStreamEncoders(b *testing.B) {
	resp := &chat.Response{FinishReason: "stop", Usage: chat.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10}}
	for _, tt := range []struct {
		name  string
		enc   func() streamEncoder
		tools bool
	}{
		{"chat", func() streamEncoder { return &chunkEncoder{meta: chunkMeta{ID: "chatcmpl-x", Created: 1, Model: "m"}} }, false},
		{"chat-tools", func() streamEncoder { return &chunkEncoder{meta: chunkMeta{ID: "chatcmpl-x", Created: 1, Model: "m"}} }, true},
		{"responses", func() streamEncoder {
			return &responsesEncoder{meta: (&responsesRequest{Model: "m"}).echo()}
		}, false},
	} {
		for _, n := range []int{5, 200} {
			words := make([]string, n)
			for i := range words {
				words[i] = fmt.Sprintf(" w%d", i)
			}
			b.Run(fmt.Sprintf("%s-%d", tt.name, n), func(b *testing.B) {
				buf := make([]byte, 0, 8192)
				size := 0
				for b.Loop() {
					e := tt.enc()
					buf = e.start(buf[:0])
					for i, w := range words {
						d := chat.Delta{Content: w}
						if tt.tools {
							d = chat.Delta{ToolCall: &chat.ToolCallDelta{Arguments: w}}
							if i == 0 {
								d.ToolCall.ID, d.ToolCall.Name = "call_1", "lookup"
							}
						}
						buf = e.delta(buf, d)
					}
					buf = e.end(buf, resp)
					size = len(buf)
				}
				b.ReportMetric(float64(size), "bytes/stream")
			})
		}
	}
}
