// Package catalog holds the models and providers the service offers. The
// catalog is data: a JSON file embedded in the binary (catalog.json), which an
// operator may replace with their own file (GENWAY_CATALOG).
//
// A Catalog is immutable after Load and safe for concurrent use.
package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/genway/genway/shared/credits"
)

//go:embed catalog.json
var embedded []byte

// Model types.
const (
	TypeChat  = "chat"
	TypeMusic = "music"
	TypeSFX   = "sfx"
	TypeVideo = "video"
	// TypeSpeech is a text-to-speech model (POST /v1/audio/speech).
	TypeSpeech = "speech"
	// TypeImage models make images synchronously (POST
	// /v1/images/generations), priced per image.
	TypeImage = "image"
)

// Thinking styles for reasoning models: how reasoning_effort reaches the
// provider.
const (
	ThinkingEffort   = "effort"   // pass reasoning_effort through (OpenAI o-series, GPT-5)
	ThinkingBudget   = "budget"   // a thinking token budget (Anthropic, Bedrock Claude, Gemini 2.5)
	ThinkingAdaptive = "adaptive" // Anthropic adaptive thinking with an effort level (newer Claude)
)

// Capabilities are the chat features a model supports.
type Capabilities struct {
	Vision    bool `json:"vision"`
	Reasoning bool `json:"reasoning"`
	Streaming bool `json:"streaming"`
	// Tools: the model takes tools and calls them (tool_choice, tool
	// calls and results in the conversation).
	Tools bool `json:"tools"`
	// StructuredOutputs: the model takes response_format json_object and
	// json_schema.
	StructuredOutputs bool `json:"structured_outputs"`
}

// Price is what a model costs, in exact amounts of credits (decoded from
// the catalog's JSON decimals with no float; more than 6 decimal places of
// credits is a load error naming the model and field). Job models use
// CreditsPerSecond (of requested duration) and/or CreditsPerJob; chat
// models per-million-token prices; image models CreditsPerImage;
// speech models CreditsPer1KChars. The cost methods (ChatCost, SpeechCost,
// ImageCost, JobCost) compute exactly and round up at most once per
// request, to the micro-credit; a cost beyond credits.MaxAmount is
// credits.MaxAmount (no account can pay it).
//
// A catalog states each price one of two ways: as the vendor's list
// price in US dollars (the usd_ fields, with the Source it was read from
// and the date it was read, AsOf), which Parse converts into the credits
// field of the same class with the deployment's Pricing (the credit value
// and markup), rounding up to the micro-credit per unit; or in credits
// (the credits_ fields), used as written. A class stated both ways is a
// load error. After Parse the credits fields hold every price; the usd_
// fields keep the list prices, for the operator's eyes only.
type Price struct {
	CreditsPerSecond credits.Amount `json:"credits_per_second,omitempty"`
	CreditsPerJob    credits.Amount `json:"credits_per_job,omitempty"`
	// TokenPrices are a chat model's prices per MILLION tokens of each
	// class: 0.15 is 0.000015 credits for 100 input tokens.
	TokenPrices
	// ServiceTiers, if set, replace TokenPrices for a completion served
	// at a tier it names (OpenAI's service_tier "flex", "priority"): the
	// tier the upstream reports serving at, else the one asked for.
	// "priority" and "fast" (OpenAI's new name for it) are one tier:
	// Parse gives the one not stated the other's prices.
	ServiceTiers map[string]TokenPrices `json:"service_tiers,omitempty"`
	// LongContext, if set, replaces TokenPrices for a completion whose
	// prompt is longer than its AbovePromptTokens (Gemini 2.5 Pro above
	// 200k): every token of such a request is charged at its prices.
	LongContext *LongContext `json:"long_context,omitempty"`
	// CreditsPerImage is an image model's price of one image;
	// CreditsPerImageByQuality, if set, replaces it for the qualities it
	// names (a vendor whose price depends on the quality asked for).
	CreditsPerImage          credits.Amount            `json:"credits_per_image,omitempty"`
	CreditsPerImageByQuality map[string]credits.Amount `json:"credits_per_image_by_quality,omitempty"`
	// CreditsPer1KChars is a speech model's price per 1,000 characters
	// of input (Unicode code points, as the vendors count them).
	CreditsPer1KChars credits.Amount `json:"credits_per_1k_chars,omitempty"`

	// The list prices in US dollars, per the same units as the credits
	// fields they convert into (TokenPrices, ServiceTiers and
	// LongContext have theirs).
	USDPerSecond         *USD           `json:"usd_per_second,omitempty"`
	USDPerJob            *USD           `json:"usd_per_job,omitempty"`
	USDPerImage          *USD           `json:"usd_per_image,omitempty"`
	USDPerImageByQuality map[string]USD `json:"usd_per_image_by_quality,omitempty"`
	USDPer1KChars        *USD           `json:"usd_per_1k_chars,omitempty"`
	// Source is where the list price was read (a URL); AsOf the date it
	// was read (YYYY-MM-DD); both are required with a price in USD. Note
	// says what an operator should know of it (a third party's numbers,
	// a derived price, a model being retired).
	Source string `json:"source,omitempty"`
	AsOf   string `json:"as_of,omitempty"`
	Note   string `json:"note,omitempty"`

	// Free marks a chat model that costs nothing on purpose (a test model,
	// a server on the operator's own hardware): it states no price. A
	// chat model of a provider that is not free must have a price or
	// this marker (see Parse).
	Free bool `json:"free,omitempty"`
}

// TokenPrices are one set of a chat model's prices per million tokens,
// one per token class. A class without a price of its own is charged at
// another's: cached input and cache writes at the input price, 1-hour
// cache writes at the cache write price. Reasoning tokens are output.
// Each class may be stated in credits or as a list price in US dollars
// (the usd_ fields), which Parse converts into the credits field (see
// Price).
type TokenPrices struct {
	CreditsPerMillionInput        credits.Amount  `json:"credits_per_million_input_tokens,omitempty"`
	CreditsPerMillionCachedInput  *credits.Amount `json:"credits_per_million_cached_input_tokens,omitempty"`
	CreditsPerMillionCacheWrite   *credits.Amount `json:"credits_per_million_cache_write_tokens,omitempty"`
	CreditsPerMillionCacheWrite1h *credits.Amount `json:"credits_per_million_cache_write_1h_tokens,omitempty"`
	CreditsPerMillionOutput       credits.Amount  `json:"credits_per_million_output_tokens,omitempty"`

	USDPerMillionInput        *USD `json:"usd_per_million_input_tokens,omitempty"`
	USDPerMillionCachedInput  *USD `json:"usd_per_million_cached_input_tokens,omitempty"`
	USDPerMillionCacheWrite   *USD `json:"usd_per_million_cache_write_tokens,omitempty"`
	USDPerMillionCacheWrite1h *USD `json:"usd_per_million_cache_write_1h_tokens,omitempty"`
	USDPerMillionOutput       *USD `json:"usd_per_million_output_tokens,omitempty"`
}

