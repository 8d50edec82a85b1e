package openai

// OpenAI's Images API, as documented at
// https://platform.openai.com/docs/api-reference/images/create and typed
// by the openai npm SDK 7.57.0 (ImageGenerateParams, ImagesResponse).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
	"github.com/genway/genway/shared/route"
)

// maxImagesBody bounds an Images API answer: up to 10 images in base64.
const maxImagesBody = 96 << 20

// maxImageFile bounds one image downloaded from a link (dall-e's answers).
const maxImageFile = 32 << 20

// Images is the images.Provider for OpenAI's Images API (and servers
// that speak it): POST {base}/images/generations with the model, prompt,
// n, size, quality, output_format and, when asked, background,
// output_compression, moderation and user. response_format is never sent
// (the GPT Image models refuse it and always answer b64_json); an answer
// with links instead (the retired dall-e models) is downloaded, without
// the key. A refusal by OpenAI's safety system (error code
// moderation_blocked or content_policy_violation) is content_policy, with
// OpenAI's words. Safe for concurrent use.
type Images struct {
	name     string
	endpoint string
	keys     route.KeySet // each call sends the key its ctx names (route.WithKey)
	client   *http.Client
	files    *http.Client // images answered as links (Config.Downloads)
}

var (
	_ images.Provider        = (*Images)(nil)
	_ images.FeatureProvider = (*Images)(nil)
	_ route.Keyed            = (*Images)(nil)
)

// NewImages returns the Images API provider for cfg.
func NewImages(cfg Config) *Images {
	cfg, base := cfg.withDefaults()
	files := cfg.Downloads
	if files == nil {
		files = cfg.HTTPClient
	}
	return &Images{name: cfg.Name, endpoint: base + "/images/generations", keys: route.NewKeySet(cfg.APIKey), client: cfg.HTTPClient, files: files}
}

// KeyIDs returns the KeyIDs of the provider's key pool (route.Keyed).
func (p *Images) KeyIDs() []string { return p.keys.KeyIDs() }

// Features reports that the GPT Image models take background,
// output_compression and moderation.
func (p *Images) Features() images.Features {
	return images.Features{Background: true, Compression: true, Moderation: true}
}

// imageRequest is the body of POST /images/generations.
type imageRequest struct {
	Model             string `json:"model"`
	Prompt            string `json:"prompt"`
	N                 int    `json:"n"`
	Size              string `json:"size,omitempty"`
	Quality           string `json:"quality,omitempty"`
	OutputFormat      string `json:"output_format,omitempty"`
	Background        string `json:"background,omitempty"`
	OutputCompression *int   `json:"output_compression,omitempty"`
	Moderation        string `json:"moderation,omitempty"`
	User              string `json:"user,omitempty"`
}

// imagesResponse is the ImagesResponse.
type imagesResponse struct {
	Created int64 `json:"created"`
	Data    []struct {
		B64JSON       string `json:"b64_json"`
		URL           string `json:"url"`
		RevisedPrompt string `json:"revised_prompt"`
	} `json:"data"`
	Size  string        `json:"size"`
	Usage *images.Usage `json:"usage"`
}

// Generate implements images.Provider.
func (p *Images) Generate(ctx context.Context, m *catalog.Model, ip *images.Params) (*images.Output, error) {
	body, err := json.Marshal(imageRequest{Model: m.Upstream, Prompt: ip.Prompt, N: ip.N, Size: ip.Size, Quality: ip.Quality,
		OutputFormat: ip.Format, Background: ip.Background, OutputCompression: ip.Compression, Moderation: ip.Moderation, User: ip.User})
	if err != nil {
		return nil, fmt.Errorf("%s images: encode request: %w", p.name, err)
	}
	h := http.Header{"Accept": {"application/json"}}
	if key := p.keys.Key(ctx); key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	req, err := mediafetch.NewRequest(http.MethodPost, p.endpoint, body, h)
	if err != nil {
		return nil, err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, p.name+" images", p.refusal)
	if err != nil {
		return nil, err
	}
	var ir imagesResponse
	if err := mediafetch.DecodeJSONLimit(resp, p.name+" images", maxImagesBody, &ir); err != nil {
		return nil, err
	}
	out := &images.Output{Usage: ir.Usage, Size: ir.Size}
	if out.Size == images.SizeAuto {
		out.Size = ""
	}
	for i, d := range ir.Data {
		img := images.Image{RevisedPrompt: d.RevisedPrompt}
		switch {
		case d.B64JSON != "":
			if img.Data, err = base64.StdEncoding.DecodeString(d.B64JSON); err != nil {
				return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The vendor answered an image that is not base64.",
					Err: fmt.Errorf("%s images: data[%d]: %w", p.name, i, err)}
			}
			img.ContentType = sniff(img.Data, ip.Format)
		case d.URL != "":
			// A link (dall-e): copied here, without the key.
			if img.Data, img.ContentType, err = mediafetch.Fetch(ctx, p.files, d.URL, nil, images.ContentType(ip.Format), maxImageFile); err != nil {
				return nil, err
			}
		default:
			return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: fmt.Sprintf("The vendor answered data[%d] with neither b64_json nor url.", i)}
		}
		out.Images = append(out.Images, img)
	}
	return out, nil
}

// sniff returns the media type of an image's bytes, or that of format
// if they are not a known image.
func sniff(data []byte, format string) string {
	if ct := http.DetectContentType(data); strings.HasPrefix(ct, "image/") {
		return ct
	}
	return images.ContentType(format)
}

// refusal reads an Images API error: OpenAI's {"error": {"message",
// "type", "code", "param"}}. A refusal by its safety system (code
// moderation_blocked, or content_policy_violation for dall-e) is
// content_policy; a refused key (401, 403) and a used-up quota (429
// insufficient_quota) are the operator's account's.
func (p *Images) refusal(status int, body []byte) jobs.Refusal {
	r := jobs.Refusal{Message: errorMessage(body)}
	code, ok := errorCode(body)
	if !ok {
		return r
	}
	switch {
	case moderated(code):
		r.Code = jobs.CodeContentPolicy
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		r.Message, r.Account = p.name+" refused the configured key: "+r.Message, true
	case status == http.StatusTooManyRequests && code == "insufficient_quota":
		r.Account = true
	}
	return r
}
