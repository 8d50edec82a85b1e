// Package speech is text to speech in OpenAI's shape (POST
// /v1/audio/speech): the request and its rules against a catalog model of
// type speech, the Provider interface that vendors' adapters implement
// (audio streamed as the vendor makes it), and the Service that prices a
// request, reserves its credits, routes it over its model and the model's
// catalog fallbacks up to the first audio byte, streams the audio to the
// client as it arrives, and settles the credits once.
//
// The rules, each a 400 naming its parameter (OpenAI's, where OpenAI has
// one):
//
//   - model: a speech model (404 model_not_found if unknown or not
//     configured here; 400 model_type_mismatch for another type).
//   - input: required, at most the model's max_input characters (Unicode
//     code points, as the vendors count and bill them).
//   - voice: a string, or OpenAI's {"id": "..."} whose id is taken as the
//     voice; one of the model's voices, or a vendor voice id its
//     voice_pattern matches; required unless the model has a
//     default_voice.
//   - response_format: mp3 (the default), opus, aac, flac, wav or pcm,
//     among those the model streams.
//   - speed: 0.25 to 4.0, within the range the model honours (ElevenLabs
//     0.7 to 1.2).
//   - instructions: only for a model that takes them (gpt-4o-mini-tts).
//   - stream_format: "audio", the default; "sse" (OpenAI's base64 audio
//     events) is not offered: audio is always streamed as bytes.
//
// Unknown fields are ignored, as chat completions ignore them.
package speech

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/route"
)

// DefaultFormat is the response format of a request that names none.
const DefaultFormat = "mp3"

// JobType is the job type of speech in the credits ledger and the job
// usage (credits.Entry.JobType).
const JobType = catalog.TypeSpeech

// Request is a POST /v1/audio/speech body.
type Request struct {
	Model          string   `json:"model"`
	Input          string   `json:"input"`
	Voice          Voice    `json:"voice"`
	ResponseFormat string   `json:"response_format"`
	Speed          *float64 `json:"speed"`
	Instructions   string   `json:"instructions"`
	StreamFormat   string   `json:"stream_format"`
}

// Voice is a request's voice: a JSON string, or an object {"id": "..."}
// (OpenAI's custom voice reference), which stands for its id.
type Voice string

// UnmarshalJSON takes a string, an object with a string id, or null
// (no voice); anything else is a 400 invalid_type naming voice.
func (v *Voice) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = Voice(s)
		return nil
	}
	var o struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(b, &o); err == nil && o.ID != nil {
		*v = Voice(*o.ID)
		return nil
	}
	return apierr.Invalidf("voice", "invalid_type", "voice must be a voice name (a string) or an object with an id, not %s.", b)
}

// Call is a request as one model serves it, validated, defaults applied:
// what a Provider gets.
type Call struct {
	Model *catalog.Model
	Input string
	// Voice is the voice as the model's vendor names it (the catalog's
	// upstream_voices applied): an OpenAI voice name, an ElevenLabs
	// voice id.
	Voice  string
	Format string // a response format of SpeechFormats, among the model's
	// Speed is the speed the request asked for; 0 when it named none
	// (the vendor's default, 1).
	Speed        float64
	Instructions string // "" for none
}

// Chars returns how many characters the call speaks: what it is priced by.
func (c *Call) Chars() int { return utf8.RuneCountInString(c.Input) }

// Price returns the credits the call costs on its model
// (catalog.Price.SpeechCost of its characters).
func (c *Call) Price() credits.Amount { return c.Model.Price.SpeechCost(c.Chars()) }

// Provider makes speech at one vendor. Implementations are safe for
// concurrent use and honour ctx: when it ends, the vendor request is
// cancelled and the body's reads fail.
//
// Speak starts c and returns the audio, in c.Format, as the vendor sends
// it: the caller reads it to its end or until it fails, and closes it.
// Errors, of Speak and of the body's reads, are route.VendorFailures
// (*chat.UpstreamError): classified for routing, and told to the client
// as chat's are; a vendor's refusal on content grounds is ContentPolicy's
// error.
type Provider interface {
	Speak(ctx context.Context, c *Call) (io.ReadCloser, error)
}

// ContentPolicy returns the 400 content_policy error of a vendor that
// refused the input on content grounds, with the vendor's own words (msg)
// and cause for the logs.
func ContentPolicy(msg string, cause error) error {
	return &apierr.Error{Kind: apierr.Invalid, Code: "content_policy", Param: "input", Message: msg, Err: cause}
}

// ContentType returns the media type a response in format is answered
// with: audio/mpeg (mp3), audio/ogg (opus, in an Ogg container), audio/aac,
// audio/flac, audio/wav, audio/pcm (raw 16-bit little-endian mono samples
// at 24 kHz, as OpenAI's pcm); "" for another format. (A switch, not a
// map: a map would be built at start-up in every program that links
// speech.)
func ContentType(format string) string {
	switch format {
	case "mp3":
		return "audio/mpeg"
	case "opus":
		return "audio/ogg"
	case "aac":
		return "audio/aac"
	case "flac":
		return "audio/flac"
	case "wav":
		return "audio/wav"
	case "pcm":
		return "audio/pcm"
	}
	return ""
}

