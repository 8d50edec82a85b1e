package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// speechVendor is a fake speech provider: answer decides each call.
type speechVendor func(ctx context.Context, c *speech.Call) (io.ReadCloser, error)

func (f speechVendor) Speak(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
	return f(ctx, c)
}

// chunks is audio read piece by piece, then err (nil: the end).
type chunks struct {
	pieces []string
	err    error
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.pieces) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.pieces[0])
	c.pieces = c.pieces[1:]
	return n, nil
}

func (c *chunks) Close() error { return nil }

// speechServer serves POST /v1/audio/speech over the default catalog's
// speech models, the openai provider answering with vendor (the
// synthetic one as the real one), and logs to logs.
func speechServer(t *testing.T, vendor speechVendor, logs io.Writer) *httptest.Server {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	svc := &speech.Service{Catalog: cat, Providers: map[string]speech.Provider{"openai": vendor},
		Router: route.New(route.Policy{Retries: -1}, nil)}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	srv := httptest.NewServer(NewMux(log, Route{Method: "POST", Pattern: "/v1/audio/speech", Handler: Speech(svc, log)}))
	t.Cleanup(srv.Close)
	return srv
}

func postSpeech(t *testing.T, srv *httptest.Server, contentType, body string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/audio/speech", contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestSpeechAnswer: the audio, streamed (no length: chunked), with its
// format's type and the attempts.
func TestSpeechAnswer(t *testing.T) {
	var got *speech.Call
	srv := speechServer(t, func(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
		got = c
		return &chunks{pieces: []string{"RIFF", "data1", "data2"}}, nil
	}, io.Discard)
	resp, b, err := postSpeech(t, srv, "application/json", `{"model":"tts-1","input":"Hi there","voice":{"id":"nova"},"response_format":"wav","speed":1.25,"user":"ignored"}`)
	if err != nil || resp.StatusCode != 200 || string(b) != "RIFFdata1data2" {
		t.Fatalf("POST = %d %q, %v; want 200 and the audio", resp.StatusCode, b, err)
	}
	if ct, te := resp.Header.Get("Content-Type"), resp.TransferEncoding; ct != "audio/wav" || len(te) != 1 || te[0] != "chunked" || resp.ContentLength != -1 {
		t.Errorf("Content-Type %q, Transfer-Encoding %v, length %d; want audio/wav, chunked", ct, te, resp.ContentLength)
	}
	if a := resp.Header.Get(AttemptsHeader); a != "tts-1=200" {
		t.Errorf("%s = %q; want tts-1=200", AttemptsHeader, a)
	}
	// This service charges nothing (no credits store): the cost is 0.
	if c, id := resp.Header.Get(CostHeader), resp.Header.Get(GenerationHeader); c != "0" || !strings.HasPrefix(id, "speech_") {
		t.Errorf("%s = %q, %s = %q; want 0 and the speech's id", CostHeader, c, GenerationHeader, id)
	}
	if got.Voice != "nova" || got.Speed != 1.25 || got.Format != "wav" || got.Input != "Hi there" {
		t.Errorf("vendor called with %+v", *got)
	}
}

// TestSpeechErrors: a request refused, or failing before any audio, is an
// OpenAI error envelope naming the parameter; a failure after the audio
// began cuts the response short, which the client sees as an error.
func TestSpeechErrors(t *testing.T) {
	audio := func(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
		return &chunks{pieces: []string{"ID3"}}, nil
	}
	tests := []struct {
		name        string
		contentType string
		body        string
		vendor      speechVendor
		status      int
		param, code string
		attempts    string
	}{
		{"not json", "application/json", `{"model":`, audio, 400, "", "invalid_json", ""},
		{"not application/json", "text/plain", `{}`, audio, 415, "", "unsupported_media_type", ""},
		{"voice of a wrong type", "application/json", `{"model":"tts-1","input":"hi","voice":3}`, audio, 400, "voice", "invalid_type", ""},
		{"speed of a wrong type", "application/json", `{"model":"tts-1","input":"hi","voice":"nova","speed":"fast"}`, audio, 400, "speed", "invalid_type", ""},
		{"no model", "application/json", `{"input":"hi","voice":"nova"}`, audio, 400, "model", "missing_field", ""},
		{"unknown model", "application/json", `{"model":"tts-9","input":"hi","voice":"nova"}`, audio, 404, "model", "model_not_found", ""},
		{"not configured", "application/json", `{"model":"eleven-flash-v2-5","input":"hi"}`, audio, 404, "model", "model_not_found", ""},
		{"a chat model", "application/json", `{"model":"openai/gpt-4o","input":"hi","voice":"nova"}`, audio, 400, "model", "model_type_mismatch", ""},
		{"no voice", "application/json", `{"model":"tts-1","input":"hi"}`, audio, 400, "voice", "missing_field", ""},
		{"instructions to tts-1", "application/json", `{"model":"tts-1","input":"hi","voice":"nova","instructions":"slowly"}`, audio, 400, "instructions", "unsupported_parameter", ""},
		{"vendor down", "application/json", `{"model":"tts-1","input":"hi","voice":"nova"}`,
			func(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
				return nil, chat.StatusError("openai", 503, http.Header{}, "down", errors.New("HTTP 503"))
			}, 503, "", "upstream_unavailable", "tts-1=503"},
		{"vendor refuses the text", "application/json", `{"model":"tts-1","input":"hi","voice":"nova"}`,
			func(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
				return nil, speech.ContentPolicy("Rejected by the safety system.", errors.New("HTTP 400"))
			}, 400, "input", "content_policy", "tts-1=content_policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := speechServer(t, tt.vendor, io.Discard)
			resp, b, err := postSpeech(t, srv, tt.contentType, tt.body)
			var env struct {
				Error struct {
					Param *string `json:"param"`
					Code  string  `json:"code"`
				} `json:"error"`
			}
			if err != nil || resp.StatusCode != tt.status || json.Unmarshal(b, &env) != nil || env.Error.Code != tt.code ||
				(tt.param != "" && (env.Error.Param == nil || *env.Error.Param != tt.param)) {
				t.Fatalf("POST %s = %d %s, %v; want %d %s naming %q", tt.body, resp.StatusCode, b, err, tt.status, tt.code, tt.param)
			}
			if a := resp.Header.Get(AttemptsHeader); a != tt.attempts {
				t.Errorf("%s = %q; want %q", AttemptsHeader, a, tt.attempts)
			}
		})
	}
}

