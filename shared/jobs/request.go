package jobs

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
)

// CreateRequest is a decoded POST /v1/jobs body. Optional fields are
// pointers so that a field sent for the wrong job type is seen and refused.
type CreateRequest struct {
	Type       string
	Model      string
	Prompt     string
	Duration   *int
	Format     *string
	Mode       *string
	Lyrics     *string
	Category   *string
	Size       *string
	Resolution *string
	// WebhookURL is where to announce the job's end ("" for the
	// account's default); Service.Create checks it with CheckWebhookURL.
	WebhookURL string
}

// Limits of the request.
const (
	MaxPromptChars = 4000
	MaxLyricsChars = 10000
	MaxDimension   = 4096
	MinDimension   = 16
)

var (
	sizeRE       = regexp.MustCompile(`^[1-9][0-9]{1,4}x[1-9][0-9]{1,4}$`)
	resolutionRE = regexp.MustCompile(`^[1-9][0-9]{2,3}p$`)
)

// defaultDuration is the seed's default per type, in seconds.
func defaultDuration(typ string) int {
	switch typ {
	case TypeMusic:
		return 30
	default:
		return 5
	}
}

// DefaultFormat is the format a job of type typ gets when the request names
// none: mp4 for video, mp3 for audio.
func DefaultFormat(typ string) string {
	if typ == TypeVideo {
		return catalog.VideoFormat
	}
	return "mp3"
}

// DefaultDuration is the duration a job of model m gets when the request
// names none: the model's default_duration, else the seed's default for its
// type (cut to the model's max_duration); 0 for a chat model.
func DefaultDuration(m *catalog.Model) int {
	switch {
	case m.Type == catalog.TypeChat:
		return 0
	case m.DefaultDuration != 0:
		return m.DefaultDuration
	}
	return min(defaultDuration(m.Type), m.MaxDuration)
}

