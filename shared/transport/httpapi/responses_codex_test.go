package httpapi

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// codexRequest returns the captured Codex request testdata/codex/name
// for synthetic/echo; text, if not "", replaces its last user message.
func codexRequest(t *testing.T, name, text string, stream bool) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "codex", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	body["model"], body["stream"] = "synthetic/echo", stream
	if text != "" {
		input := body["input"].([]any)
		last := input[len(input)-1].(map[string]any)
		last["content"] = []any{map[string]any{"type": "input_text", "text": text}}
	}
	out, _ := json.Marshal(body)
	return string(out)
}

// TestResponsesCodexRequests: every request Codex CLI 0.171 was captured
// sending (testdata/codex) is accepted as it is and answered, streamed
// as Codex reads it (response.created, output items, response.completed
// with usage), its hosted web_search left out and named; the follow-ups
// with a tool's output are answered from that output.
func TestResponsesCodexRequests(t *testing.T) {
	srv := apiServer(t, syntheticGateway(t))
	tests := []struct{ file, answer string }{
		{"baseline-1", "You said: say hi"},
		{"gpt55-1", "You said: say hi"},
		{"catalog-1", "You said: say hi"},
		{"shell-2", "Tool exec_command returned: Chunk ID: d737e1 Wall time: 0.0446 seconds"},
		{"patch-2", "Tool apply_patch returned: Exit code: 0 Wall time: 0.1 seconds Output: Success."},
		{"toolsearch-2", "Tool tool_search returned: Loaded tools: multi_agent_v1__spawn_agent, multi_agent_v1__resume_agent."},
		{"ns-field-2", "Tool multi_agent_v1__close_agent returned: invalid agent id synthetic"},
		{"resume-2", "You said: and again"},
		{"retry-3", "You said: say hi"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(codexRequest(t, tt.file, "", true)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get(OmittedToolsHeader) != "web_search" {
				t.Fatalf("status %d, %s %q; want 200 and web_search left out", resp.StatusCode, OmittedToolsHeader, resp.Header.Get(OmittedToolsHeader))
			}
			events := responseEvents(t, resp.Body)
			if len(events) < 3 || events[0]["type"] != "response.created" || events[len(events)-1]["type"] != "response.completed" {
				t.Fatalf("%d events; want response.created ... response.completed", len(events))
			}
			var text string
			for _, ev := range events {
				if it, _ := ev["item"].(map[string]any); ev["type"] == "response.output_item.done" && it["type"] == "message" {
					text = it["content"].([]any)[0].(map[string]any)["text"].(string)
				}
			}
			if !strings.HasPrefix(text, tt.answer) {
				t.Errorf("answer %q; want it to begin %q", text, tt.answer)
			}
			final := events[len(events)-1]["response"].(map[string]any)
			u, _ := final["usage"].(map[string]any)
			if u["input_tokens"].(float64) == 0 || u["output_tokens"].(float64) == 0 || u["input_tokens_details"].(map[string]any)["cached_tokens"] == nil {
				t.Errorf("usage %v; want input and output tokens, and the details Codex reads", u)
			}
		})
	}
}

