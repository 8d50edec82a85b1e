package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// recordingUpstream is a fake chat vendor on 127.0.0.1 that records each
// request (path, headers, body) and answers with answer(path).
type recordingUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []upstreamRequest
	answer func(path string) string
}

type upstreamRequest struct {
	path   string
	header http.Header
	body   []byte
}

func newRecordingUpstream(t *testing.T, answer func(path string) string) *recordingUpstream {
	u := &recordingUpstream{answer: answer}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, upstreamRequest{r.URL.Path, r.Header.Clone(), b})
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, u.answer(r.URL.Path))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// take returns the requests recorded since the last take.
func (u *recordingUpstream) take() []upstreamRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.reqs
	u.reqs = nil
	return r
}

// jsonAt returns the value at path (object keys and array indexes) in the
// JSON document b, nil if there is none.
func jsonAt(t *testing.T, b []byte, path ...any) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("upstream body %s: %v", b, err)
	}
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[p]
		case int:
			a, _ := v.([]any)
			if p >= len(a) {
				return nil
			}
			v = a[p]
		}
	}
	return v
}

func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPromptCacheEndToEnd runs cache_control through genway serve to fake
// Anthropic, Bedrock, OpenAI and Gemini upstreams that record what they
// get: Anthropic and Bedrock receive the breakpoints where the client put
// them (cache_control, cachePoint blocks), on chat completions and on the
// Responses API; OpenAI and Gemini, which cache on their own, receive
// none and answer; a request over Anthropic's limit is a 400 naming the
// breakpoint, unless a fallback that caches on its own can serve it.
func TestPromptCacheEndToEnd(t *testing.T) {
	anth := newRecordingUpstream(t, func(string) string {
		return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],
			"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1,"cache_creation_input_tokens":2000,"cache_read_input_tokens":0}}`
	})
	bed := newRecordingUpstream(t, func(string) string {
		return `{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn",
			"usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},"metrics":{"latencyMs":1}}`
	})
	oai := newRecordingUpstream(t, func(string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,
			"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	})
	gem := newRecordingUpstream(t, func(string) string {
		return `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}`
	})
	// The Bedrock client's credentials come from the process environment.
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	s := startServer(t, t.TempDir(), map[string]string{
		"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": anth.srv.URL,
		"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": oai.srv.URL + "/v1",
		"GEMINI_API_KEY": "gm-test", "GEMINI_BASE_URL": gem.srv.URL,
		"GENWAY_BEDROCK": "on", "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": bed.srv.URL,
	})

	const (
		eph   = `"cache_control":{"type":"ephemeral"}`
		eph1h = `"cache_control":{"type":"ephemeral","ttl":"1h"}`
	)
	chatBody := func(model string) json.RawMessage {
		return json.RawMessage(`{"model":"` + model + `",
			"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}},` + eph1h + `}],
			"messages":[
				{"role":"system","content":[{"type":"text","text":"You are a coding agent."},{"type":"text","text":"<the style guide>",` + eph1h + `}]},
				{"role":"user","content":[{"type":"text","text":"<the repository>",` + eph + `},{"type":"text","text":"What does main do?"}]}]}`)
	}
	responsesBody := func(model string) json.RawMessage {
		return json.RawMessage(`{"model":"` + model + `","instructions":"Be brief.",
			"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},` + eph + `}],
			"input":[
				{"role":"user","content":[{"type":"input_text","text":"Weather?"}]},
				{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"sunny",` + eph + `}]},
				{"role":"user","content":[{"type":"input_text","text":"<a long document>",` + eph + `},{"type":"input_text","text":"Summarise it."}]}]}`)
	}
	post := func(t *testing.T, path string, body json.RawMessage) map[string]any {
		t.Helper()
		var out map[string]any
		if code, _ := s.do(t, "POST", path, body, nil, &out); code != 200 {
			t.Fatalf("POST %s = %d %v", path, code, out)
		}
		return out
	}
	one := func(t *testing.T, u *recordingUpstream) upstreamRequest {
		t.Helper()
		reqs := u.take()
		if len(reqs) != 1 {
			t.Fatalf("upstream got %d requests; want 1", len(reqs))
		}
		return reqs[0]
	}
	type where struct {
		path []any
		want string // JSON; "" for absent
	}
	check := func(t *testing.T, r upstreamRequest, wheres []where) {
		t.Helper()
		for _, w := range wheres {
			got := jsonAt(t, r.body, w.path...)
			var want any
			if w.want != "" {
				want = jsonOf(t, w.want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("upstream body at %v = %v; want %s\nbody: %s", w.path, got, w.want, r.body)
			}
		}
	}
	ephemeral, hour := `{"type":"ephemeral"}`, `{"type":"ephemeral","ttl":"1h"}`

	t.Run("anthropic chat", func(t *testing.T) {
		post(t, "/v1/chat/completions", chatBody("anthropic/claude-sonnet-4-5"))
		r := one(t, anth)
		check(t, r, []where{
			{[]any{"tools", 0, "cache_control"}, hour},
			{[]any{"system", 0, "cache_control"}, ""},
			{[]any{"system", 1}, `{"type":"text","text":"<the style guide>","cache_control":` + hour + `}`},
			{[]any{"messages", 0, "content", 0, "cache_control"}, ephemeral},
			{[]any{"messages", 0, "content", 1, "cache_control"}, ""},
		})
		if b := r.header.Get("Anthropic-Beta"); b != "extended-cache-ttl-2025-04-11" {
			t.Errorf("anthropic-beta = %q; want extended-cache-ttl-2025-04-11 with a one-hour breakpoint", b)
		}
	})
	t.Run("anthropic chat, on messages as OpenRouter's AI SDK provider sends them", func(t *testing.T) {
		post(t, "/v1/chat/completions", json.RawMessage(`{"model":"anthropic/claude-sonnet-4-5",
			"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
			"messages":[
				{"role":"system","content":[{"type":"text","text":"You are a coding agent.",`+eph+`}]},
				{"role":"user","content":"Weather in Paris?"},
				{"role":"assistant","content":"",`+eph+`,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"sunny",`+eph+`}]}`))
		check(t, one(t, anth), []where{
			{[]any{"system", 0, "cache_control"}, ephemeral},
			{[]any{"messages", 1, "content"}, `[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{},"cache_control":` + ephemeral + `}]`},
			{[]any{"messages", 2, "content"}, `[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny","cache_control":` + ephemeral + `}]`},
		})
	})
	t.Run("anthropic responses", func(t *testing.T) {
		post(t, "/v1/responses", responsesBody("anthropic/claude-sonnet-4-5"))
		check(t, one(t, anth), []where{
			{[]any{"tools", 0, "cache_control"}, ephemeral},
			{[]any{"system"}, `"Be brief."`},
			{[]any{"messages", 2, "content", 0, "type"}, `"tool_result"`},
			{[]any{"messages", 2, "content", 0, "cache_control"}, ephemeral},
			{[]any{"messages", 2, "content", 1, "text"}, `"<a long document>"`},
			{[]any{"messages", 2, "content", 1, "cache_control"}, ephemeral},
			{[]any{"messages", 2, "content", 2, "cache_control"}, ""},
		})
	})
	t.Run("bedrock chat", func(t *testing.T) {
		post(t, "/v1/chat/completions", chatBody("bedrock/claude-sonnet-4-5"))
		r := one(t, bed)
		if !strings.HasSuffix(r.path, "/converse") {
			t.Errorf("Bedrock path %q; want Converse", r.path)
		}
		check(t, r, []where{
			{[]any{"toolConfig", "tools", 1}, `{"cachePoint":{"type":"default","ttl":"1h"}}`},
			{[]any{"system"}, `[{"text":"You are a coding agent."},{"text":"<the style guide>"},{"cachePoint":{"type":"default","ttl":"1h"}}]`},
			{[]any{"messages", 0, "content"}, `[{"text":"<the repository>"},{"cachePoint":{"type":"default"}},{"text":"What does main do?"}]`},
		})
	})
	t.Run("bedrock nova responses: no tool cache point", func(t *testing.T) {
		post(t, "/v1/responses", responsesBody("bedrock/nova-lite"))
		check(t, one(t, bed), []where{
			{[]any{"toolConfig", "tools"}, `[{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object"}}}}]`},
			{[]any{"messages", 2, "content", 1}, `{"cachePoint":{"type":"default"}}`},
			{[]any{"messages", 2, "content", 3}, `{"cachePoint":{"type":"default"}}`},
		})
	})
	for _, c := range []struct {
		model string
		up    *recordingUpstream
	}{{"openai/gpt-4o-mini", oai}, {"gemini/gemini-2.5-flash", gem}} {
		t.Run(c.model+" gets no breakpoint", func(t *testing.T) {
			for _, call := range []struct {
				path string
				body json.RawMessage
			}{{"/v1/chat/completions", chatBody(c.model)}, {"/v1/responses", responsesBody(c.model)}} {
				post(t, call.path, call.body)
				r := one(t, c.up)
				for _, marker := range []string{"cache_control", "cachePoint", "ephemeral"} {
					if bytes.Contains(r.body, []byte(marker)) {
						t.Errorf("%s %s: the upstream body has %q: %s", c.model, call.path, marker, r.body)
					}
				}
			}
		})
	}

	five := func(model, models string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"model":%q%s,"tools":[{"type":"function","function":{"name":"f"},%s}],
			"messages":[{"role":"user","content":[{"type":"text","text":"a",%s},{"type":"text","text":"b",%s},{"type":"text","text":"c",%s},{"type":"text","text":"d",%s}]}]}`,
			model, models, eph, eph, eph, eph, eph))
	}
	t.Run("over the limit", func(t *testing.T) {
		var out struct {
			Error struct{ Code, Param string } `json:"error"`
		}
		code, _ := s.do(t, "POST", "/v1/chat/completions", five("anthropic/claude-sonnet-4-5", ""), nil, &out)
		if code != 400 || out.Error.Param != "messages[0].content[3].cache_control" {
			t.Errorf("five breakpoints to Anthropic = %d %+v; want 400 naming messages[0].content[3].cache_control", code, out.Error)
		}
		if n := len(anth.take()); n != 0 {
			t.Errorf("Anthropic got %d requests; want 0", n)
		}
	})
	t.Run("over the limit, with a fallback that caches on its own", func(t *testing.T) {
		out := post(t, "/v1/chat/completions", five("anthropic/claude-sonnet-4-5", `,"models":["openai/gpt-4o-mini"]`))
		if out["model"] != "openai/gpt-4o-mini" {
			t.Errorf("answered by %v; want openai/gpt-4o-mini", out["model"])
		}
		if n := len(anth.take()); n != 0 {
			t.Errorf("Anthropic got %d requests; want 0", n)
		}
		if r := one(t, oai); bytes.Contains(r.body, []byte("cache_control")) {
			t.Errorf("the fallback's body has cache_control: %s", r.body)
		}
	})
}
