package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/genway/genway/shared/auth"
)

// TestChatKeepAlive: a slow non-streamed answer gets keep-alive spaces
// (the client still reads one JSON value); a quick one gets none and its
// Content-Length; a failure after the spaces is the error envelope as the
// body. The upstream waits for a signal, never for a clock: the test
// waits (bounded) until the spaces have reached the client.
func TestChatKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		slow     bool
		fail     bool
		wantBody string // a substring
	}{
		{"quick", false, false, `"content":"hi"`},
		{"slow", true, false, `"content":"hi"`},
		{"slow then failure", true, true, `"error":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
				if tc.slow {
					select {
					case <-release:
					case <-time.After(guard):
					}
				}
				if tc.fail {
					http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
			}})
			defer up.Close()
			h := ChatCompletions(openaiGateway(t, up.URL, 0), nil, ChatKeepAlive(20*time.Millisecond))
			srv := httptest.NewServer(withAccount(h))
			defer srv.Close()
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			var got []byte
			buf := make([]byte, 1)
			if tc.slow {
				// Read the first space, then let the upstream answer.
				if _, err := io.ReadFull(resp.Body, buf); err != nil || buf[0] != ' ' {
					t.Fatalf("first byte %q, %v; want a keep-alive space", buf, err)
				}
				got = append(got, buf...)
				close(release)
			} else if resp.ContentLength <= 0 {
				t.Errorf("a quick answer has no Content-Length")
			}
			rest, _ := io.ReadAll(resp.Body)
			got = append(got, rest...)
			if !strings.Contains(string(got), tc.wantBody) {
				t.Errorf("body %q; want %s", got, tc.wantBody)
			}
			var v map[string]any
			if err := json.Unmarshal(got, &v); err != nil {
				t.Errorf("body with its spaces is not one JSON value: %v", err)
			}
		})
	}
}

// TestChatKeepAliveOpenAIClient: openai-go reads a kept-alive answer.
func TestChatKeepAliveOpenAIClient(t *testing.T) {
	up := httptest.NewServer(&fakeUpstream{handler: func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond) // several keep-alive intervals; a sleep, not an assertion
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}})
	defer up.Close()
	h := ChatCompletions(openaiGateway(t, up.URL, 0), nil, ChatKeepAlive(10*time.Millisecond))
	mux := NewMux(nil, Route{Method: "POST", Pattern: "/v1/chat/completions", Handler: withAccount(h)})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := client(srv)
	resp, err := c.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
		Model: "openai/gpt-4o-mini", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("x")}})
	if err != nil || resp.Choices[0].Message.Content != "hi" {
		t.Fatalf("New = %+v, %v", resp, err)
	}
}

// withAccount runs h as account "acct".
func withAccount(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithAccount(r.Context(), "acct")))
	})
}
