package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
)

// ImagesOption configures GenerateImages.
type ImagesOption func(*imagesConfig)

type imagesConfig struct {
	keepAlive time.Duration // 0: no keep-alive
}

// ImagesKeepAlive makes an answer that is still silent after d send a
// space, and again every d (JSON allows whitespace before the value), so
// that API Gateway, whose streamed integration cuts a response that stays
// idle, keeps it open while a vendor draws: as ChatKeepAlive does for
// chat. The 200 status is then committed: a failure after it is the error
// envelope as the body. d <= 0 turns it off (the default).
func ImagesKeepAlive(d time.Duration) ImagesOption {
	return func(c *imagesConfig) { c.keepAlive = d }
}

// imagesView is the answer of POST /v1/images/generations: OpenAI's
// ImagesResponse (created, data, and where known size, quality,
// output_format, background), plus the request's id (its record's: GET
// /v1/generations/{id}) and the model that made the images, and usage:
// the vendor's token counts where it gave them, and always cost, the
// credits captured for the images.
type imagesView struct {
	ID           string         `json:"id"`
	Created      int64          `json:"created"`
	Data         []images.Datum `json:"data"`
	Model        string         `json:"model"`
	Background   string         `json:"background,omitempty"`
	OutputFormat string         `json:"output_format"`
	Quality      string         `json:"quality,omitempty"`
	Size         string         `json:"size,omitempty"`
	Usage        imagesUsage    `json:"usage"`
}

// imagesUsage is an image answer's usage: the vendor's token counts (when
// it gave them) and the cost.
type imagesUsage struct {
	*images.Usage
	Cost credits.Amount `json:"cost"`
}

// GenerateImages serves POST /v1/images/generations for the account in
// the request context (see Authenticated): decode, one service call
// (images.Service.Generate: validation, credits, routing, storage),
// encode. Every image is data[i].b64_json or, with response_format url,
// data[i].url, a link to our own storage; the model that made them is in
// model and the attempts in the X-Genway-Attempts header (on a failure
// too). Errors are the OpenAI envelope: a bad field a 400 naming it, a
// refused prompt a 400 content_policy with the vendor's words, a vendor's
// failure as chat's are (429, 502, 503, 504).
func GenerateImages(svc *images.Service, log *slog.Logger, opts ...ImagesOption) http.Handler {
	var cfg imagesConfig
	for _, o := range opts {
		o(&cfg)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		js := &jsonSink{w: w, keepAlive: cfg.keepAlive}
		defer js.stopKeepAlive()
		return chatError(w, r, log, js, serveImages(w, r, svc, js)) // with the attempts header, as chat's
	})
}

// serveImages decodes the request, runs it and writes the answer through
// js (after keep-alive spaces if the vendor is slow).
func serveImages(w http.ResponseWriter, r *http.Request, svc *images.Service, js *jsonSink) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var req images.Request
	if err := unmarshal(body, &req); err != nil {
		return err
	}
	ctx := r.Context()
	noteModel(ctx, req.Model)
	js.Start()
	res, err := svc.Generate(ctx, account(r), &req)
	if err != nil {
		return err
	}
	noteRoute(ctx, res.Model, len(res.Attempts))
	js.Begin(chat.Answer{Model: res.Model, Attempts: res.Attempts}) // the attempts header, unless a space was sent
	return js.writeBody(&imagesView{ID: res.ID, Created: res.Created, Data: res.Data, Model: res.Model, Background: res.Background,
		OutputFormat: res.OutputFormat, Quality: res.Quality, Size: res.Size, Usage: imagesUsage{res.Usage, res.Charged}})
}
