package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// modelView is a Model record of GET /v1/models: the OpenAI list fields plus
// ours. Provider-side details (upstream name, base URLs) are not shown.
type modelView struct {
	ID           string                `json:"id"`
	Object       string                `json:"object"`
	Created      int64                 `json:"created"`
	OwnedBy      string                `json:"owned_by"`
	Type         string                `json:"type"`
	Description  string                `json:"description,omitempty"`
	Test         bool                  `json:"test,omitempty"`
	Capabilities *catalog.Capabilities `json:"capabilities,omitempty"`
	MaxTokens    int                   `json:"max_tokens,omitempty"`
	Formats      []string              `json:"formats,omitempty"`
	MinDuration  int                   `json:"min_duration,omitempty"`
	MaxDuration  int                   `json:"max_duration,omitempty"`
	// DefaultDuration is the duration a job gets when it names none.
	DefaultDuration int        `json:"default_duration,omitempty"`
	Durations       []int      `json:"durations,omitempty"`
	Sizes           []string   `json:"sizes,omitempty"`
	MaxPixels       int        `json:"max_pixels,omitempty"`
	Modes           []string   `json:"modes,omitempty"`
	DefaultSize     string     `json:"default_size,omitempty"`
	Price           *priceView `json:"price,omitempty"`
	// Image models: the most images a request may ask for, the qualities
	// and the one a request gets when it names none, the response format
	// answered by default, and the longest prompt.
	MaxImages             int      `json:"max_images,omitempty"`
	Qualities             []string `json:"qualities,omitempty"`
	DefaultQuality        string   `json:"default_quality,omitempty"`
	DefaultResponseFormat string   `json:"default_response_format,omitempty"`
	MaxPrompt             int      `json:"max_prompt,omitempty"`
	// Fallbacks are the models tried, in order, when this one fails.
	Fallbacks []string `json:"fallbacks,omitempty"`
	// Targets are an alias's deployments and their weights; its
	// capabilities are those every target has.
	Targets []catalog.Target `json:"targets,omitempty"`

	// Speech models: the voices, the voice of a request that names none,
	// the most characters of input, the speed range, and whether the
	// model takes instructions.
	Voices       []string `json:"voices,omitempty"`
	DefaultVoice string   `json:"default_voice,omitempty"`
	MaxInput     int      `json:"max_input,omitempty"`
	MinSpeed     float64  `json:"min_speed,omitempty"`
	MaxSpeed     float64  `json:"max_speed,omitempty"`
	Instructions bool     `json:"instructions,omitempty"`
}

func viewModel(m *catalog.Model) modelView {
	v := modelView{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.OwnedBy, Type: m.Type,
		Description: m.Description, Test: m.Test, Capabilities: m.Capabilities, MaxTokens: m.MaxTokens,
		Formats: m.Formats, MinDuration: m.MinDuration, MaxDuration: m.MaxDuration, DefaultDuration: jobs.DefaultDuration(m),
		Durations: m.Durations, Sizes: m.Sizes, MaxPixels: m.MaxPixels, Modes: m.Modes, DefaultSize: m.DefaultSize, Price: viewPrice(m),
		MaxImages: m.MaxImages, Qualities: m.Qualities, DefaultQuality: m.DefaultQuality, DefaultResponseFormat: m.DefaultResponseFormat,
		Fallbacks: m.Fallbacks, Targets: m.Targets,
		Voices: m.Voices, DefaultVoice: m.DefaultVoice, MaxInput: m.MaxInput, MinSpeed: m.MinSpeed, MaxSpeed: m.MaxSpeed, Instructions: m.Instructions}
	if m.Type == catalog.TypeImage {
		v.MaxPrompt = m.MaxPrompt
	}
	return v
}

// priceView is a model's price as GET /v1/models shows it: in credits
// only. The list price in US dollars, its source and the markup are the
// operator's business (the admin API shows them). A chat model shows
// every token class of its prices, resolved (a class without a price of
// its own at the one it falls back to), its service tiers and long
// context likewise, or free: true; an alias shows none (its targets'
// prices apply).
type priceView struct {
	Free bool `json:"free,omitempty"`
	*tokenPriceView
	ServiceTiers map[string]tokenPriceView `json:"service_tiers,omitempty"`
	LongContext  *longContextView          `json:"long_context,omitempty"`

	CreditsPerSecond         credits.Amount            `json:"credits_per_second,omitempty"`
	CreditsPerJob            credits.Amount            `json:"credits_per_job,omitempty"`
	CreditsPerImage          credits.Amount            `json:"credits_per_image,omitempty"`
	CreditsPerImageByQuality map[string]credits.Amount `json:"credits_per_image_by_quality,omitempty"`
	CreditsPer1KChars        credits.Amount            `json:"credits_per_1k_chars,omitempty"`
}