// LongContext is the price of a chat completion whose prompt is longer
// than AbovePromptTokens.
type LongContext struct {
	AbovePromptTokens int `json:"above_prompt_tokens"`
	TokenPrices
}

// Rates returns tp with every class priced: a class without a price of
// its own at the price it falls back to.
func (tp TokenPrices) Rates() credits.TokenRates {
	r := credits.TokenRates{Input: tp.CreditsPerMillionInput, CachedInput: tp.CreditsPerMillionInput,
		CacheWrite: tp.CreditsPerMillionInput, Output: tp.CreditsPerMillionOutput}
	if tp.CreditsPerMillionCachedInput != nil {
		r.CachedInput = *tp.CreditsPerMillionCachedInput
	}
	if tp.CreditsPerMillionCacheWrite != nil {
		r.CacheWrite = *tp.CreditsPerMillionCacheWrite
	}
	r.CacheWrite1h = r.CacheWrite
	if tp.CreditsPerMillionCacheWrite1h != nil {
		r.CacheWrite1h = *tp.CreditsPerMillionCacheWrite1h
	}
	return r
}

// charges reports whether tp prices any class above zero.
func (tp TokenPrices) charges() bool {
	r := tp.Rates()
	return r.Input > 0 || r.CachedInput > 0 || r.CacheWrite > 0 || r.CacheWrite1h > 0 || r.Output > 0
}

// ChargesTokens reports whether p makes a chat completion cost credits:
// some token class of some tier is priced above zero.
func (p *Price) ChargesTokens() bool {
	if p == nil {
		return false
	}
	if p.TokenPrices.charges() || (p.LongContext != nil && p.LongContext.charges()) {
		return true
	}
	for _, tp := range p.ServiceTiers {
		if tp.charges() {
			return true
		}
	}
	return false
}

// ChatRates returns the per-million-token rates a completion of t tokens
// served at service tier tier ("" for none) is charged at: the tier's
// prices if p has them, else the long-context prices when t's prompt is
// above their threshold, else p's own.
func (p *Price) ChatRates(t credits.Tokens, tier string) credits.TokenRates {
	if p == nil {
		return credits.TokenRates{}
	}
	if tp, ok := p.ServiceTiers[tier]; ok && tier != "" {
		return tp.Rates()
	}
	if lc := p.LongContext; lc != nil && t.Prompt > int64(lc.AbovePromptTokens) {
		return lc.Rates()
	}
	return p.TokenPrices.Rates()
}

// MaxChatCost returns the most a chat completion of prompt input tokens
// and completion output tokens can cost, whatever its service tier,
// prompt length and use of the cache: every input token at the highest
// input-side rate (fresh, cached or written to the cache) and every
// output token at the highest output rate, over p's own prices, its
// service tiers and its long-context prices. What a hold reserves.
func (p *Price) MaxChatCost(prompt, completion int64) credits.Amount {
	if p == nil {
		return 0
	}
	sets := []TokenPrices{p.TokenPrices}
	for _, tp := range p.ServiceTiers {
		sets = append(sets, tp)
	}
	if p.LongContext != nil {
		sets = append(sets, p.LongContext.TokenPrices)
	}
	var in, out credits.Amount
	for _, tp := range sets {
		r := tp.Rates()
		in = max(in, r.Input, r.CachedInput, r.CacheWrite, r.CacheWrite1h)
		out = max(out, r.Output)
	}
	return perMillion(tokens{prompt, in}, tokens{completion, out})
}

// tokens is one class of a chat completion's tokens and its price per
// million of them.
type tokens struct {
	n     int64
	price credits.Amount // per million tokens
}

// ChatCost returns what a chat completion of t tokens, served at service
// tier tier ("" for none), costs, and the rates it is charged at (see
// ChatRates): over its token classes (fresh input, cached input, cache
// writes of each lifetime, output; reasoning is output), the sum of
// tokens x price per million tokens, divided by a million and rounded up
// once, to the micro-credit, with every product exact (128 bits). Fresh
// input is the prompt less its cached and cache-write tokens. 100 prompt
// tokens at 0.15 credits per million cost exactly 0.000015 credits; any
// priced completion with a token costs at least 0.000001. 0 if the model
// has no token price.
func (p *Price) ChatCost(t credits.Tokens, tier string) (credits.Amount, credits.TokenRates) {
	if p == nil {
		return 0, credits.TokenRates{}
	}
	r := p.ChatRates(t, tier)
	fresh := t.Prompt - max(t.Cached, 0) - max(t.CacheWrite, 0) - max(t.CacheWrite1h, 0)
	return perMillion(
		tokens{fresh, r.Input},
		tokens{t.Cached, r.CachedInput},
		tokens{t.CacheWrite, r.CacheWrite},
		tokens{t.CacheWrite1h, r.CacheWrite1h},
		tokens{t.Completion, r.Output},
	), r
}

// perMillion returns the sum of each class's tokens x its price per
// million, divided by a million, rounded up to the micro-credit: the one
// rounding of a chat cost. Negative counts and prices count as 0.
func perMillion(classes ...tokens) credits.Amount {
	var hi, lo uint64
	for _, c := range classes {
		if c.n <= 0 || c.price <= 0 {
			continue
		}
		h, l := bits.Mul64(uint64(c.n), uint64(c.price))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi, _ = bits.Add64(hi, h, carry) // at most 2^126 per class: no overflow for the classes we have
	}
	return ceilDiv(hi, lo, 1_000_000)
}

// ceilDiv returns the 128-bit (hi, lo) divided by d, rounded up, as an
// Amount; beyond credits.MaxAmount it is credits.MaxAmount.
func ceilDiv(hi, lo, d uint64) credits.Amount {
	if hi >= d { // the quotient needs more than 64 bits
		return credits.MaxAmount
	}
	q, r := bits.Div64(hi, lo, d)
	if r != 0 {
		q++ // cannot wrap: q < 2^64 - 1 when hi < d
	}
	if q > uint64(credits.MaxAmount) {
		return credits.MaxAmount
	}
	return credits.Amount(q)
}

// SpeechCost returns what speaking chars characters costs: chars x the
// price per 1,000 characters, divided by 1,000 and rounded up once, to the
// micro-credit (so any input of a priced model costs at least 0.000001).
func (p *Price) SpeechCost(chars int) credits.Amount {
	if p == nil || chars <= 0 || p.CreditsPer1KChars <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(chars), uint64(p.CreditsPer1KChars))
	return ceilDiv(hi, lo, 1000)
}

