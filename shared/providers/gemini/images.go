package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
	"github.com/genway/genway/shared/route"
)

// maxImageAnswer bounds one generateContent answer with an image.
const maxImageAnswer = 32 << 20

// Images is the images.Provider for Gemini's image output (Gemini 2.5
// Flash Image): POST {base}/v1beta/models/{model}:generateContent with
// the prompt as the one user part and generationConfig
// {"responseModalities": ["IMAGE"], "imageConfig": {"aspectRatio"}}, once
// per image asked for (a call makes one image); the image is the answer's
// inlineData part. The size picks the aspect ratio (aspectRatios); the
// images are PNG. A prompt the filters blocked (promptFeedback.blockReason,
// or a finishReason such as IMAGE_SAFETY or PROHIBITED_CONTENT) is
// content_policy, with Gemini's reason and any text it gave. The key is
// sent as x-goog-api-key. Safe for concurrent use.
type Images struct{ conn }

var (
	_ images.Provider = (*Images)(nil)
	_ route.Keyed     = (*Images)(nil)
)

// NewImages returns the image provider for cfg (Name is not used).
func NewImages(cfg Config) *Images { return &Images{newConn(cfg)} }

// aspectRatios are the sizes Gemini 2.5 Flash Image makes, by the
// imageConfig.aspectRatio that asks for each (the Gemini API's image
// generation guide).
var aspectRatios = map[string]string{
	"1024x1024": "1:1", "832x1248": "2:3", "1248x832": "3:2", "864x1184": "3:4", "1184x864": "4:3",
	"896x1152": "4:5", "1152x896": "5:4", "768x1344": "9:16", "1344x768": "16:9", "1536x672": "21:9",
}

// blocked are the finish reasons of an answer whose image the filters
// withheld.
var blocked = map[string]bool{
	"SAFETY": true, "IMAGE_SAFETY": true, "PROHIBITED_CONTENT": true, "IMAGE_PROHIBITED_CONTENT": true,
	"BLOCKLIST": true, "SPII": true, "RECITATION": true, "IMAGE_RECITATION": true,
}

// Generate implements images.Provider: one generateContent call per
// image; any failure fails the request (images made before it are not
// answered, nor charged).
func (p *Images) Generate(ctx context.Context, m *catalog.Model, ip *images.Params) (*images.Output, error) {
	ratio, ok := aspectRatios[ip.Size]
	if !ok {
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: fmt.Sprintf("Gemini makes no image of size %q.", ip.Size)}
	}
	body, err := json.Marshal(generateRequest{
		Contents:         []content{{Role: "user", Parts: []part{{Text: ip.Prompt}}}},
		GenerationConfig: &generationConfig{ResponseModalities: []string{"IMAGE"}, ImageConfig: &imageConfig{AspectRatio: ratio}},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini images: encode request: %w", err)
	}
	u := p.base + "/v1beta/models/" + url.PathEscape(m.Upstream) + ":generateContent"
	out := &images.Output{Size: ip.Size, Usage: &images.Usage{}}
	for range ip.N {
		img, usage, err := p.one(ctx, u, body)
		if err != nil {
			return nil, err
		}
		out.Images = append(out.Images, *img)
		if usage != nil {
			out.Usage.InputTokens += usage.PromptTokenCount
			out.Usage.InputTokensDetails.TextTokens += usage.PromptTokenCount
			out.Usage.OutputTokens += usage.CandidatesTokenCount + usage.ThoughtsTokenCount
			out.Usage.TotalTokens += usage.TotalTokenCount
		}
	}
	if out.Usage.TotalTokens == 0 {
		out.Usage = nil
	}
	return out, nil
}

// one makes one image with a call to u.
func (p *Images) one(ctx context.Context, u string, body []byte) (*images.Image, *usageMetadata, error) {
	req, err := mediafetch.NewRequest(http.MethodPost, u, body, http.Header{"x-goog-api-key": {p.keys.Key(ctx)}})
	if err != nil {
		return nil, nil, err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "gemini generate image", googleError)
	if err != nil {
		return nil, nil, err
	}
	var g generateResponse
	if err := mediafetch.DecodeJSONLimit(resp, "gemini generate image", maxImageAnswer, &g); err != nil {
		return nil, nil, err
	}
	if g.PromptFeedback != nil && g.PromptFeedback.BlockReason != "" {
		return nil, nil, &jobs.ProviderError{Code: jobs.CodeContentPolicy, Message: "Gemini blocked the prompt: " + g.PromptFeedback.BlockReason}
	}
	var text []string
	finish := ""
	for _, c := range g.Candidates {
		finish = c.FinishReason
		if c.Content == nil {
			continue
		}
		for _, pt := range c.Content.Parts {
			if pt.InlineData != nil && strings.HasPrefix(pt.InlineData.MimeType, "image/") && !pt.Thought {
				data, err := base64.StdEncoding.DecodeString(pt.InlineData.Data)
				if err != nil || len(data) == 0 {
					return nil, nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Gemini answered an image that is not base64."}
				}
				return &images.Image{Data: data, ContentType: pt.InlineData.MimeType}, g.UsageMetadata, nil
			}
			if pt.Text != "" && !pt.Thought {
				text = append(text, pt.Text)
			}
		}
	}
	said := ""
	if len(text) > 0 {
		said = ": " + strings.Join(text, " ")
	}
	if blocked[finish] {
		return nil, nil, &jobs.ProviderError{Code: jobs.CodeContentPolicy, Message: "Gemini withheld the image (" + finish + ")" + said}
	}
	return nil, nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: fmt.Sprintf("Gemini answered no image (finishReason %q)%s", finish, said)}
}
