package fal

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

// TestKeyPool: fal takes a pool of keys.
func TestKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "Authorization", func(k string) string { return "Key " + k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := New(Config{BaseURL: base, APIKey: keys})
			return p, func(ctx context.Context) { p.Start(ctx, klingModel, videoJob()) }
		})
}
