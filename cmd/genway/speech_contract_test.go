package main

// The speech vendors' contract tests: the openai SDK's
// audio.speech.create and @elevenlabs/elevenlabs-js's textToSpeech.stream
// against our adapters, on the harness of contract_test.go (fresh
// recording fakes per side, the requests compared step by step, what the
// SDK read checked beside what our adapter read). Run them with
//
//	CGO_ENABLED=0 go test -count=1 -p 1 -run Contract -v ./cmd/genway/

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/providers/elevenlabs"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// speechRun is how our adapter ended a speech: the audio (and how many
// reads returned some), or the error of the call or of its body.
type speechRun struct {
	Err   error
	Audio []byte
	Reads int
}

// outcome names how a speech ended: "ok", "content_policy", or the
// routing class of the failure (route.Class names: "key_refused",
// "rate_limited", "transient", "unsupported", "final").
func (r speechRun) outcome() string {
	var f interface{ Failure() route.Failure }
	switch {
	case r.Err == nil:
		return "ok"
	case apierr.As(r.Err) != nil:
		return apierr.As(r.Err).Code
	case errors.As(r.Err, &f):
		return f.Failure().Class.String()
	}
	return "unclassified: " + r.Err.Error()
}

// speechCase is one speech that the SDK and our adapter each make against
// a fresh fake of their own.
type speechCase struct {
	name   string
	call   speech.Call // for our adapter; Model by modelID
	model  string      // the catalog model of call
	sdk    map[string]any
	badKey bool
	wire   bool
	check  func(t *testing.T, sdk sdkReport, ours speechRun)
}

// speechContract is one speech vendor's contract test.
type speechContract struct {
	pkg, version, script, key string
	fake                      func(testing.TB) *fakeVendor
	// base is the base URL the SDK and our adapter are given for a fake
	// at url.
	base    func(url string) string
	adapter func(base, key string) speech.Provider
	step    func(wireRequest) string
	known   map[string]string
	cases   []speechCase
}

func (sc speechContract) run(t *testing.T) {
	node, dir := pinnedSDK(t, sc.pkg, sc.version)
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	key := func(c speechCase) string {
		if c.badKey {
			return "not-the-configured-key"
		}
		return sc.key
	}
	sdkFakes := make([]*fakeVendor, len(sc.cases))
	var calls []sdkCall
	for i, c := range sc.cases {
		sdkFakes[i] = recordingFake(sc.fake(t))
		calls = append(calls, sdkCall{Name: c.name, Base: sc.base(sdkFakes[i].srv.URL), Key: key(c), Args: c.sdk})
	}
	reports := runSDK(t, node, dir, sc.script, calls)
	ours := make([]speechRun, len(sc.cases))
	var wire []wireCase
	for i, c := range sc.cases {
		f := recordingFake(sc.fake(t))
		m, ok := cat.Model(c.model)
		if !ok {
			t.Fatalf("%s: no model %q", c.name, c.model)
		}
		call := c.call
		call.Model = m
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		body, err := sc.adapter(sc.base(f.srv.URL), key(c)).Speak(ctx, &call)
		if err == nil {
			ours[i].Audio, ours[i].Reads, err = readAllChunks(body)
			body.Close()
		}
		cancel()
		ours[i].Err = err
		if c.wire {
			wire = append(wire, wireCase{name: c.name, sdk: sdkFakes[i].requests(), ours: f.requests()})
		}
	}
	t.Run("requests", func(t *testing.T) {
		compareWire(t, sc.key, sc.step, sc.known, wire)
	})
	t.Run("responses", func(t *testing.T) {
		for i, c := range sc.cases {
			t.Run(c.name, func(t *testing.T) {
				r := reports[c.name]
				t.Logf("the SDK read: value %v, error %+v; our adapter: %s, %d bytes in %d reads (%v)", r.Value, r.Error, ours[i].outcome(), len(ours[i].Audio), ours[i].Reads, ours[i].Err)
				c.check(t, r, ours[i])
			})
		}
	})
}

// audioRead checks that the SDK read the fake's audio (bytes of it, of
// type ctype, in more than one piece) and our adapter the same bytes.
func audioRead(want []byte, ctype string) func(t *testing.T, sdk sdkReport, ours speechRun) {
	return func(t *testing.T, sdk sdkReport, ours speechRun) {
		v := sdkValue(t, sdk)
		if v["bytes"] != float64(len(want)) || v["contentType"] != ctype || v["chunks"].(float64) < 2 {
			t.Errorf("the SDK read %v; want %d bytes of %s, streamed in pieces", v, len(want), ctype)
		}
		if ours.outcome() != "ok" || string(ours.Audio) != string(want) || ours.Reads < 2 {
			t.Errorf("our adapter read %s, %d bytes in %d reads; want the fake's %d, in pieces", ours.outcome(), len(ours.Audio), ours.Reads, len(want))
		}
	}
}