// ImageCost returns what n images of quality cost (quality "" or one
// without a price of its own: CreditsPerImage): n x the price per image,
// exact (no rounding).
func (p *Price) ImageCost(quality string, n int) credits.Amount {
	if p == nil || n <= 0 {
		return 0
	}
	per := p.CreditsPerImage
	if q, ok := p.CreditsPerImageByQuality[quality]; ok {
		per = q
	}
	return saturate(per.Mul(int64(n)))
}

// JobCost returns what a job of duration seconds costs: CreditsPerJob +
// CreditsPerSecond x duration, exact (no rounding).
func (p *Price) JobCost(duration int) credits.Amount {
	if p == nil {
		return 0
	}
	perSecond := saturate(p.CreditsPerSecond.Mul(int64(max(duration, 0))))
	return saturate(p.CreditsPerJob.Add(perSecond))
}

// saturate returns a, or credits.MaxAmount for a cost beyond it (err).
func saturate(a credits.Amount, err error) credits.Amount {
	if err != nil {
		return credits.MaxAmount
	}
	return a
}

// check refuses a negative price, naming its field.
func (p *Price) check() error {
	if p == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		a    credits.Amount
	}{
		{"credits_per_second", p.CreditsPerSecond}, {"credits_per_job", p.CreditsPerJob},
		{"credits_per_image", p.CreditsPerImage}, {"credits_per_1k_chars", p.CreditsPer1KChars},
	} {
		if f.a < 0 {
			return fmt.Errorf("price.%s: %s is negative", f.name, f.a)
		}
	}
	for q, a := range p.CreditsPerImageByQuality {
		if a < 0 {
			return fmt.Errorf("price.credits_per_image_by_quality.%s: %s is negative", q, a)
		}
	}
	if err := p.TokenPrices.check("price."); err != nil {
		return err
	}
	for tier, tp := range p.ServiceTiers {
		if err := tp.check("price.service_tiers." + tier + "."); err != nil {
			return err
		}
	}
	if lc := p.LongContext; lc != nil {
		if lc.AbovePromptTokens <= 0 {
			return fmt.Errorf("price.long_context.above_prompt_tokens: must be a positive number of tokens")
		}
		if err := lc.check("price.long_context."); err != nil {
			return err
		}
	}
	return nil
}

// check refuses a negative token price, naming its field after prefix.
func (tp TokenPrices) check(prefix string) error {
	r := tp.Rates()
	for _, f := range []struct {
		name string
		a    credits.Amount
	}{
		{"credits_per_million_input_tokens", r.Input}, {"credits_per_million_cached_input_tokens", r.CachedInput},
		{"credits_per_million_cache_write_tokens", r.CacheWrite}, {"credits_per_million_cache_write_1h_tokens", r.CacheWrite1h},
		{"credits_per_million_output_tokens", r.Output},
	} {
		if f.a < 0 {
			return fmt.Errorf("%s%s: %s is negative", prefix, f.name, f.a)
		}
	}
	return nil
}

// Model is one entry of the catalog. The JSON tags without omitempty are the
// fields GET /v1/models shows; provider-side details are tagged "-" in the
// listing by httpapi.
type Model struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Provider    string `json:"provider"` // a Provider.Name
	Upstream    string `json:"upstream"` // the model's name at the provider
	OwnedBy     string `json:"owned_by"`
	Created     int64  `json:"created"`
	Description string `json:"description,omitempty"`
	Test        bool   `json:"test,omitempty"` // a test model (synthetic provider)
	// Fallbacks are other models of the same type tried in order when
	// this one fails (see package route); a request's own list replaces
	// them.
	Fallbacks []string `json:"fallbacks,omitempty"`
	// Targets make a chat model an alias: equivalent deployments (other
	// catalog chat models) that share its requests by weight. An alias
	// has no provider, upstream, price or capabilities of its own: Parse
	// sets its Capabilities to those every target has, and a request is
	// answered, and charged, by the target that served it. See Alias.
	Targets []Target `json:"targets,omitempty"`

	// Chat models.
	Capabilities *Capabilities `json:"capabilities,omitempty"`
	MaxTokens    int           `json:"max_tokens,omitempty"`
	Thinking     string        `json:"thinking,omitempty"` // ThinkingEffort, ThinkingBudget or ThinkingAdaptive
	// TokensPerSecond, on a chat model of the synthetic provider only,
	// makes it answer at that pace, as a slow model does: each streamed
	// delta (a word) comes 1/TokensPerSecond s after the one before, and
	// a whole answer after as long as its completion tokens take. 0, the
	// default: at once. For seeing a stream arrive (the console's browser
	// tests) and for exercising timeouts and cancellation.
	TokensPerSecond int `json:"tokens_per_second,omitempty"`

	// Job models.
	// Formats are the output formats the model produces (a job's
	// "format"): mp3 and/or wav for audio, ["mp4"] for video. Required.
	Formats         []string `json:"formats,omitempty"`
	MinDuration     int      `json:"min_duration,omitempty"` // 0: 1 second
	MaxDuration     int      `json:"max_duration,omitempty"`
	DefaultDuration int      `json:"default_duration,omitempty"` // 0: the type's default
	DefaultSize     string   `json:"default_size,omitempty"`     // video: WxH
	// Durations, if set, are the only durations the vendor takes (Veo: 4,
	// 6, 8); any other is a 400 at create.
	Durations []int `json:"durations,omitempty"`
	// MaxPixels, if set, bounds a video's width x height (the synthetic
	// provider: 1920x1080), so that a large frame cannot cost far more to
	// make and keep than its per-second price.
	MaxPixels int `json:"max_pixels,omitempty"`
	// Sizes, if set, are the only video sizes (WxH) the vendor makes; a
	// resolution alone picks the landscape size of that height.
	Sizes []string `json:"sizes,omitempty"`
	// SizeDurations narrows Durations per size, where a vendor makes some
	// sizes only at some lengths (Veo 3.1: 1080p only at 8 s).
	SizeDurations map[string][]int `json:"size_durations,omitempty"`
	// Modes, if set, are the music modes the model takes (a model that
	// cannot sing lyrics: ["DESCRIPTION"]); another is a 400 at create.
	Modes []string `json:"modes,omitempty"`
	// DeadlineSeconds bounds a job from its first start; past it the job
	// fails with code timeout, no charge. 0: DefaultDeadline.
	DeadlineSeconds int `json:"deadline_seconds,omitempty"`
	// Input maps a job onto a hosted model's input (fal, Replicate).
	Input *Input `json:"input,omitempty"`

	// Speech models. Formats (above) are the response formats the model
	// can stream: mp3 (the default), wav, opus, aac, flac, pcm.
	// Voices are the voice names the model takes, as GET /v1/models
	// lists them; DefaultVoice is the voice of a request that names none
	// ("": voice is required, as OpenAI's API has it).
	Voices       []string `json:"voices,omitempty"`
	DefaultVoice string   `json:"default_voice,omitempty"`
	// UpstreamVoices maps a voice of Voices to the vendor's own voice id
	// where the two differ (OpenAI's voice names on ElevenLabs' default
	// voices); a voice it does not map goes to the vendor as it is.
	UpstreamVoices map[string]string `json:"upstream_voices,omitempty"`
	// VoicePattern, if set, is a regular expression (anchored) that a
	// voice outside Voices may match to be taken as the vendor's own
	// voice id (ElevenLabs: any voice of the operator's account).
	VoicePattern string `json:"voice_pattern,omitempty"`
	// MaxInput is the most characters of input a request may have.
	MaxInput int `json:"max_input,omitempty"`
	// MinSpeed and MaxSpeed bound the speed the model honours; both 0:
	// it takes no speed but the default, 1.
	MinSpeed float64 `json:"min_speed,omitempty"`
	MaxSpeed float64 `json:"max_speed,omitempty"`
	// Instructions: the model takes instructions (a voice's style, tone,
	// accent: OpenAI's gpt-4o-mini-tts).
	Instructions bool `json:"instructions,omitempty"`
	// Image models. Sizes are the only sizes (WxH, or "auto" where the
	// vendor picks one) and DefaultSize the one a request without a size
	// gets; Formats the output formats (png, jpeg, webp).
	// MaxImages is the most images one request may ask for (n).
	MaxImages int `json:"max_images,omitempty"`
	// Qualities are the qualities the model takes ("low", "high", ...;
	// none: a request may only say "auto"); DefaultQuality is sent when a
	// request names none ("": none is sent, the vendor's default).
	Qualities      []string `json:"qualities,omitempty"`
	DefaultQuality string   `json:"default_quality,omitempty"`
	// DefaultResponseFormat is how images are answered when the request
	// does not say: "b64_json" (the default) or "url".
	DefaultResponseFormat string `json:"default_response_format,omitempty"`
	// MaxPrompt is the longest prompt in characters (0: DefaultMaxPrompt).
	MaxPrompt int `json:"max_prompt,omitempty"`

	Price *Price `json:"price,omitempty"`

	voicePattern *regexp.Regexp // VoicePattern, compiled by Parse
}

