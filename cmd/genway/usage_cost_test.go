package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/genway/genway/shared/credits"
)

// Fake chat vendors for the usage and cost tests: httptest servers on
// loopback that speak each vendor's wire format (shared/providers/openai,
// shared/providers/anthropic, shared/providers/gemini and shared/providers/bedrock test the wire in
// detail; these check the whole path through genway serve) and report
// cached, cache-write and reasoning tokens, whole and streamed.

// usageVendors is the fake OpenAI, Anthropic, Gemini and Bedrock runtime,
// each on its own server; tiers records the service_tier of each OpenAI
// request.
type usageVendors struct {
	openai, anthropic, gemini, bedrock *httptest.Server

	mu    sync.Mutex
	tiers []string
}

// The counts each fake reports, and what they cost at usageCostCatalog's
// prices (per million tokens, one rounding up to the micro-credit):
//   - OpenAI: 2,000 prompt tokens (1,500 cached), 500 completion (400
//     reasoning): 500 x 1.25 + 1,500 x 0.125 + 500 x 10 = 5,812.5
//     millionths: 0.005813; at the "fast" tier (OpenAI answers
//     "priority") 500 x 2.5 + 1,500 x 0.25 + 500 x 20: 0.011625.
//   - Anthropic: 100 input tokens, 3,000 read from the cache, 1,500
//     written (500 for 5 minutes, 1,000 for an hour), 250 output:
//     100 x 3 + 3,000 x 0.3 + 500 x 3.75 + 1,000 x 6 + 250 x 15: 0.012825.
//   - Gemini: 4,000 prompt tokens (3,000 cached), 100 candidates and 300
//     thoughts: 1,000 x 0.3 + 3,000 x 0.03 + 400 x 2.5: 0.00139.
//   - Bedrock: 50 input tokens, 2,000 read from the cache, 1,000 written
//     (600 for 5 minutes, 400 for an hour), 100 output: 50 x 3.3 + 2,000 x
//     0.33 + 600 x 4.125 + 400 x 6.6 + 100 x 16.5: 0.00759.
const usageCostCatalog = `{
  "providers": [
    {"name": "openai", "kind": "openai", "base_url_env": "OPENAI_BASE_URL", "key_env": "OPENAI_API_KEY"},
    {"name": "anthropic", "kind": "anthropic", "base_url_env": "ANTHROPIC_BASE_URL", "key_env": "ANTHROPIC_API_KEY"},
    {"name": "gemini", "kind": "gemini", "base_url_env": "GEMINI_BASE_URL", "key_env": "GEMINI_API_KEY"},
    {"name": "bedrock", "kind": "bedrock"}
  ],
  "models": [
    {"id": "openai/gpt-5", "type": "chat", "provider": "openai", "created": 1754425777,
     "capabilities": {"reasoning": true, "streaming": true}, "thinking": "effort",
     "price": {"credits_per_million_input_tokens": 1.25, "credits_per_million_cached_input_tokens": 0.125,
       "credits_per_million_output_tokens": 10,
       "service_tiers": {"fast": {"credits_per_million_input_tokens": 2.5, "credits_per_million_cached_input_tokens": 0.25,
         "credits_per_million_output_tokens": 20}}}},
    {"id": "anthropic/claude-sonnet-4-5", "type": "chat", "provider": "anthropic", "upstream": "claude-sonnet-4-5", "created": 1759104000,
     "capabilities": {"reasoning": true, "streaming": true}, "max_tokens": 64000, "thinking": "budget",
     "price": {"credits_per_million_input_tokens": 3, "credits_per_million_cached_input_tokens": 0.3,
       "credits_per_million_cache_write_tokens": 3.75, "credits_per_million_cache_write_1h_tokens": 6,
       "credits_per_million_output_tokens": 15}},
    {"id": "gemini/gemini-2.5-flash", "type": "chat", "provider": "gemini", "created": 1750118400,
     "capabilities": {"reasoning": true, "streaming": true}, "max_tokens": 65536, "thinking": "budget",
     "price": {"credits_per_million_input_tokens": 0.3, "credits_per_million_cached_input_tokens": 0.03,
       "credits_per_million_output_tokens": 2.5}},
    {"id": "bedrock/claude-sonnet-4-5", "type": "chat", "provider": "bedrock", "upstream": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "created": 1759104000,
     "capabilities": {"reasoning": true, "streaming": true}, "max_tokens": 64000, "thinking": "budget",
     "price": {"credits_per_million_input_tokens": 3.3, "credits_per_million_cached_input_tokens": 0.33,
       "credits_per_million_cache_write_tokens": 4.125, "credits_per_million_cache_write_1h_tokens": 6.6,
       "credits_per_million_output_tokens": 16.5}}
  ]
}`

