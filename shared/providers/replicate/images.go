package replicate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
)

// preferWait is the "Prefer: wait" of an image prediction: Replicate's
// longest hold, in seconds.
const preferWait = 60

// maxImageFile bounds one image downloaded from Replicate's delivery.
const maxImageFile = 32 << 20

// maxImagePolls bounds the reads of one image prediction (the request's
// deadline bounds them first).
const maxImagePolls = 3600

// fluxRatios are the aspect ratios of the FLUX models on Replicate, by
// the size each makes at one megapixel (black-forest-labs' cog-flux).
// Another size is sent as its reduced ratio (width:height).
var fluxRatios = map[string]string{
	"1024x1024": "1:1", "1344x768": "16:9", "768x1344": "9:16", "1216x832": "3:2", "832x1216": "2:3",
	"1152x896": "4:3", "896x1152": "3:4", "1088x896": "5:4", "896x1088": "4:5", "1536x640": "21:9", "640x1536": "9:21",
}

// Generate implements images.Provider with the input of the FLUX models on
// Replicate: the catalog model's Input.Build (its Fixed inputs and the
// prompt), then aspect_ratio, num_outputs and output_format (png, jpg or
// webp). The prediction is created with "Prefer: wait=60" and, if it has
// not ended by then, read again every poll interval (within ctx); its
// output files are downloaded (Replicate's delivery links are public: no
// token is sent to them). A prediction flagged as sensitive (E005, NSFW)
// is content_policy.
func (p *Provider) Generate(ctx context.Context, m *catalog.Model, ip *images.Params) (*images.Output, error) {
	ratio, ok := fluxRatios[ip.Size]
	if !ok {
		if ratio, ok = catalog.AspectRatio(ip.Size); !ok {
			return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: fmt.Sprintf("Replicate takes no image size %q.", ip.Size)}
		}
	}
	format := ip.Format
	if format == "jpeg" {
		format = "jpg"
	}
	input := m.Input.Build(ip.Prompt, "", 0, "", "", "") // Fixed, and the prompt
	input["aspect_ratio"], input["num_outputs"], input["output_format"] = ratio, ip.N, format
	pr, err := p.create(ctx, m, input, preferWait)
	if err != nil {
		return nil, err
	}
	if err := mediafetch.PollUntil(ctx, p.poll, maxImagePolls, "replicate prediction "+pr.ID, func(n int) (bool, error) {
		if n > 0 { // the first is the answer to the create
			next, err := p.get(ctx, pr.URLs.Get)
			if err != nil {
				return false, err
			}
			pr = next
		}
		return ended(pr)
	}); err != nil {
		return nil, err
	}
	links := outputURLs(pr.Output)
	if len(links) == 0 {
		return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Replicate's prediction has no output file."}
	}
	out := &images.Output{Size: ip.Size}
	for _, link := range links {
		data, ct, err := mediafetch.Fetch(ctx, p.files, link, nil, images.ContentType(ip.Format), maxImageFile)
		if err != nil {
			return nil, err
		}
		out.Images = append(out.Images, images.Image{Data: data, ContentType: ct})
	}
	return out, nil
}

// outputURLs returns every file of a prediction's output: a URL string, a
// list of them, or an object with a "url".
func outputURLs(raw json.RawMessage) []string {
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	if u := outputURL(raw, catalog.TypeImage); u != "" {
		return []string{u}
	}
	return nil
}