// UnmarshalJSON decodes a catalog model. A price that is not an exact
// amount of credits (more than 6 decimal places, beyond
// credits.MaxAmount, not a number) is an error naming the model and the
// field.
//
// A price that states one class both ways (a usd_ list price and the
// credits_ field it converts into) is an error naming both fields, and so
// are a list price in USD that is not an exact amount of dollars (more
// than 9 decimal places, negative, not a number) and a free marker with
// a price.
func (m *Model) UnmarshalJSON(b []byte) error {
	type plain Model // without this method
	err := json.Unmarshal(b, (*plain)(m))
	named := func(field, reason string) error {
		var id struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(b, &id) // best effort: the message names what it can
		// encoding/json names an embedded struct's fields through its
		// type name; the JSON has no such level.
		field = strings.ReplaceAll(field, "TokenPrices.", "")
		return fmt.Errorf("model %q: %s: %s", id.ID, field, reason)
	}
	if field, reason, ok := credits.AmountFieldError(err); ok {
		return named(field, reason)
	}
	if field, reason, ok := usdFieldError(err); ok {
		return named(field, reason)
	}
	if err != nil {
		return err
	}
	var raw struct {
		Price json.RawMessage `json:"price"`
	}
	if json.Unmarshal(b, &raw) == nil {
		if err := checkPriceFields(raw.Price); err != nil {
			return fmt.Errorf("model %q: %w", m.ID, err)
		}
	}
	return nil
}

// Target is one deployment of an alias: a catalog chat model that is not
// itself an alias, and its weight (>= 1). A request to the alias goes
// first to a target with probability its weight over the sum of the
// alias's weights (see route.WeightedOrder).
type Target struct {
	Model  string `json:"model"`
	Weight int    `json:"weight"`
}

// Alias reports whether m is an alias (a chat model with Targets).
func (m *Model) Alias() bool { return len(m.Targets) > 0 }

// SpeechFormats are the response formats a speech model may list, as
// OpenAI's API names them; mp3 is the default.
var SpeechFormats = []string{"mp3", "opus", "aac", "flac", "wav", "pcm"}

// SpeechSpeeds bound every speech model's speed range (OpenAI's API).
const (
	MinSpeechSpeed = 0.25
	MaxSpeechSpeed = 4.0
)

// TakesVoice reports whether speech model m takes voice: one of its
// Voices, or a vendor voice id matching its VoicePattern.
func (m *Model) TakesVoice(voice string) bool {
	return slices.Contains(m.Voices, voice) || (m.voicePattern != nil && m.voicePattern.MatchString(voice))
}

// UpstreamVoice returns the vendor's id of voice (see UpstreamVoices).
func (m *Model) UpstreamVoice(voice string) string {
	if v, ok := m.UpstreamVoices[voice]; ok {
		return v
	}
	return voice
}

// checkSpeech checks a speech model: a price per 1,000 characters, a
// positive max_input, formats among SpeechFormats with mp3 (the default)
// among them, voices (or a voice pattern), a default voice it takes, voice
// mappings of its own voices only, and a speed range within OpenAI's.
func (m *Model) checkSpeech() error {
	switch {
	case m.Price == nil || m.Price.CreditsPer1KChars < 0 || m.Price.CreditsPerSecond != 0 || m.Price.CreditsPerJob != 0 ||
		m.Price.CreditsPerMillionInput != 0 || m.Price.CreditsPerMillionOutput != 0 || m.Price.CreditsPerImage != 0 || len(m.Price.CreditsPerImageByQuality) > 0:
		return fmt.Errorf(`a speech model needs "price": {"usd_per_1k_chars": N, "source": ..., "as_of": ...} or {"credits_per_1k_chars": N}, and no other price`)
	case m.MaxInput <= 0:
		return fmt.Errorf(`a speech model needs "max_input" (characters)`)
	case !slices.Contains(m.Formats, "mp3"):
		return fmt.Errorf(`a speech model's "formats" must include mp3 (the default response_format); got %q`, m.Formats)
	case len(m.Voices) == 0 && m.VoicePattern == "":
		return fmt.Errorf(`a speech model needs "voices" or a "voice_pattern"`)
	case m.MinSpeed > m.MaxSpeed || (m.MaxSpeed != 0 && (m.MinSpeed < MinSpeechSpeed || m.MaxSpeed > MaxSpeechSpeed || m.MinSpeed > 1 || m.MaxSpeed < 1)):
		return fmt.Errorf("min_speed %g, max_speed %g: need %g <= min_speed <= 1 <= max_speed <= %g (or neither)", m.MinSpeed, m.MaxSpeed, MinSpeechSpeed, MaxSpeechSpeed)
	}
	for _, f := range m.Formats {
		if !slices.Contains(SpeechFormats, f) {
			return fmt.Errorf("formats: %q is not one of %v", f, SpeechFormats)
		}
	}
	if m.VoicePattern != "" {
		re, err := regexp.Compile("^(?:" + m.VoicePattern + ")$")
		if err != nil {
			return fmt.Errorf("voice_pattern: %w", err)
		}
		m.voicePattern = re
	}
	if m.DefaultVoice != "" && !m.TakesVoice(m.DefaultVoice) {
		return fmt.Errorf("default_voice %q is not one of voices %v and does not match voice_pattern", m.DefaultVoice, m.Voices)
	}
	for v := range m.UpstreamVoices {
		if !slices.Contains(m.Voices, v) {
			return fmt.Errorf("upstream_voices: %q is not one of voices %v", v, m.Voices)
		}
	}
	return nil
}

