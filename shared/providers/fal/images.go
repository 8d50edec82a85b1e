package fal

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
)

// maxImageFile bounds one image downloaded from fal's file storage.
const maxImageFile = 32 << 20

// maxImagePolls bounds the status reads of one image request (the
// request's deadline bounds them first).
const maxImagePolls = 3600

// presets are fal's named image sizes (image_size), by the size each
// makes; another size is sent as {"width", "height"}.
var presets = map[string]string{
	"1024x1024": "square_hd", "512x512": "square", "768x1024": "portrait_4_3",
	"576x1024": "portrait_16_9", "1024x768": "landscape_4_3", "1024x576": "landscape_16_9",
}

// imageResult is the result of fal's text-to-image models (the FLUX
// family and most others): the files, and the safety checker's verdict
// on each.
type imageResult struct {
	Images []struct {
		URL         string `json:"url"`
		ContentType string `json:"content_type"`
	} `json:"images"`
	HasNSFWConcepts []bool `json:"has_nsfw_concepts"`
}

// Generate implements images.Provider with the input of fal's
// text-to-image models: the catalog model's Input.Build (its Fixed inputs
// and the prompt), then image_size (a preset's name, else {"width",
// "height"}), num_images, output_format and enable_safety_checker true.
// The request is queued, its status read every poll interval until it is
// COMPLETED (within ctx), and its images downloaded (fal's file links are
// public: no key is sent to them). An image the safety checker flagged
// (has_nsfw_concepts: fal answers it blacked out) is left out; if every
// one is, the request is refused with content_policy.
func (p *Provider) Generate(ctx context.Context, m *catalog.Model, ip *images.Params) (*images.Output, error) {
	input := m.Input.Build(ip.Prompt, "", 0, "", "", "") // Fixed, and the prompt
	w, h, ok := catalog.ParseSize(ip.Size)
	if !ok {
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: fmt.Sprintf("fal takes no image size %q.", ip.Size)}
	}
	if preset, ok := presets[ip.Size]; ok {
		input["image_size"] = preset
	} else {
		input["image_size"] = map[string]int{"width": w, "height": h}
	}
	input["num_images"], input["output_format"], input["enable_safety_checker"] = ip.N, ip.Format, true
	handle, err := p.submit(ctx, m, input)
	if err != nil {
		return nil, err
	}
	if err := mediafetch.PollUntil(ctx, p.poll, maxImagePolls, "fal request "+handle.ID, func(int) (bool, error) {
		return p.done(ctx, handle)
	}); err != nil {
		return nil, err
	}
	var res imageResult
	if err := p.result(ctx, handle, &res); err != nil {
		return nil, err
	}
	out := &images.Output{Size: ip.Size}
	flagged := 0
	for i, f := range res.Images {
		if i < len(res.HasNSFWConcepts) && res.HasNSFWConcepts[i] {
			flagged++
			continue
		}
		if !strings.HasPrefix(f.URL, "https://") && !strings.HasPrefix(f.URL, "http://") {
			return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "fal's result has an image without a link."}
		}
		data, ct, err := mediafetch.Fetch(ctx, p.files, f.URL, nil, mediafetch.ContentType(f.ContentType, f.URL, images.ContentType(ip.Format)), maxImageFile)
		if err != nil {
			return nil, err
		}
		out.Images = append(out.Images, images.Image{Data: data, ContentType: ct})
	}
	switch {
	case flagged > 0 && len(out.Images) == 0:
		return nil, &jobs.ProviderError{Code: jobs.CodeContentPolicy, Message: "fal's safety checker flagged the image(s) made for this prompt."}
	case len(out.Images) == 0:
		b, _ := json.Marshal(res)
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "fal's result has no images.", Err: fmt.Errorf("fal result: %s", b)}
	}
	return out, nil
}