// Prepare validates r against speech model m and returns the call m
// would make. Errors are *apierr.Error naming the parameter (see the
// package doc); r.Model is not looked at (m is the model).
func Prepare(m *catalog.Model, r *Request) (*Call, error) {
	c := &Call{Model: m, Input: r.Input, Instructions: r.Instructions}
	if strings.TrimSpace(r.Input) == "" {
		return nil, apierr.Invalidf("input", "missing_field", "input is required: the text to speak.")
	}
	if n := utf8.RuneCountInString(r.Input); n > m.MaxInput {
		return nil, apierr.Invalidf("input", "invalid_value", "input has %d characters; %s takes at most %d.", n, m.ID, m.MaxInput)
	}
	voice := string(r.Voice)
	switch {
	case voice == "" && m.DefaultVoice == "":
		return nil, apierr.Invalidf("voice", "missing_field", "voice is required for %s: one of %s.", m.ID, strings.Join(m.Voices, ", "))
	case voice == "":
		voice = m.DefaultVoice
	case !m.TakesVoice(voice):
		also := ""
		if m.VoicePattern != "" {
			also = ", or a voice id of the vendor's"
		}
		return nil, apierr.Invalidf("voice", "invalid_value", "%s has no voice %q; its voices are %s%s.", m.ID, voice, strings.Join(m.Voices, ", "), also)
	}
	c.Voice = m.UpstreamVoice(voice)
	c.Format = r.ResponseFormat
	switch {
	case c.Format == "":
		c.Format = DefaultFormat
	case !slices.Contains(catalog.SpeechFormats, c.Format):
		return nil, apierr.Invalidf("response_format", "invalid_value", "response_format must be one of %s; got %q.", strings.Join(catalog.SpeechFormats, ", "), c.Format)
	}
	if !slices.Contains(m.Formats, c.Format) {
		return nil, apierr.Invalidf("response_format", "invalid_value", "%s does not stream %s; its formats are %s.", m.ID, c.Format, strings.Join(m.Formats, ", "))
	}
	if r.Speed != nil {
		v := *r.Speed
		switch {
		case !(v >= catalog.MinSpeechSpeed && v <= catalog.MaxSpeechSpeed):
			return nil, apierr.Invalidf("speed", "invalid_value", "speed must be from %g to %g; got %g.", catalog.MinSpeechSpeed, catalog.MaxSpeechSpeed, v)
		case m.MaxSpeed == 0 && v != 1:
			return nil, apierr.Invalidf("speed", "invalid_value", "%s takes no speed but 1; got %g.", m.ID, v)
		case m.MaxSpeed != 0 && (v < m.MinSpeed || v > m.MaxSpeed):
			return nil, apierr.Invalidf("speed", "invalid_value", "%s speaks at speeds from %g to %g; got %g.", m.ID, m.MinSpeed, m.MaxSpeed, v)
		}
		c.Speed = v
	}
	if r.Instructions != "" && !m.Instructions {
		return nil, &apierr.Error{Kind: apierr.Invalid, Code: "unsupported_parameter", Param: "instructions",
			Message: fmt.Sprintf("%s takes no instructions (gpt-4o-mini-tts does); remove them or pick another model.", m.ID)}
	}
	switch r.StreamFormat {
	case "", "audio":
	case "sse":
		return nil, &apierr.Error{Kind: apierr.Invalid, Code: "unsupported_parameter", Param: "stream_format",
			Message: `stream_format "sse" is not offered: the audio is streamed as it is made, as bytes (stream_format "audio").`}
	default:
		return nil, apierr.Invalidf("stream_format", "invalid_value", `stream_format must be "audio" or "sse"; got %q.`, r.StreamFormat)
	}
	return c, nil
}

// Answer is what Writer.Begin is told when the first audio byte is here.
type Answer struct {
	// ID is the speech's id: its record's (GET /v1/generations/{id}).
	ID          string
	Model       string // the catalog id of the model that answers (a fallback's, after a failure)
	Format      string
	ContentType string
	// Attempts are the attempts made, the answering one last
	// (route.FormatAttempts: the x-genway-attempts header).
	Attempts []route.Attempt
	// Cost is what the speech is charged once its audio reaches the
	// client: its model's price for its characters (never more than was
	// reserved), known before the audio starts.
	Cost credits.Amount
}

// Writer is the client's end of a speech: Begin commits the answer (its
// status and headers) when the first audio byte is here, then each Write
// sends audio and flushes it. An error of either means the client is
// gone.
type Writer interface {
	Begin(a Answer) error
	Write(p []byte) (int, error)
}
