package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/chat/chattest"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/synthetic"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/route"
)

// TestStreamFallbackBeforeFirstToken: a stream whose first target fails
// before its first token (an in-band error event inside a 200 stream, a
// dropped connection, the synthetic provider's fail:inband) moves to the
// next target unseen: the client gets one clean stream from the model
// that answered, and the attempts header tells what happened.
func TestStreamFallbackBeforeFirstToken(t *testing.T) {
	const role = `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	tests := []struct {
		name     string
		upstream chattest.Answer // the openai upstream
		models   string          // the request's models
		message  string
		want     string // the attempts header
		answerer string // the model of the chunks
	}{
		{"OpenRouter in-band 529", chattest.Answer{ContentType: "text/event-stream",
			Body: role + `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","error":{"code":529,"message":"Overloaded"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}` + "\n\n"},
			`["openai/gpt-4o-mini","synthetic/echo"]`, "hi", "openai/gpt-4o-mini=529, synthetic/echo=200", "synthetic/echo"},
		{"OpenAI in-band rate limit", chattest.Answer{ContentType: "text/event-stream",
			Body: role + `data: {"error":{"message":"Rate limit reached","type":"tokens","param":null,"code":"rate_limit_exceeded"}}` + "\n\n"},
			`["openai/gpt-4o-mini","synthetic/echo"]`, "hi", "openai/gpt-4o-mini=429, synthetic/echo=200", "synthetic/echo"},
		{"connection dropped after the role chunk", chattest.Answer{Cut: true, ContentType: "text/event-stream", Body: role},
			`["openai/gpt-4o-mini","synthetic/echo"]`, "hi", "openai/gpt-4o-mini=dropped, synthetic/echo=200", "synthetic/echo"},
		{"synthetic fail:inband for echo", chattest.Answer{Refused: true},
			`["synthetic/echo","synthetic/thinker"]`, "fail:inband@synthetic/echo hi", "synthetic/echo=529, synthetic/thinker=200", "synthetic/thinker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := upstreams.NewHTTPClient()
			defer hc.CloseIdleConnections()
			// No retries: each failure moves on at once.
			gw := chat.NewGateway(chat.Config{Catalog: testCatalog(t), Router: route.New(route.Policy{Retries: -1}, nil),
				Providers: map[string]chat.Provider{
					"openai":    openai.New(openai.Config{BaseURL: tt.upstream.URL(t), APIKey: "k", HTTPClient: hc}),
					"synthetic": synthetic.NewChat(),
				}})
			srv := chatServer(t, gw)
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(
				`{"models":`+tt.models+`,"stream":true,"messages":[{"role":"user","content":"`+tt.message+`"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.Header.Get(AttemptsHeader); resp.StatusCode != 200 || got != tt.want {
				t.Errorf("status %d, %s = %q; want 200, %q", resp.StatusCode, AttemptsHeader, got, tt.want)
			}
			s := string(body)
			if strings.Contains(s, `"error"`) || !strings.Contains(s, `"model":"`+tt.answerer+`"`) ||
				strings.Contains(s, "gpt-4o-mini") || !strings.HasSuffix(s, "data: [DONE]\n\n") {
				t.Errorf("stream = %s; want one clean answer from %s", s, tt.answerer)
			}
		})
	}
}