// DefaultDeadline is a job model's deadline when the catalog sets none.
const DefaultDeadline = 15 * time.Minute

// DefaultImageDeadline bounds one attempt of an image request when its
// model sets no deadline_seconds.
const DefaultImageDeadline = 5 * time.Minute

// DefaultMaxPrompt is an image model's prompt limit when the catalog sets
// none: the jobs' limit.
const DefaultMaxPrompt = 4000

// ImageFormat reports whether f is an image output format: png, jpeg or
// webp (OpenAI's output_format values).
func ImageFormat(f string) bool { return f == "png" || f == "jpeg" || f == "webp" }

// Deadline returns how long a job of m may run from its first start.
func (m *Model) Deadline() time.Duration {
	if m.DeadlineSeconds > 0 {
		return time.Duration(m.DeadlineSeconds) * time.Second
	}
	return DefaultDeadline
}

// Input says where a job's fields go in a hosted model's input object (fal
// and Replicate models each name their inputs their own way). A field name
// left empty is not sent. Fixed inputs are sent as they are, under the
// mapped ones.
type Input struct {
	Prompt string `json:"prompt,omitempty"` // the prompt; default "prompt"
	// Duration is the duration in seconds, as a JSON number, or as a
	// string when DurationString is set (some fal models take "5").
	Duration       string `json:"duration,omitempty"`
	DurationString bool   `json:"duration_string,omitempty"`
	// DurationMS is the duration in milliseconds (a number).
	DurationMS  string         `json:"duration_ms,omitempty"`
	AspectRatio string         `json:"aspect_ratio,omitempty"` // "16:9", "9:16", "1:1" from the size
	Resolution  string         `json:"resolution,omitempty"`   // "720p" from the size's height
	Size        string         `json:"size,omitempty"`         // "WxH" as it is
	Lyrics      string         `json:"lyrics,omitempty"`       // music in LYRICS mode
	Category    string         `json:"category,omitempty"`     // the sfx category hint; unmapped, it is folded into the prompt
	Format      string         `json:"format,omitempty"`       // the audio format, mp3 or wav
	Fixed       map[string]any `json:"fixed,omitempty"`
}

// Build returns a hosted model's input object for a job: Fixed first, then
// each mapped field whose name is set (the prompt always, under "prompt" by
// default; a category hint with no field of its own is folded into the
// prompt as "<category>: <prompt>"). The aspect ratio is the size's width:height reduced ("16:9",
// "9:16", "1:1"); the resolution is the size's shorter side ("720p").
// Empty values (no lyrics, no size) are not sent.
func (in *Input) Build(prompt, category string, duration int, size, lyrics, format string) map[string]any {
	out := map[string]any{}
	if in == nil {
		in = &Input{}
	}
	for k, v := range in.Fixed {
		out[k] = v
	}
	put := func(field string, v any) {
		if field != "" && v != "" && v != 0 {
			out[field] = v
		}
	}
	field := in.Prompt
	if field == "" {
		field = "prompt"
	}
	if category != "" && in.Category == "" {
		prompt = category + ": " + prompt
	}
	out[field] = prompt
	put(in.Category, category)
	if in.DurationString {
		put(in.Duration, fmt.Sprint(duration))
	} else {
		put(in.Duration, duration)
	}
	put(in.DurationMS, duration*1000)
	if w, h, ok := ParseSize(size); ok {
		ratio, _ := AspectRatio(size)
		put(in.AspectRatio, ratio)
		put(in.Resolution, fmt.Sprintf("%dp", min(w, h)))
		put(in.Size, size)
	}
	put(in.Lyrics, lyrics)
	put(in.Format, format)
	return out
}

// AspectRatio returns the aspect ratio of size (WxH): width:height reduced
// ("16:9", "1:1"), and whether size is WxH.
func AspectRatio(size string) (string, bool) {
	w, h, ok := ParseSize(size)
	if !ok {
		return "", false
	}
	g := gcd(w, h)
	return fmt.Sprintf("%d:%d", w/g, h/g), true
}