// TestResponsesCodexCalls: the synthetic model calls Codex's tools, named
// in its prompt, and each call comes back in the shape Codex runs:
// a namespaced function_call with namespace and its bare name, a
// custom_tool_call with its input (streamed with its input events), a
// tool_search_call with its arguments an object.
func TestResponsesCodexCalls(t *testing.T) {
	srv := apiServer(t, syntheticGateway(t))
	tests := []struct {
		name, file, prompt string
		want               map[string]any // fields of the call item
		events             []string       // events it streams, in order
	}{
		{"namespaced function", "baseline-1", `CALL_TOOL close_agent {"target":"a1"}`,
			map[string]any{"type": "function_call", "namespace": "multi_agent_v1", "name": "close_agent", "arguments": `{"target":"a1"}`},
			[]string{"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done"}},
		{"function", "baseline-1", `CALL_TOOL exec_command {"cmd":"echo hi"}`,
			map[string]any{"type": "function_call", "name": "exec_command", "arguments": `{"cmd":"echo hi"}`}, nil},
		{"custom", "gpt55-1", `CALL_TOOL apply_patch {"input":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}`,
			map[string]any{"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"},
			[]string{"response.output_item.added", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done"}},
		{"tool search", "gpt55-1", `CALL_TOOL tool_search {"query":"spawn agent","limit":2}`,
			map[string]any{"type": "tool_search_call", "execution": "client", "arguments": map[string]any{"query": "spawn agent", "limit": float64(2)}},
			[]string{"response.output_item.added", "response.output_item.done"}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				body := codexRequest(t, tt.file, tt.prompt, stream)
				resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var items []map[string]any
				var types []string
				if stream {
					for _, ev := range responseEvents(t, resp.Body) {
						if it, _ := ev["item"].(map[string]any); it != nil && it["type"] == tt.want["type"] || ev["item_id"] != nil {
							types = append(types, ev["type"].(string))
						}
						if ev["type"] == "response.output_item.done" {
							items = append(items, ev["item"].(map[string]any))
						}
					}
				} else {
					var o struct {
						Output []map[string]any `json:"output"`
					}
					json.NewDecoder(resp.Body).Decode(&o)
					items = o.Output
				}
				if len(items) != 1 {
					t.Fatalf("output %v; want one call", items)
				}
				it := items[0]
				for k, v := range tt.want {
					if b1, _ := json.Marshal(it[k]); string(b1) != string(must(json.Marshal(v))) {
						t.Errorf("item %s = %s; want %s (item %v)", k, b1, must(json.Marshal(v)), it)
					}
				}
				if it["call_id"] == "" || it["id"] == "" || it["status"] != "completed" {
					t.Errorf("item %v; want call_id, id and status completed", it)
				}
				if stream && tt.events != nil && strings.Join(types, ",") != strings.Join(tt.events, ",") {
					t.Errorf("events %v; want %v", types, tt.events)
				}
			})
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestResponsesCodexToolsOpenAIClient: openai-go, unmodified, reads the
// calls of a namespace's function and of a custom tool (with a grammar)
// that the synthetic model makes, whole and streamed, in the shapes
// Codex needs; the hosted web_search is left out.
func TestResponsesCodexToolsOpenAIClient(t *testing.T) {
	c := client(apiServer(t, syntheticGateway(t)))
	params := responses.ResponseNewParams{Model: "synthetic/echo",
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(`CALL_TOOL multi_agent_v1.close_agent {"target":"a1"} CALL_TOOL apply_patch {"input":"*** Begin Patch\n*** End Patch\n"}`)},
		Tools: []responses.ToolUnionParam{
			{OfNamespace: &responses.NamespaceToolParam{Name: "multi_agent_v1", Description: "Sub-agents.", Tools: []responses.NamespaceToolToolUnionParam{
				{OfFunction: &responses.NamespaceToolToolFunctionParam{Name: "close_agent", Parameters: map[string]any{"type": "object",
					"properties": map[string]any{"target": map[string]any{"type": "string"}}, "required": []string{"target"}}}}}}},
			{OfCustom: &responses.CustomToolParam{Name: "apply_patch", Format: shared.CustomToolInputFormatUnionParam{
				OfGrammar: &shared.CustomToolInputFormatGrammarParam{Syntax: "lark", Definition: "start: begin_patch hunk+ end_patch"}}}},
			{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}},
		}}
	check := func(t *testing.T, out []responses.ResponseOutputItemUnion) {
		if len(out) != 2 {
			t.Fatalf("output %+v; want two calls", out)
		}
		fc, ct := out[0], out[1]
		if fc.Type != "function_call" || fc.Namespace != "multi_agent_v1" || fc.Name != "close_agent" || fc.Arguments.OfString != `{"target":"a1"}` || fc.CallID == "" {
			t.Errorf("function call = %s %s.%s(%s) %q", fc.Type, fc.Namespace, fc.Name, fc.Arguments.OfString, fc.CallID)
		}
		if ct.Type != "custom_tool_call" || ct.Name != "apply_patch" || ct.Input != "*** Begin Patch\n*** End Patch\n" || ct.CallID == "" {
			t.Errorf("custom call = %s %s(%q) %q", ct.Type, ct.Name, ct.Input, ct.CallID)
		}
	}
	t.Run("whole", func(t *testing.T) {
		r, err := c.Responses.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		check(t, r.Output)
	})
	t.Run("stream", func(t *testing.T) {
		s := c.Responses.NewStreaming(t.Context(), params)
		var done []responses.ResponseOutputItemUnion
		var inputDone string
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_item.done":
				done = append(done, ev.Item)
			case "response.custom_tool_call_input.done":
				inputDone = ev.Input
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		check(t, done)
		if inputDone != "*** Begin Patch\n*** End Patch\n" {
			t.Errorf("custom_tool_call_input.done input %q", inputDone)
		}
	})
}