// refusedAs checks that the SDK threw class with status, its message
// saying msg, and that our adapter ended with outcome.
func refusedAs(class string, status int, msg, outcome string) func(t *testing.T, sdk sdkReport, ours speechRun) {
	return func(t *testing.T, sdk sdkReport, ours speechRun) {
		if e := sdkThrew(t, sdk, class, status); !strings.Contains(e.Message, msg) {
			t.Errorf("the SDK read %q; want %q", e.Message, msg)
		}
		if ours.outcome() != outcome || !strings.Contains(ours.Err.Error(), msg) {
			t.Errorf("our adapter ended %s (%v); want %s saying %q", ours.outcome(), ours.Err, outcome, msg)
		}
	}
}

// paced are fakes that send their audio 1 KB at a time, a little apart,
// so a client that streams sees pieces.
const paced = 2 * time.Millisecond

// TestSpeechContractOpenAI: the openai SDK 7.57.0 (audio.speech.create)
// sends what our OpenAI speech adapter sends, and both read the fake's
// streamed audio and errors alike.
func TestSpeechContractOpenAI(t *testing.T) {
	text := speechText
	req := func(model, voice, format string, extra map[string]any) map[string]any {
		r := map[string]any{"model": model, "input": text, "voice": voice, "response_format": format}
		for k, v := range extra {
			r[k] = v
		}
		return map[string]any{"request": r}
	}
	call := func(voice, format string) speech.Call { return speech.Call{Input: text, Voice: voice, Format: format} }
	refused := func(input string) speech.Call { return speech.Call{Input: input, Voice: "alloy", Format: "mp3"} }
	refusedReq := func(input string) map[string]any {
		return map[string]any{"request": map[string]any{"model": "tts-1", "input": input, "voice": "alloy", "response_format": "mp3"}}
	}
	speechContract{
		pkg: "openai", version: "7.57.0", script: "openai-tts.mjs", key: openAIKey,
		fake:    func(t testing.TB) *fakeVendor { return fakeOpenAITTS(t, paced) },
		base:    func(url string) string { return url + "/v1" },
		adapter: func(base, key string) speech.Provider { return openai.New(openai.Config{BaseURL: base, APIKey: key}) },
		step:    func(r wireRequest) string { return "speech" },
		cases: []speechCase{
			{name: "mp3", model: "tts-1", call: call("alloy", "mp3"), wire: true,
				sdk: req("tts-1", "alloy", "mp3", nil), check: audioRead(ttsAudio(text, "mp3", true), "audio/mpeg")},
			{name: "wav with speed and instructions", model: "gpt-4o-mini-tts", wire: true,
				call: speech.Call{Input: text, Voice: "marin", Format: "wav", Speed: 1.25, Instructions: "Speak slowly and warmly."},
				sdk:  req("gpt-4o-mini-tts", "marin", "wav", map[string]any{"speed": 1.25, "instructions": "Speak slowly and warmly."}),
				check: func(t *testing.T, sdk sdkReport, ours speechRun) {
					want := ttsAudio(text, "wav", true)
					audioRead(want, "audio/wav")(t, sdk, ours)
					if string(ours.Audio[:8]) != "RIFF\xff\xff\xff\xff" {
						t.Errorf("our adapter's WAV starts %q; want OpenAI's header of unknown length, as it came", ours.Audio[:8])
					}
				}},
			{name: "pcm", model: "tts-1-hd", call: call("onyx", "pcm"), wire: true,
				sdk: req("tts-1-hd", "onyx", "pcm", nil), check: audioRead(ttsAudio(text, "pcm", true), "audio/pcm")},
			{name: "wrong key", model: "tts-1", call: call("alloy", "mp3"), badKey: true,
				sdk: req("tts-1", "alloy", "mp3", nil), check: refusedAs("AuthenticationError", http.StatusUnauthorized, "Incorrect API key", "key_refused")},
			{name: "refused", model: "tts-1", call: refused("forbidden words"),
				sdk: refusedReq("forbidden words"), check: refusedAs("BadRequestError", http.StatusBadRequest, "safety system", "content_policy")},
			{name: "throttled", model: "tts-1", call: refused("throttled words"),
				sdk: refusedReq("throttled words"), check: refusedAs("RateLimitError", http.StatusTooManyRequests, "Rate limit", "rate_limited")},
			{name: "server error", model: "tts-1", call: refused("broken words"),
				sdk: refusedReq("broken words"), check: refusedAs("InternalServerError", http.StatusInternalServerError, "", "transient")},
		},
	}.run(t)
}