// ParseSize returns the width and height of a size WxH ("1024x768"), and
// whether s is one, both positive.
func ParseSize(s string) (w, h int, ok bool) {
	ws, hs, found := strings.Cut(s, "x")
	if _, err := fmt.Sscan(ws, &w); err != nil || !found {
		return 0, 0, false
	}
	if _, err := fmt.Sscan(hs, &h); err != nil || w <= 0 || h <= 0 {
		return 0, 0, false
	}
	return w, h, true
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Provider is an upstream the catalog's models run on.
type Provider struct {
	Name        string `json:"name"`                   // e.g. "openai", "groq"
	Kind        string `json:"kind"`                   // wire protocol: openai, anthropic, gemini, bedrock, synthetic
	BaseURL     string `json:"base_url,omitempty"`     // default base URL
	BaseURLEnv  string `json:"base_url_env,omitempty"` // env var overriding BaseURL
	KeyEnv      string `json:"key_env,omitempty"`      // env var holding the API key
	KeyOptional bool   `json:"key_optional,omitempty"` // configured by BaseURLEnv alone (Ollama, vLLM)
	Test        bool   `json:"test,omitempty"`
	// Free: the provider's models cost the operator nothing (a server on
	// the operator's own hardware: Ollama, vLLM), so a chat model of it
	// without a price is free; one with a price is charged it. The
	// synthetic provider (kind synthetic) is free whatever it says.
	Free bool `json:"free,omitempty"`
	// Native lists the client APIs the provider's server speaks itself,
	// whose requests it is sent as the client sent them instead of
	// translated (see chat.NativeProvider): "responses" (OpenAI's
	// Responses API, kind openai: OpenAI itself, not the servers that
	// only copy its chat API) and "messages" (Anthropic's Messages API,
	// kind anthropic). GENWAY_NATIVE=off turns them all off.
	Native []string `json:"native,omitempty"`
}

// nativeKinds are the provider kinds that may speak each native API.
var nativeKinds = map[string]string{"responses": "openai", "messages": "anthropic"}

// NativeAPIs returns the client APIs p speaks natively (see Native), none
// when s.NoNative (GENWAY_NATIVE=off): every request is then translated.
func (p *Provider) NativeAPIs(s Setup) []string {
	if s.NoNative {
		return nil
	}
	return p.Native
}

// IsFree reports whether p's models cost the operator nothing (see Free).
func (p *Provider) IsFree() bool { return p.Free || p.Kind == "synthetic" }

// Catalog is the set of providers and models.
type Catalog struct {
	Providers []Provider `json:"providers"`
	Models    []Model    `json:"models"`

	byID       map[string]*Model
	byProvider map[string]*Provider
	pricing    Pricing
}

// Default returns the embedded catalog, its list prices converted at the
// default credit value (Pricing{}: 1 credit = US$0.01, no markup).
func Default() (*Catalog, error) { return Parse(embedded, Pricing{}) }

// Load returns the catalog in the file at path, or the embedded one if path
// is empty, its list prices converted into credits with pricing (see
// Parse).
func Load(path string, pricing Pricing) (*Catalog, error) {
	if path == "" {
		return Parse(embedded, pricing)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load catalog: %w", err)
	}
	return Parse(b, pricing)
}

// Parse decodes and checks a catalog. Every list price in US dollars is
// converted into credits with pricing (the deployment's credit value and
// markup), rounded up to the micro-credit per unit; prices in credits are
// used as written (see Price).
//
// Nothing is free by accident: a chat model of a provider that is not
// free (see Provider.Free) needs a price of its own tokens, or the
// explicit marker "price": {"free": true}; without either it is refused,
// by name. An alias has no price (its targets' apply). Job, image and
// speech models need their price.
func Parse(b []byte, pricing Pricing) (*Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	c.pricing = pricing
	c.byID = make(map[string]*Model, len(c.Models))
	c.byProvider = make(map[string]*Provider, len(c.Providers))
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.Name == "" || p.Kind == "" {
			return nil, fmt.Errorf("parse catalog: provider %d needs name and kind", i)
		}
		for _, api := range p.Native {
			if kind, ok := nativeKinds[api]; !ok || kind != p.Kind {
				return nil, fmt.Errorf("parse catalog: provider %q: native %q is not an API a provider of kind %s speaks (responses: kind openai; messages: kind anthropic)", p.Name, api, p.Kind)
			}
		}
		c.byProvider[p.Name] = p
	}
	for i := range c.Models {
		m := &c.Models[i]
		if _, dup := c.byID[m.ID]; dup {
			return nil, fmt.Errorf("parse catalog: duplicate model %q", m.ID)
		}
		if m.Targets != nil {
			if err := m.checkAlias(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
			if m.OwnedBy == "" {
				m.OwnedBy = AliasOwner
			}
			c.byID[m.ID] = m
			continue
		}
		if _, ok := c.byProvider[m.Provider]; !ok {
			return nil, fmt.Errorf("parse catalog: model %q: unknown provider %q", m.ID, m.Provider)
		}
		if err := m.Price.convert(pricing); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
		if err := m.Price.check(); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
		if m.Price != nil && m.Price.Free && m.Type != TypeChat {
			return nil, fmt.Errorf("parse catalog: model %q: price.free: only a chat model may be marked free; a %s model needs a price", m.ID, m.Type)
		}
		if m.TokensPerSecond != 0 && (m.TokensPerSecond < 0 || m.Type != TypeChat || c.byProvider[m.Provider].Kind != "synthetic") {
			return nil, fmt.Errorf("parse catalog: model %q: tokens_per_second must be positive, on a chat model of the synthetic provider", m.ID)
		}
		switch m.Type {
		case TypeChat:
			if !strings.HasPrefix(m.ID, m.Provider+"/") {
				return nil, fmt.Errorf("parse catalog: chat model %q must be named %s/<model>", m.ID, m.Provider)
			}
			if m.Capabilities == nil {
				m.Capabilities = &Capabilities{Streaming: true}
			}
			if err := c.checkChatPrice(m); err != nil {
				return nil, fmt.Errorf("parse catalog: %w", err)
			}
		case TypeImage:
			if err := m.checkImage(); err != nil {
				return nil, fmt.Errorf("parse catalog: image model %q: %w", m.ID, err)
			}
		case TypeMusic, TypeSFX, TypeVideo:
			if m.MaxDuration <= 0 || m.Price == nil {
				return nil, fmt.Errorf("parse catalog: job model %q needs max_duration and price", m.ID)
			}
			if err := m.checkFormats(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
			if err := m.checkJobLimits(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
		case TypeSpeech:
			if err := m.checkSpeech(); err != nil {
				return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
			}
		default:
			return nil, fmt.Errorf("parse catalog: model %q: unknown type %q", m.ID, m.Type)
		}
		if m.Upstream == "" {
			m.Upstream = strings.TrimPrefix(m.ID, m.Provider+"/")
		}
		if m.OwnedBy == "" {
			m.OwnedBy = m.Provider
		}
		c.byID[m.ID] = m
	}
	for _, m := range c.byID {
		if err := c.checkTargets(m); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
		if err := c.checkFallbacks(m); err != nil {
			return nil, fmt.Errorf("parse catalog: model %q: %w", m.ID, err)
		}
	}
	sort.SliceStable(c.Models, func(i, j int) bool { return c.Models[i].ID < c.Models[j].ID })
	for i := range c.Models { // re-point after sorting
		c.byID[c.Models[i].ID] = &c.Models[i]
	}
	return &c, nil
}

// checkChatPrice refuses a chat model that would be free by accident: of
// a provider that is not free, with no price of its own tokens (input,
// cached input, cache writes or output above zero) and no free marker.
// The message names the model and the two ways out.
func (c *Catalog) checkChatPrice(m *Model) error {
	if c.byProvider[m.Provider].IsFree() || (m.Price != nil && (m.Price.Free || m.Price.TokenPrices.charges())) {
		return nil
	}
	return fmt.Errorf(`chat model %q (provider %q) has no price: give it one (its vendor's list price: `+
		`"price": {"usd_per_million_input_tokens": N, "usd_per_million_output_tokens": N, "source": URL, "as_of": DATE}, or credits_per_million_..._tokens), `+
		`or mark it free on purpose ("price": {"free": true})`, m.ID, m.Provider)
}

// Pricing returns the credit value and markup the catalog's list prices
// were converted with.
func (c *Catalog) Pricing() Pricing { return c.pricing }

// VideoFormat is the one format of every video model: each video adapter
// delivers MP4 (the synthetic provider Motion JPEG in MP4, Veo and the
// hosted models H.264), and none asks its vendor for another container.
const VideoFormat = "mp4"

// checkFormats checks that a job model lists the formats it produces: at
// least one for audio, exactly VideoFormat for video.
func (m *Model) checkFormats() error {
	switch {
	case m.Type == TypeVideo && (len(m.Formats) != 1 || m.Formats[0] != VideoFormat):
		return fmt.Errorf(`a video model needs "formats": [%q] (Genway delivers video as MP4); got %q`, VideoFormat, m.Formats)
	case len(m.Formats) == 0:
		return fmt.Errorf(`an audio model needs "formats", e.g. ["mp3", "wav"]`)
	}
	return nil
}

// checkJobLimits checks that a job model's default duration and size are
// among the ones it allows.
func (m *Model) checkJobLimits() error {
	d := m.DefaultDuration
	if d > m.MaxDuration || d < 0 {
		return fmt.Errorf("default_duration %d is not within 1..max_duration %d", d, m.MaxDuration)
	}
	if len(m.Durations) > 0 && d == 0 {
		return fmt.Errorf("durations %v need a default_duration among them", m.Durations)
	}
	if d != 0 && len(m.Durations) > 0 && !slices.Contains(m.Durations, d) {
		return fmt.Errorf("default_duration %d is not one of durations %v", d, m.Durations)
	}
	if m.MinDuration < 0 || m.MinDuration > m.MaxDuration || (d != 0 && d < m.MinDuration) {
		return fmt.Errorf("min_duration %d does not fit max_duration %d and default_duration %d", m.MinDuration, m.MaxDuration, d)
	}
	for _, v := range m.Durations {
		if v <= 0 || v > m.MaxDuration {
			return fmt.Errorf("durations: %d is not within 1..max_duration %d", v, m.MaxDuration)
		}
	}
	if m.Type == TypeMusic && m.Input != nil && m.Input.Lyrics == "" && !(len(m.Modes) == 1 && m.Modes[0] == "DESCRIPTION") {
		return fmt.Errorf(`a hosted music model with no "lyrics" input field must say "modes": ["DESCRIPTION"]`)
	}
	if m.DefaultSize != "" && len(m.Sizes) > 0 && !slices.Contains(m.Sizes, m.DefaultSize) {
		return fmt.Errorf("default_size %q is not one of sizes %v", m.DefaultSize, m.Sizes)
	}
	for s := range m.SizeDurations {
		if !slices.Contains(m.Sizes, s) {
			return fmt.Errorf("size_durations: %q is not one of sizes %v", s, m.Sizes)
		}
	}
	return nil
}

// checkImage checks an image model and applies its defaults (max_prompt,
// default_response_format): a price per image (and one per quality only
// for qualities it takes), at least one size with the default among them,
// a positive max_images, output formats png, jpeg or webp, and a
// default quality among its qualities.
func (m *Model) checkImage() error {
	p := m.Price
	switch {
	case p == nil || p.CreditsPerImage <= 0:
		return fmt.Errorf(`needs "price": {"usd_per_image": N, "source": ..., "as_of": ...} or {"credits_per_image": N} with N > 0`)
	case m.MaxImages <= 0:
		return fmt.Errorf("needs max_images > 0")
	case len(m.Sizes) == 0 || !slices.Contains(m.Sizes, m.DefaultSize):
		return fmt.Errorf("needs sizes and a default_size among them; got %v and %q", m.Sizes, m.DefaultSize)
	case len(m.Formats) == 0:
		return fmt.Errorf(`needs "formats", e.g. ["png", "jpeg"]`)
	case m.DefaultQuality != "" && !slices.Contains(m.Qualities, m.DefaultQuality):
		return fmt.Errorf("default_quality %q is not one of qualities %v", m.DefaultQuality, m.Qualities)
	case m.MaxPrompt < 0:
		return fmt.Errorf("max_prompt must not be negative")
	}
	for _, s := range m.Sizes {
		if _, _, ok := ParseSize(s); !ok && s != "auto" {
			return fmt.Errorf("size %q is neither WxH nor auto", s)
		}
	}
	for _, f := range m.Formats {
		if !ImageFormat(f) {
			return fmt.Errorf("format %q is not png, jpeg or webp", f)
		}
	}
	for q, v := range p.CreditsPerImageByQuality {
		if !slices.Contains(m.Qualities, q) || v <= 0 {
			return fmt.Errorf("credits_per_image_by_quality: %q needs a positive price and to be one of qualities %v", q, m.Qualities)
		}
	}
	switch m.DefaultResponseFormat {
	case "":
		m.DefaultResponseFormat = "b64_json"
	case "b64_json", "url":
	default:
		return fmt.Errorf("default_response_format %q is not b64_json or url", m.DefaultResponseFormat)
	}
	if m.MaxPrompt == 0 {
		m.MaxPrompt = DefaultMaxPrompt
	}
	return nil
}

// ImageDeadline returns how long one attempt of an image request on m may
// take: its deadline_seconds, else DefaultImageDeadline.
func (m *Model) ImageDeadline() time.Duration {
	if m.DeadlineSeconds > 0 {
		return time.Duration(m.DeadlineSeconds) * time.Second
	}
	return DefaultImageDeadline
}

// AliasOwner is the owned_by of an alias that sets none: the alias is this
// gateway's, whoever owns its targets.
const AliasOwner = "genway"

// checkAlias checks what alias m (a model with targets) says of itself:
// it is a chat model with an id, at least one target, each weighing an
// integer >= 1, and none of the fields that belong to a deployment
// (provider, upstream, capabilities, price, max_tokens, thinking,
// tokens_per_second). Its targets are checked by checkTargets.
func (m *Model) checkAlias() error {
	field := ""
	switch {
	case m.Type != TypeChat:
		return fmt.Errorf("targets: only a chat model may have targets, not a %q model", m.Type)
	case m.ID == "":
		return fmt.Errorf("id: an alias needs an id")
	case len(m.Targets) == 0:
		return fmt.Errorf("targets: an alias needs at least one target")
	case m.Provider != "":
		field = "provider"
	case m.Upstream != "":
		field = "upstream"
	case m.Capabilities != nil:
		field = "capabilities" // those every target has
	case m.Price != nil:
		field = "price" // the answering target's
	case m.MaxTokens != 0:
		field = "max_tokens"
	case m.Thinking != "":
		field = "thinking"
	case m.TokensPerSecond != 0:
		field = "tokens_per_second"
	}
	if field != "" {
		return fmt.Errorf("%s: an alias (a model with targets) has no %s of its own: its targets' apply", field, field)
	}
	for i, t := range m.Targets {
		if t.Weight < 1 {
			return fmt.Errorf("targets[%d].weight: must be an integer >= 1, not %d", i, t.Weight)
		}
	}
	return nil
}

// checkTargets checks that alias m's targets are chat models of the
// catalog that are not aliases, each listed once, and sets m's
// Capabilities to those every target has. A model without targets passes.
func (c *Catalog) checkTargets(m *Model) error {
	if !m.Alias() {
		return nil
	}
	caps := Capabilities{Vision: true, Reasoning: true, Streaming: true, Tools: true, StructuredOutputs: true}
	for i, t := range m.Targets {
		tm, ok := c.byID[t.Model]
		switch {
		case !ok:
			return fmt.Errorf("targets[%d].model: unknown model %q", i, t.Model)
		case tm.Type != TypeChat:
			return fmt.Errorf("targets[%d].model: %q is a %s model, not chat", i, t.Model, tm.Type)
		case tm.Alias():
			return fmt.Errorf("targets[%d].model: %q is an alias; a target is a model with a provider", i, t.Model)
		case slices.ContainsFunc(m.Targets[:i], func(o Target) bool { return o.Model == t.Model }):
			return fmt.Errorf("targets[%d].model: %q is listed twice", i, t.Model)
		}
		tc := tm.Capabilities
		caps.Vision = caps.Vision && tc.Vision
		caps.Reasoning = caps.Reasoning && tc.Reasoning
		caps.Streaming = caps.Streaming && tc.Streaming
		caps.Tools = caps.Tools && tc.Tools
		caps.StructuredOutputs = caps.StructuredOutputs && tc.StructuredOutputs
	}
	m.Capabilities = &caps
	return nil
}

// checkFallbacks checks that m's fallbacks are other models of its type,
// each listed once.
func (c *Catalog) checkFallbacks(m *Model) error {
	for i, id := range m.Fallbacks {
		f, ok := c.byID[id]
		switch {
		case !ok:
			return fmt.Errorf("fallbacks: unknown model %q", id)
		case id == m.ID:
			return fmt.Errorf("fallbacks: a model is not its own fallback")
		case f.Type != m.Type:
			return fmt.Errorf("fallbacks: %q is a %s model, not %s", id, f.Type, m.Type)
		case slices.Contains(m.Fallbacks[:i], id):
			return fmt.Errorf("fallbacks: %q is listed twice", id)
		}
	}
	return nil
}

// Model returns the model with id, and whether it exists.
func (c *Catalog) Model(id string) (*Model, bool) {
	m, ok := c.byID[id]
	return m, ok
}

// Provider returns the provider named name, and whether it exists.
func (c *Catalog) Provider(name string) (*Provider, bool) {
	p, ok := c.byProvider[name]
	return p, ok
}

// Setup is how a deployment configures the catalog's providers: the
// values of the variables the providers name (their keys and base URLs),
// and the switches. The zero Setup configures the synthetic provider
// alone, with the native APIs on. It is read once, at start (package app
// reads it from the environment).
type Setup struct {
	// Vars holds the values of the variables the providers name (each
	// KeyEnv and BaseURLEnv; see Catalog.EnvNames), by name; a variable
	// that is unset is absent or "".
	Vars map[string]string
	// Configured (GENWAY_CONFIGURED) names providers configured without
	// their key: for a function that only lists models or validates jobs
	// and must not hold vendor secrets. The synthetic provider is not
	// concerned.
	Configured []string
	// NoSynthetic (GENWAY_SYNTHETIC=off) hides and disables the synthetic
	// provider.
	NoSynthetic bool
	// Bedrock (GENWAY_BEDROCK=on) configures the providers of kind
	// bedrock (through the AWS credential chain).
	Bedrock bool
	// NoNative (GENWAY_NATIVE=off) translates every request (see
	// Provider.NativeAPIs).
	NoNative bool
}

// Configured reports whether provider p can be used under s: the
// synthetic provider always (unless s.NoSynthetic), others when their key
// (or, for key-optional ones, their base URL) is set, or when s.Configured
// names them.
func (p *Provider) Configured(s Setup) bool {
	if p.Kind != "synthetic" && slices.Contains(s.Configured, p.Name) {
		return true
	}
	switch {
	case p.Kind == "synthetic":
		return !s.NoSynthetic
	case p.Kind == "bedrock":
		return s.Bedrock
	case p.KeyOptional:
		return p.BaseURLEnv != "" && s.Vars[p.BaseURLEnv] != ""
	default: // a key, or a pool of keys separated by commas ("sk-a,sk-b")
		return p.KeyEnv != "" && strings.Trim(s.Vars[p.KeyEnv], ", \t") != ""
	}
}

// BaseURLFor returns the provider's base URL, overridden by its variable
// in s.
func (p *Provider) BaseURLFor(s Setup) string {
	if p.BaseURLEnv != "" {
		if v := s.Vars[p.BaseURLEnv]; v != "" {
			return strings.TrimRight(v, "/")
		}
	}
	return strings.TrimRight(p.BaseURL, "/")
}

// EnvNames returns the variables the catalog's providers name (each
// KeyEnv and BaseURLEnv), sorted, each once: those a Setup's Vars holds.
func (c *Catalog) EnvNames() []string {
	var names []string
	for i := range c.Providers {
		for _, n := range []string{c.Providers[i].KeyEnv, c.Providers[i].BaseURLEnv} {
			if n != "" {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ConfiguredFunc returns a function reporting, for a provider name, whether
// it is configured under s (unknown names are not). It is resolved once,
// now: configuration is settled at start, not per request.
func (c *Catalog) ConfiguredFunc(s Setup) func(provider string) bool {
	set := make(map[string]bool, len(c.Providers))
	for i := range c.Providers {
		if p := &c.Providers[i]; p.Configured(s) {
			set[p.Name] = true
		}
	}
	return func(name string) bool { return set[name] }
}

// Serves reports whether a server whose providers are configured as
// configured says (see ConfiguredFunc; nil: every provider is) can serve
// m: m's provider is configured or, for an alias, one of its targets'.
func (c *Catalog) Serves(m *Model, configured func(provider string) bool) bool {
	if configured == nil {
		return true
	}
	if !m.Alias() {
		return configured(m.Provider)
	}
	for _, t := range m.Targets {
		if tm, ok := c.byID[t.Model]; ok && configured(tm.Provider) {
			return true
		}
	}
	return false
}

// List returns the models of type typ ("" for all) that the server can
// serve (see Serves; configured nil: every model), in id order.
func (c *Catalog) List(typ string, configured func(provider string) bool) []Model {
	var out []Model
	for i := range c.Models {
		m := &c.Models[i]
		if typ != "" && m.Type != typ {
			continue
		}
		if !c.Serves(m, configured) {
			continue
		}
		out = append(out, *m)
	}
	return out
}
