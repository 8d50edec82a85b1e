// Package images is image generation in OpenAI's Images API shape (POST
// /v1/images/generations): the request and its validation against the
// catalog, the Provider interface the vendor adapters implement, and the
// Service that runs a request: it reserves the request's credits, routes
// it over the model and its catalog fallbacks (route.Router.Run, skipping
// those that cannot serve it), stores the images when the client asked for
// links, settles the reservation (the answering model's price for the
// images made, or nothing) and answers.
//
// A vendor that answers with links to its files (fal, Replicate, OpenAI's
// retired dall-e) is downloaded by its adapter: the answer carries the
// bytes (b64_json) or a link to our own storage (url), never the vendor's
// link.
package images

import (
	"context"
	"errors"
	"fmt"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
)

// Response formats.
const (
	FormatB64 = "b64_json"
	FormatURL = "url"
)

// SizeAuto is the size a vendor picks itself (OpenAI's "auto").
const SizeAuto = "auto"

// Request is a decoded POST /v1/images/generations body, OpenAI's fields.
// Optional fields are pointers so that a field that was sent is seen: one
// the model cannot honour is refused, never silently dropped.
type Request struct {
	Model          string  `json:"model"`
	Prompt         string  `json:"prompt"`
	N              *int    `json:"n"`
	Size           *string `json:"size"`
	Quality        *string `json:"quality"`
	OutputFormat   *string `json:"output_format"`
	ResponseFormat *string `json:"response_format"`
	// Background, OutputCompression and Moderation are honoured by the
	// providers whose Features say so and refused (400) by the others;
	// "auto" (the default) is no preference and accepted by all.
	Background        *string `json:"background"`
	OutputCompression *int    `json:"output_compression"`
	Moderation        *string `json:"moderation"`
	// User and SafetyIdentifier are forwarded where the vendor takes
	// them (OpenAI) and accepted, not forwarded, elsewhere (as chat's
	// user is).
	User             string `json:"user"`
	SafetyIdentifier string `json:"safety_identifier"`

	// OpenAI fields Genway does not honour: refused with a 400 naming
	// them when set (stream false and a null are accepted).
	Stream          *bool   `json:"stream"`
	PartialImages   *int    `json:"partial_images"`
	Style           *string `json:"style"`
	Complexity      *string `json:"complexity"`
	FrameCount      *int    `json:"frame_count"`
	FrameDurationMS *int    `json:"frame_duration_ms"`
	SVG             any     `json:"svg"`
}

// Params are a request resolved for one model: the model's defaults
// applied, every value one it takes. Adapters get them.
type Params struct {
	Prompt  string
	N       int
	Size    string // WxH, or SizeAuto where the model takes it
	Quality string // "" for none (the vendor's default)
	Format  string // png, jpeg or webp
	// Background ("transparent", "opaque"), Compression (0-100, nil for
	// none) and Moderation ("low") are set only when the request asked
	// for something other than the default, and only for a provider
	// whose Features honour them.
	Background  string
	Compression *int
	Moderation  string
	User        string // OpenAI's safety_identifier (or user)
}

// Image is one generated image: its bytes and media type (image/png,
// image/jpeg, image/webp), and the prompt the vendor used if it revised
// it.
type Image struct {
	Data          []byte
	ContentType   string
	RevisedPrompt string
}

// Usage is the token usage of a generation, where the vendor reports
// tokens (OpenAI's GPT Image models, Gemini), in OpenAI's shape.
type Usage struct {
	InputTokens        int           `json:"input_tokens"`
	InputTokensDetails TokensDetails `json:"input_tokens_details"`
	OutputTokens       int           `json:"output_tokens"`
	TotalTokens        int           `json:"total_tokens"`
}

// TokensDetails splits a token count into text and image tokens.
type TokensDetails struct {
	TextTokens  int `json:"text_tokens"`
	ImageTokens int `json:"image_tokens"`
}

// Output is what a provider made: at least one image, at most Params.N.
type Output struct {
	Images []Image
	Usage  *Usage // nil if the vendor reports none
	// Size is the images' size as the vendor reports it ("" if it does
	// not: the size asked for).
	Size string
}

// Provider makes images with one vendor. Implementations are safe for
// concurrent use and honour ctx (its deadline bounds the whole call,
// polls included).
//
// Errors are the media vendors' (jobs.ProviderError for a failure that
// another attempt will not cure, with Code jobs.CodeContentPolicy and the
// vendor's words for a refused prompt; jobs.TransientError for 408, 429,
// 5xx and network faults), classified for routing by jobs.Failure.
type Provider interface {
	Generate(ctx context.Context, m *catalog.Model, p *Params) (*Output, error)
}

// Features are the optional fields a provider honours.
type Features struct {
	Background  bool // background transparent or opaque
	Compression bool // output_compression
	Moderation  bool // moderation low
}

// FeatureProvider is implemented by a Provider that honours some
// Features; one that does not implement it honours none.
type FeatureProvider interface {
	Features() Features
}

// featuresOf returns p's Features (see Capabilities).
func featuresOf(p Provider) Features {
	if f := Capabilities(p).Features; f != nil {
		return f.Features()
	}
	return Features{}
}

// VendorError is the failure of an attempt at a vendor: its provider and
// model and the adapter's error (a jobs.ProviderError or
// jobs.TransientError as the adapter returned it, or another error). It
// is the images' route.VendorFailure, the provider named: a refused
// prompt is a content-policy refusal with the vendor's words, the rest
// as chat's upstream failures are. Service returns the last one inside a
// *route.AttemptsError naming every attempt.
type VendorError struct {
	Provider string
	Model    string
	Err      error
}

func (e *VendorError) Error() string {
	return fmt.Sprintf("images: %s (%s): %v", e.Model, e.Provider, e.Err)
}

// Unwrap returns the adapter's error.
func (e *VendorError) Unwrap() error { return e.Err }

// Failure classifies the adapter's error by the routing policy
// (jobs.Failure).
func (e *VendorError) Failure() route.Failure {
	f, _ := jobs.Failure(e.Err)
	return f
}

// Fault is what the client is told of the adapter's error: a
// jobs.ProviderError's or jobs.TransientError's Fault, naming e's
// Provider (a rejected request without the vendor's words says it was
// rejected, with the status); another route.VendorFailure's own; a
// failure for any other error.
func (e *VendorError) Fault() route.Fault {
	var (
		pe *jobs.ProviderError
		te *jobs.TransientError
		vf route.VendorFailure
		f  route.Fault
	)
	switch {
	case errors.As(e.Err, &pe):
		f = pe.Fault()
	case errors.As(e.Err, &te):
		f = te.Fault()
	case errors.As(e.Err, &vf):
		return vf.Fault() // it names its vendor
	}
	f.Provider = e.Provider
	if f.Kind == route.VendorRejected && f.Message == "" {
		f.Message = fmt.Sprintf("The %s provider rejected the request (HTTP %d).", f.Provider, f.Status)
	}
	return f
}

var _ route.VendorFailure = (*VendorError)(nil)

// ContentType returns the media type of an output format.
func ContentType(format string) string {
	switch format {
	case "jpeg":
		return "image/jpeg"
	case "webp":
		return "image/webp"
	}
	return "image/png"
}
