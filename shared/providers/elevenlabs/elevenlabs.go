// Package elevenlabs is the jobs.Provider for ElevenLabs' sound effects and
// music, a synchronous vendor: one POST answers with the audio bytes, which
// the worker copies into storage as they arrive.
//
//   - sfx: POST {base}/v1/sound-generation {"text", "duration_seconds",
//     "model_id"}; the job's category hint is folded into the text.
//   - music: POST {base}/v1/music {"prompt", "music_length_ms",
//     "model_id"}; in LYRICS mode a "composition_plan" instead of the
//     prompt (the API takes one or the other), whose sections carry every
//     lyric line and the prompt as the global style.
//
// format mp3 asks for output_format=mp3_44100_128; wav asks for raw PCM
// (pcm_44100: 16-bit little-endian mono samples) and wraps it in a
// RIFF/WAVE header, the samples byte for byte. The key goes in the
// xi-api-key header only. Safe for concurrent use.
package elevenlabs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/providers/mediafetch"
	"github.com/genway/genway/shared/route"
)

// DefaultBaseURL is ElevenLabs' API.
const DefaultBaseURL = "https://api.elevenlabs.io"

// PCMRate is the sample rate asked for WAV output (output_format pcm_44100).
const PCMRate = 44100

// MaxPCM bounds raw PCM read into memory when the vendor does not say its
// length (a WAV header needs it first): 10 minutes at PCMRate.
const MaxPCM = 10 * 60 * PCMRate * 2

// Section durations the music API accepts in a composition plan.
const (
	minSectionMS = 3000
	maxSectionMS = 120000
)

// Config configures a Provider.
type Config struct {
	BaseURL    string       // DefaultBaseURL if empty
	APIKey     string       // one key, or a pool separated by commas (route.NewKeySet)
	HTTPClient *http.Client // http.DefaultClient if nil
}

// Provider talks to ElevenLabs.
type Provider struct {
	base   string
	keys   route.KeySet // each call sends the key its ctx names (route.WithKey)
	client *http.Client
}

var (
	_ jobs.Provider = (*Provider)(nil)
	_ route.Keyed   = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	c := cfg.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	return &Provider{base: base, keys: route.NewKeySet(cfg.APIKey), client: c}
}

// KeyIDs returns the KeyIDs of the provider's key pool (route.Keyed).
func (p *Provider) KeyIDs() []string { return p.keys.KeyIDs() }

type sfxRequest struct {
	Text            string  `json:"text"`
	DurationSeconds float64 `json:"duration_seconds"`
	ModelID         string  `json:"model_id,omitempty"`
}

type musicRequest struct {
	Prompt          string           `json:"prompt,omitempty"`
	CompositionPlan *CompositionPlan `json:"composition_plan,omitempty"`
	MusicLengthMS   int              `json:"music_length_ms,omitempty"`
	ModelID         string           `json:"model_id,omitempty"`
}

// CompositionPlan is the music API's section-by-section plan.
type CompositionPlan struct {
	PositiveGlobalStyles []string  `json:"positive_global_styles"`
	NegativeGlobalStyles []string  `json:"negative_global_styles"`
	Sections             []Section `json:"sections"`
}

// Section is one part of a CompositionPlan.
type Section struct {
	SectionName         string   `json:"section_name"`
	PositiveLocalStyles []string `json:"positive_local_styles"`
	NegativeLocalStyles []string `json:"negative_local_styles"`
	DurationMS          int      `json:"duration_ms"`
	Lines               []string `json:"lines"`
}

// Start implements jobs.Provider: one call, answered with the audio.
func (p *Provider) Start(ctx context.Context, m *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	var path string
	var body any
	in := j.Input
	switch j.Type {
	case jobs.TypeSFX:
		text := in.Prompt
		if in.Category != "" {
			text = in.Category + " sound effect: " + in.Prompt
		}
		path, body = "/v1/sound-generation", sfxRequest{Text: text, DurationSeconds: float64(in.Duration), ModelID: m.Upstream}
	case jobs.TypeMusic:
		r := musicRequest{MusicLengthMS: in.Duration * 1000, ModelID: m.Upstream}
		if in.Mode == "LYRICS" {
			plan, err := Plan(in.Prompt, in.Lyrics, in.Duration*1000)
			if err != nil {
				return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: err.Error(), Err: err}
			}
			// The plan's sections set the length.
			r.CompositionPlan, r.MusicLengthMS = plan, 0
		} else {
			r.Prompt = in.Prompt
		}
		path, body = "/v1/music", r
	default:
		return nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "ElevenLabs makes sound effects and music, not " + j.Type + "."}
	}
	format := "mp3_44100_128"
	if in.Format == "wav" {
		format = fmt.Sprintf("pcm_%d", PCMRate)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("elevenlabs: encode request: %w", err)
	}
	req, err := mediafetch.NewRequest(http.MethodPost, p.base+path+"?output_format="+url.QueryEscape(format), b, http.Header{"xi-api-key": {p.keys.Key(ctx)}})
	if err != nil {
		return nil, err
	}
	resp, err := mediafetch.Do(ctx, p.client, req, "elevenlabs "+j.Type, apiError)
	if err != nil {
		return nil, err
	}
	res := &jobs.Result{Body: resp.Body, Size: resp.ContentLength, ContentType: "audio/mpeg", Ext: "mp3", Duration: in.Duration}
	if in.Format == "wav" {
		return wrapPCM(resp, res)
	}
	return &jobs.Step{Result: res}, nil
}

