package elevenlabs

// The fake below follows ElevenLabs' API reference for streaming text to
// speech (elevenlabs.io/docs/api-reference/text-to-speech/stream) and the
// SDK's textToSpeech.stream: POST /v1/text-to-speech/{voice_id}/stream
// ?output_format=mp3_44100_128|pcm_24000... with the xi-api-key header and
// {"text", "model_id", "voice_settings"}, answered 200 with the audio,
// chunked as it is made; errors {"detail": {"status", "message"}} or
// FastAPI's 422 {"detail": [{"loc", "msg", "type"}]}.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// ttsFake answers with status and the chunks, each flushed, each after
// the first only once next has a value (nil next: at once).
type ttsFake struct {
	status int
	chunks []string
	next   chan struct{}

	path, format, key string
	body              map[string]any
}

func (f *ttsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.path, f.format, f.key = r.URL.Path, r.URL.Query().Get("output_format"), r.Header.Get("xi-api-key")
	f.body = nil
	json.NewDecoder(r.Body).Decode(&f.body)
	if f.status == 0 {
		w.Header().Set("Content-Type", "audio/mpeg")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(max(f.status, 200))
	for i, c := range f.chunks {
		if i > 0 && f.next != nil {
			select {
			case <-f.next:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, c)
		w.(http.Flusher).Flush()
	}
}

func ttsModel(t *testing.T) *catalog.Model {
	c, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Model("eleven-flash-v2-5")
	return m
}

// TestSpeakRequest: the documented streaming call, with the voice id in
// the path, the output format per response format, and voice_settings
// only for a speed.
func TestSpeakRequest(t *testing.T) {
	f := &ttsFake{chunks: []string{"audio"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL, APIKey: testKey})
	tests := []struct {
		format string
		speed  float64
		query  string
		body   string
	}{
		{"mp3", 0, "mp3_44100_128", `{"model_id":"eleven_flash_v2_5","text":"Hello there."}`},
		{"pcm", 1.1, "pcm_24000", `{"model_id":"eleven_flash_v2_5","text":"Hello there.","voice_settings":{"speed":1.1}}`},
		{"wav", 0.7, "pcm_24000", `{"model_id":"eleven_flash_v2_5","text":"Hello there.","voice_settings":{"speed":0.7}}`},
	}
	for _, tt := range tests {
		body, err := p.Speak(context.Background(), &speech.Call{Model: ttsModel(t), Input: "Hello there.", Voice: "JBFqnCBsd6RMkjVDRZzb", Format: tt.format, Speed: tt.speed})
		if err != nil {
			t.Fatalf("%s: Speak = %v", tt.format, err)
		}
		b, err := io.ReadAll(body)
		body.Close()
		if err != nil || !strings.HasSuffix(string(b), "audio") {
			t.Errorf("%s: read %q, %v", tt.format, b, err)
		}
		got, _ := json.Marshal(f.body)
		if f.path != "/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb/stream" || f.format != tt.query || f.key != testKey || string(got) != tt.body {
			t.Errorf("%s: %s ?output_format=%s key %q body %s; want the stream path, %s, the key, %s", tt.format, f.path, f.format, f.key, got, tt.query, tt.body)
		}
	}
	// A pool's key is the one the attempt names.
	p = New(Config{BaseURL: srv.URL, APIKey: "k1," + testKey})
	body, err := p.Speak(route.WithKey(context.Background(), route.KeyID(testKey)), &speech.Call{Model: ttsModel(t), Input: "x", Voice: "JBFqnCBsd6RMkjVDRZzb", Format: "mp3"})
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	if f.key != testKey {
		t.Errorf("sent key %q; want the one named", f.key)
	}
}

// TestSpeakWAV: wav is the PCM behind a streamed WAV header (0xFFFFFFFF
// sizes, 24 kHz), which comes with the first audio, then the rest as it
// arrives.
func TestSpeakWAV(t *testing.T) {
	f := &ttsFake{chunks: []string{"\x01\x00\x02\x00", "\x03\x00"}, next: make(chan struct{})}
	srv := httptest.NewServer(f)
	defer srv.Close()
	body, err := New(Config{BaseURL: srv.URL, APIKey: testKey}).Speak(context.Background(), &speech.Call{Model: ttsModel(t), Input: "x", Voice: "JBFqnCBsd6RMkjVDRZzb", Format: "wav"})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	buf := make([]byte, 1000)
	n, err := body.Read(buf)
	le := binary.LittleEndian
	if err != nil || n != 48 || string(buf[:4]) != "RIFF" || le.Uint32(buf[4:]) != 0xFFFFFFFF || le.Uint32(buf[24:]) != media.SpeechRate ||
		le.Uint32(buf[40:]) != 0xFFFFFFFF || string(buf[44:48]) != "\x01\x00\x02\x00" {
		t.Fatalf("first read = %q, %v; want the streamed WAV header and the first 4 bytes of PCM", buf[:n], err)
	}
	select {
	case f.next <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the fake did not take the signal")
	}
	rest, err := io.ReadAll(body)
	if err != nil || string(rest) != "\x03\x00" {
		t.Errorf("the rest = %q, %v; want the second chunk", rest, err)
	}
}

// TestSpeakErrors: ElevenLabs' answers, classified for routing.
func TestSpeakErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		class  route.Class
		msg    string
		policy bool
	}{
		{"bad key", 401, `{"detail":{"status":"invalid_api_key","message":"Invalid API key"}}`, route.KeyRefused, "Invalid API key", false},
		{"quota", 401, `{"detail":{"status":"quota_exceeded","message":"This request exceeds your quota."}}`, route.KeyRefused, "quota", false},
		{"busy", 429, `{"detail":{"status":"too_many_concurrent_requests","message":"Too many concurrent requests."}}`, route.RateLimited, "", false},
		{"invalid", 422, `{"detail":[{"loc":["body","text"],"msg":"Field required","type":"missing"}]}`, route.Final, "Field required", false},
		{"unknown voice", 404, `{"detail":{"status":"voice_not_found","message":"A voice with the voice_id was not found."}}`, route.Unsupported, "was not found", false},
		{"refused text", 400, `{"detail":{"status":"content_against_policy","message":"The text violates the terms of service."}}`, route.Final, "terms of service", true},
		{"server", 500, `{"detail":{"status":"internal_error","message":"Something went wrong."}}`, route.Transient, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&ttsFake{status: tt.status, chunks: []string{tt.body}})
			defer srv.Close()
			_, err := New(Config{BaseURL: srv.URL, APIKey: testKey}).Speak(context.Background(), &speech.Call{Model: ttsModel(t), Input: "x", Voice: "JBFqnCBsd6RMkjVDRZzb", Format: "mp3"})
			if err == nil || strings.Contains(err.Error(), testKey) {
				t.Fatalf("Speak = %v; want an error without the key", err)
			}
			if tt.policy {
				if e := apierr.As(err); e == nil || e.Code != "content_policy" || !strings.Contains(e.Message, tt.msg) {
					t.Errorf("Speak = %v; want content_policy with ElevenLabs' words", err)
				}
				return
			}
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) || ue.Failure().Class != tt.class || !strings.Contains(ue.Message, tt.msg) {
				t.Errorf("Speak = %v; want an upstream error of class %v saying %q", err, tt.class, tt.msg)
			}
		})
	}
}
