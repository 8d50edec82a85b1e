package openai

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

// TestKeyPool: an OpenAI-compatible provider takes a pool of keys.
func TestKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "Authorization", func(k string) string { return "Bearer " + k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := New(Config{BaseURL: base, APIKey: keys})
			return p, func(ctx context.Context) {
				p.Complete(ctx, &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}})
			}
		})
}