// TestSpeechContractElevenLabs: @elevenlabs/elevenlabs-js 2.73.0
// (textToSpeech.stream) sends what our ElevenLabs speech adapter sends,
// and both read the fake's streamed audio and errors alike; for wav, ours
// is the same PCM behind a WAV header of unknown length.
func TestSpeechContractElevenLabs(t *testing.T) {
	const george = "JBFqnCBsd6RMkjVDRZzb"
	text := speechText
	stream := func(voice, format string, settings map[string]any) map[string]any {
		body := map[string]any{"text": text, "modelId": "eleven_flash_v2_5", "outputFormat": format}
		if settings != nil {
			body["voiceSettings"] = settings
		}
		return map[string]any{"method": "tts", "request": map[string]any{"voiceId": voice, "body": body}}
	}
	call := func(voice, format string, speed float64) speech.Call {
		return speech.Call{Input: text, Voice: voice, Format: format, Speed: speed}
	}
	on := func(input string) (speech.Call, map[string]any) {
		c := speech.Call{Input: input, Voice: george, Format: "mp3"}
		s := map[string]any{"method": "tts", "request": map[string]any{"voiceId": george,
			"body": map[string]any{"text": input, "modelId": "eleven_flash_v2_5", "outputFormat": "mp3_44100_128"}}}
		return c, s
	}
	forbidden, forbiddenSDK := on("forbidden words")
	throttled, throttledSDK := on("throttled words")
	pcm := ttsAudio(text, "pcm", false)
	speechContract{
		pkg: "@elevenlabs/elevenlabs-js", version: "2.73.0", script: "elevenlabs.mjs", key: vendorKeys["ELEVENLABS_API_KEY"],
		fake: func(t testing.TB) *fakeVendor { return fakeElevenLabsTTS(t, paced) },
		base: func(url string) string { return url },
		adapter: func(base, key string) speech.Provider {
			return elevenlabs.New(elevenlabs.Config{BaseURL: base, APIKey: key})
		},
		step: func(r wireRequest) string { return "stream" },
		cases: []speechCase{
			{name: "mp3", model: "eleven-flash-v2-5", call: call(george, "mp3", 0), wire: true,
				sdk: stream(george, "mp3_44100_128", nil), check: audioRead(ttsAudio(text, "mp3", false), "audio/mpeg")},
			{name: "pcm with a speed", model: "eleven-flash-v2-5", call: call(george, "pcm", 1.1), wire: true,
				sdk: stream(george, "pcm_24000", map[string]any{"speed": 1.1}), check: audioRead(pcm, "audio/pcm")},
			{name: "wav", model: "eleven-flash-v2-5", call: call(george, "wav", 0), wire: true,
				sdk: stream(george, "pcm_24000", nil),
				check: func(t *testing.T, sdk sdkReport, ours speechRun) {
					if v := sdkValue(t, sdk); v["bytes"] != float64(len(pcm)) {
						t.Errorf("the SDK read %v; want the %d PCM bytes", v, len(pcm))
					}
					want := append(media.WAVStreamHeader(media.SpeechRate), pcm...)
					if ours.outcome() != "ok" || string(ours.Audio) != string(want) {
						t.Errorf("our adapter read %s, %d bytes; want the same PCM behind a streamed WAV header (%d bytes)", ours.outcome(), len(ours.Audio), len(want))
					}
				}},
			{name: "wrong key", model: "eleven-flash-v2-5", call: call(george, "mp3", 0), badKey: true,
				sdk: stream(george, "mp3_44100_128", nil), check: refusedAs("ElevenLabsError", http.StatusUnauthorized, "Invalid API key", "key_refused")},
			{name: "unknown voice", model: "eleven-flash-v2-5", call: call("nope", "mp3", 0),
				sdk: stream("nope", "mp3_44100_128", nil), check: refusedAs("ElevenLabsError", http.StatusNotFound, "was not found", "unsupported")},
			{name: "speed out of range", model: "eleven-flash-v2-5", call: call(george, "mp3", 1.5),
				sdk: stream(george, "mp3_44100_128", map[string]any{"speed": 1.5}), check: refusedAs("ElevenLabsError", http.StatusBadRequest, "speed must be", "final")},
			{name: "refused", model: "eleven-flash-v2-5", call: forbidden,
				sdk: forbiddenSDK, check: refusedAs("ElevenLabsError", http.StatusBadRequest, "content policy", "content_policy")},
			{name: "throttled", model: "eleven-flash-v2-5", call: throttled,
				sdk: throttledSDK, check: refusedAs("ElevenLabsError", http.StatusTooManyRequests, "Too many concurrent requests", "rate_limited")},
		},
	}.run(t)
}

// TestSpeechRunOutcome checks the harness's naming of outcomes.
func TestSpeechRunOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{speech.ContentPolicy("no", nil), "content_policy"},
		{io.ErrUnexpectedEOF, "unclassified: unexpected EOF"},
	}
	for _, tt := range tests {
		if got := (speechRun{Err: tt.err}).outcome(); got != tt.want {
			t.Errorf("outcome(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}
