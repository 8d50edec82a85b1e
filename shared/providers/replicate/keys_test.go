package replicate

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

// TestKeyPool: Replicate takes a pool of tokens.
func TestKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "Authorization", func(k string) string { return "Bearer " + k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := New(Config{BaseURL: base, APIToken: keys})
			return p, func(ctx context.Context) { p.Start(ctx, musicgen, musicJob()) }
		})
}