// newUsageVendors starts the four fakes.
func newUsageVendors(t *testing.T) *usageVendors {
	t.Helper()
	v := &usageVendors{}
	v.openai = httptest.NewServer(http.HandlerFunc(v.serveOpenAI))
	v.anthropic = httptest.NewServer(http.HandlerFunc(serveAnthropicUsage))
	v.gemini = httptest.NewServer(http.HandlerFunc(serveGeminiUsage))
	v.bedrock = httptest.NewServer(http.HandlerFunc(serveBedrockUsage(t)))
	for _, s := range []*httptest.Server{v.openai, v.anthropic, v.gemini, v.bedrock} {
		t.Cleanup(s.Close)
	}
	return v
}

// env returns genway serve's environment for the fakes and the catalog
// at catalogPath. Bedrock's endpoint is the process's
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME (set here): the AWS backend's
// AWS_ENDPOINT_URL is moto's.
func (v *usageVendors) env(t *testing.T, catalogPath string) map[string]string {
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", v.bedrock.URL)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	return map[string]string{
		"GENWAY_CATALOG": catalogPath, "GENWAY_USAGE_FLUSH": "20ms", "GENWAY_DEV_CREDITS": "100",
		"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": v.openai.URL + "/v1",
		"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": v.anthropic.URL,
		"GEMINI_API_KEY": "gemini-test", "GEMINI_BASE_URL": v.gemini.URL,
		"GENWAY_BEDROCK": "on", "AWS_REGION": "us-east-1",
	}
}

// serveOpenAI answers chat completions: OpenAI's usage details, and the
// service tier served: "priority" when asked for "fast" or "priority"
// (as OpenAI answers either name), else "default".
func (v *usageVendors) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream      bool   `json:"stream"`
		ServiceTier string `json:"service_tier"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	v.mu.Lock()
	v.tiers = append(v.tiers, req.ServiceTier)
	v.mu.Unlock()
	tier := "default"
	if req.ServiceTier == "fast" || req.ServiceTier == "priority" {
		tier = "priority"
	}
	usage := `{"prompt_tokens":2000,"completion_tokens":500,"total_tokens":2500,` +
		`"prompt_tokens_details":{"cached_tokens":1500,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":400,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-u1","object":"chat.completion","created":1,"model":"gpt-5","service_tier":%q,`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Forty-two."},"finish_reason":"stop"}],"usage":%s}`, tier, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(choices, usage string) {
		fmt.Fprintf(w, `data: {"id":"chatcmpl-u1","object":"chat.completion.chunk","created":1,"model":"gpt-5","service_tier":%q,"choices":%s,"usage":%s}`+"\n\n", tier, choices, usage)
	}
	chunk(`[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`, "null")
	chunk(`[{"index":0,"delta":{"content":"Forty-two."},"finish_reason":null}]`, "null")
	chunk(`[{"index":0,"delta":{},"finish_reason":"stop"}]`, "null")
	chunk(`[]`, usage)
	io.WriteString(w, "data: [DONE]\n\n")
}

// serveAnthropicUsage answers the Messages API: cache reads and writes
// of both lifetimes (in message_start when streamed; message_delta
// carries the output tokens).
func serveAnthropicUsage(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	if r.URL.Path != "/v1/messages" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	usage := func(output int) string {
		return fmt.Sprintf(`{"input_tokens":100,"cache_creation_input_tokens":1500,"cache_read_input_tokens":3000,`+
			`"cache_creation":{"ephemeral_5m_input_tokens":500,"ephemeral_1h_input_tokens":1000},"output_tokens":%d,"service_tier":"standard"}`, output)
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_u1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",`+
			`"content":[{"type":"text","text":"Forty-two."}],"stop_reason":"end_turn","stop_sequence":null,"usage":%s}`, usage(250))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	event("message_start", `{"type":"message_start","message":{"id":"msg_u1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":`+usage(1)+`}}`)
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Forty-two."}}`)
	event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":250}}`)
	event("message_stop", `{"type":"message_stop"}`)
}

// serveGeminiUsage answers generateContent and streamGenerateContent:
// cached prompt tokens and thoughts.
func serveGeminiUsage(w http.ResponseWriter, r *http.Request) {
	const usage = `{"promptTokenCount":4000,"cachedContentTokenCount":3000,"candidatesTokenCount":100,"thoughtsTokenCount":300,"totalTokenCount":4400}`
	switch {
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"candidates":[{"content":{"parts":[{"text":"Forty-two."}],"role":"model"},"finishReason":"STOP","index":0}],`+
			`"usageMetadata":`+usage+`,"modelVersion":"gemini-2.5-flash","responseId":"r1"}`)
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":"Forty-two."}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":4000,"cachedContentTokenCount":3000,"totalTokenCount":4000},"responseId":"r1"}`+"\n\n")
		io.WriteString(w, `data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":`+usage+`,"responseId":"r1"}`+"\n\n")
	default:
		http.Error(w, `{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}`, http.StatusNotFound)
	}
}