// TestSpeechCutShort: a vendor that fails after the first audio byte
// makes the response end without its last chunk: the client's read fails
// (it cannot take the audio for whole), and the access log says aborted.
func TestSpeechCutShort(t *testing.T) {
	var logs syncBuffer
	srv := speechServer(t, func(ctx context.Context, c *speech.Call) (io.ReadCloser, error) {
		return &chunks{pieces: []string{"ID3", "frame"}, err: chat.TransportError(ctx, "openai", "read audio", io.ErrUnexpectedEOF)}, nil
	}, &logs)
	resp, b, err := postSpeech(t, srv, "application/json", `{"model":"tts-1","input":"hi","voice":"nova"}`)
	if resp.StatusCode != 200 || string(b) != "ID3frame" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("POST = %d %q, %v; want 200, the audio sent, then an unexpected EOF", resp.StatusCode, b, err)
	}
	if !strings.Contains(logs.String(), `"aborted":true`) || !strings.Contains(logs.String(), `"route":"POST /v1/audio/speech"`) {
		t.Errorf("no access log line saying aborted: %s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestListModelsSpeech: GET /v1/models?type=speech lists the speech
// models with their voices, formats, limits and price per 1,000
// characters.
func TestListModelsSpeech(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ListModels(cat, everyProvider, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/v1/models?type=speech")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range list.Data {
		if m["type"] != "speech" || m["upstream_voices"] != nil || m["voice_pattern"] != nil {
			t.Errorf("model %v: want speech models only, without vendor details", m)
		}
		got[m["id"].(string)] = fmt.Sprint(len(m["voices"].([]any)), " ", m["default_voice"], " ", m["max_input"], " ",
			m["min_speed"], "-", m["max_speed"], " ", m["instructions"], " ", m["price"])
	}
	want := map[string]string{
		"synthetic-speech":       "13 alloy 4096 0.25-4 true map[credits_per_1k_chars:1]",
		"tts-1":                  "9 <nil> 4096 0.25-4 <nil> map[credits_per_1k_chars:1.5]",
		"tts-1-hd":               "9 <nil> 4096 0.25-4 <nil> map[credits_per_1k_chars:3]",
		"gpt-4o-mini-tts":        "13 <nil> 4096 0.25-4 true map[credits_per_1k_chars:1.7]",
		"eleven-multilingual-v2": "13 JBFqnCBsd6RMkjVDRZzb 10000 0.7-1.2 <nil> map[credits_per_1k_chars:10]",
		"eleven-flash-v2-5":      "13 JBFqnCBsd6RMkjVDRZzb 10000 0.7-1.2 <nil> map[credits_per_1k_chars:5]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("speech models:\n%v\nwant\n%v", got, want)
	}
}
