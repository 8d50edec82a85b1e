package localserver

import (
	"log/slog"
	"net/http"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/speech"
	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

// apiDeps are what the local server's routes need.
type apiDeps struct {
	cat        *catalog.Catalog
	configured func(provider string) bool
	log        *slog.Logger
	auth       *auth.Authenticator
	limiter    httpapi.Limiter
	bodies     *httpapi.Bodies // request bodies' bounds; nil: httpapi's defaults, no memory bound
	jobs       *jobs.Service
	gw         *chat.Gateway
	images     *images.Service
	speech     *speech.Service
	credits    httpapi.CreditsReader
	records    credits.RecordReader // GET /v1/generations/{id}
	files      http.Handler         // signed local media links; nil if none
	admin      httpapi.AdminConfig
	console    http.Handler // the operator console, at /console/; nil if none
	metrics    http.Handler // GET /metrics (operator token); nil if none
	hooks      *webhooks.Service
}

// apiHandler mounts every route on one mux: the same handler makers that
// the Lambda functions mount one each.
func apiHandler(d apiDeps) http.Handler {
	authed := func(h http.Handler) http.Handler { return httpapi.Authenticated(d.auth, d.limiter, d.log, h) }
	routes := []httpapi.Route{
		{Method: "GET", Pattern: "/v1/models", Handler: authed(httpapi.ListModels(d.cat, d.configured, d.log))},
		{Method: "GET", Pattern: "/v1/models/{id...}", Handler: authed(httpapi.GetModel(d.cat, d.configured, d.log))},
		{Method: "POST", Pattern: "/v1/chat/completions", Handler: authed(httpapi.ChatCompletions(d.gw, d.log))},
		{Method: "POST", Pattern: "/v1/responses", Handler: authed(httpapi.Responses(d.gw, d.log))},
		{Method: "POST", Pattern: "/v1/messages", Handler: authed(httpapi.Messages(d.gw, d.log))},
		{Method: "POST", Pattern: "/v1/messages/count_tokens", Handler: authed(httpapi.CountMessageTokens(d.gw, d.log))},
		// Spaces keep a slow image's answer open, as non-streamed chat's
		// are on Lambda.
		{Method: "POST", Pattern: "/v1/images/generations", Handler: authed(httpapi.GenerateImages(d.images, d.log, httpapi.ImagesKeepAlive(httpapi.DefaultChatHeartbeat)))},
		{Method: "POST", Pattern: "/v1/audio/speech", Handler: authed(httpapi.Speech(d.speech, d.log))},
		{Method: "POST", Pattern: "/v1/jobs", Handler: authed(httpapi.CreateJob(d.jobs, d.log))},
		{Method: "GET", Pattern: "/v1/jobs/{id}", Handler: authed(httpapi.GetJob(d.jobs, d.log))},
		{Method: "GET", Pattern: "/v1/jobs", Handler: authed(httpapi.ListJobs(d.jobs, d.log))},
		{Method: "POST", Pattern: "/v1/jobs/{id}/cancel", Handler: authed(httpapi.CancelJob(d.jobs, d.log))},
		// OpenAI's Videos API: the same video jobs, in OpenAI's shape.
		{Method: "POST", Pattern: "/v1/videos", Handler: authed(httpapi.CreateVideo(d.jobs, d.log))},
		{Method: "GET", Pattern: "/v1/videos", Handler: authed(httpapi.ListVideos(d.jobs, d.log))},
		{Method: "GET", Pattern: "/v1/videos/{id}", Handler: authed(httpapi.GetVideo(d.jobs, d.log))},
		{Method: "DELETE", Pattern: "/v1/videos/{id}", Handler: authed(httpapi.DeleteVideo(d.jobs, d.log))},
		{Method: "GET", Pattern: "/v1/videos/{id}/content", Handler: authed(httpapi.VideoContent(d.jobs, d.log))},
		{Method: "GET", Pattern: "/v1/credits", Handler: authed(httpapi.GetCredits(d.credits, d.log))},
		{Method: "GET", Pattern: "/v1/generations/{id}", Handler: authed(httpapi.GetGeneration(d.records, d.log))},
		{Method: "GET", Pattern: "/v1/webhooks/secret", Handler: authed(httpapi.GetWebhookSecret(d.hooks, d.log))},
		{Method: "GET", Pattern: "/healthz", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok\n"))
		})},
	}
	if d.files != nil {
		routes = append(routes, httpapi.Route{Method: "GET", Pattern: "/files/{key...}", Handler: d.files})
	}
	if d.admin.Operator != nil {
		routes = append(routes, httpapi.AdminRoutes(d.admin)...)
	}
	if d.metrics != nil {
		routes = append(routes, httpapi.Route{Method: "GET", Pattern: "/metrics", Handler: d.metrics})
	}
	if d.console != nil {
		for _, m := range []string{"GET", "POST"} {
			routes = append(routes, httpapi.Route{Method: m, Pattern: "/console/", Handler: d.console})
		}
	}
	h := httpapi.NewMux(d.log, routes...)
	if d.bodies != nil {
		h = httpapi.LimitBodies(d.bodies, h)
	}
	return httpapi.BodyTimeout(httpapi.DefaultBodyTimeout, h)
}