// serveBedrockUsage answers Converse and ConverseStream (the AWS event
// stream encoding): cache reads, and writes split by lifetime in
// cacheDetails.
func serveBedrockUsage(t *testing.T) http.HandlerFunc {
	const usage = `{"inputTokens":50,"outputTokens":100,"totalTokens":3150,"cacheReadInputTokens":2000,"cacheWriteInputTokens":1000,` +
		`"cacheDetails":[{"ttl":"1h","inputTokens":400},{"ttl":"5m","inputTokens":600}]}`
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/converse"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Forty-two."}]}},"stopReason":"end_turn",`+
				`"usage":`+usage+`,"metrics":{"latencyMs":10}}`)
		case strings.HasSuffix(r.URL.Path, "/converse-stream"):
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			enc := eventstream.NewEncoder()
			for _, ev := range [][2]string{
				{"messageStart", `{"role":"assistant"}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Forty-two."}}`},
				{"contentBlockStop", `{"contentBlockIndex":0}`},
				{"messageStop", `{"stopReason":"end_turn"}`},
				{"metadata", `{"usage":` + usage + `,"metrics":{"latencyMs":10}}`},
			} {
				var msg eventstream.Message
				msg.Headers.Set(":message-type", eventstream.StringValue("event"))
				msg.Headers.Set(":event-type", eventstream.StringValue(ev[0]))
				msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
				msg.Payload = []byte(ev[1])
				if err := enc.Encode(w, msg); err != nil {
					t.Errorf("encode %s: %v", ev[0], err)
					return
				}
			}
		default:
			w.Header().Set("X-Amzn-ErrorType", "UnknownOperationException")
			http.Error(w, `{"message":"unknown operation"}`, http.StatusNotFound)
		}
	}
}

// usageAnswer is what a test reads of an answer's usage, in either
// shape (chat: prompt/completion; Responses: input/output).
type usageAnswer struct {
	Prompt, Completion, Cached, CacheWrite, CacheWrite1h, Reasoning int
	Cost                                                            credits.Amount
}

// wireUsage decodes a usage object of the chat or the Responses shape.
type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	InputTokens         int `json:"input_tokens"`
	OutputTokens        int `json:"output_tokens"`
	PromptTokensDetails *struct {
		CachedTokens       int `json:"cached_tokens"`
		CacheWriteTokens   int `json:"cache_write_tokens"`
		CacheWrite1hTokens int `json:"cache_write_1h_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails *struct {
		CachedTokens       int `json:"cached_tokens"`
		CacheWriteTokens   int `json:"cache_write_tokens"`
		CacheWrite1hTokens int `json:"cache_write_1h_tokens"`
	} `json:"input_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	Cost *credits.Amount `json:"cost"`
}

// answer returns u as a usageAnswer, and an error naming what is missing.
func (u wireUsage) answer(responses bool) (usageAnswer, error) {
	var a usageAnswer
	in, out := u.PromptTokensDetails, u.CompletionTokensDetails
	a.Prompt, a.Completion = u.PromptTokens, u.CompletionTokens
	if responses {
		in, out = u.InputTokensDetails, u.OutputTokensDetails
		a.Prompt, a.Completion = u.InputTokens, u.OutputTokens
	}
	if in == nil || out == nil || u.Cost == nil {
		return a, fmt.Errorf("usage without its details or cost: %+v", u)
	}
	a.Cached, a.CacheWrite, a.CacheWrite1h, a.Reasoning, a.Cost = in.CachedTokens, in.CacheWriteTokens, in.CacheWrite1hTokens, out.ReasoningTokens, *u.Cost
	return a, nil
}

// askUsage sends one chat or Responses request for model, whole or
// streamed, and returns the usage of its answer (the final chunk's, or
// response.completed's).
func askUsage(s *server, api, model, tier string, stream bool) (usageAnswer, error) {
	u, _, err := askUsageID(s, api, model, tier, stream)
	return u, err
}

