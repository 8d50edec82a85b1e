package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hajimehoshi/go-mp3"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/providers/synthetic"
)

// speechText is long enough to come in many pieces: 240 characters, 16 s
// of synthetic speech.
var speechText = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 6)[:240]

// speak posts a speech request to s and returns the response (its body
// read: the bytes, how many reads returned some, the read's error).
func (s *server) speak(t *testing.T, body map[string]any) (*http.Response, []byte, int, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", s.base+"/v1/audio/speech", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/audio/speech: %v", err)
	}
	defer resp.Body.Close()
	audio, reads, err := readAllChunks(resp.Body)
	return resp, audio, reads, err
}

// speechError decodes an OpenAI error envelope.
func speechError(t *testing.T, b []byte) (param, code, msg string) {
	t.Helper()
	var env struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("not an error envelope: %q", b)
	}
	if env.Error.Param != nil {
		param = *env.Error.Param
	}
	if env.Error.Code != nil {
		code = *env.Error.Code
	}
	return param, code, env.Error.Message
}

// TestSpeechEndToEnd: POST /v1/audio/speech through genway serve on the
// synthetic model: each format streamed (chunked, in many pieces) and
// exactly the synthetic speech of the input, valid WAV and MP3; refusals
// and failures as the API says; the price charged once.
func TestSpeechEndToEnd(t *testing.T) {
	s := startServer(t, t.TempDir(), nil)
	var models struct {
		Data []struct {
			ID     string   `json:"id"`
			Voices []string `json:"voices"`
		} `json:"data"`
	}
	if code, _ := s.do(t, "GET", "/v1/models?type=speech", nil, nil, &models); code != 200 || len(models.Data) != 1 ||
		models.Data[0].ID != "synthetic-speech" || len(models.Data[0].Voices) != 13 {
		t.Fatalf("GET /v1/models?type=speech = %d %+v; want synthetic-speech alone (no vendor key is set) with its 13 voices", code, models)
	}
	for _, format := range []string{"mp3", "wav", "pcm"} {
		t.Run(format, func(t *testing.T) {
			resp, audio, reads, err := s.speak(t, map[string]any{"model": "synthetic-speech", "input": speechText, "voice": "coral", "response_format": format})
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("POST = %d, %v: %q", resp.StatusCode, err, audio[:min(len(audio), 200)])
			}
			wantType := map[string]string{"mp3": "audio/mpeg", "wav": "audio/wav", "pcm": "audio/pcm"}[format]
			if ct := resp.Header.Get("Content-Type"); ct != wantType || resp.ContentLength != -1 || reads < 3 {
				t.Errorf("Content-Type %q, length %d, %d reads; want %s, streamed in pieces", ct, resp.ContentLength, reads, wantType)
			}
			if a := resp.Header.Get("X-Genway-Attempts"); a != "synthetic-speech=200" {
				t.Errorf("X-Genway-Attempts = %q", a)
			}
			var want bytes.Buffer
			if err := media.WriteSpeech(&want, speechText, synthetic.Seed("speech", "coral", ""), 1, format); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(audio, want.Bytes()) {
				t.Fatalf("got %d bytes; want the synthetic speech's %d", len(audio), want.Len())
			}
			samples := media.SpeechSamples(speechText, 1, format)
			switch format {
			case "wav":
				le := binary.LittleEndian
				if string(audio[:4]) != "RIFF" || le.Uint32(audio[40:]) != uint32(2*samples) || le.Uint32(audio[24:]) != media.SpeechRate {
					t.Errorf("WAV header %q; want the exact length of %d samples at %d Hz", audio[:44], samples, media.SpeechRate)
				}
			case "mp3":
				d, err := mp3.NewDecoder(bytes.NewReader(audio))
				if err != nil {
					t.Fatal(err)
				}
				pcm, err := io.ReadAll(d)
				if err != nil || len(pcm)/4 < samples {
					t.Errorf("go-mp3 decoded %d samples, %v; want at least %d", len(pcm)/4, err, samples)
				}
			}
		})
	}
	t.Run("refusals", func(t *testing.T) {
		tests := []struct {
			body        map[string]any
			status      int
			param, code string
		}{
			{map[string]any{"model": "synthetic-speech", "input": "hi", "voice": "darth"}, 400, "voice", "invalid_value"},
			{map[string]any{"model": "synthetic-speech", "input": "hi", "response_format": "flac"}, 400, "response_format", "invalid_value"},
			{map[string]any{"model": "synthetic-speech", "input": strings.Repeat("x", 4097)}, 400, "input", "invalid_value"},
			{map[string]any{"model": "synthetic-speech", "input": "hi", "stream_format": "sse"}, 400, "stream_format", "unsupported_parameter"},
			{map[string]any{"model": "tts-1", "input": "hi", "voice": "alloy"}, 404, "model", "model_not_found"},
			{map[string]any{"model": "synthetic-music", "input": "hi"}, 400, "model", "model_type_mismatch"},
		}
		for _, tt := range tests {
			resp, b, _, _ := s.speak(t, tt.body)
			if param, code, _ := speechError(t, b); resp.StatusCode != tt.status || param != tt.param || code != tt.code {
				t.Errorf("POST %v = %d %s; want %d %s naming %s", tt.body, resp.StatusCode, b, tt.status, tt.code, tt.param)
			}
		}
	})
	t.Run("failures", func(t *testing.T) {
		// Before any audio: a JSON error, with the attempts.
		resp, b, _, _ := s.speak(t, map[string]any{"model": "synthetic-speech", "input": "fail:503 hello"})
		if _, code, _ := speechError(t, b); resp.StatusCode != 503 || code != "upstream_unavailable" ||
			resp.Header.Get("X-Genway-Attempts") != "synthetic-speech=503, synthetic-speech=503, synthetic-speech=503" {
			t.Errorf("fail:503 = %d %s (attempts %q); want a 503 after three attempts", resp.StatusCode, b, resp.Header.Get("X-Genway-Attempts"))
		}
		// After it: the response is cut short; the client's read fails.
		resp, audio, _, err := s.speak(t, map[string]any{"model": "synthetic-speech", "input": "fail: " + speechText, "response_format": "wav"})
		if resp.StatusCode != 200 || !bytes.HasPrefix(audio, []byte("RIFF")) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("fail: = %d, %d bytes, %v; want 200, the first audio, then an unexpected EOF", resp.StatusCode, len(audio), err)
		}
	})
	t.Run("credits", func(t *testing.T) {
		var before, after struct{ Balance, Held, Available credits.Amount }
		s.do(t, "GET", "/v1/credits", nil, nil, &before)
		// 240 characters at 1 credit per 1,000: 0.24 credits, exactly; a
		// failed one: none.
		s.speak(t, map[string]any{"model": "synthetic-speech", "input": speechText})
		s.speak(t, map[string]any{"model": "synthetic-speech", "input": "fail:503 " + speechText})
		s.do(t, "GET", "/v1/credits", nil, nil, &after)
		if after.Balance != before.Balance-240_000 || after.Held != 0 {
			t.Errorf("credits %+v -> %+v; want 0.24 charged, none held", before, after)
		}
	})
}

