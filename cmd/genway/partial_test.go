package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// partialCatalog prices three chat models at 1 credit an input token and 2
// an output token: synthetic/paced (50 tokens a second), and one model of
// each fake upstream of TestServePartialCharges (OpenAI-compatible,
// Anthropic).
const partialCatalog = `{
  "providers": [
    {"name": "synthetic", "kind": "synthetic", "test": true},
    {"name": "openai", "kind": "openai", "base_url_env": "OPENAI_BASE_URL", "key_env": "OPENAI_API_KEY"},
    {"name": "anthropic", "kind": "anthropic", "base_url_env": "ANTHROPIC_BASE_URL", "key_env": "ANTHROPIC_API_KEY"}
  ],
  "models": [
    {"id": "synthetic/paced", "type": "chat", "provider": "synthetic", "created": 1735689600, "test": true, "tokens_per_second": 50,
     "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_output_tokens": 2000000}},
    {"id": "openai/gpt-cut", "type": "chat", "provider": "openai", "created": 1735689600,
     "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_output_tokens": 2000000}},
    {"id": "anthropic/claude-cut", "type": "chat", "provider": "anthropic", "created": 1735689600,
     "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_output_tokens": 2000000}}
  ]
}`

// hangUp closes the connection of w's request without ending its body,
// as an upstream that dies mid-stream does.
func hangUp(t *testing.T, w http.ResponseWriter) {
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

// fakeOpenAICut is an OpenAI-compatible upstream whose stream, by the
// request's text: "please cut": 5 content chunks ("w1", " w2" ... " w5"),
// then the connection dies; "no usage": the same 5 chunks and a normal
// end without usage; else 40 chunks, the finish and usage (8 prompt, 40
// completion tokens).
func fakeOpenAICut(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := 40
		cut, noUsage := bytes.Contains(body, []byte("please cut")), bytes.Contains(body, []byte("no usage"))
		if cut || noUsage {
			n = 5
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		for i := 1; i <= n; i++ {
			piece := fmt.Sprintf(" w%d", i)
			if i == 1 {
				piece = "w1"
			}
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`+piece+`"}}]}`+"\n\n")
		}
		if cut {
			hangUp(t, w)
			return
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		if !noUsage {
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":40,"total_tokens":48}}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeAnthropicCut is a Messages API upstream: message_start reports 40
// input tokens and 10 read from the cache, then "Hello", " world",
// " again"; with "please cut" in the request the connection then dies,
// else the answer ends (30 output tokens).
func fakeAnthropicCut(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(name, data string) { io.WriteString(w, "event: "+name+"\ndata: "+data+"\n\n") }
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-cut","content":[],"usage":{"input_tokens":40,"cache_read_input_tokens":10,"output_tokens":1}}}`)
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for _, s := range []string{"Hello", " world", " again"} {
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+s+`"}}`)
		}
		if bytes.Contains(body, []byte("please cut")) {
			hangUp(t, w)
			return
		}
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":30}}`)
		ev("message_stop", `{"type":"message_stop"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sseCall sends a streamed chat or Responses request with key and reads
// its events until n content deltas came (n > 0), then hangs up; with n
// == 0 it reads to the end. It returns the body read.
func sseCall(t *testing.T, s *server, key, api, model, text string, n int) string {
	t.Helper()
	body := map[string]any{"model": model, "stream": true, "messages": []map[string]string{{"role": "user", "content": text}}}
	path, delta := "/v1/chat/completions", `"delta":{"content":"`
	if api == "responses" {
		body = map[string]any{"model": model, "stream": true, "input": text}
		path, delta = "/v1/responses", "event: response.output_text.delta"
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", s.base+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close() // before the end: the connection is closed
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s = %d %s; want 200", path, resp.StatusCode, msg)
	}
	var read strings.Builder
	br := bufio.NewReader(resp.Body)
	seen := 0
	for {
		line, err := br.ReadString('\n')
		read.WriteString(line)
		if strings.Contains(line, delta) && !strings.Contains(line, `"content":""`) {
			if seen++; seen == n {
				return read.String()
			}
		}
		if err != nil {
			if n > 0 {
				t.Fatalf("POST %s: the stream ended after %d content deltas (%v); want %d:\n%s", path, seen, err, n, read.String())
			}
			return read.String()
		}
	}
}

// cr is n credits.
func cr(n int64) credits.Amount { return credits.Amount(n) * credits.Credit }

// chargeOf runs call and returns what it charged the account of key:
// its balance before less its balance once it moved (polled, at most 15
// s; 0 if it never did).
func chargeOf(t *testing.T, s *server, key string, call func()) credits.Amount {
	t.Helper()
	ks := &server{base: s.base, key: key}
	var before, after balance
	ks.do(t, "GET", "/v1/credits", nil, nil, &before)
	call()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ks.do(t, "GET", "/v1/credits", nil, nil, &after)
		if after.Balance != before.Balance {
			return before.Balance - after.Balance
		}
	}
	return 0
}

// estimatedMetric reads genway_chat_usage_estimated_total{provider,
// reason} from the server's /metrics.
func estimatedMetric(t *testing.T, s *server, provider, reason string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	prefix := `genway_chat_usage_estimated_total{provider="` + provider + `",reason="` + reason + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// TestServePartialCharges runs genway serve, on both stores, over
// partialCatalog (1 credit an input token, 2 an output token) and checks
// that answers that end early are charged more than 0 and at most their
// full price, through chat completions and the Responses API:
//   - a stream the client drops after 10 content chunks (synthetic/paced,
//     which reports its usage so far exactly);
//   - a stream an OpenAI-compatible upstream breaks after 5 chunks, with
//     no usage: the estimate (input: ceil(bytes/4) of the text as sent and
//     4 for its message; output: ceil(bytes/4) of what was delivered);
//   - a stream an Anthropic upstream breaks after message_start and 3
//     text deltas: its exact input (40 + 10 cached), the output estimated;
//   - a stream that ends normally without usage: the estimate, counted in
//     genway_chat_usage_estimated_total{reason="no_usage"};
//   - a whole answer whose client leaves while the upstream works: its
//     exact full price (the upstream call runs on);
//   - a held completion (a key with a credit limit) that the client drops:
//     charged, the key's spend shows it, nothing left held.
func TestServePartialCharges(t *testing.T) {
	for _, backend := range []string{"embedded", "aws"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{}
			dir := t.TempDir()
			if backend == "aws" {
				if testing.Short() {
					t.Skip("starts moto_server")
				}
				_, env, dir = awsServe(t)
			}
			cat := filepath.Join(t.TempDir(), "catalog.json")
			if err := os.WriteFile(cat, []byte(partialCatalog), 0o600); err != nil {
				t.Fatal(err)
			}
			oai, ant := fakeOpenAICut(t), fakeAnthropicCut(t)
			for k, v := range map[string]string{"GENWAY_CATALOG": cat, "GENWAY_USAGE_FLUSH": "20ms", "GENWAY_ADMIN_TOKEN": testAdminToken,
				"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": oai.URL + "/v1", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": ant.URL} {
				env[k] = v
			}
			s := startServer(t, dir, env)
			// 60 words: 60 prompt tokens; "You said:" and the 60 words, 62
			// completion tokens: 60 + 2 x 62 credits.
			words := strings.TrimSpace(strings.Repeat("word ", 60))
			syntheticFull := cr(60 + 2*62)

			for _, api := range []string{"chat", "responses"} {
				t.Run(api, func(t *testing.T) {
					t.Run("client drops the stream", func(t *testing.T) {
						at := time.Now().UnixMilli()
						c := chargeOf(t, s, s.key, func() { sseCall(t, s, s.key, api, "synthetic/paced", words, 10) })
						// The prompt and at least the 10 chunks read.
						if c < cr(60+2*10) || c > syntheticFull {
							t.Errorf("charged %s for a stream dropped after 10 of 62 chunks; want from %s (the prompt and 10 chunks) to %s (the full price)",
								c, cr(60+2*10), syntheticFull)
						}
						// Its record says it was partial, and the charge.
						if r := lastRecord(t, s, "synthetic/paced", at); !r.Partial || r.Status != credits.StatusClientClosed || r.Cost != c {
							t.Errorf("record = %+v; want partial, client_closed, cost %s", r, c)
						}
					})
					t.Run("OpenAI-compatible upstream breaks the stream", func(t *testing.T) {
						full := chargeOf(t, s, s.key, func() { sseCall(t, s, s.key, api, "openai/gpt-cut", "please answer", 0) })
						var got string
						c := chargeOf(t, s, s.key, func() { got = sseCall(t, s, s.key, api, "openai/gpt-cut", "please cut", 0) })
						if !strings.Contains(got, "error") {
							t.Errorf("the broken stream ended %q; want an error event", got[max(0, len(got)-300):])
						}
						if full != cr(8+2*40) || c <= 0 || c > full {
							t.Errorf("charged %s for a stream broken after 5 chunks (full: %s); want more than 0 and at most %s", c, full, cr(8+2*40))
						}
						// The content as sent, a JSON string: "please cut" is 12
						// bytes, 3 tokens, and 4 for the message; "w1 w2 w3 w4 w5"
						// is 14 bytes, 4 tokens.
						if c != cr(7+2*4) {
							t.Errorf("charged %s for a stream broken after 5 chunks; want the estimate, %s", c, cr(7+2*4))
						}
					})
					t.Run("Anthropic upstream breaks the stream", func(t *testing.T) {
						full := chargeOf(t, s, s.key, func() { sseCall(t, s, s.key, api, "anthropic/claude-cut", "please answer", 0) })
						at := time.Now().UnixMilli()
						c := chargeOf(t, s, s.key, func() { sseCall(t, s, s.key, api, "anthropic/claude-cut", "please cut", 0) })
						if r := lastRecord(t, s, "anthropic/claude-cut", at); !r.Partial || r.Status != credits.StatusUpstreamError || r.Cost != c || !r.Estimated {
							t.Errorf("record = %+v; want partial, upstream_error, estimated, cost %s", r, c)
						}
						// The exact input, 50, and "Hello world again" (17
						// bytes) estimated at 5 tokens.
						if full != cr(50+2*30) || c != cr(50+2*5) {
							t.Errorf("charged %s for a stream broken after message_start and 3 deltas (full: %s); want %s (of %s)", c, full, cr(50+2*5), cr(50+2*30))
						}
					})
					t.Run("no usage at the end", func(t *testing.T) {
						before := estimatedMetric(t, s, "openai", "no_usage")
						c := chargeOf(t, s, s.key, func() { sseCall(t, s, s.key, api, "openai/gpt-cut", "no usage please", 0) })
						if c <= 0 || c > cr(8+2*40) {
							t.Errorf("charged %s for an answer without usage; want the estimate, more than 0", c)
						}
						// "no usage please": 17 bytes as sent, 5 tokens and 4.
						if c != cr(9+2*4) {
							t.Errorf("charged %s for an answer without usage; want the estimate, %s", c, cr(9+2*4))
						}
						if got := estimatedMetric(t, s, "openai", "no_usage") - before; got != 1 {
							t.Errorf("genway_chat_usage_estimated_total{provider=openai,reason=no_usage} went up by %d; want 1", got)
						}
					})
				})
			}

			t.Run("whole answer, client leaves", func(t *testing.T) {
				c := chargeOf(t, s, s.key, func() {
					// The answer takes 62/50 s; the client leaves after 0.3 s.
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					defer cancel()
					b, _ := json.Marshal(map[string]any{"model": "synthetic/paced", "messages": []map[string]string{{"role": "user", "content": words}}})
					req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/chat/completions", bytes.NewReader(b))
					req.Header.Set("Authorization", "Bearer "+s.key)
					req.Header.Set("Content-Type", "application/json")
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
						t.Errorf("the answer came within 0.3 s (%d); want the client gone first", resp.StatusCode)
					}
				})
				if c != syntheticFull {
					t.Errorf("charged %s for a whole answer whose client left; want its exact price, %s", c, syntheticFull)
				}
			})

			t.Run("held completion", func(t *testing.T) {
				key := cliKeyEnv(t, dir, env, "--account", "dev", "--credit-limit", "10000")
				ks := &server{base: s.base, key: key}
				sseCall(t, s, key, "chat", "synthetic/paced", words, 10)
				var got struct {
					Key *struct{ Spent, Held, Left credits.Amount } `json:"key"`
				}
				for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					ks.do(t, "GET", "/v1/credits", nil, nil, &got)
					if got.Key != nil && got.Key.Spent > 0 && got.Key.Held == 0 {
						break
					}
				}
				if got.Key == nil || got.Key.Spent < cr(60+2*10) || got.Key.Spent > syntheticFull || got.Key.Held != 0 || got.Key.Left != cr(10000)-got.Key.Spent {
					t.Errorf("key after a held stream dropped after 10 chunks = %+v; want from %s to %s spent, nothing held", got.Key, cr(60+2*10), syntheticFull)
				}
			})
		})
	}
}

// lastRecord returns the newest record of model (GET /admin/v1/records,
// with the operator token), waiting up to 10 s for one made after
// afterMS (Unix milliseconds) to be written.
func lastRecord(t *testing.T, s *server, model string, afterMS int64) credits.Record {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("GET", s.base+"/admin/v1/records?limit=1&model="+model, nil)
		req.Header.Set("Authorization", "Bearer "+testAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ Data []credits.Record }
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err == nil && len(page.Data) == 1 && page.Data[0].At >= afterMS {
			return page.Data[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of %s after %d: %v, %+v", model, afterMS, err, page.Data)
		}
	}
}
