// Package api mounts the routes of an API function (chat, credits-api,
// jobs-create, jobs-get, media, models) as `genway serve` mounts them. It
// is apart from package wire so that the functions that serve no routes
// (credits, jobs-sweeper, worker) do not link the HTTP edge.
package api

import (
	"net/http"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/transport/httpapi"
)

// Handler mounts routes on one mux, each behind key authentication (with
// the per-container key cache) and the per-key rate limit
// (GENWAY_RATE_LIMIT default, account overrides), with the body limit of
// a request without images (GENWAY_MAX_TEXT_BODY). The bounds on requests
// in progress and on the memory of bodies are not applied: a Lambda
// instance serves one request at a time, whose body is already in its
// event (docs/aws.md).
func Handler(b *wire.Base, routes ...httpapi.Route) http.Handler {
	authn := app.Authenticator(b.Config, b.Store)
	limits := app.Limiter(b.Config, b.Store, b.Store)
	for i := range routes {
		routes[i].Handler = httpapi.Authenticated(authn, limits, b.Log, routes[i].Handler)
	}
	return httpapi.LimitBodies(httpapi.NewBodies(b.Config.MaxTextBody, 0), httpapi.NewMux(b.Log, routes...))
}
