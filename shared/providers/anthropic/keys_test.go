package anthropic

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

// TestKeyPool: Anthropic takes a pool of keys.
func TestKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "x-api-key", func(k string) string { return k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := New(Config{BaseURL: base, APIKey: keys})
			return p, func(ctx context.Context) {
				p.Stream(ctx, &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}}, chat.WriterFunc(func(chat.Delta) error { return nil }))
			}
		})
}
