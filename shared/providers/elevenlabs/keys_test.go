package elevenlabs

import (
	"context"
	"testing"

	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/route/routetest"
)

// TestKeyPool: ElevenLabs takes a pool of keys.
func TestKeyPool(t *testing.T) {
	routetest.CheckKeyPool(t, "xi-api-key", func(k string) string { return k },
		func(base, keys string) (route.Keyed, func(context.Context)) {
			p := New(Config{BaseURL: base, APIKey: keys})
			return p, func(ctx context.Context) {
				p.Start(ctx, sfxModel, &jobs.Job{Type: jobs.TypeSFX, Input: jobs.Input{Prompt: "p", Duration: 1, Format: "mp3"}})
			}
		})
}
