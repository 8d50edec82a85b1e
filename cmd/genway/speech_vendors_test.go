package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/genway/genway/shared/media"
)

// Fake speech vendors: OpenAI's text to speech and ElevenLabs' streaming
// text to speech, on loopback, as their API references document them
// (see shared/providers/openai/speech_test.go and shared/providers/elevenlabs/speech_test.go
// for the details checked there); the vendors' SDKs read them in the
// contract tests (speech_contract_test.go). The audio is synthetic speech
// of the input (media.WriteSpeech), so it is real audio of the requested
// format where Genway can make it; opus, aac and flac are marked bytes.
// Each answer is written in chunks of ttsChunk bytes, each flushed, paced
// by the fake's pace (0: at once), and stops when the caller goes away.
//
// Inputs that begin with "forbidden" are refused as content (OpenAI:
// 400 moderation_blocked; ElevenLabs: 400 with a detail.status naming
// the policy); "throttled" is answered 429 once, then served; "broken"
// fails every time before any audio (500).

// ttsChunk is how much audio a fake sends at a time.
const ttsChunk = 1024

// openAIKey is the fake OpenAI's API key.
const openAIKey = "sk-openai-secret-key-1234567890"

// ttsAudios caches ttsAudio's answers, so that a fake's first byte does
// not wait for its synthesis (the time to first byte benchmark measures
// Genway, not the fake).
var ttsAudios sync.Map // of [3]string -> []byte

// ttsAudio is the fake's audio of text in format, with the header a
// stream of unknown length has for wav (0xFFFFFFFF sizes, as OpenAI and
// ElevenLabs stream WAV) when streamedWAV.
func ttsAudio(text, format string, streamedWAV bool) []byte {
	k := [3]string{text, format, fmt.Sprint(streamedWAV)}
	if b, ok := ttsAudios.Load(k); ok {
		return b.([]byte)
	}
	b := synthTTS(text, format, streamedWAV)
	ttsAudios.Store(k, b)
	return b
}

func synthTTS(text, format string, streamedWAV bool) []byte {
	var b bytes.Buffer
	switch format {
	case "mp3", "pcm":
		media.WriteSpeech(&b, text, 1, 1, format)
	case "wav":
		if !streamedWAV {
			media.WriteSpeech(&b, text, 1, 1, "wav")
			break
		}
		b.Write(media.WAVStreamHeader(media.SpeechRate))
		media.WriteSpeech(&b, text, 1, 1, "pcm")
	default: // marked bytes: not decodable audio
		b.WriteString("fake " + format + " audio of " + text)
	}
	return b.Bytes()
}

// writePaced writes b in ttsChunk pieces, each flushed, pace apart,
// until r's client goes away.
func writePaced(w http.ResponseWriter, r *http.Request, b []byte, pace time.Duration) {
	for len(b) > 0 {
		n := min(len(b), ttsChunk)
		if _, err := w.Write(b[:n]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		b = b[n:]
		if pace > 0 && len(b) > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(pace):
			}
		}
	}
}

