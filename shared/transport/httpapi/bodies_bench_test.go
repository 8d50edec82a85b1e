package httpapi

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
)

// BenchmarkChatBody measures what one chat request of about 5 MB
// allocates, from its body to the upstream's request, through
// ChatCompletions and the openai provider to an upstream that reads the
// request and answers a few words: B/op is the memory the body costs
// (the body read, the request decoded, its message, the request sent
// upstream). "text" is one 5 MB message (its text limit raised to let it
// through), "image" a short message with a PNG of 3.7 MB as a data URI
// (decoded to check it, encoded again for the upstream).
//
//	go test ./shared/transport/httpapi -run '^$' -bench ChatBody -benchtime 20x
func BenchmarkChatBody(b *testing.B) {
	up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`)
	}})
	defer up.Close()
	h := ChatCompletions(openaiGateway(b, up.URL, time.Minute), nil)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"text", []byte(`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 5<<20/12) + `"}]}`)},
		{"image", []byte(`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"` + bigPNG(b, 5<<20) + `"}}]}]}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bodies := NewBodies(MaxBodyBytes, 0)
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(tc.body))
				r.Header.Set("Content-Type", "application/json")
				r = r.WithContext(auth.WithAccount(r.Context(), "acct"))
				w := httptest.NewRecorder()
				LimitBodies(bodies, h).ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// bigPNG returns a data URI of about size bytes: a PNG's header (it is
// sniffed as one), padded.
func bigPNG(t testing.TB, size int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size*3/4)
	copy(data, b.Bytes())
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
}