// Validate checks req against the catalog and returns the model and the
// input with defaults applied, or an *apierr.Error naming the field.
func Validate(cat *catalog.Catalog, req *CreateRequest) (*catalog.Model, Input, error) {
	var in Input
	switch req.Type {
	case TypeMusic, TypeSFX, TypeVideo:
	case "":
		return nil, in, apierr.Invalidf("type", "missing_field", "type is required: one of music, sfx, video.")
	default:
		return nil, in, apierr.Invalidf("type", "invalid_value", "type must be one of music, sfx, video; got %q.", req.Type)
	}
	if req.Model == "" {
		return nil, in, apierr.Invalidf("model", "missing_field", "model is required; see GET /v1/models?type=%s.", req.Type)
	}
	m, ok := cat.Model(req.Model)
	if !ok {
		return nil, in, &apierr.Error{Kind: apierr.NotFound, Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model %q does not exist; see GET /v1/models?type=%s.", req.Model, req.Type)}
	}
	if m.Type != req.Type {
		return nil, in, apierr.Invalidf("model", "model_type_mismatch", "The model %q makes %s, not %s.", m.ID, m.Type, req.Type)
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, in, apierr.Invalidf("prompt", "missing_field", "prompt is required and must not be empty.")
	}
	if n := utf8.RuneCountInString(req.Prompt); n > MaxPromptChars {
		return nil, in, apierr.Invalidf("prompt", "invalid_value", "prompt has %d characters; the limit is %d.", n, MaxPromptChars)
	}
	in.Prompt = req.Prompt

	// Fields of other job types are refused, not dropped.
	foreign := []struct {
		name string
		set  bool
		only string
	}{
		{"mode", req.Mode != nil, TypeMusic},
		{"lyrics", req.Lyrics != nil, TypeMusic},
		{"category", req.Category != nil, TypeSFX},
		{"size", req.Size != nil, TypeVideo},
		{"resolution", req.Resolution != nil, TypeVideo},
	}
	for _, f := range foreign {
		if f.set && f.only != req.Type {
			return nil, in, apierr.Invalidf(f.name, "invalid_value", "%s applies only to %s jobs, not %s.", f.name, f.only, req.Type)
		}
	}

	in.Duration = DefaultDuration(m)
	if req.Duration != nil {
		d := *req.Duration
		if d < max(m.MinDuration, 1) || d > m.MaxDuration {
			return nil, in, apierr.Invalidf("duration", "invalid_value", "duration must be an integer from %d to %d seconds for %s; got %d.", max(m.MinDuration, 1), m.MaxDuration, m.ID, d)
		}
		in.Duration = d
	}
	if len(m.Durations) > 0 && !slices.Contains(m.Durations, in.Duration) {
		return nil, in, apierr.Invalidf("duration", "invalid_value", "duration must be one of %s seconds for %s; got %d.", joinInts(m.Durations), m.ID, in.Duration)
	}

	// format is the output's container: mp3 or wav for audio (default
	// mp3), mp4 for video (the only one; the catalog refuses others).
	in.Format = DefaultFormat(req.Type)
	if req.Format != nil {
		in.Format = *req.Format
	}
	if !contains(m.Formats, in.Format) {
		return nil, in, apierr.Invalidf("format", "invalid_value", "format must be one of %s for %s; got %q.", strings.Join(m.Formats, ", "), m.ID, in.Format)
	}
	switch req.Type {
	case TypeMusic:
		in.Mode = "DESCRIPTION"
		if req.Mode != nil {
			in.Mode = *req.Mode
		}
		if in.Mode != "DESCRIPTION" && in.Mode != "LYRICS" {
			return nil, in, apierr.Invalidf("mode", "invalid_value", "mode must be DESCRIPTION or LYRICS (case-sensitive); got %q.", in.Mode)
		}
		if len(m.Modes) > 0 && !contains(m.Modes, in.Mode) {
			return nil, in, apierr.Invalidf("mode", "invalid_value", "%s takes mode %s only; got %q.", m.ID, strings.Join(m.Modes, ", "), in.Mode)
		}
		if req.Lyrics != nil {
			in.Lyrics = *req.Lyrics
		}
		if in.Mode == "LYRICS" && strings.TrimSpace(in.Lyrics) == "" {
			return nil, in, apierr.Invalidf("lyrics", "missing_field", "lyrics are required when mode is LYRICS.")
		}
		if in.Mode != "LYRICS" && req.Lyrics != nil {
			return nil, in, apierr.Invalidf("lyrics", "invalid_value", "lyrics apply only when mode is LYRICS.")
		}
		if n := utf8.RuneCountInString(in.Lyrics); n > MaxLyricsChars {
			return nil, in, apierr.Invalidf("lyrics", "invalid_value", "lyrics have %d characters; the limit is %d.", n, MaxLyricsChars)
		}
	case TypeSFX:
		if req.Category != nil {
			c := strings.TrimSpace(*req.Category)
			if c == "" || len(c) > 100 {
				return nil, in, apierr.Invalidf("category", "invalid_value", "category must be a non-empty hint of at most 100 characters.")
			}
			in.Category = c
		}
	case TypeVideo:
		w, h, err := videoSize(m, req)
		if err != nil {
			return nil, in, err
		}
		if m.MaxPixels > 0 && w*h > m.MaxPixels {
			param := "size"
			if req.Size == nil {
				param = "resolution"
			}
			return nil, in, apierr.Invalidf(param, "invalid_value", "%s makes videos of at most %d pixels (e.g. 1920x1080); %dx%d has %d.", m.ID, m.MaxPixels, w, h, w*h)
		}
		in.Size = fmt.Sprintf("%dx%d", w, h)
		if req.Resolution != nil {
			in.Resolution = *req.Resolution
		}
		if ds, ok := m.SizeDurations[in.Size]; ok && !slices.Contains(ds, in.Duration) {
			return nil, in, apierr.Invalidf("duration", "invalid_value", "%s makes %s only at %s seconds; got %d.", m.ID, in.Size, joinInts(ds), in.Duration)
		}
	}
	return m, in, nil
}

// videoSize resolves size and resolution: size wins; resolution alone gives
// a 16:9 frame of that height; both must agree on the height.
func videoSize(m *catalog.Model, req *CreateRequest) (int, int, error) {
	var rh int
	if req.Resolution != nil {
		r := *req.Resolution
		if !resolutionRE.MatchString(r) {
			return 0, 0, apierr.Invalidf("resolution", "invalid_value", "resolution must look like 720p; got %q.", r)
		}
		rh, _ = strconv.Atoi(strings.TrimSuffix(r, "p"))
		if rh < MinDimension || rh > MaxDimension {
			return 0, 0, apierr.Invalidf("resolution", "invalid_value", "resolution must be from %dp to %dp; got %q.", MinDimension, MaxDimension, r)
		}
	}
	if req.Size != nil {
		s := *req.Size
		if !sizeRE.MatchString(s) {
			return 0, 0, apierr.Invalidf("size", "invalid_value", "size must be <width>x<height>, e.g. 1280x720; got %q.", s)
		}
		ws, hs, _ := strings.Cut(s, "x")
		w, _ := strconv.Atoi(ws)
		h, _ := strconv.Atoi(hs)
		if w < MinDimension || h < MinDimension || w > MaxDimension || h > MaxDimension {
			return 0, 0, apierr.Invalidf("size", "invalid_value", "size must be from %dx%d to %dx%d; got %q.", MinDimension, MinDimension, MaxDimension, MaxDimension, s)
		}
		if rh != 0 && rh != h && !(len(m.Sizes) > 0 && rh == min(w, h)) {
			return 0, 0, apierr.Invalidf("resolution", "invalid_value", "resolution %q disagrees with size %q.", *req.Resolution, s)
		}
		if len(m.Sizes) > 0 && !slices.Contains(m.Sizes, s) {
			return 0, 0, apierr.Invalidf("size", "invalid_value", "size must be one of %s for %s; got %q.", strings.Join(m.Sizes, ", "), m.ID, s)
		}
		return w, h, nil
	}
	if rh != 0 && len(m.Sizes) > 0 {
		// The vendor's landscape size of that height (720p: 1280x720).
		for _, sz := range m.Sizes {
			if sw, sh := parseSize(sz); sh == rh && sw >= sh {
				return sw, sh, nil
			}
		}
		return 0, 0, apierr.Invalidf("resolution", "invalid_value", "%s makes no %s video; sizes: %s.", m.ID, *req.Resolution, strings.Join(m.Sizes, ", "))
	}
	if rh != 0 {
		w := (rh*16/9 + 1) &^ 1
		return min(w, MaxDimension), rh, nil
	}
	def := m.DefaultSize
	if def == "" {
		def = "640x360"
	}
	ws, hs, _ := strings.Cut(def, "x")
	w, _ := strconv.Atoi(ws)
	h, _ := strconv.Atoi(hs)
	return w, h, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// idSuffixLen gives 20*log2(36) = 103 bits.
const idSuffixLen = 20

// NewID returns a fresh id job_<type>_<20 random [a-z0-9]>.
func NewID(typ string) (string, error) {
	b := make([]byte, idSuffixLen)
	max := big.NewInt(int64(len(idAlphabet)))
	for i := range b {
		v, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("new job id: %w", err)
		}
		b[i] = idAlphabet[v.Int64()]
	}
	return "job_" + typ + "_" + string(b), nil
}

// ValidID reports whether id has the shape of a job id.
func ValidID(id string) bool {
	typ, suffix, ok := strings.Cut(strings.TrimPrefix(id, "job_"), "_")
	if !ok || !strings.HasPrefix(id, "job_") || (typ != TypeMusic && typ != TypeSFX && typ != TypeVideo) {
		return false
	}
	if len(suffix) < idSuffixLen || len(suffix) > 64 {
		return false
	}
	for i := 0; i < len(suffix); i++ {
		if !strings.ContainsRune(idAlphabet, rune(suffix[i])) {
			return false
		}
	}
	return true
}
