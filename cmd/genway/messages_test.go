package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// fakeClaude is a Messages API upstream for the end-to-end test: a first
// turn is answered with a signed thinking block and a get_weather call, a
// turn that brings the call's result with text; count_tokens with 42.
// Each request is recorded.
type fakeClaude struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []upstreamRequest
}

const (
	claudeCallTurn = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":1000,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"I should call get_weather."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkgIBhABGAIiQSIGNED"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01Weather","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":50}}

event: message_stop
data: {"type":"message_stop"}

`
	claudeAnswerTurn = `event: message_start
data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":150,"cache_creation_input_tokens":0,"cache_read_input_tokens":1000,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is 18C in Paris."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":10}}

event: message_stop
data: {"type":"message_stop"}

`
)

func newFakeClaude(t *testing.T) *fakeClaude {
	return newFakeClaudeFunc(t, func(body []byte) string {
		if bytes.Contains(body, []byte(`"tool_result"`)) {
			return claudeAnswerTurn
		}
		return claudeCallTurn
	})
}

// newFakeClaudeFunc is a fakeClaude that answers each Messages request
// with the stream answer(body) returns (count_tokens with 42).
func newFakeClaudeFunc(t *testing.T, answer func(body []byte) string) *fakeClaude {
	f := &fakeClaude{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, upstreamRequest{r.URL.Path, r.Header.Clone(), b})
		f.mu.Unlock()
		if r.URL.Path == "/v1/messages/count_tokens" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"input_tokens":42}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, answer(b))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeClaude) take() []upstreamRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

// accumulated is a streamed message as the Anthropic SDK accumulates it:
// its blocks, whole, and the final usage.
type accumulated struct {
	ID         string
	Content    []map[string]any
	StopReason string
	Usage      map[string]any
	Model      string
}

// streamMessages posts body to /v1/messages?beta=true as Claude Code does
// (x-api-key, anthropic-version 2023-06-01, its betas) and accumulates
// the stream.
func streamMessages(t *testing.T, s *server, body string) (accumulated, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.base+"/v1/messages?beta=true", strings.NewReader(body))
	req.Header.Set("x-api-key", s.key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/messages = %d %s", resp.StatusCode, b)
	}
	var m accumulated
	inputs := map[int]*strings.Builder{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if event == "" {
			t.Fatalf("data without an event line: %s", data)
		}
		var ev struct {
			Type         string         `json:"type"`
			Index        int            `json:"index"`
			Message      map[string]any `json:"message"`
			ContentBlock map[string]any `json:"content_block"`
			Delta        map[string]any `json:"delta"`
			Usage        map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "message_start":
			m.Model, _ = ev.Message["model"].(string)
			m.ID, _ = ev.Message["id"].(string)
		case "content_block_start":
			for len(m.Content) <= ev.Index {
				m.Content = append(m.Content, nil)
			}
			m.Content[ev.Index] = ev.ContentBlock
			inputs[ev.Index] = &strings.Builder{}
		case "content_block_delta":
			b := m.Content[ev.Index]
			switch ev.Delta["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + ev.Delta["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + ev.Delta["thinking"].(string)
			case "signature_delta":
				b["signature"] = b["signature"].(string) + ev.Delta["signature"].(string)
			case "input_json_delta":
				inputs[ev.Index].WriteString(ev.Delta["partial_json"].(string))
			}
		case "content_block_stop":
			if b := m.Content[ev.Index]; b["type"] == "tool_use" {
				var in any
				if err := json.Unmarshal([]byte(inputs[ev.Index].String()), &in); err != nil {
					t.Fatalf("tool_use input %q: %v", inputs[ev.Index].String(), err)
				}
				b["input"] = in
			}
		case "message_delta":
			m.StopReason, _ = ev.Delta["stop_reason"].(string)
			m.Usage = ev.Usage
		}
		event = ""
	}
	return m, resp.Header
}

// TestMessagesEndToEnd runs Claude Code's conversation through genway
// serve to an Anthropic model behind a fake upstream: the first turn's
// signed thinking and tool call come back in Anthropic's events, and the
// second turn, which sends them back with the call's result, reaches the
// upstream with the signed thinking block first in its assistant turn and
// thinking on; each answer's usage is Anthropic's (input without the cache
// reads) with its cost, and the account is charged exactly that. A
// synthetic model answers the same shape, and count_tokens counts with
// the upstream (Anthropic) or estimates (synthetic).
func TestMessagesEndToEnd(t *testing.T) {
	up := newFakeClaude(t)
	// The translation to Anthropic (a Messages client's request to
	// another provider is translated alike): Anthropic's own models get
	// it natively, unless GENWAY_NATIVE=off (TestNativeEndToEnd).
	s := startServer(t, t.TempDir(), map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": up.srv.URL,
		"GENWAY_USAGE_FLUSH": "20ms", "GENWAY_NATIVE": "off"})
	var before struct{ Balance credits.Amount }
	s.do(t, "GET", "/v1/credits", nil, nil, &before)

	tools := `"tools":[{"name":"get_weather","description":"Weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	first := `{"role":"user","content":[{"type":"text","text":"Weather in Paris?","cache_control":{"type":"ephemeral"}}]}`
	body := func(messages ...string) string {
		return `{"model":"anthropic/claude-sonnet-4-5","max_tokens":4096,"stream":true,"thinking":{"type":"enabled","budget_tokens":2048},` +
			`"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],` + tools + `,"messages":[` + strings.Join(messages, ",") + `]}`
	}

	m1, h := streamMessages(t, s, body(first))
	if h.Get("request-id") == "" || m1.Model != "anthropic/claude-sonnet-4-5" || m1.StopReason != "tool_use" || len(m1.Content) != 2 {
		t.Fatalf("first turn = %+v (request-id %q); want thinking and a tool_use of anthropic/claude-sonnet-4-5", m1, h.Get("request-id"))
	}
	if th := m1.Content[0]; th["type"] != "thinking" || th["thinking"] != "I should call get_weather." || th["signature"] != "EqQBCkgIBhABGAIiQSIGNED" {
		t.Errorf("first turn's thinking block = %v", th)
	}
	if tu := m1.Content[1]; tu["type"] != "tool_use" || tu["id"] != "toolu_01Weather" || tu["name"] != "get_weather" || jsonString(tu["input"]) != `{"city":"Paris"}` {
		t.Errorf("first turn's tool_use block = %v", tu)
	}
	reqs := up.take()
	if len(reqs) != 1 {
		t.Fatalf("the upstream got %d requests; want 1", len(reqs))
	}
	if b := reqs[0].header.Get("anthropic-beta"); b != "claude-code-20250219,interleaved-thinking-2025-05-14" || reqs[0].header.Get("x-api-key") != "sk-ant-test" {
		t.Errorf("upstream headers: anthropic-beta %q, x-api-key %q; want the client's betas and the vendor key", b, reqs[0].header.Get("x-api-key"))
	}

	assistant, _ := json.Marshal(map[string]any{"role": "assistant", "content": m1.Content})
	result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01Weather","content":"18C","cache_control":{"type":"ephemeral"}}]}`
	m2, _ := streamMessages(t, s, body(first, string(assistant), result))
	if m2.StopReason != "end_turn" || len(m2.Content) != 1 || m2.Content[0]["text"] != "It is 18C in Paris." {
		t.Fatalf("second turn = %+v; want the answer", m2)
	}
	reqs = up.take()
	if len(reqs) != 1 {
		t.Fatalf("the upstream got %d requests for the second turn; want 1", len(reqs))
	}
	second := reqs[0].body
	if got := jsonAt(t, second, "messages", 1, "content", 0); jsonString(got) != `{"signature":"EqQBCkgIBhABGAIiQSIGNED","thinking":"I should call get_weather.","type":"thinking"}` {
		t.Errorf("the second turn's assistant message begins with %v; want the signed thinking block", got)
	}
	if got := jsonAt(t, second, "messages", 1, "content", 1, "id"); got != "toolu_01Weather" {
		t.Errorf("the second turn's tool_use id = %v; want toolu_01Weather, unmangled", got)
	}
	if got := jsonAt(t, second, "thinking"); jsonString(got) != `{"budget_tokens":2048,"type":"enabled"}` {
		t.Errorf("the second turn's thinking = %v; want it on, with the client's budget", got)
	}

	// Usage: Anthropic's counts; the cost at claude-sonnet-4-5's price.
	for i, m := range []accumulated{m1, m2} {
		u := m.Usage
		if u["cache_read_input_tokens"] != 1000.0 || (i == 0 && (u["input_tokens"] != 100.0 || u["output_tokens"] != 50.0)) ||
			(i == 1 && (u["input_tokens"] != 150.0 || u["output_tokens"] != 10.0)) {
			t.Errorf("turn %d usage = %v", i+1, u)
		}
	}
	cost := func(m accumulated) credits.Amount {
		a, err := credits.ParseAmount(jsonString(m.Usage["cost"]))
		if err != nil || a <= 0 {
			t.Fatalf("usage.cost %v: %v", m.Usage["cost"], err)
		}
		return a
	}
	charged := cost(m1) + cost(m2)
	var after struct{ Balance credits.Amount }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.do(t, "GET", "/v1/credits", nil, nil, &after)
		if before.Balance-after.Balance >= charged || time.Now().After(deadline) {
			break
		}
	}
	if before.Balance-after.Balance != charged {
		t.Errorf("charged %s; want the answers' usage.cost, %s", before.Balance-after.Balance, charged)
	}
	// Each turn left its record, under its msg_ id: kind messages, the
	// model that answered, its cost the answer's.
	for i, m := range []accumulated{m1, m2} {
		r := s.waitGeneration(t, m.ID)
		if r.ID != m.ID || r.Kind != credits.KindMessages || r.Model != "anthropic/claude-sonnet-4-5" || r.Cost != cost(m) || r.Status != credits.StatusCompleted {
			t.Errorf("turn %d's record = %+v; want kind messages, its id %s and its cost %s", i+1, r, m.ID, cost(m))
		}
	}

	t.Run("synthetic", func(t *testing.T) {
		m, _ := streamMessages(t, s, `{"model":"synthetic/echo","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`)
		if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0]["text"] != "You said: hello there" || m.Model != "synthetic/echo" {
			t.Errorf("synthetic turn = %+v", m)
		}
		var whole map[string]any
		if code, _ := s.do(t, "POST", "/v1/messages", json.RawMessage(`{"model":"synthetic/echo","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`),
			map[string]string{"anthropic-version": "2026-10-21"}, &whole); code != 200 || whole["type"] != "message" {
			t.Errorf("POST /v1/messages (Bearer, 2026-10-21) = %d %v", code, whole)
		}
	})

	t.Run("count_tokens", func(t *testing.T) {
		for _, c := range []struct {
			model string
			want  float64
		}{{"anthropic/claude-sonnet-4-5", 42}, {"synthetic/echo", 8}} {
			var n map[string]any
			code, _ := s.do(t, "POST", "/v1/messages/count_tokens", json.RawMessage(`{"model":"`+c.model+`","messages":[{"role":"user","content":"hello there"}]}`), nil, &n)
			if code != 200 || n["input_tokens"] != c.want {
				t.Errorf("count_tokens(%s) = %d %v; want %v", c.model, code, n, c.want)
			}
		}
		if reqs := up.take(); len(reqs) != 1 || reqs[0].path != "/v1/messages/count_tokens" {
			t.Errorf("upstream requests %v; want one count_tokens", reqs)
		}
	})

	t.Run("errors", func(t *testing.T) {
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		code, _ := s.do(t, "POST", "/v1/messages", json.RawMessage(`{"model":"nope/x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), nil, &e)
		if code != 404 || e.Type != "error" || e.Error.Type != "not_found_error" {
			t.Errorf("unknown model = %d %+v; want 404 not_found_error", code, e)
		}
		req, _ := http.NewRequest(http.MethodPost, s.base+"/v1/messages", strings.NewReader(`{}`))
		req.Header.Set("x-api-key", "sk_live_"+strings.Repeat("z", 32))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 401 || e.Error.Type != "authentication_error" || resp.Header.Get("request-id") == "" {
			t.Errorf("a bad x-api-key = %d %+v; want 401 authentication_error with a request-id", resp.StatusCode, e)
		}
	})
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
