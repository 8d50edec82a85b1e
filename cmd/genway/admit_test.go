package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// chatErr is the OpenAI error envelope.
type chatErr struct {
	Error struct {
		Type, Code, Message string
	}
}

// TestServePricedChatNeedsCredits runs genway serve over a catalog
// (GENWAY_CATALOG) with a priced synthetic model: an account with no
// credits available gets 402 insufficient_credits on the priced model,
// streamed or not, and 200 on the unpriced one; an account with one
// micro-credit gets one priced completion, which is charged its exact
// price, and then 402.
func TestServePricedChatNeedsCredits(t *testing.T) {
	chatBody := func(model string, stream bool) map[string]any {
		return map[string]any{"model": model, "stream": stream, "messages": []map[string]string{{"role": "user", "content": "hello world"}}}
	}
	// post sends a chat completion and returns its status and, for an
	// error, the envelope (a stream's 200 body is not JSON: not decoded).
	post := func(t *testing.T, s *server, model string, stream bool) (int, chatErr) {
		t.Helper()
		b, err := json.Marshal(chatBody(model, stream))
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", s.base+"/v1/chat/completions", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST /v1/chat/completions %s: %v", model, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("POST /v1/chat/completions %s: read body: %v", model, err)
		}
		var e chatErr
		if resp.StatusCode != 200 {
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("POST /v1/chat/completions %s: status %d, body %s: %v", model, resp.StatusCode, body, err)
			}
		}
		return resp.StatusCode, e
	}
	tests := []struct {
		model  string
		stream bool
		want   int
	}{
		{"synthetic/priced", false, 402},
		{"synthetic/priced", true, 402},
		{"synthetic/echo", false, 200},
		{"synthetic/echo", true, 200},
	}

	t.Run("no credits", func(t *testing.T) {
		s := startServer(t, t.TempDir(), map[string]string{"GENWAY_CATALOG": "testdata/priced_catalog.json", "GENWAY_DEV_CREDITS": "0"})
		for _, tt := range tests {
			code, e := post(t, s, tt.model, tt.stream)
			if code != tt.want {
				t.Errorf("POST %s (stream %v) = %d; want %d", tt.model, tt.stream, code, tt.want)
			}
			if tt.want == 402 && (e.Error.Type != "insufficient_quota" || e.Error.Code != "insufficient_credits") {
				t.Errorf("POST %s (stream %v) error = %+v; want type insufficient_quota, code insufficient_credits", tt.model, tt.stream, e.Error)
			}
		}
		var cr struct{ Balance, Available int64 }
		s.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Balance != 0 || cr.Available != 0 {
			t.Errorf("GET /v1/credits = %+v; want nothing charged (0, 0)", cr)
		}
	})

	t.Run("one micro-credit", func(t *testing.T) {
		s := startServer(t, t.TempDir(), map[string]string{"GENWAY_CATALOG": "testdata/priced_catalog.json", "GENWAY_DEV_CREDITS": "0.000001",
			"GENWAY_USAGE_FLUSH": "20ms"})
		// Any credit available admits a completion, which is then charged
		// its exact price (0.001 credits a token), past the balance.
		var answer struct {
			Usage struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if code, _ := s.do(t, "POST", "/v1/chat/completions", chatBody("synthetic/priced", false), nil, &answer); code != 200 {
			t.Fatalf("POST synthetic/priced with 0.000001 credits = %d; want 200", code)
		}
		cost := credits.Amount(answer.Usage.PromptTokens+answer.Usage.CompletionTokens) * 1000
		want := credits.Micro - cost
		// Wait (bounded) for the usage recorder's flush to charge it.
		var cr struct{ Balance, Available credits.Amount }
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			s.do(t, "GET", "/v1/credits", nil, nil, &cr)
			if cr.Available <= 0 || time.Now().After(deadline) {
				break
			}
		}
		if cost <= 0 || cr.Balance != want || cr.Available != want {
			t.Fatalf("GET /v1/credits after one priced completion (usage %+v) = %+v; want %s, the micro-credit less its exact price", answer.Usage, cr, want)
		}
		for _, tt := range tests {
			if code, _ := post(t, s, tt.model, tt.stream); code != tt.want {
				t.Errorf("POST %s (stream %v) after the credit was spent = %d; want %d", tt.model, tt.stream, code, tt.want)
			}
		}
	})
}
