package catalog

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/genway/genway/shared/credits"
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

// Model is one entry of the catalog: the core every model has, and the
// part of its type (Chat, Job, Speech or Image), embedded so that a
// catalog file and the code read a field by its name alone (m.MaxTokens).
// A model uses the part of its Type; the others stay empty. The JSON tags without omitempty are the fields GET
// /v1/models shows; provider-side details are left out of the listing by
// httpapi.
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

	// Formats are the output formats the model produces: for a job
	// model (a job's "format"), mp3 and/or wav for audio, ["mp4"] for
	// video (required); for a speech model the response formats it can
	// stream (SpeechFormats; mp3 the default); for an image model png,
	// jpeg and/or webp.
	Formats []string `json:"formats,omitempty"`
	// Sizes, if set, are the only sizes (WxH) the model makes: a video
	// model's (a resolution alone picks the landscape size of that
	// height), an image model's (or "auto" where the vendor picks one;
	// required). DefaultSize is the size of a request that names none.
	Sizes       []string `json:"sizes,omitempty"`
	DefaultSize string   `json:"default_size,omitempty"`
	// DeadlineSeconds bounds a job from its first start (past it the job
	// fails with code timeout, no charge; 0: DefaultDeadline), and one
	// attempt of an image request (0: DefaultImageDeadline).
	DeadlineSeconds int `json:"deadline_seconds,omitempty"`
	// Input maps a job or an image request onto a hosted model's input
	// (fal, Replicate).
	Input *Input `json:"input,omitempty"`

	Chat
	Job
	Speech
	Image

	Price *Price `json:"price,omitempty"`
}

// Chat is the part of a chat model.
type Chat struct {
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
}

// Job is the part of a job model (music, sfx, video): the durations,
// sizes and modes a job may ask for.
type Job struct {
	MinDuration     int `json:"min_duration,omitempty"` // 0: 1 second
	MaxDuration     int `json:"max_duration,omitempty"`
	DefaultDuration int `json:"default_duration,omitempty"` // 0: the type's default
	// Durations, if set, are the only durations the vendor takes (Veo: 4,
	// 6, 8); any other is a 400 at create.
	Durations []int `json:"durations,omitempty"`
	// MaxPixels, if set, bounds a video's width x height (the synthetic
	// provider: 1920x1080), so that a large frame cannot cost far more to
	// make and keep than its per-second price.
	MaxPixels int `json:"max_pixels,omitempty"`
	// SizeDurations narrows Durations per size, where a vendor makes some
	// sizes only at some lengths (Veo 3.1: 1080p only at 8 s).
	SizeDurations map[string][]int `json:"size_durations,omitempty"`
	// Modes, if set, are the music modes the model takes (a model that
	// cannot sing lyrics: ["DESCRIPTION"]); another is a 400 at create.
	Modes []string `json:"modes,omitempty"`
}

// Speech is the part of a speech model: its voices, input and speed.
type Speech struct {
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

	voicePattern *regexp.Regexp // VoicePattern, compiled by Parse
}

// Image is the part of an image model (its Sizes, DefaultSize and Formats
// are in the core).
type Image struct {
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
