package images

import (
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
)

// testCatalog has an OpenAI-like model (qualities, auto size, every
// format) and a plain one (no qualities, png and jpeg, urls by default).
const testCatalog = `{"providers": [{"name": "synthetic", "kind": "synthetic"}, {"name": "openai", "kind": "openai"}],
 "models": [
  {"id": "gpt-image", "type": "image", "provider": "openai", "sizes": ["1024x1024", "1536x1024", "auto"], "default_size": "auto",
   "max_images": 4, "qualities": ["low", "medium", "high", "auto"], "default_quality": "medium", "formats": ["png", "jpeg", "webp"],
   "max_prompt": 20, "price": {"credits_per_image": 5, "credits_per_image_by_quality": {"low": 2, "high": 20, "auto": 20}}},
  {"id": "plain", "type": "image", "provider": "synthetic", "sizes": ["256x256", "512x512"], "default_size": "512x512",
   "max_images": 2, "formats": ["jpeg", "png"], "default_response_format": "url", "price": {"credits_per_image": 1}}
 ]}`

func testModel(t *testing.T, id string) *catalog.Model {
	t.Helper()
	c, err := catalog.Parse([]byte(testCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := c.Model(id)
	if !ok {
		t.Fatalf("no model %s", id)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// TestResolveRefusals: every refusal is a 400 naming its param, with the
// code saying why.
func TestResolveRefusals(t *testing.T) {
	all := Features{Background: true, Compression: true, Moderation: true}
	tests := []struct {
		name  string
		model string
		feats Features
		req   Request
		param string
		code  string
	}{
		{"no prompt", "gpt-image", all, Request{}, "prompt", "missing_field"},
		{"blank prompt", "gpt-image", all, Request{Prompt: "  \n"}, "prompt", "missing_field"},
		{"prompt over the model's limit", "gpt-image", all, Request{Prompt: strings.Repeat("é", 21)}, "prompt", "invalid_value"},
		{"n zero", "gpt-image", all, Request{Prompt: "p", N: ptr(0)}, "n", "invalid_value"},
		{"n negative", "gpt-image", all, Request{Prompt: "p", N: ptr(-1)}, "n", "invalid_value"},
		{"n over max_images", "plain", all, Request{Prompt: "p", N: ptr(3)}, "n", "invalid_value"},
		{"size not offered", "gpt-image", all, Request{Prompt: "p", Size: ptr("1024x1536")}, "size", "invalid_value"},
		{"size malformed", "plain", all, Request{Prompt: "p", Size: ptr("big")}, "size", "invalid_value"},
		{"quality unknown", "gpt-image", all, Request{Prompt: "p", Quality: ptr("hd")}, "quality", "invalid_value"},
		{"quality on a model without", "plain", all, Request{Prompt: "p", Quality: ptr("high")}, "quality", "invalid_value"},
		{"output_format gif", "gpt-image", all, Request{Prompt: "p", OutputFormat: ptr("gif")}, "output_format", "invalid_value"},
		{"output_format the model lacks", "plain", all, Request{Prompt: "p", OutputFormat: ptr("webp")}, "output_format", "invalid_value"},
		{"response_format unknown", "gpt-image", all, Request{Prompt: "p", ResponseFormat: ptr("png")}, "response_format", "invalid_value"},
		{"background unknown", "gpt-image", all, Request{Prompt: "p", Background: ptr("white")}, "background", "invalid_value"},
		{"background without the feature", "plain", Features{}, Request{Prompt: "p", Background: ptr("transparent")}, "background", "unsupported_parameter"},
		{"transparent jpeg", "gpt-image", all, Request{Prompt: "p", Background: ptr("transparent"), OutputFormat: ptr("jpeg")}, "background", "invalid_value"},
		{"compression over 100", "gpt-image", all, Request{Prompt: "p", OutputCompression: ptr(101)}, "output_compression", "invalid_value"},
		{"compression without the feature", "plain", Features{}, Request{Prompt: "p", OutputCompression: ptr(50)}, "output_compression", "unsupported_parameter"},
		{"moderation unknown", "gpt-image", all, Request{Prompt: "p", Moderation: ptr("none")}, "moderation", "invalid_value"},
		{"moderation without the feature", "plain", Features{}, Request{Prompt: "p", Moderation: ptr("low")}, "moderation", "unsupported_parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := Resolve(testModel(t, tt.model), tt.feats, &tt.req)
			checkRefusal(t, err, tt.param, tt.code)
			if p != nil {
				t.Errorf("Resolve returned params %+v with its error", p)
			}
		})
	}
}

// TestRefused: the OpenAI fields Genway honours for no model are refused
// when set, and accepted when left out (or stream false).
func TestRefused(t *testing.T) {
	tests := []struct {
		req   Request
		param string
	}{
		{Request{Stream: ptr(true)}, "stream"},
		{Request{PartialImages: ptr(0)}, "partial_images"},
		{Request{Style: ptr("vivid")}, "style"},
		{Request{Complexity: ptr("low")}, "complexity"},
		{Request{FrameCount: ptr(4)}, "frame_count"},
		{Request{FrameDurationMS: ptr(100)}, "frame_duration_ms"},
		{Request{SVG: map[string]any{"model": "x"}}, "svg"},
		{Request{Stream: ptr(false)}, ""},
		{Request{}, ""},
	}
	for _, tt := range tests {
		err := Refused(&tt.req)
		if tt.param == "" {
			if err != nil {
				t.Errorf("Refused(%+v) = %v; want nil", tt.req, err)
			}
			continue
		}
		checkRefusal(t, err, tt.param, "unsupported_parameter")
	}
}

func checkRefusal(t *testing.T, err error, param, code string) {
	t.Helper()
	e := apierr.As(err)
	if e == nil || e.Kind != apierr.Invalid || e.Param != param || e.Code != code {
		t.Errorf("error %v; want a 400 %s naming %q", err, code, param)
	}
}

// TestResolveDefaults: what a request leaves out is the model's default;
// "auto" is no preference where the model has no such value.
func TestResolveDefaults(t *testing.T) {
	tests := []struct {
		name   string
		model  string
		req    Request
		want   Params
		wantRF string
	}{
		{"gpt defaults", "gpt-image", Request{Prompt: "p"},
			Params{Prompt: "p", N: 1, Size: "auto", Quality: "medium", Format: "png"}, "b64_json"},
		{"plain defaults", "plain", Request{Prompt: "p"},
			Params{Prompt: "p", N: 1, Size: "512x512", Format: "png"}, "url"},
		{"auto size on a model without: its default", "plain", Request{Prompt: "p", Size: ptr("auto")},
			Params{Prompt: "p", N: 1, Size: "512x512", Format: "png"}, "url"},
		{"auto quality on a model without: none", "plain", Request{Prompt: "p", Quality: ptr("auto")},
			Params{Prompt: "p", N: 1, Size: "512x512", Format: "png"}, "url"},
		{"auto background and moderation: none", "gpt-image", Request{Prompt: "p", Background: ptr("auto"), Moderation: ptr("auto")},
			Params{Prompt: "p", N: 1, Size: "auto", Quality: "medium", Format: "png"}, "b64_json"},
		{"every field", "gpt-image", Request{Prompt: "p", N: ptr(4), Size: ptr("1536x1024"), Quality: ptr("high"), OutputFormat: ptr("webp"),
			ResponseFormat: ptr("url"), Background: ptr("transparent"), OutputCompression: ptr(80), Moderation: ptr("low"), User: "u", SafetyIdentifier: "s"},
			Params{Prompt: "p", N: 4, Size: "1536x1024", Quality: "high", Format: "webp", Background: "transparent", Compression: ptr(80), Moderation: "low", User: "s"}, "url"},
		{"user alone", "plain", Request{Prompt: "p", User: "u", ResponseFormat: ptr("b64_json")},
			Params{Prompt: "p", N: 1, Size: "512x512", Format: "png", User: "u"}, "b64_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			feats := Features{Background: true, Compression: true, Moderation: true}
			p, rf, err := Resolve(testModel(t, tt.model), feats, &tt.req)
			if err != nil {
				t.Fatalf("Resolve = %v", err)
			}
			if (p.Compression == nil) != (tt.want.Compression == nil) || (p.Compression != nil && *p.Compression != *tt.want.Compression) {
				t.Errorf("compression %v; want %v", p.Compression, tt.want.Compression)
			}
			p.Compression, tt.want.Compression = nil, nil
			if *p != tt.want || rf != tt.wantRF {
				t.Errorf("Resolve = %+v, %s; want %+v, %s", *p, rf, tt.want, tt.wantRF)
			}
		})
	}
}