// openAIVoices and the formats are those OpenAI's reference lists.
var (
	openAIVoices  = []string{"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"}
	openAIFormats = map[string]string{"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}
)

// fakeOpenAITTS speaks POST /v1/audio/speech: a bearer key (a wrong one is
// 401 invalid_api_key), the body checked as OpenAI checks it (a model, an
// input of at most 4096 characters, a known voice, response_format,
// speed 0.25-4, no instructions for tts-1 and tts-1-hd), a 200 of the
// audio, chunked; errors {"error": {"message", "type", "param", "code"}}.
func fakeOpenAITTS(t testing.TB, pace time.Duration) *fakeVendor {
	v := &fakeVendor{}
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/audio/speech" {
			http.NotFound(w, r)
			return
		}
		if !v.authorized(w, r, "Authorization", "Bearer "+openAIKey, 401,
			`{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`) {
			return
		}
		var body struct {
			Model          string   `json:"model"`
			Input          string   `json:"input"`
			Voice          string   `json:"voice"`
			ResponseFormat string   `json:"response_format"`
			Speed          *float64 `json:"speed"`
			Instructions   string   `json:"instructions"`
		}
		invalid := func(param, msg string) {
			writeStatusJSON(w, 400, `{"error":{"message":"`+msg+`","type":"invalid_request_error","param":"`+param+`","code":null}}`)
		}
		if json.NewDecoder(r.Body).Decode(&body) != nil {
			invalid("", "We could not parse the JSON body of your request.")
			return
		}
		if body.ResponseFormat == "" {
			body.ResponseFormat = "mp3"
		}
		switch {
		case body.Model == "" || body.Input == "":
			invalid("input", "model and input are required.")
			return
		case utf8.RuneCountInString(body.Input) > 4096:
			invalid("input", "input is longer than 4096 characters.")
			return
		case !slices.Contains(openAIVoices, body.Voice):
			invalid("voice", "Invalid voice.")
			return
		case openAIFormats[body.ResponseFormat] == "":
			invalid("response_format", "Invalid response_format.")
			return
		case body.Speed != nil && (*body.Speed < 0.25 || *body.Speed > 4):
			invalid("speed", "speed must be between 0.25 and 4.0.")
			return
		case body.Instructions != "" && strings.HasPrefix(body.Model, "tts-1"):
			invalid("instructions", "instructions are not supported for this model.")
			return
		case strings.HasPrefix(body.Input, "forbidden"):
			writeStatusJSON(w, 400, `{"error":{"message":"Your request was rejected by our safety system.","type":"invalid_request_error","param":null,"code":"moderation_blocked"}}`)
			return
		case strings.HasPrefix(body.Input, "broken"):
			writeStatusJSON(w, 500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
			return
		}
		if v.accept(body.Input) == "" {
			w.Header().Set("Retry-After", "1")
			writeStatusJSON(w, 429, `{"error":{"message":"Rate limit reached for requests.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			return
		}
		w.Header().Set("Content-Type", openAIFormats[body.ResponseFormat])
		w.WriteHeader(200)
		writePaced(w, r, ttsAudio(body.Input, body.ResponseFormat, true), pace)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// elevenVoiceID is an ElevenLabs voice id's shape.
var elevenVoiceID = regexp.MustCompile(`^[A-Za-z0-9]{20}$`)

// fakeElevenLabsTTS speaks POST /v1/text-to-speech/{voice_id}/stream:
// the xi-api-key header (a wrong one is 401 invalid_api_key), a voice id
// (another path is 404 voice_not_found), output_format mp3_44100_128 or
// pcm_24000 (others 422), {"text", "model_id", "voice_settings"} with a
// speed of 0.7-1.2 (else 400 invalid_voice_settings), answered with the
// audio, chunked; errors {"detail": {"status", "message"}} or FastAPI's
// 422 list.
func fakeElevenLabsTTS(t testing.TB, pace time.Duration) *fakeVendor {
	v := &fakeVendor{}
	key := vendorKeys["ELEVENLABS_API_KEY"]
	v.srv = httptest.NewServer(v.count(func(w http.ResponseWriter, r *http.Request) {
		voice, ok := strings.CutPrefix(r.URL.Path, "/v1/text-to-speech/")
		voice, stream := strings.CutSuffix(voice, "/stream")
		if r.Method != "POST" || !ok || !stream {
			http.NotFound(w, r)
			return
		}
		if !v.authorized(w, r, "xi-api-key", key, 401, `{"detail":{"status":"invalid_api_key","message":"Invalid API key"}}`) {
			return
		}
		if !elevenVoiceID.MatchString(voice) {
			writeStatusJSON(w, 404, `{"detail":{"status":"voice_not_found","message":"A voice with the voice_id `+voice+` was not found."}}`)
			return
		}
		var body struct {
			Text          *string `json:"text"`
			ModelID       string  `json:"model_id"`
			VoiceSettings *struct {
				Speed *float64 `json:"speed"`
			} `json:"voice_settings"`
		}
		if json.NewDecoder(r.Body).Decode(&body) != nil || body.Text == nil {
			writeStatusJSON(w, 422, `{"detail":[{"loc":["body","text"],"msg":"Field required","type":"missing"}]}`)
			return
		}
		format := map[string]string{"": "mp3", "mp3_44100_128": "mp3", "pcm_24000": "pcm"}[r.URL.Query().Get("output_format")]
		text := *body.Text
		switch {
		case format == "":
			writeStatusJSON(w, 422, `{"detail":[{"loc":["query","output_format"],"msg":"Input should be a known output format","type":"enum"}]}`)
			return
		case body.VoiceSettings != nil && body.VoiceSettings.Speed != nil && (*body.VoiceSettings.Speed < 0.7 || *body.VoiceSettings.Speed > 1.2):
			writeStatusJSON(w, 400, `{"detail":{"status":"invalid_voice_settings","message":"speed must be between 0.7 and 1.2"}}`)
			return
		case strings.HasPrefix(text, "forbidden"):
			writeStatusJSON(w, 400, `{"detail":{"status":"content_against_policy","message":"The text was blocked by our content policy."}}`)
			return
		case strings.HasPrefix(text, "broken"):
			writeStatusJSON(w, 500, `{"detail":{"status":"internal_error","message":"An internal error occurred."}}`)
			return
		}
		if v.accept(text) == "" {
			writeStatusJSON(w, 429, `{"detail":{"status":"too_many_concurrent_requests","message":"Too many concurrent requests for your subscription."}}`)
			return
		}
		ct := map[string]string{"mp3": "audio/mpeg", "pcm": "audio/pcm"}[format]
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(200)
		writePaced(w, r, ttsAudio(text, format, false), pace)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

// readAllChunks reads r to its end and returns the bytes and how many
// reads returned some.
func readAllChunks(r io.Reader) ([]byte, int, error) {
	var out bytes.Buffer
	buf := make([]byte, 64<<10)
	reads := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			reads++
			out.Write(buf[:n])
		}
		if err == io.EOF {
			return out.Bytes(), reads, nil
		}
		if err != nil {
			return out.Bytes(), reads, err
		}
	}
}
