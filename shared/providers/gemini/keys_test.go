package gemini

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

// TestKeyPool: Gemini chat takes a pool of keys.
func TestKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "x-goog-api-key", func(k string) string { return k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := New(Config{BaseURL: base, APIKey: keys})
			return p, func(ctx context.Context) {
				p.Complete(ctx, &chat.Request{Model: flash, Messages: []chat.Message{user("x")}})
			}
		})
}

// TestVideoKeyPool: Veo through the Gemini API takes a pool of keys.
func TestVideoKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "x-goog-api-key", func(k string) string { return k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			v := NewVideo(Config{BaseURL: base, APIKey: keys})
			return v, func(ctx context.Context) { v.Start(ctx, veoModel, veoJob("1280x720")) }
		})
}
