package speech

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
)

// testCatalog has three speech models in the shapes of the real ones (a
// synthetic-like one with a default voice and instructions, an
// OpenAI-like one whose voice is required, an ElevenLabs-like one with
// mapped voices, vendor ids and a narrow speed range), a free one and a
// chat model.
const testCatalog = `{
 "providers": [{"name": "a", "kind": "openai"}, {"name": "b", "kind": "elevenlabs"}, {"name": "c", "kind": "synthetic"}],
 "models": [
  {"id": "syn", "type": "speech", "provider": "c", "formats": ["mp3", "wav", "pcm"], "voices": ["alloy", "echo"], "default_voice": "alloy",
   "max_input": 40, "min_speed": 0.25, "max_speed": 4, "instructions": true, "price": {"credits_per_1k_chars": 100}},
  {"id": "oai", "type": "speech", "provider": "a", "formats": ["mp3", "opus", "aac", "flac", "wav", "pcm"], "voices": ["alloy", "echo", "nova"],
   "max_input": 40, "min_speed": 0.25, "max_speed": 4, "price": {"credits_per_1k_chars": 50}, "fallbacks": ["eleven", "syn"]},
  {"id": "eleven", "type": "speech", "provider": "b", "upstream": "eleven_v", "formats": ["mp3", "wav", "pcm"], "voices": ["alloy", "echo"],
   "upstream_voices": {"alloy": "AAAAAAAAAAAAAAAAAAAA"}, "voice_pattern": "[A-Za-z0-9]{20}", "default_voice": "BBBBBBBBBBBBBBBBBBBB",
   "max_input": 40, "min_speed": 0.7, "max_speed": 1.2, "price": {"credits_per_1k_chars": 200}},
  {"id": "fixed", "type": "speech", "provider": "c", "formats": ["mp3"], "voices": ["alloy"], "max_input": 40, "price": {}},
  {"id": "a/chat", "type": "chat", "provider": "a", "price": {"free": true}}
 ]}`

func mustCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse([]byte(testCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func speed(v float64) *float64 { return &v }

// TestPrepare is the table of the request rules: each refusal names its
// parameter, and an accepted request becomes the call its model makes.
func TestPrepare(t *testing.T) {
	cat := mustCatalog(t)
	long := strings.Repeat("é", 41) // 41 characters, 82 bytes
	tests := []struct {
		name  string
		model string
		req   Request
		param string // the refusal's parameter; "" for a call
		code  string
		want  Call // Voice, Format, Speed, Instructions of the call
	}{
		{"defaults", "syn", Request{Input: "hi"}, "", "", Call{Voice: "alloy", Format: "mp3"}},
		{"everything", "syn", Request{Input: "hi", Voice: "echo", ResponseFormat: "wav", Speed: speed(2.5), Instructions: "calm", StreamFormat: "audio"},
			"", "", Call{Voice: "echo", Format: "wav", Speed: 2.5, Instructions: "calm"}},
		{"max input in characters", "syn", Request{Input: long[2:]}, "", "", Call{Voice: "alloy", Format: "mp3"}},
		{"no input", "syn", Request{}, "input", "missing_field", Call{}},
		{"blank input", "syn", Request{Input: " \n\t"}, "input", "missing_field", Call{}},
		{"input too long", "syn", Request{Input: long}, "input", "invalid_value", Call{}},
		{"voice required", "oai", Request{Input: "hi"}, "voice", "missing_field", Call{}},
		{"unknown voice", "oai", Request{Input: "hi", Voice: "ballad"}, "voice", "invalid_value", Call{}},
		{"voice names are case-sensitive", "oai", Request{Input: "hi", Voice: "Alloy"}, "voice", "invalid_value", Call{}},
		{"mapped voice", "eleven", Request{Input: "hi", Voice: "alloy"}, "", "", Call{Voice: "AAAAAAAAAAAAAAAAAAAA", Format: "mp3"}},
		{"unmapped voice", "eleven", Request{Input: "hi", Voice: "echo"}, "", "", Call{Voice: "echo", Format: "mp3"}},
		{"vendor voice id", "eleven", Request{Input: "hi", Voice: "CCCCCCCCCCCCCCCCCCC1"}, "", "", Call{Voice: "CCCCCCCCCCCCCCCCCCC1", Format: "mp3"}},
		{"vendor default voice", "eleven", Request{Input: "hi"}, "", "", Call{Voice: "BBBBBBBBBBBBBBBBBBBB", Format: "mp3"}},
		{"not a vendor voice id", "eleven", Request{Input: "hi", Voice: "CCCC/../CCCCCCCCCCCC"}, "voice", "invalid_value", Call{}},
		{"every format", "oai", Request{Input: "hi", Voice: "nova", ResponseFormat: "flac"}, "", "", Call{Voice: "nova", Format: "flac"}},
		{"unknown format", "oai", Request{Input: "hi", Voice: "nova", ResponseFormat: "ogg"}, "response_format", "invalid_value", Call{}},
		{"a format the model lacks", "eleven", Request{Input: "hi", ResponseFormat: "opus"}, "response_format", "invalid_value", Call{}},
		{"format case", "syn", Request{Input: "hi", ResponseFormat: "MP3"}, "response_format", "invalid_value", Call{}},
		{"slowest", "oai", Request{Input: "hi", Voice: "nova", Speed: speed(0.25)}, "", "", Call{Voice: "nova", Format: "mp3", Speed: 0.25}},
		{"speed 1 explicit", "fixed", Request{Input: "hi", Voice: "alloy", Speed: speed(1)}, "", "", Call{Voice: "alloy", Format: "mp3", Speed: 1}},
		{"too slow", "oai", Request{Input: "hi", Voice: "nova", Speed: speed(0.2)}, "speed", "invalid_value", Call{}},
		{"too fast", "syn", Request{Input: "hi", Speed: speed(4.01)}, "speed", "invalid_value", Call{}},
		{"zero speed", "syn", Request{Input: "hi", Speed: speed(0)}, "speed", "invalid_value", Call{}},
		{"past the vendor's range", "eleven", Request{Input: "hi", Speed: speed(1.5)}, "speed", "invalid_value", Call{}},
		{"within the vendor's range", "eleven", Request{Input: "hi", Speed: speed(0.7)}, "", "", Call{Voice: "BBBBBBBBBBBBBBBBBBBB", Format: "mp3", Speed: 0.7}},
		{"no speed at all", "fixed", Request{Input: "hi", Voice: "alloy", Speed: speed(1.1)}, "speed", "invalid_value", Call{}},
		{"instructions to a model without", "oai", Request{Input: "hi", Voice: "nova", Instructions: "whisper"}, "instructions", "unsupported_parameter", Call{}},
		{"sse", "syn", Request{Input: "hi", StreamFormat: "sse"}, "stream_format", "unsupported_parameter", Call{}},
		{"unknown stream format", "syn", Request{Input: "hi", StreamFormat: "chunks"}, "stream_format", "invalid_value", Call{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := cat.Model(tt.model)
			c, err := Prepare(m, &tt.req)
			if tt.param != "" {
				e := apierr.As(err)
				if e == nil || e.Kind != apierr.Invalid || e.Param != tt.param || e.Code != tt.code {
					t.Fatalf("Prepare(%s, %+v) = %v; want a 400 %s naming %s", tt.model, tt.req, err, tt.code, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare(%s, %+v) = %v; want a call", tt.model, tt.req, err)
			}
			got := Call{Voice: c.Voice, Format: c.Format, Speed: c.Speed, Instructions: c.Instructions}
			if got != tt.want || c.Model != m || c.Input != tt.req.Input {
				t.Errorf("Prepare(%s, %+v) = %+v; want %+v on %s", tt.model, tt.req, got, tt.want, m.ID)
			}
		})
	}
}

// TestLead checks the model parameter.
func TestLead(t *testing.T) {
	cat := mustCatalog(t)
	s := &Service{Catalog: cat, Providers: map[string]Provider{"a": nil, "c": providerFunc(nil)}}
	s.Providers["a"] = providerFunc(nil)
	tests := []struct {
		model string
		kind  apierr.Kind
		code  string
	}{
		{"", apierr.Invalid, "missing_field"},
		{"nope", apierr.NotFound, "model_not_found"},
		{"a/chat", apierr.Invalid, "model_type_mismatch"},
		{"eleven", apierr.NotFound, "model_not_found"}, // its provider b is not configured
	}
	for _, tt := range tests {
		_, err := s.Lead(&Request{Model: tt.model, Input: "hi", Voice: "alloy"})
		if e := apierr.As(err); e == nil || e.Kind != tt.kind || e.Code != tt.code || e.Param != "model" {
			t.Errorf("Lead(model %q) = %v; want %s naming model", tt.model, err, tt.code)
		}
	}
	c, err := s.Lead(&Request{Model: "oai", Input: "hi", Voice: "alloy"})
	if err != nil || c.Model.ID != "oai" {
		t.Errorf("Lead(oai) = %v, %v; want its call", c, err)
	}
}

// TestVoiceJSON: voice is a string or OpenAI's {"id": ...}.
func TestVoiceJSON(t *testing.T) {
	tests := []struct {
		body string
		want Voice
		bad  bool
	}{
		{`{"voice": "alloy"}`, "alloy", false},
		{`{"voice": {"id": "voice_1234"}}`, "voice_1234", false},
		{`{"voice": null}`, "", false},
		{`{}`, "", false},
		{`{"voice": 7}`, "", true},
		{`{"voice": {"name": "alloy"}}`, "", true},
		{`{"voice": ["alloy"]}`, "", true},
	}
	for _, tt := range tests {
		var r Request
		err := json.Unmarshal([]byte(tt.body), &r)
		if tt.bad {
			if e := apierr.As(err); e == nil || e.Param != "voice" || e.Code != "invalid_type" {
				t.Errorf("Unmarshal(%s) = %v; want a 400 invalid_type naming voice", tt.body, err)
			}
			continue
		}
		if err != nil || r.Voice != tt.want {
			t.Errorf("Unmarshal(%s): voice %q, %v; want %q", tt.body, r.Voice, err, tt.want)
		}
	}
}

func TestContentType(t *testing.T) {
	want := map[string]string{"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}
	for _, f := range catalog.SpeechFormats {
		if got := ContentType(f); got != want[f] {
			t.Errorf("ContentType(%s) = %q; want %q", f, got, want[f])
		}
	}
	if e := apierr.As(ContentPolicy("no", errors.New("cause"))); e == nil || e.Code != "content_policy" || e.Kind != apierr.Invalid || e.Message != "no" {
		t.Errorf("ContentPolicy = %v; want a 400 content_policy with the vendor's words", e)
	}
}