// tokenPriceView is one set of a chat model's prices per million tokens,
// every class shown.
type tokenPriceView struct {
	Input        credits.Amount `json:"credits_per_million_input_tokens"`
	CachedInput  credits.Amount `json:"credits_per_million_cached_input_tokens"`
	CacheWrite   credits.Amount `json:"credits_per_million_cache_write_tokens"`
	CacheWrite1h credits.Amount `json:"credits_per_million_cache_write_1h_tokens"`
	Output       credits.Amount `json:"credits_per_million_output_tokens"`
}

// longContextView is the price of a prompt above AbovePromptTokens.
type longContextView struct {
	AbovePromptTokens int `json:"above_prompt_tokens"`
	tokenPriceView
}

func viewTokens(tp catalog.TokenPrices) tokenPriceView {
	r := tp.Rates()
	return tokenPriceView{Input: r.Input, CachedInput: r.CachedInput, CacheWrite: r.CacheWrite, CacheWrite1h: r.CacheWrite1h, Output: r.Output}
}

// viewPrice returns m's price as the models list shows it (nil for an
// alias, or a model without one).
func viewPrice(m *catalog.Model) *priceView {
	p := m.Price
	switch {
	case m.Alias():
		return nil
	case m.Type == catalog.TypeChat && !p.ChargesTokens():
		return &priceView{Free: true} // marked free, or a free provider's
	case p == nil:
		return nil
	}
	v := &priceView{CreditsPerSecond: p.CreditsPerSecond, CreditsPerJob: p.CreditsPerJob, CreditsPerImage: p.CreditsPerImage,
		CreditsPerImageByQuality: p.CreditsPerImageByQuality, CreditsPer1KChars: p.CreditsPer1KChars}
	if m.Type != catalog.TypeChat {
		return v
	}
	tp := viewTokens(p.TokenPrices)
	v.tokenPriceView = &tp
	if len(p.ServiceTiers) > 0 {
		v.ServiceTiers = make(map[string]tokenPriceView, len(p.ServiceTiers))
		for tier, tp := range p.ServiceTiers {
			v.ServiceTiers[tier] = viewTokens(tp)
		}
	}
	if lc := p.LongContext; lc != nil {
		v.LongContext = &longContextView{AbovePromptTokens: lc.AbovePromptTokens, tokenPriceView: viewTokens(lc.TokenPrices)}
	}
	return v
}

// ListModels serves GET /v1/models: the models whose provider is configured
// (configured says, as catalog.Catalog.ConfiguredFunc makes it; an alias:
// one of its targets' providers, see catalog.Serves) and that the
// caller's API key may use (auth.Allowed), optionally filtered by ?type=.
func ListModels(cat *catalog.Catalog, configured func(provider string) bool, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		typ := r.URL.Query().Get("type")
		switch typ {
		case "", catalog.TypeChat, catalog.TypeMusic, catalog.TypeSFX, catalog.TypeVideo, catalog.TypeImage, catalog.TypeSpeech:
		default:
			return apierr.Invalidf("type", "invalid_value", "type must be one of chat, music, sfx, video, image, speech; got %q.", typ)
		}
		models := cat.List(typ, configured)
		data := make([]modelView, 0, len(models))
		for i := range models {
			if auth.Allowed(r.Context(), models[i].ID) { // the key's model patterns
				data = append(data, viewModel(&models[i]))
			}
		}
		writeJSON(w, http.StatusOK, struct {
			Object string      `json:"object"`
			Data   []modelView `json:"data"`
		}{"list", data})
		return nil
	})
}

// GetModel serves GET /v1/models/{id...} (ids may contain slashes): a
// model the caller's key may not use is a 404, as it is absent from the
// key's list.
func GetModel(cat *catalog.Catalog, configured func(provider string) bool, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		m, ok := cat.Model(id)
		ok = ok && cat.Serves(m, configured) && auth.Allowed(r.Context(), m.ID)
		if !ok {
			return &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: "model",
				Message: "The model " + id + " does not exist or is not configured."}
		}
		writeJSON(w, http.StatusOK, viewModel(m))
		return nil
	})
}