// wrapPCM turns the raw PCM answer into a WAV file: the header, then the
// samples as they come. The header needs the data size: the answer's
// Content-Length, else the whole answer read first (at most MaxPCM).
func wrapPCM(resp *http.Response, res *jobs.Result) (*jobs.Step, error) {
	res.ContentType, res.Ext = "audio/wav", "wav"
	size := resp.ContentLength
	var body io.Reader = resp.Body
	if size < 0 {
		pcm, err := io.ReadAll(io.LimitReader(resp.Body, MaxPCM+1))
		resp.Body.Close()
		if err != nil {
			return nil, &jobs.TransientError{Err: fmt.Errorf("elevenlabs: read audio: %w", err)}
		}
		if len(pcm) > MaxPCM {
			return nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "ElevenLabs answered more audio than the WAV limit."}
		}
		size, body = int64(len(pcm)), bytes.NewReader(pcm)
	}
	// An odd byte count has a half sample at the end; the header counts
	// every byte, as the vendor sent it (players ignore the half sample).
	hdr := media.WAVHeader(PCMRate, size)
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(hdr), body), resp.Body}
	res.Size = int64(len(hdr)) + size
	return &jobs.Step{Result: res}, nil
}

// Plan makes a composition plan that sings lyrics in the style of prompt,
// lasting about lengthMS: one section per block of lyrics (blocks are
// separated by blank lines; a line such as "[Chorus]" names the next
// block), every lyric line in exactly one section, in order, and the
// length spread over the sections (each within the API's 3 s to 120 s).
func Plan(prompt, lyrics string, lengthMS int) (*CompositionPlan, error) {
	type block struct {
		name  string
		lines []string
	}
	var blocks []block
	cur := block{}
	flush := func() {
		if len(cur.lines) > 0 {
			blocks = append(blocks, cur)
		}
		cur = block{}
	}
	for _, raw := range strings.Split(strings.ReplaceAll(lyrics, "\r\n", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") && len(line) > 2:
			flush()
			cur.name = strings.TrimSpace(line[1 : len(line)-1])
		default:
			cur.lines = append(cur.lines, line)
		}
	}
	flush()
	if len(blocks) == 0 {
		return nil, fmt.Errorf("the lyrics have no lines to sing")
	}
	// Fewer sections if the length cannot give each its minimum: later
	// blocks are merged into the one before.
	for len(blocks) > 1 && len(blocks)*minSectionMS > lengthMS {
		last := blocks[len(blocks)-1]
		blocks = blocks[:len(blocks)-1]
		blocks[len(blocks)-1].lines = append(blocks[len(blocks)-1].lines, last.lines...)
	}
	lengthMS = max(lengthMS, minSectionMS)
	if lengthMS > len(blocks)*maxSectionMS {
		return nil, fmt.Errorf("%d lyric sections cannot last %d s (at most %d s each)", len(blocks), lengthMS/1000, maxSectionMS/1000)
	}
	// Spread the length by lines sung, each section at least the minimum.
	total := 0
	for _, b := range blocks {
		total += len(b.lines)
	}
	plan := &CompositionPlan{PositiveGlobalStyles: []string{prompt}, NegativeGlobalStyles: []string{}}
	left := lengthMS
	for i, b := range blocks {
		d := left
		if rest := len(blocks) - i - 1; rest > 0 {
			d = lengthMS * len(b.lines) / total
			lo := max(minSectionMS, left-rest*maxSectionMS)
			hi := min(maxSectionMS, left-rest*minSectionMS)
			d = min(max(d, lo), hi)
		}
		left -= d
		name := b.name
		if name == "" {
			name = fmt.Sprintf("Part %d", i+1)
		}
		plan.Sections = append(plan.Sections, Section{SectionName: name, PositiveLocalStyles: []string{}, NegativeLocalStyles: []string{}, DurationMS: d, Lines: b.lines})
	}
	return plan, nil
}

// apiError reads ElevenLabs' error bodies: {"detail": {"status",
// "message"}} and FastAPI's validation list {"detail": [{"msg", "loc"}]}.
// A prompt or plan the music API refuses (copyrighted material, an
// artist's name: bad_prompt, bad_composition_plan) and a moderation
// refusal are content_policy. A refused key and a used-up quota
// (quota_exceeded, which ElevenLabs answers with 401) are the operator's
// account's.
func apiError(status int, body []byte) jobs.Refusal {
	var e struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Detail) == 0 {
		return jobs.Refusal{}
	}
	var d struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	var list []struct {
		Msg string `json:"msg"`
		Loc []any  `json:"loc"`
	}
	var text string
	switch {
	case json.Unmarshal(e.Detail, &d) == nil:
	case json.Unmarshal(e.Detail, &list) == nil:
		var msgs []string
		for _, l := range list {
			msgs = append(msgs, fmt.Sprintf("%v: %s", l.Loc, l.Msg))
		}
		return jobs.Refusal{Message: "ElevenLabs refused the request: " + strings.Join(msgs, "; ")}
	case json.Unmarshal(e.Detail, &text) == nil:
		return jobs.Refusal{Message: text}
	}
	switch {
	case d.Status == "quota_exceeded":
		return jobs.Refusal{Message: "ElevenLabs: the account's quota is used up: " + d.Message, Account: true}
	case status == http.StatusUnauthorized:
		return jobs.Refusal{Message: "ElevenLabs rejected the configured API key: " + d.Message, Account: true}
	case d.Status == "bad_prompt" || d.Status == "bad_composition_plan" || strings.Contains(d.Status, "moderation") || strings.Contains(d.Status, "policy"):
		return jobs.Refusal{Code: jobs.CodeContentPolicy, Message: d.Message}
	}
	return jobs.Refusal{Message: d.Message}
}