// askUsageID is askUsage, also returning the answer's id (its record's).
func askUsageID(s *server, api, model, tier string, stream bool) (usageAnswer, string, error) {
	body := map[string]any{"model": model, "stream": stream}
	path := "/v1/chat/completions"
	if api == "responses" {
		path, body["input"] = "/v1/responses", "What is six times seven?"
	} else {
		body["messages"] = []map[string]string{{"role": "user", "content": "What is six times seven?"}}
	}
	if tier != "" {
		body["service_tier"] = tier
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return usageAnswer{}, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return usageAnswer{}, "", fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, msg)
	}
	var found []wireUsage
	var ev struct {
		ID       string     `json:"id"`
		Type     string     `json:"type"`
		Usage    *wireUsage `json:"usage"`
		Response struct {
			ID    string     `json:"id"`
			Usage *wireUsage `json:"usage"`
		} `json:"response"`
	}
	id := ""
	if !stream {
		if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
			return usageAnswer{}, "", err
		}
		if ev.Usage != nil {
			found = append(found, *ev.Usage)
		}
		id = ev.ID
	} else {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			ev.Usage, ev.Response.Usage = nil, nil
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return usageAnswer{}, "", fmt.Errorf("event %s: %w", data, err)
			}
			switch {
			case ev.Usage != nil:
				found = append(found, *ev.Usage)
				id = ev.ID
			case ev.Type == "response.completed" && ev.Response.Usage != nil:
				found = append(found, *ev.Response.Usage)
				id = ev.Response.ID
			}
		}
		if err := sc.Err(); err != nil {
			return usageAnswer{}, "", err
		}
	}
	if len(found) != 1 {
		return usageAnswer{}, "", fmt.Errorf("%d usage objects in the answer; want 1", len(found))
	}
	u, err := found[0].answer(api == "responses")
	return u, id, err
}

// balanceOf returns the account's balance, from GET /v1/credits.
func balanceOf(t *testing.T, s *server) credits.Amount {
	t.Helper()
	var cr balance
	if code, _ := s.do(t, "GET", "/v1/credits", nil, nil, &cr); code != http.StatusOK {
		t.Fatalf("GET /v1/credits = %d", code)
	}
	return cr.Balance
}

// limitedKeyCost runs requests with key, a key with a credit limit: a
// held completion is charged as it ends, before the answer's end, by
// exactly its usage.cost, to the account and to the key's spend; its
// record (written behind on the embedded store) costs the same.
func limitedKeyCost(t *testing.T, s *server, key string) {
	ks := &server{base: s.base, key: key}
	var spent credits.Amount
	for _, api := range []string{"chat", "responses"} {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("limited key, anthropic %s stream=%v", api, stream)
			before := balanceOf(t, ks)
			got, id, err := askUsageID(ks, api, "anthropic/claude-sonnet-4-5", "", stream)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if got.Cost.String() != "0.012825" {
				t.Errorf("%s: usage.cost %s; want 0.012825", name, got.Cost)
			}
			spent += got.Cost
			var cr struct {
				Balance credits.Amount `json:"balance"`
				Key     struct {
					Spent credits.Amount `json:"spent"`
				} `json:"key"`
			}
			ks.do(t, "GET", "/v1/credits", nil, nil, &cr)
			if moved := before - cr.Balance; moved != got.Cost || cr.Key.Spent != spent {
				t.Errorf("%s: the balance moved by %s and the key spent %s; want usage.cost %s, %s in all", name, moved, cr.Key.Spent, got.Cost, spent)
			}
			if r := s.waitGeneration(t, id); r.Cost != got.Cost || r.Key == "" {
				t.Errorf("%s: record %s costs %s, of key %q; want usage.cost %s, of the limited key", name, id, r.Cost, r.Key, got.Cost)
			}
		}
	}
}

