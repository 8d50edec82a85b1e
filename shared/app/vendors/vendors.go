// Package vendors builds, from the configuration, the settings the
// vendors' providers are made with (upstreams.New and its siblings). It is
// apart from package app so that only the processes that call a vendor
// (genway serve; the chat, media, worker and jobs-create functions) link
// the vendors' adapters and SDKs.
package vendors

import (
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/providers/upstreams"
)

// Settings returns the settings the vendors' providers are built from:
// which are configured, their keys and base URLs as the environment gives
// them, and the rest of their configuration.
func Settings(c app.Config) upstreams.Settings {
	return upstreams.Settings{Setup: c.Providers, AllowPrivateMedia: c.MediaAllowPrivate,
		Vertex: upstreams.Vertex(c.Vertex), AWS: c.AWS}
}
