package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// streamUpstream is a fake chat vendor on 127.0.0.1 that records each
// request body and streams the answer answer(body) returns: SSE data
// lines, each written as "data: <line>\n\n".
type streamUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newStreamUpstream(t *testing.T, answer func(body []byte) []string) *streamUpstream {
	u := &streamUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, b)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range answer(b) {
			fmt.Fprintf(w, "data: %s\n\n", d)
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *streamUpstream) last() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[len(u.bodies)-1]
}

// codexCapture returns a captured Codex request (shared/transport/httpapi's
// testdata) for model, its last user message replaced by text.
func codexCapture(t *testing.T, name, model, text string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../shared/transport/httpapi/testdata/codex/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	body["model"] = model
	input := body["input"].([]any)
	input[len(input)-1].(map[string]any)["content"] = []any{map[string]any{"type": "input_text", "text": text}}
	return body
}

// codexTurn posts a Responses request as Codex does (streamed) and
// returns the output items of its output_item.done events, as Codex
// collects them, and the answer's headers.
func codexTurn(t *testing.T, s *server, body map[string]any) ([]map[string]any, http.Header) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.base+"/v1/responses", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		eb, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, eb)
	}
	var items []map[string]any
	completed := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 0; sc.Scan() && n < 10000; n++ {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type string         `json:"type"`
			Item map[string]any `json:"item"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("event %s: %v", d, err)
		}
		switch ev.Type {
		case "response.output_item.done":
			items = append(items, ev.Item)
		case "response.completed":
			completed = true
		}
	}
	if !completed {
		t.Fatal("the stream ended without response.completed")
	}
	return items, resp.Header
}

// TestCodexToolsEndToEnd runs Codex's own requests (captured, with a
// namespace tool, a custom apply_patch tool with its lark grammar and the
// hosted web_search) through genway serve to fake upstreams:
//   - an OpenAI-compatible one offered flat functions calls a namespaced
//     function and the custom tool, which come back in the shapes Codex
//     runs (function_call with namespace and its bare name,
//     custom_tool_call with its input); web_search is left out and named;
//     the next turn, the items replayed as Codex replays them, reaches the
//     upstream as chat tool turns under the same flat names;
//   - a Gemini one whose call is signed (thoughtSignature) gets the
//     signature back on that call in the next turn: it went to the client
//     in a reasoning item's encrypted_content and came back with it.
func TestCodexToolsEndToEnd(t *testing.T) {
	oai := newStreamUpstream(t, func(body []byte) []string {
		if strings.Contains(string(body), `"role":"tool"`) {
			return []string{`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},"finish_reason":null}]}`,
				`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":2,"total_tokens":52}}`,
				`[DONE]`}
		}
		return []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_ns","type":"function","function":{"name":"multi_agent_v1__close_agent","arguments":""}}]},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"target\":\"a1\"}"}}]},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_patch","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\"}"}}]},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60}}`,
			`[DONE]`}
	})
	gem := newStreamUpstream(t, func(body []byte) []string {
		if strings.Contains(string(body), `"functionResponse"`) {
			return []string{`{"candidates":[{"content":{"role":"model","parts":[{"text":"Done."}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":2,"totalTokenCount":32}}`}
		}
		return []string{`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"exec_command","args":{"cmd":"ls"}},"thoughtSignature":"CiIBVKhc7oDf"}]},"finishReason":"STOP"}],` +
			`"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":5,"totalTokenCount":25},"responseId":"r1"}`}
	})
	// The translation of Codex's tools, with openai/gpt-4o-mini standing
	// for any OpenAI-compatible model: OpenAI's own models get Codex's
	// requests natively (TestNativeEndToEnd).
	s := startServer(t, t.TempDir(), map[string]string{
		"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": oai.srv.URL + "/v1",
		"GEMINI_API_KEY": "gm-test", "GEMINI_BASE_URL": gem.srv.URL, "GENWAY_NATIVE": "off",
	})

	t.Run("namespaced and custom calls", func(t *testing.T) {
		body := codexCapture(t, "baseline-1", "openai/gpt-4o-mini", "close agent a1 and add a.txt")
		gpt55 := codexCapture(t, "gpt55-1", "openai/gpt-4o-mini", "")
		for _, tool := range gpt55["tools"].([]any) {
			if tool.(map[string]any)["type"] == "custom" {
				body["tools"] = append(body["tools"].([]any), tool) // Codex's apply_patch, with its grammar
			}
		}
		items, h := codexTurn(t, s, body)
		if got := h.Get("X-Genway-Omitted-Tools"); got != "web_search" {
			t.Errorf("X-Genway-Omitted-Tools = %q; want web_search", got)
		}
		if len(items) != 2 {
			t.Fatalf("output %v; want two calls", items)
		}
		fc, ct := items[0], items[1]
		if fc["type"] != "function_call" || fc["namespace"] != "multi_agent_v1" || fc["name"] != "close_agent" || fc["arguments"] != `{"target":"a1"}` || fc["call_id"] != "call_ns" {
			t.Errorf("namespaced call = %v; want function_call multi_agent_v1 close_agent", fc)
		}
		if ct["type"] != "custom_tool_call" || ct["name"] != "apply_patch" || ct["input"] != "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n" || ct["call_id"] != "call_patch" {
			t.Errorf("custom call = %v; want custom_tool_call apply_patch with the patch", ct)
		}
		var first struct {
			Tools []struct {
				Function struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		json.Unmarshal(oai.last(), &first)
		offered := map[string]string{}
		for _, tl := range first.Tools {
			offered[tl.Function.Name] = tl.Function.Description
		}
		if _, ok := offered["multi_agent_v1__spawn_agent"]; !ok || !strings.Contains(offered["apply_patch"], "begin_patch hunk+ end_patch") || len(first.Tools) != 13 {
			t.Errorf("upstream offered %d tools %v; want Codex's 7 functions, the namespace's 5, apply_patch with its grammar", len(first.Tools), offered)
		}

		// Codex's next request: the items as it replays them, and the outputs.
		input := body["input"].([]any)
		for _, it := range items {
			input = append(input, it)
		}
		input = append(input, map[string]any{"type": "function_call_output", "id": "fco_1", "call_id": "call_ns", "output": "closed"},
			map[string]any{"type": "custom_tool_call_output", "id": "ctco_1", "call_id": "call_patch", "output": "Success."})
		body["input"] = input
		items, _ = codexTurn(t, s, body)
		if len(items) != 1 || items[0]["type"] != "message" {
			t.Fatalf("second turn output %v; want a message", items)
		}
		var second struct {
			Messages []struct {
				Role      string          `json:"role"`
				Content   json.RawMessage `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"messages"`
		}
		json.Unmarshal(oai.last(), &second)
		ms := second.Messages
		n := len(ms)
		if n < 3 || len(ms[n-3].ToolCalls) != 2 || ms[n-3].ToolCalls[0].Function.Name != "multi_agent_v1__close_agent" ||
			ms[n-3].ToolCalls[1].Function.Name != "apply_patch" || ms[n-3].ToolCalls[1].Function.Arguments != `{"input":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}` ||
			ms[n-2].ToolCallID != "call_ns" || string(ms[n-1].Content) != `"Success."` {
			b, _ := json.Marshal(ms[max(n-3, 0):])
			t.Errorf("upstream's last messages = %s; want the two calls under their flat names and their results", b)
		}
	})

	t.Run("gemini signature", func(t *testing.T) {
		body := codexCapture(t, "baseline-1", "gemini/gemini-2.5-flash", "list the files")
		items, _ := codexTurn(t, s, body)
		if len(items) != 2 || items[0]["type"] != "reasoning" || items[1]["type"] != "function_call" || items[1]["name"] != "exec_command" {
			t.Fatalf("output %v; want a reasoning item (the signature) and the call", items)
		}
		if ec, _ := items[0]["encrypted_content"].(string); !strings.HasPrefix(ec, "gw1.") {
			t.Errorf("reasoning item %v; want Genway's encrypted_content", items[0])
		}
		input := body["input"].([]any)
		for _, it := range items {
			it["status"] = "completed"
			input = append(input, it)
		}
		input = append(input, map[string]any{"type": "function_call_output", "id": "fco_2", "call_id": items[1]["call_id"], "output": "a.txt"})
		body["input"] = input
		codexTurn(t, s, body)
		var next struct {
			Contents []struct {
				Role  string           `json:"role"`
				Parts []map[string]any `json:"parts"`
			} `json:"contents"`
		}
		json.Unmarshal(gem.last(), &next)
		signed := false
		for _, c := range next.Contents {
			for _, p := range c.Parts {
				if p["functionCall"] != nil && p["thoughtSignature"] == "CiIBVKhc7oDf" {
					signed = true
				}
			}
		}
		if !signed {
			t.Errorf("Gemini's next request %s; want the call with its thoughtSignature", gem.last())
		}
	})
}