// TestUsageCost runs chat and Responses requests, whole and streamed,
// through genway serve to fake vendors that report cached, cache-write
// and reasoning tokens (and OpenAI the tier it served at), on both
// stores: each answer carries the details the vendor reported and its
// cost, exact to the micro-credit, and the balance moves by exactly that
// cost; with a key without a limit (charged by the usage recorder after
// the answer) and with a limited key (held, and charged before the
// answer ends).
func TestUsageCost(t *testing.T) {
	for _, backend := range []string{"embedded", "aws"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "aws" && testing.Short() {
				t.Skip("starts moto_server")
			}
			vendors := newUsageVendors(t)
			catalogPath := filepath.Join(t.TempDir(), "catalog.json")
			if err := os.WriteFile(catalogPath, []byte(usageCostCatalog), 0o600); err != nil {
				t.Fatal(err)
			}
			env := vendors.env(t, catalogPath)
			dir := t.TempDir()
			if backend == "aws" {
				var awsEnv map[string]string
				_, awsEnv, dir = awsServe(t)
				for k, v := range awsEnv {
					env[k] = v
				}
				env["AWS_REGION"] = awsEnv["AWS_REGION"]
			}
			var logs syncBuffer
			s := startServerLog(t, dir, env, &logs)
			usageCost(t, s, vendors, backend == "embedded")
			limitedKeyCost(t, s, cliKeyEnv(t, dir, env, "--account", "dev", "--name", "limited", "--credit-limit", "10"))
			if t.Failed() {
				t.Logf("server log:\n%s", logs.String())
			}
		})
	}
}

// usageCost is TestUsageCost on the server s; withBedrock includes the
// Bedrock fake. On the AWS backend it cannot be reached: Bedrock's client
// takes the AWS_ENDPOINT_URL given to genway serve (moto's) before the
// process's AWS_ENDPOINT_URL_BEDROCK_RUNTIME; the store's part is the
// same for every vendor.
func usageCost(t *testing.T, s *server, vendors *usageVendors, withBedrock bool) {
	openai := usageAnswer{Prompt: 2000, Completion: 500, Cached: 1500, Reasoning: 400}
	anthropic := usageAnswer{Prompt: 4600, Completion: 250, Cached: 3000, CacheWrite: 1500, CacheWrite1h: 1000}
	gemini := usageAnswer{Prompt: 4000, Completion: 400, Cached: 3000, Reasoning: 300}
	bedrock := usageAnswer{Prompt: 3050, Completion: 100, Cached: 2000, CacheWrite: 1000, CacheWrite1h: 400}
	costs := map[string]string{"openai": "0.005813", "openai fast": "0.011625", "anthropic": "0.012825", "gemini": "0.00139", "bedrock": "0.00759"}
	tests := []struct {
		vendor string
		model  string
		tier   string
		want   usageAnswer
	}{
		{"openai", "openai/gpt-5", "", openai},
		{"openai fast", "openai/gpt-5", "fast", openai},
		{"anthropic", "anthropic/claude-sonnet-4-5", "", anthropic},
		{"gemini", "gemini/gemini-2.5-flash", "", gemini},
		{"bedrock", "bedrock/claude-sonnet-4-5", "", bedrock},
	}
	for _, tt := range tests {
		if tt.vendor == "bedrock" && !withBedrock {
			continue
		}
		for _, api := range []string{"chat", "responses"} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s %s stream=%v", tt.vendor, api, stream)
				before := balanceOf(t, s)
				got, id, err := askUsageID(s, api, tt.model, tt.tier, stream)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				want := tt.want
				want.Cost, err = credits.ParseAmount(costs[tt.vendor])
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s: usage %+v; want %+v", name, got, want)
				}
				// The charge reaches the ledger within a few flushes of
				// the usage recorder (20 ms); it is exactly usage.cost.
				var moved credits.Amount
				deadline := time.Now().Add(guardWait)
				for {
					moved = before - balanceOf(t, s)
					if moved != 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if moved != got.Cost {
					t.Errorf("%s: the balance moved by %s; want usage.cost %s", name, moved, got.Cost)
				}
				// The request's record says the same: its tokens by class
				// and its cost, the ledger's move.
				r := s.waitGeneration(t, id)
				rt := r.Tokens
				if r.Cost != got.Cost || rt.Prompt != int64(got.Prompt) || rt.Completion != int64(got.Completion) || rt.Cached != int64(got.Cached) ||
					rt.CacheWrite+rt.CacheWrite1h != int64(got.CacheWrite) || rt.CacheWrite1h != int64(got.CacheWrite1h) || rt.Reasoning != int64(got.Reasoning) {
					t.Errorf("%s: record %s = cost %s, tokens %+v; want the answer's usage %+v", name, id, r.Cost, rt, got)
				}
			}
		}
	}
	vendors.mu.Lock()
	defer vendors.mu.Unlock()
	fast := 0
	for _, tier := range vendors.tiers {
		if tier == "fast" {
			fast++
		}
	}
	if fast != 4 {
		t.Errorf("OpenAI got service_tier %q; want \"fast\" 4 times, as the client asked", vendors.tiers)
	}
}
