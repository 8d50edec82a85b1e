// Package vendors builds, from the configuration, the settings the
// vendors' providers are made with (upstreams.New and its siblings), and
// the services over those providers that `genway serve` and the Lambda
// functions share (images, speech). It is
// apart from package app so that only the processes that call a vendor
// (genway serve; the chat, media, worker and jobs-create functions) link
// the vendors' adapters and SDKs.
package vendors

import (
	"log/slog"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// Settings returns the settings the vendors' providers are built from:
// which are configured, their keys and base URLs as the environment gives
// them, and the rest of their configuration.
func Settings(c app.Config) upstreams.Settings {
	return upstreams.Settings{Setup: c.Providers, AllowPrivateMedia: c.MediaAllowPrivate,
		Vertex: upstreams.Vertex(c.Vertex), AWS: c.AWS}
}

// Store is what the synchronous generations keep: their credit
// reservations (made before the vendor is called, settled once) and
// their records.
type Store interface {
	credits.Reservations
	credits.RecordWriter
}

// Images returns the images service of POST /v1/images/generations over
// c's catalog: the image providers, the router, store's reservations and
// records, and media for url answers.
func Images(c app.Config, providers map[string]images.Provider, router *route.Router, store Store, media jobs.Media, log *slog.Logger) *images.Service {
	return &images.Service{Catalog: c.Catalog, Providers: providers, Router: router, Credits: store, Records: store, Media: media, Log: log}
}

// Speech returns the speech service of POST /v1/audio/speech over c's
// catalog: the speech providers, the router, store's reservations and
// records.
func Speech(c app.Config, providers map[string]speech.Provider, router *route.Router, store Store, log *slog.Logger) *speech.Service {
	return &speech.Service{Catalog: c.Catalog, Providers: providers, Router: router, Credits: store, Records: store, Log: log}
}
