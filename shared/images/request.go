package images

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
)

// Refused returns the 400 (unsupported_parameter, naming the field) of
// the first OpenAI field in req that Genway does not honour for any model:
// stream true, partial_images, style (dall-e-3's, retired), complexity,
// frame_count, frame_duration_ms and svg; nil if none is set.
func Refused(req *Request) error {
	for _, f := range []struct {
		name string
		set  bool
		why  string
	}{
		{"stream", req.Stream != nil && *req.Stream, "streamed image generation is not supported; leave stream out or false"},
		{"partial_images", req.PartialImages != nil, "partial images come only with streaming, which is not supported"},
		{"style", req.Style != nil, "style was a parameter of the retired dall-e-3; describe the style in the prompt"},
		{"complexity", req.Complexity != nil, "complexity is not supported"},
		{"frame_count", req.FrameCount != nil, "GIF output is not supported"},
		{"frame_duration_ms", req.FrameDurationMS != nil, "GIF output is not supported"},
		{"svg", req.SVG != nil, "SVG output is not supported"},
	} {
		if f.set {
			return apierr.Invalidf(f.name, "unsupported_parameter", "%s: %s.", f.name, f.why)
		}
	}
	return nil
}

// Resolve checks req against image model m, whose provider honours feats,
// and returns the request's Params for m (m's defaults applied), and its
// response format; or an *apierr.Error naming the field at fault. It does
// not check req.Model (the Service does) nor the fields Refused refuses.
//
// A size of "auto" on a model that takes no "auto" is its default size; a
// quality of "auto" on a model that takes no quality is none.
func Resolve(m *catalog.Model, feats Features, req *Request) (*Params, string, error) {
	p := &Params{User: req.SafetyIdentifier}
	if p.User == "" {
		p.User = req.User
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, "", apierr.Invalidf("prompt", "missing_field", "prompt is required and must not be empty.")
	}
	if n := utf8.RuneCountInString(req.Prompt); n > m.MaxPrompt {
		return nil, "", apierr.Invalidf("prompt", "invalid_value", "prompt has %d characters; the limit of model %s is %d.", n, m.ID, m.MaxPrompt)
	}
	p.Prompt = req.Prompt

	p.N = 1
	if req.N != nil {
		if *req.N < 1 || *req.N > m.MaxImages {
			return nil, "", apierr.Invalidf("n", "invalid_value", "n must be from 1 to %d for model %s; got %d.", m.MaxImages, m.ID, *req.N)
		}
		p.N = *req.N
	}

	p.Size = m.DefaultSize
	if req.Size != nil && !(*req.Size == SizeAuto && !slices.Contains(m.Sizes, SizeAuto)) {
		if !slices.Contains(m.Sizes, *req.Size) {
			return nil, "", apierr.Invalidf("size", "invalid_value", "size must be one of %s for model %s; got %q.", strings.Join(m.Sizes, ", "), m.ID, *req.Size)
		}
		p.Size = *req.Size
	}

	p.Quality = m.DefaultQuality
	if req.Quality != nil {
		switch q := *req.Quality; {
		case len(m.Qualities) == 0 && q == "auto":
		case len(m.Qualities) == 0:
			return nil, "", apierr.Invalidf("quality", "invalid_value", "model %s takes no quality (only auto); got %q.", m.ID, q)
		case !slices.Contains(m.Qualities, q):
			return nil, "", apierr.Invalidf("quality", "invalid_value", "quality must be one of %s for model %s; got %q.", strings.Join(m.Qualities, ", "), m.ID, q)
		default:
			p.Quality = q
		}
	}

	p.Format = "png"
	if !slices.Contains(m.Formats, p.Format) {
		p.Format = m.Formats[0]
	}
	if req.OutputFormat != nil {
		if !slices.Contains(m.Formats, *req.OutputFormat) {
			return nil, "", apierr.Invalidf("output_format", "invalid_value", "output_format must be one of %s for model %s; got %q.", strings.Join(m.Formats, ", "), m.ID, *req.OutputFormat)
		}
		p.Format = *req.OutputFormat
	}

	rf := m.DefaultResponseFormat
	if req.ResponseFormat != nil {
		if *req.ResponseFormat != FormatB64 && *req.ResponseFormat != FormatURL {
			return nil, "", apierr.Invalidf("response_format", "invalid_value", "response_format must be b64_json or url; got %q.", *req.ResponseFormat)
		}
		rf = *req.ResponseFormat
	}

	if err := p.options(m, feats, req); err != nil {
		return nil, "", err
	}
	return p, rf, nil
}

// options resolves background, output_compression and moderation: the
// default ("auto", absent) is none; another value needs a provider that
// honours it.
func (p *Params) options(m *catalog.Model, feats Features, req *Request) error {
	unsupported := func(param string) error {
		return apierr.Invalidf(param, "unsupported_parameter", "model %s (provider %s) does not take %s.", m.ID, m.Provider, param)
	}
	if b := req.Background; b != nil && *b != "auto" {
		switch {
		case *b != "transparent" && *b != "opaque":
			return apierr.Invalidf("background", "invalid_value", "background must be transparent, opaque or auto; got %q.", *b)
		case !feats.Background:
			return unsupported("background")
		case *b == "transparent" && p.Format == "jpeg":
			return apierr.Invalidf("background", "invalid_value", "a transparent background needs output_format png or webp, not jpeg.")
		}
		p.Background = *b
	}
	if c := req.OutputCompression; c != nil {
		switch {
		case *c < 0 || *c > 100:
			return apierr.Invalidf("output_compression", "invalid_value", "output_compression must be from 0 to 100; got %d.", *c)
		case !feats.Compression:
			return unsupported("output_compression")
		}
		v := *c
		p.Compression = &v
	}
	if mod := req.Moderation; mod != nil && *mod != "auto" {
		switch {
		case *mod != "low":
			return apierr.Invalidf("moderation", "invalid_value", "moderation must be low or auto; got %q.", *mod)
		case !feats.Moderation:
			return unsupported("moderation")
		}
		p.Moderation = *mod
	}
	return nil
}
