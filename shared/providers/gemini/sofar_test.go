package gemini

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
)

// TestStreamSoFar: a stream that fails after its first token returns,
// with its error, the last usage Gemini reported (each is cumulative), its
// output only when no part came after it, for the gateway to charge the
// answer so far.
func TestStreamSoFar(t *testing.T) {
	const (
		withUsage = `data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":1,"thoughtsTokenCount":4}}` + "\n\n"
		noUsage   = `data: {"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"}}]}` + "\n\n"
		failed    = `data: {"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}` + "\n\n"
	)
	gone := errors.New("client gone")
	tests := []struct {
		name string
		body string
		w    error
		want *chat.Usage // nil: no response
	}{
		{"dropped after a usage", withUsage, nil, &chat.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}},
		{"error after a usage", withUsage + failed, nil, &chat.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}},
		{"a part after the usage", withUsage + noUsage, nil, &chat.Usage{PromptTokens: 12, TotalTokens: 12}},
		{"writer failed", withUsage, gone, &chat.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}},
		{"nothing reported", noUsage, nil, nil},
	}
	p := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.readStream(context.Background(), strings.NewReader(tt.body), chat.WriterFunc(func(chat.Delta) error { return tt.w }))
			var ue *chat.UpstreamError
			if !errors.Is(err, gone) && !errors.As(err, &ue) || tt.w != nil && !errors.Is(err, tt.w) {
				t.Fatalf("readStream error = %v; want the writer's, or an *chat.UpstreamError", err)
			}
			switch {
			case tt.want == nil && got != nil:
				t.Errorf("readStream(%s) = %+v; want nil", tt.name, got)
			case tt.want != nil && (got == nil || got.Usage.PromptTokens != tt.want.PromptTokens ||
				got.Usage.CompletionTokens != tt.want.CompletionTokens || got.Usage.TotalTokens != tt.want.TotalTokens || got.Content != ""):
				t.Errorf("readStream(%s) = %+v; want only the usage %+v", tt.name, got, *tt.want)
			}
		})
	}
}