// speechCatalog writes the default catalog with tts-1's fallbacks
// eleven-flash-v2-5, then synthetic-speech (for GENWAY_CATALOG).
func speechCatalog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../shared/catalog/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Providers []json.RawMessage `json:"providers"`
		Models    []map[string]any  `json:"models"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Models {
		if m["id"] == "tts-1" {
			m["fallbacks"] = []string{"eleven-flash-v2-5", "synthetic-speech"}
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSpeechVendorsEndToEnd: OpenAI and ElevenLabs speech through genway
// serve, against fakes of their wire: the audio as the vendor streams it
// (a WAV of unknown length as OpenAI sends it, ElevenLabs' PCM behind
// Genway's header of unknown length), OpenAI's voice names on ElevenLabs'
// voices, fallbacks before the first byte, a refusal as content_policy;
// no vendor key in any answer or log line.
func TestSpeechVendorsEndToEnd(t *testing.T) {
	oai, eleven := fakeOpenAITTS(t, 0), recordingFake(fakeElevenLabsTTS(t, 0))
	logs := &syncBuffer{}
	s := startServerLog(t, t.TempDir(), map[string]string{
		"OPENAI_API_KEY": openAIKey, "OPENAI_BASE_URL": oai.srv.URL + "/v1",
		"ELEVENLABS_API_KEY": vendorKeys["ELEVENLABS_API_KEY"], "ELEVENLABS_BASE_URL": eleven.srv.URL,
		"GENWAY_CATALOG": speechCatalog(t), "GENWAY_ROUTE_RETRIES": "0",
	}, logs)
	tests := []struct {
		name     string
		body     map[string]any
		status   int
		ctype    string
		audio    []byte // the body, when 200
		attempts string
		code     string // the error's, when not 200
	}{
		{"tts-1 mp3", map[string]any{"model": "tts-1", "input": speechText, "voice": "nova"}, 200, "audio/mpeg",
			ttsAudio(speechText, "mp3", true), "tts-1=200", ""},
		{"tts-1 wav of unknown length", map[string]any{"model": "tts-1", "input": speechText, "voice": "nova", "response_format": "wav"}, 200, "audio/wav",
			ttsAudio(speechText, "wav", true), "tts-1=200", ""},
		{"gpt-4o-mini-tts opus with instructions", map[string]any{"model": "gpt-4o-mini-tts", "input": "hi", "voice": "marin", "response_format": "opus", "instructions": "Warmly."}, 200, "audio/ogg",
			ttsAudio("hi", "opus", true), "gpt-4o-mini-tts=200", ""},
		{"eleven wav", map[string]any{"model": "eleven-flash-v2-5", "input": speechText, "voice": "alloy", "response_format": "wav", "speed": 1.1}, 200, "audio/wav",
			ttsAudio(speechText, "wav", true), "eleven-flash-v2-5=200", ""},
		{"eleven pcm, an ElevenLabs voice id", map[string]any{"model": "eleven-multilingual-v2", "input": speechText, "voice": "21m00Tcm4TlvDq8ikWAM", "response_format": "pcm"}, 200, "audio/pcm",
			ttsAudio(speechText, "pcm", true), "eleven-multilingual-v2=200", ""},
		{"eleven speed out of its range", map[string]any{"model": "eleven-flash-v2-5", "input": "hi", "speed": 2}, 400, "", nil, "", "invalid_value"},
		{"fallbacks before the first byte", map[string]any{"model": "tts-1", "input": "broken " + speechText, "voice": "alloy", "response_format": "wav"}, 200, "audio/wav",
			nil, "tts-1=500, eleven-flash-v2-5=500, synthetic-speech=200", ""},
		{"refused", map[string]any{"model": "tts-1", "input": "forbidden words", "voice": "alloy"}, 400, "", nil, "tts-1=content_policy", "content_policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b, _, err := s.speak(t, tt.body)
			if err != nil || resp.StatusCode != tt.status {
				t.Fatalf("POST = %d %q, %v; want %d", resp.StatusCode, b[:min(len(b), 300)], err, tt.status)
			}
			if a := resp.Header.Get("X-Genway-Attempts"); a != tt.attempts {
				t.Errorf("X-Genway-Attempts = %q; want %q", a, tt.attempts)
			}
			noSecrets(t, "the answer", string(b))
			if strings.Contains(string(b), openAIKey) || strings.Contains(string(b), oai.srv.URL) || strings.Contains(string(b), eleven.srv.URL) {
				t.Errorf("the answer shows a vendor's key or URL: %q", b)
			}
			if tt.status != 200 {
				if _, code, msg := speechError(t, b); code != tt.code {
					t.Errorf("error %s (%s); want %s", code, msg, tt.code)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.ctype {
				t.Errorf("Content-Type = %q; want %q", ct, tt.ctype)
			}
			if tt.audio != nil && !bytes.Equal(b, tt.audio) {
				t.Errorf("got %d bytes (%q...); want the vendor's %d", len(b), b[:min(len(b), 48)], len(tt.audio))
			}
			if tt.ctype == "audio/wav" && binary.LittleEndian.Uint32(b[40:]) != 0xFFFFFFFF && !strings.Contains(tt.attempts, "synthetic") {
				t.Errorf("a vendor's WAV data size = %#x; want 0xFFFFFFFF (unknown when the stream starts)", binary.LittleEndian.Uint32(b[40:]))
			}
		})
	}
	// alloy went to ElevenLabs as the default voice it maps to.
	var paths []string
	for _, r := range eleven.requests() {
		paths = append(paths, r.Path)
	}
	if !strings.Contains(strings.Join(paths, " "), "/v1/text-to-speech/SAz9YHcvj6GT2YYXdXww/stream") {
		t.Errorf("ElevenLabs got %v; want alloy as SAz9YHcvj6GT2YYXdXww", paths)
	}
	// The refusal was the answer: no fallback was asked.
	for _, r := range eleven.requests() {
		if bytes.Contains(r.Body, []byte("forbidden")) {
			t.Errorf("a refused text went on to a fallback")
		}
	}
	noSecrets(t, "the log", logs.String())
	if strings.Contains(logs.String(), openAIKey) {
		t.Error("the log shows the OpenAI key")
	}
}

// TestSpeechCreditsStress speaks from many goroutines on an account whose
// balance covers only some of the requests, some failing on purpose
// before their first byte (fail:503) and some after it (fail:), and checks
// the promises of reservations through genway serve: no overdraft (a 402
// once the credits are held or spent), exactly the speeches heard to
// their end charged, once each, every failure released, nothing held.
func TestSpeechCreditsStress(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"GENWAY_DEV_CREDITS": "0", "GENWAY_ROUTE_RETRIES": "0"})
	var out bytes.Buffer
	const balance, clients, perClient = 30, 16, 5 // 80 requests of 1 credit each
	text := strings.Repeat(speechText, 5)[:1000]  // 1 credit at 1 per 1,000 characters
	if err := run(t.Context(), []string{"keys", "create", "--account", "talker", "--credits", "30"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	c := &server{base: s.base, key: lines[len(lines)-1]}
	var mu sync.Mutex
	heard, cut, failed, refused, other := 0, 0, 0, 0, 0
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				input := text
				switch (g + i) % 5 {
				case 1:
					input = "fail:503 " + text
				case 2:
					input = "fail: " + text
				}
				resp, _, _, err := c.speak(t, map[string]any{"model": "synthetic-speech", "input": input, "response_format": "pcm"})
				mu.Lock()
				switch {
				case resp.StatusCode == 200 && err == nil:
					heard++
				case resp.StatusCode == 200:
					cut++
				case resp.StatusCode == 503:
					failed++
				case resp.StatusCode == 402:
					refused++
				default:
					other++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var cr struct{ Balance, Held, Available credits.Amount }
	c.do(t, "GET", "/v1/credits", nil, nil, &cr)
	out.Reset()
	if err := run(t.Context(), []string{"credits", "ledger", "--account", "talker"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	reserved, captures, releases := strings.Count(out.String(), " reservation "), strings.Count(out.String(), " capture "), strings.Count(out.String(), " release ")
	t.Logf("%d requests: %d heard to the end, %d cut after the first byte, %d failed before it, %d refused (402); ledger: %d reservations, %d captures, %d releases; credits %+v",
		clients*perClient, heard, cut, failed, refused, reserved, captures, releases, cr)
	if other != 0 || heard == 0 || cut == 0 || failed == 0 || refused == 0 {
		t.Errorf("%d answers were none of 200, 503, 402; want some of each kind", other)
	}
	if cr.Held != 0 || cr.Balance != credits.Amount(balance-heard)*credits.Credit || cr.Available != cr.Balance {
		t.Errorf("credits = %+v; want balance %d (%d heard at 1 credit), nothing held", cr, balance-heard, heard)
	}
	if reserved != heard+cut+failed || captures != heard || releases != cut+failed {
		t.Errorf("ledger: %d reservations, %d captures, %d releases; want %d, %d, %d", reserved, captures, releases, heard+cut+failed, heard, cut+failed)
	}
}

// TestSpeechAWS speaks on the AWS-backed local mode against moto_server:
// the reservation and its settlement are DynamoDB transactions (a speech
// heard to the end charged once, one failing before or after its first
// byte released), and the openai npm client's speech script runs there
// too, when node is installed.
func TestSpeechAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	_, env, dir := awsServe(t)
	env["GENWAY_ROUTE_RETRIES"] = "0"
	s := startServer(t, dir, env)
	var before, after struct{ Balance, Held, Available credits.Amount }
	s.do(t, "GET", "/v1/credits", nil, nil, &before)
	tests := []struct {
		input  string
		status int
		cut    bool // the response is cut short
	}{
		{speechText, 200, false},
		{"fail:503 " + speechText, 503, false},
		{"fail: " + speechText, 200, true},
	}
	for _, tt := range tests {
		resp, audio, _, err := s.speak(t, map[string]any{"model": "synthetic-speech", "input": tt.input, "response_format": "mp3"})
		if resp.StatusCode != tt.status || errors.Is(err, io.ErrUnexpectedEOF) != tt.cut {
			t.Errorf("speak %.12q = %d, %d bytes, %v; want %d, cut short %v", tt.input, resp.StatusCode, len(audio), err, tt.status, tt.cut)
		}
	}
	s.do(t, "GET", "/v1/credits", nil, nil, &after)
	if after.Balance != before.Balance-240_000 || after.Held != 0 || after.Available != after.Balance {
		t.Errorf("credits %+v -> %+v; want the one speech heard to its end charged (0.24 credits), nothing held", before, after)
	}
	t.Run("npm", func(t *testing.T) {
		node, npmDir := npmClients(t, filepath.Join("openai", "package.json"))
		out := runNode(t, node, npmDir, []string{"GENWAY_URL=" + s.base, "GENWAY_KEY=" + s.key}, "speech.mjs")
		if n := strings.Count(string(out), "ok "); n != 4 {
			t.Errorf("node speech.mjs reported %d checks; want 4", n)
		}
	})
}
