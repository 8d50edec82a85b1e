package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
)

// The wire request types and wireRequestFor are the reference encoding:
// what (*Provider).do sent through json.Marshal before appendRequest.
// appendRequest must produce json.Marshal(wireRequestFor(req, stream))
// byte for byte.

// wireRequest is the request body of POST /chat/completions.
type wireRequest struct {
	Model               string         `json:"model"`
	Messages            []wireMessage  `json:"messages"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	ReasoningEffort     string         `json:"reasoning_effort,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Stop                []string       `json:"stop,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage's Content is a string, or []wirePart when there are images.
type wireMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type wirePart struct {
	Type     string        `json:"type"`
	Text     *string       `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
}

type wireImageURL struct {
	URL string `json:"url"`
}

func wireRequestFor(req *chat.Request, stream bool) *wireRequest {
	w := &wireRequest{
		Model:               req.Model.Upstream,
		Messages:            make([]wireMessage, len(req.Messages)),
		MaxCompletionTokens: req.MaxTokens,
		Temperature:         req.Temperature,
		TopP:                req.TopP,
		Stop:                req.Stop,
		Seed:                req.Seed,
	}
	if req.Model.Thinking == catalog.ThinkingEffort {
		w.ReasoningEffort = req.ReasoningEffort
	}
	if stream {
		w.Stream = true
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	for i, m := range req.Messages {
		w.Messages[i].Role = m.Role
		images := false
		for _, p := range m.Parts {
			images = images || p.Image != nil
		}
		if !images {
			w.Messages[i].Content = m.Text()
			continue
		}
		parts := make([]wirePart, len(m.Parts))
		for j, pt := range m.Parts {
			if pt.Image == nil {
				t := pt.Text
				parts[j] = wirePart{Type: "text", Text: &t}
				continue
			}
			u := pt.Image.URL
			if pt.Image.Data != nil {
				u = "data:" + pt.Image.MediaType + ";base64," + base64.StdEncoding.EncodeToString(pt.Image.Data)
			}
			parts[j] = wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: u}}
		}
		w.Messages[i].Content = parts
	}
	return w
}

func ptr[T any](v T) *T { return &v }

func text(role string, parts ...string) chat.Message {
	m := chat.Message{Role: role}
	for _, p := range parts {
		m.Parts = append(m.Parts, chat.Part{Text: p})
	}
	return m
}

var (
	plainModel  = &catalog.Model{ID: "openai/gpt-4o-mini", Upstream: "gpt-4o-mini"}
	effortModel = &catalog.Model{ID: "openai/o4-mini", Upstream: "o4-mini", Thinking: catalog.ThinkingEffort}
	budgetModel = &catalog.Model{ID: "vllm/x", Upstream: "x", Thinking: catalog.ThinkingBudget}
	oddModel    = &catalog.Model{ID: "odd", Upstream: "m<&>\"\u2028\xff", Thinking: catalog.ThinkingEffort}
)

// encodeRequests are requests over every field and escaping rule.
var encodeRequests = []struct {
	name string
	req  chat.Request
}{
	{"text only", chat.Request{Model: plainModel, Messages: []chat.Message{text("system", "Be brief."), text("user", "Hi")}}},
	{"no messages", chat.Request{Model: plainModel}},
	{"empty messages", chat.Request{Model: plainModel, Messages: []chat.Message{}}},
	{"message without parts", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user"}}}},
	{"empty text", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", ""), text("", "", "")}}},
	{"text parts joined", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", "one ", "two ", "three")}}},
	{"invalid UTF-8 split across parts", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", "euro \xe2\x82", "\xac!"), text("user", "\xf0\x9f", "\x99\x82", "\xff")}}},
	{"escapes", chat.Request{Model: oddModel, ReasoningEffort: "<high>", Messages: []chat.Message{
		text("user\"", "quote \" backslash \\ <script>&amp;</script> \n\r\t\b\f \x00\x1f\x7f"),
		text("assistant", "unicode é 日本語 🙂 separators \u2028 \u2029 invalid \xff\xc3 truncated \xe2\x82 surrogate \xed\xa0\x80"),
	}}},
	{"images", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
		{Text: "What?"},
		{Image: &chat.Image{URL: "https://example.com/cat.png?a=1&b=<2>"}},
		{Image: &chat.Image{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")}},
		{Text: ""},
		{Image: &chat.Image{MediaType: "image/jpeg", Data: []byte{}}},
		{Image: &chat.Image{}},
		{Image: &chat.Image{URL: "https://example.com/\u2028\xff"}},
	}}, text("assistant", "A cat.")}}},
	{"image media type to escape", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
		{Image: &chat.Image{MediaType: "image/<x>&\"\xff\u2029", Data: []byte{0xfb, 0xff, 0xfe}}},
		{Image: &chat.Image{MediaType: "", Data: []byte("x")}},
	}}}}},
	{"image only", chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
		{Image: &chat.Image{MediaType: "image/webp", Data: make([]byte, 1000)}},
	}}}}},
	{"every optional field", chat.Request{Model: effortModel, Messages: []chat.Message{text("user", "Hi")},
		MaxTokens: 4096, ReasoningEffort: "medium", Temperature: ptr(0.7), TopP: ptr(0.95),
		Stop: []string{"\n\n", "END", "<|end|>", ""}, Seed: ptr(int64(42))}},
	{"zero values set", chat.Request{Model: effortModel, Messages: []chat.Message{text("user", "Hi")},
		Temperature: ptr(0.0), TopP: ptr(math.Copysign(0, -1)), Seed: ptr(int64(0)), Stop: []string{}}},
	{"small and large floats", chat.Request{Model: plainModel, Messages: []chat.Message{text("user", "Hi")},
		Temperature: ptr(1e-7), TopP: ptr(1e21)}},
	{"temperature 1.5", chat.Request{Model: plainModel, Temperature: ptr(1.5), TopP: ptr(1.0)}},
	{"temperature just below 1e-6", chat.Request{Model: plainModel, Temperature: ptr(math.Nextafter(1e-6, 0)), TopP: ptr(1e-6)}},
	{"negative numbers", chat.Request{Model: plainModel, MaxTokens: -1, Seed: ptr(int64(math.MinInt64)), Temperature: ptr(-2.5)}},
	{"large numbers", chat.Request{Model: plainModel, MaxTokens: math.MaxInt32, Seed: ptr(int64(math.MaxInt64)), Temperature: ptr(math.MaxFloat64)}},
	{"stop unset", chat.Request{Model: plainModel, Stop: nil, Seed: ptr(int64(-7))}},
	{"one stop", chat.Request{Model: plainModel, Stop: []string{"\u2028<&>\xff"}}},
	{"effort to an effort model", chat.Request{Model: effortModel, ReasoningEffort: "high", Messages: []chat.Message{text("user", "Hi")}}},
	{"no effort to an effort model", chat.Request{Model: effortModel, ReasoningEffort: "", Messages: []chat.Message{text("user", "Hi")}}},
	{"no effort to a budget model", chat.Request{Model: budgetModel, ReasoningEffort: "low", Messages: []chat.Message{text("user", "Hi")}}},
	{"no effort to a plain model", chat.Request{Model: plainModel, ReasoningEffort: "low", Messages: []chat.Message{text("user", "Hi")}}},
}

// wantRequest is the reference encoding of req.
func wantRequest(t testing.TB, req *chat.Request, stream bool) []byte {
	t.Helper()
	want, err := json.Marshal(wireRequestFor(req, stream))
	if err != nil {
		t.Fatalf("json.Marshal(wireRequestFor(%+v)) error %v", req, err)
	}
	return want
}

func TestAppendRequest(t *testing.T) {
	for _, tt := range encodeRequests {
		for _, stream := range []bool{false, true} {
			name := tt.name
			if stream {
				name += " streamed"
			}
			t.Run(name, func(t *testing.T) {
				want := wantRequest(t, &tt.req, stream)
				if !json.Valid(want) {
					t.Fatalf("reference %s is not valid JSON", want)
				}
				if got := appendRequest([]byte("x"), &tt.req, stream); string(got) != "x"+string(want) {
					t.Errorf("appendRequest(%+v, %v) = %s; want %s", tt.req, stream, got[1:], want)
				}
			})
		}
	}
}

// TestRequestSize: an ordinary request is encoded into the buffer
// requestSize sized, without growing it.
func TestRequestSize(t *testing.T) {
	for _, tt := range encodeRequests {
		if strings.Contains(tt.name, "escape") || strings.Contains(tt.name, "UTF-8") {
			continue // escapes may grow the buffer
		}
		t.Run(tt.name, func(t *testing.T) {
			size := requestSize(&tt.req)
			if got := appendRequest(make([]byte, 0, size), &tt.req, true); len(got) > size {
				t.Errorf("len(appendRequest(%+v)) = %d; want <= requestSize %d", tt.req, len(got), size)
			}
		})
	}
}

// TestNotFiniteRequest: a NaN or infinite temperature or top_p, which
// json.Marshal refused, is an error and nothing is sent.
func TestNotFiniteRequest(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL})
	tests := []struct {
		name string
		req  chat.Request
	}{
		{"NaN temperature", chat.Request{Model: plainModel, Temperature: ptr(math.NaN())}},
		{"infinite temperature", chat.Request{Model: plainModel, Temperature: ptr(math.Inf(1))}},
		{"NaN top_p", chat.Request{Model: plainModel, TopP: ptr(math.NaN())}},
		{"negative infinite top_p", chat.Request{Model: plainModel, Temperature: ptr(1.0), TopP: ptr(math.Inf(-1))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := json.Marshal(wireRequestFor(&tt.req, false)); err == nil {
				t.Fatalf("json.Marshal(wireRequestFor(%+v)) succeeded; want an error", tt.req)
			}
			if _, err := p.Complete(context.Background(), &tt.req); err == nil {
				t.Errorf("Complete(%+v) = nil error; want an error", tt.req)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("upstream got %d requests; want 0", n)
	}
	// The same provider still sends a finite request.
	if _, err := p.Complete(context.Background(), &chat.Request{Model: plainModel, Temperature: ptr(1.0)}); err != nil {
		t.Errorf("Complete(finite) = %v; want nil", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("upstream got %d requests; want 1", n)
	}
}

// FuzzAppendRequest builds requests from the fuzz input and checks
// appendRequest against the reference encoding; flags chooses which
// parts and optional fields the request has.
func FuzzAppendRequest(f *testing.F) {
	f.Add("gpt-4o", "user", "Hi", "", "https://example.com/a.png", "image/png", []byte("\x89PNG"), "high", "END", 0.7, 1.0, int64(-42), 100, uint16(0xffff))
	f.Add("o4-mini", "system", "Be brief.", " and kind", "", "image/jpeg", []byte{}, "low", "\n\n", 1e-7, 1e21, int64(0), 0, uint16(0))
	f.Add("m<&>", "u\u2028", "euro \xe2\x82", "\xac \xff", "\x00", "<x>", []byte(nil), "", "", 0.0, -0.0, int64(7), -1, uint16(0x0155))
	f.Add("x", "assistant", "\u2029 日本語 🙂", "\"\\/", "http://127.0.0.1/\xe2", "", []byte("abc"), "medium", "\xff", 1.5, 0.95, int64(1)<<62, 4096, uint16(0x02aa))
	f.Fuzz(func(t *testing.T, modelName, role, text1, text2, url, mediaType string, data []byte, effort, stop string,
		temp, topP float64, seed int64, maxTokens int, flags uint16) {
		bit := func(i uint) bool { return flags&(1<<i) != 0 }
		m := &catalog.Model{ID: "fuzz", Upstream: modelName}
		if bit(0) {
			m.Thinking = catalog.ThinkingEffort
		}
		req := chat.Request{Model: m, MaxTokens: maxTokens, ReasoningEffort: effort}
		msg := chat.Message{Role: role, Parts: []chat.Part{{Text: text1}}}
		if bit(1) {
			msg.Parts = append(msg.Parts, chat.Part{Text: text2})
		}
		if bit(2) {
			msg.Parts = append(msg.Parts, chat.Part{Image: &chat.Image{URL: url}})
		}
		if bit(3) {
			if data == nil {
				data = []byte{}
			}
			msg.Parts = append(msg.Parts, chat.Part{Image: &chat.Image{MediaType: mediaType, Data: data}})
		}
		req.Messages = append(req.Messages, msg)
		if bit(4) {
			req.Messages = append(req.Messages, chat.Message{Role: text2}, chat.Message{Role: role, Parts: []chat.Part{{Text: text2}, {Text: text1}}})
		}
		if bit(5) {
			req.Temperature = &temp
		}
		if bit(6) {
			req.TopP = &topP
		}
		if bit(7) {
			req.Seed = &seed
		}
		if bit(8) {
			req.Stop = []string{stop}
		}
		if bit(9) {
			req.Stop = append(req.Stop, text2, "")
		}
		stream := bit(10)
		want, err := json.Marshal(wireRequestFor(&req, stream))
		if err != nil {
			if checkRequest(&req) == nil {
				t.Fatalf("json.Marshal(wireRequestFor(%+v)) error %v; checkRequest = nil", req, err)
			}
			return
		}
		if err := checkRequest(&req); err != nil {
			t.Fatalf("checkRequest(%+v) = %v; json.Marshal succeeded", req, err)
		}
		if got := appendRequest(nil, &req, stream); string(got) != string(want) {
			t.Errorf("appendRequest(%+v, %v) = %s; want %s", req, stream, got, want)
		}
	})
}

// benchRequest is a typical streamed chat request: a system prompt, a
// few turns of a conversation and sampling parameters.
func benchRequest() *chat.Request {
	turn := strings.Repeat("Tell me more about the history of the <b>printing press</b> & its effects. ", 4)
	return &chat.Request{Model: effortModel, MaxTokens: 1024, ReasoningEffort: "low", Temperature: ptr(0.7), TopP: ptr(0.95),
		Stop: []string{"\n\nUser:"}, Seed: ptr(int64(12345)),
		Messages: []chat.Message{
			text("system", "You are a helpful assistant. Answer concisely, in plain text, in the user's language."),
			text("user", turn), text("assistant", turn+"\n\u2014 caf\u00e9 \U0001F642"), text("user", "And after 1500?"),
		}}
}

func BenchmarkEncodeRequest(b *testing.B) {
	reqs := []struct {
		name string
		req  *chat.Request
	}{
		{"chat", benchRequest()},
		{"image", &chat.Request{Model: plainModel, Messages: []chat.Message{{Role: "user", Parts: []chat.Part{
			{Text: "What is in this picture?"},
			{Image: &chat.Image{MediaType: "image/png", Data: make([]byte, 32<<10)}},
		}}}}},
	}
	for _, r := range reqs {
		b.Run(r.name+"/append", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				body := appendRequest(make([]byte, 0, requestSize(r.req)), r.req, true)
				if len(body) == 0 {
					b.Fatal("empty body")
				}
			}
		})
		b.Run(r.name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				body, err := json.Marshal(wireRequestFor(r.req, true))
				if err != nil || len(body) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
