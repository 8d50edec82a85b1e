package openai

// The fake below follows OpenAI's API reference for POST /v1/audio/speech
// (developers.openai.com/api/reference, "Create speech") and the openai
// SDK's audio.speech.create: a JSON body {model, input, voice,
// response_format, speed?, instructions?} with a bearer key and Accept:
// application/octet-stream, answered 200 with the audio bytes, chunked as
// they are made (a WAV with 0xFFFFFFFF sizes in its header), or an error
// {"error": {"message", "type", "param", "code"}}.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// fakeTTS answers every request with the chunks, each flushed, the next
// one sent only once next has a value (nil next: at once).
type fakeTTS struct {
	status int
	header map[string]string
	chunks []string
	next   chan struct{}
	cut    bool // end the body early: the connection drops mid-stream

	got     map[string]any
	gotHdr  http.Header
	gotPath string
}

func (f *fakeTTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.gotPath, f.gotHdr = r.URL.Path, r.Header.Clone()
	f.got = nil
	json.NewDecoder(r.Body).Decode(&f.got)
	for k, v := range f.header {
		w.Header().Set(k, v)
	}
	if f.cut {
		w.Header().Set("Content-Length", "1000") // announces more than it sends
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

func speechCall(t *testing.T, model, voice, format string) *speech.Call {
	return &speech.Call{Model: modelOf(t, model), Input: "Hello there.", Voice: voice, Format: format}
}

// modelOf is model, under a name the parameter above does not shadow.
var modelOf = model

// TestSpeakRequest: the request is the one the API reference documents
// (and the SDK sends): speed and instructions only when set.
func TestSpeakRequest(t *testing.T) {
	f := &fakeTTS{header: map[string]string{"Content-Type": "audio/mpeg"}, chunks: []string{"ID3", "audio"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test"})
	tests := []struct {
		name string
		call *speech.Call
		want string
	}{
		{"plain", speechCall(t, "tts-1", "alloy", "mp3"),
			`{"input":"Hello there.","model":"tts-1","response_format":"mp3","voice":"alloy"}`},
		{"speed and instructions", func() *speech.Call {
			c := speechCall(t, "gpt-4o-mini-tts", "marin", "wav")
			c.Speed, c.Instructions = 1.5, "Speak calmly."
			return c
		}(), `{"input":"Hello there.","instructions":"Speak calmly.","model":"gpt-4o-mini-tts","response_format":"wav","speed":1.5,"voice":"marin"}`},
	}
	for _, tt := range tests {
		body, err := p.Speak(context.Background(), tt.call)
		if err != nil {
			t.Fatalf("%s: Speak = %v", tt.name, err)
		}
		b, err := io.ReadAll(body)
		body.Close()
		if err != nil || string(b) != "ID3audio" {
			t.Errorf("%s: read %q, %v; want the audio", tt.name, b, err)
		}
		got, _ := json.Marshal(f.got)
		if string(got) != tt.want {
			t.Errorf("%s: body %s; want %s", tt.name, got, tt.want)
		}
		if f.gotPath != "/v1/audio/speech" || f.gotHdr.Get("Authorization") != "Bearer sk-test" ||
			f.gotHdr.Get("Content-Type") != "application/json" || f.gotHdr.Get("Accept") != "application/octet-stream" {
			t.Errorf("%s: %s with headers %v", tt.name, f.gotPath, f.gotHdr)
		}
	}
	// A pool's key is the one the attempt names.
	p = New(Config{BaseURL: srv.URL + "/v1", APIKey: "k1,k2"})
	body, err := p.Speak(route.WithKey(context.Background(), route.KeyID("k2")), speechCall(t, "tts-1", "alloy", "mp3"))
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	if got := f.gotHdr.Get("Authorization"); got != "Bearer k2" {
		t.Errorf("sent %q; want the named key k2", got)
	}
}

// TestSpeakStreams: each chunk OpenAI sends can be read before the next
// is sent.
func TestSpeakStreams(t *testing.T) {
	f := &fakeTTS{header: map[string]string{"Content-Type": "audio/wav"}, chunks: []string{"RIFF\xff\xff\xff\xff", "pcm1", "pcm2"}, next: make(chan struct{})}
	srv := httptest.NewServer(f)
	defer srv.Close()
	body, err := New(Config{BaseURL: srv.URL, APIKey: "k"}).Speak(context.Background(), speechCall(t, "tts-1", "alloy", "wav"))
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	buf := make([]byte, 100)
	for i, want := range f.chunks {
		n, err := body.Read(buf)
		if (err != nil && err != io.EOF) || string(buf[:n]) != want {
			t.Fatalf("read %q, %v; want the chunk %q before the next one is sent", buf[:n], err, want)
		}
		if i == len(f.chunks)-1 {
			break
		}
		select {
		case f.next <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("the fake did not take the signal")
		}
	}
}

// TestSpeakErrors: OpenAI's failures, classified for routing as chat
// completions' are, and its content refusals as content_policy.
func TestSpeakErrors(t *testing.T) {
	tests := []struct {
		name   string
		f      *fakeTTS
		class  route.Class // of the error, Speak's or the body's
		kind   chat.UpstreamKind
		policy bool
		inBody bool // the error comes from reading the body
	}{
		{"bad key", &fakeTTS{status: 401, chunks: []string{`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`}},
			route.KeyRefused, chat.UpstreamFailed, false, false},
		{"rate limited", &fakeTTS{status: 429, header: map[string]string{"Retry-After": "2"}, chunks: []string{`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}},
			route.RateLimited, chat.UpstreamRateLimited, false, false},
		{"invalid input", &fakeTTS{status: 400, chunks: []string{`{"error":{"message":"[{'type': 'string_too_long', 'loc': ('body', 'input')}]","type":"invalid_request_error","param":null,"code":null}}`}},
			route.Final, chat.UpstreamBadRequest, false, false},
		{"moderation", &fakeTTS{status: 400, chunks: []string{`{"error":{"message":"Your request was rejected by our safety system.","type":"invalid_request_error","param":null,"code":"moderation_blocked"}}`}},
			route.Final, 0, true, false},
		{"moderation of a compatible server (OpenRouter's 403): the input's", &fakeTTS{status: 403, chunks: []string{`{"error":{"code":403,"message":"Your input was flagged","metadata":{"reasons":["violence"],"flagged_input":"..."}}}`}},
			route.Final, chat.UpstreamBadRequest, false, false},
		{"server error", &fakeTTS{status: 500, chunks: []string{`{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`}},
			route.Transient, chat.UpstreamFailed, false, false},
		{"json in a 200", &fakeTTS{header: map[string]string{"Content-Type": "application/json"}, chunks: []string{`{}`}},
			route.Transient, chat.UpstreamFailed, false, false},
		{"dropped mid-stream", &fakeTTS{header: map[string]string{"Content-Type": "audio/mpeg"}, chunks: []string{"ID3"}, cut: true},
			route.Transient, chat.UpstreamFailed, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.f)
			defer srv.Close()
			body, err := New(Config{BaseURL: srv.URL, APIKey: "sk-secret-key"}).Speak(context.Background(), speechCall(t, "tts-1", "alloy", "mp3"))
			if tt.inBody {
				if err != nil {
					t.Fatalf("Speak = %v; want the body", err)
				}
				_, err = io.ReadAll(body)
				body.Close()
			}
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "sk-secret-key") {
				t.Errorf("the error %v shows the key", err)
			}
			if tt.policy {
				if e := apierr.As(err); e == nil || e.Code != "content_policy" || !strings.Contains(e.Message, "safety system") {
					t.Errorf("Speak = %v; want content_policy with OpenAI's words", err)
				}
				return
			}
			var ue *chat.UpstreamError
			if !errors.As(err, &ue) || ue.Failure().Class != tt.class || ue.Kind != tt.kind {
				t.Errorf("Speak = %v; want an upstream error of kind %v, class %v", err, tt.kind, tt.class)
			}
		})
	}
}
