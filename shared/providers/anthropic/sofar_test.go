package anthropic

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
)

// TestStreamSoFar: a stream that fails after its first token returns,
// with its error, the usage reported so far, for the gateway to charge
// the answer so far: message_start's input, and the output only once a
// message_delta counted it.
func TestStreamSoFar(t *testing.T) {
	const (
		start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\"," +
			"\"usage\":{\"input_tokens\":472,\"cache_read_input_tokens\":100,\"output_tokens\":2},\"content\":[]}}\n\n"
		block = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
		text  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Okay\"}}\n\n"
		delta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n"
		fail  = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	)
	gone := errors.New("client gone")
	tests := []struct {
		name    string
		body    string
		w       error // the writer's failure
		want    chat.Usage
		wantErr error // nil: an *chat.UpstreamError
	}{
		// Cache reads are input: 472 + 100.
		{"dropped after content", start + block + text, nil, chat.Usage{PromptTokens: 572, TotalTokens: 572}, nil},
		{"error event after content", start + block + text + fail, nil, chat.Usage{PromptTokens: 572, TotalTokens: 572}, nil},
		{"dropped after message_delta", start + block + text + delta, nil, chat.Usage{PromptTokens: 572, CompletionTokens: 7, TotalTokens: 579}, nil},
		{"writer failed", start + block + text + text, gone, chat.Usage{PromptTokens: 572, TotalTokens: 572}, gone},
		{"nothing reported", block + text, nil, chat.Usage{}, nil},
	}
	p := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.readStream(context.Background(), strings.NewReader(tt.body), chat.WriterFunc(func(chat.Delta) error { return tt.w }), "")
			var ue *chat.UpstreamError
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("readStream error = %v; want %v", err, tt.wantErr)
			case tt.wantErr == nil && !errors.As(err, &ue):
				t.Fatalf("readStream error = %v; want an *chat.UpstreamError", err)
			}
			// The classes of the input are usage.chat's; the totals are checked here.
			if got == nil || got.Usage.PromptTokens != tt.want.PromptTokens || got.Usage.CompletionTokens != tt.want.CompletionTokens ||
				got.Usage.TotalTokens != tt.want.TotalTokens || got.Content != "" || got.FinishReason != "" {
				t.Errorf("readStream(%s) = %+v; want only the usage %+v", tt.name, got, tt.want)
			}
		})
	}
}
