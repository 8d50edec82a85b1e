package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/credits"
)

// TestServeConfigPricing: GENWAY_CREDIT_USD and GENWAY_PRICE_MARKUP set
// what the catalog's list prices are converted with; a bad value is an
// error naming them.
func TestServeConfigPricing(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string // the pricing's String, or the error's words
	}{
		{nil, "1 credit = US$0.01, markup 0%"},
		{map[string]string{"GENWAY_CREDIT_USD": "0.003", "GENWAY_PRICE_MARKUP": "12.5"}, "1 credit = US$0.003, markup 12.5%"},
		{map[string]string{"GENWAY_CREDIT_USD": "-1"}, "GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: the credit value must be"},
		{map[string]string{"GENWAY_PRICE_MARKUP": "ten"}, "GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: the markup must be"},
	}
	for _, tt := range tests {
		c, err := app.LoadConfig(app.Serve, func(k string) string { return tt.env[k] })
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = c.Pricing.String()
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("LoadConfig(%v) = %q; want %q", tt.env, got, tt.want)
		}
	}
}

// TestServeShippedPrices runs genway serve on the shipped catalog with a
// fake OpenAI upstream, 1 credit = $0.003 and a 12.5 % markup:
// GET /v1/models shows openai/gpt-4o-mini's list price as credits
// ($0.15 and $0.60 per million: 56.25 and 225), a completion of 1000
// prompt and 200 completion tokens is charged exactly 0.10125 credits,
// and an account with no credits gets 402 on it, and 200 on a free model.
func TestServeShippedPrices(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-p","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"priced"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200}}`)
	}))
	defer up.Close()
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": up.URL + "/v1",
		"GENWAY_CREDIT_USD": "0.003", "GENWAY_PRICE_MARKUP": "12.5", "GENWAY_DEV_CREDITS": "10", "GENWAY_USAGE_FLUSH": "20ms"})

	var m struct {
		Price map[string]any `json:"price"`
	}
	if code, _ := s.do(t, "GET", "/v1/models/openai/gpt-4o-mini", nil, nil, &m); code != 200 {
		t.Fatalf("GET /v1/models/openai/gpt-4o-mini = %d", code)
	}
	if in, out := m.Price["credits_per_million_input_tokens"], m.Price["credits_per_million_output_tokens"]; in != 56.25 || out != 225.0 {
		t.Errorf("gpt-4o-mini price %v; want 56.25 in, 225 out", m.Price)
	}
	chat := func(model string) map[string]any {
		return map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "hello"}}}
	}
	if code, _ := s.do(t, "POST", "/v1/chat/completions", chat("openai/gpt-4o-mini"), nil, nil); code != 200 {
		t.Fatalf("POST openai/gpt-4o-mini = %d", code)
	}
	want := 10*credits.Credit - 101_250 // 1000 x 56.25 + 200 x 225 per million
	var cr struct{ Balance credits.Amount }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // the usage flush charges it
		s.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Balance != 10*credits.Credit || time.Now().After(deadline) {
			break
		}
	}
	if cr.Balance != want {
		t.Errorf("balance after one completion = %s; want %s (0.10125 credits charged)", cr.Balance, want)
	}

	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "create", "--account", "broke", "--credits", "0"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	broke := &server{base: s.base, key: lines[len(lines)-1]}
	var e chatErr
	if code, _ := broke.do(t, "POST", "/v1/chat/completions", chat("openai/gpt-4o-mini"), nil, &e); code != 402 || e.Error.Code != "insufficient_credits" {
		t.Errorf("POST openai/gpt-4o-mini with no credits = %d %+v; want 402 insufficient_credits", code, e.Error)
	}
	if code, _ := broke.do(t, "POST", "/v1/chat/completions", chat("synthetic/echo"), nil, nil); code != 200 {
		t.Errorf("POST synthetic/echo (free) with no credits = %d; want 200", code)
	}
}
