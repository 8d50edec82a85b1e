package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
)

// nativeClientBody is a Messages request as Claude Code sends one (a
// system turn, adaptive thinking, output_config, context_management, a
// server tool), with a container, Genway's fallbacks, and assistant turns
// that carry thinking blocks: Anthropic's own (signed), and those the
// translation made for other providers (empty or genway: signatures),
// one of them a turn of its own.
const nativeClientBody = `{"model":"anthropic/claude-opus-4-6","models":["openai/gpt-5"],"max_tokens":128000,"stream":true,
 "system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
 "thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"},
 "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"container":"container_1","future_field":[1],
 "tools":[{"name":"save_note","input_schema":{"type":"object"},"defer_loading":true},{"type":"web_search_20250305","name":"web_search","max_uses":2}],
 "messages":[
  {"role":"user","content":"Weather <in> Paris & Rome?"},
  {"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"genway:gemini:c2ln"}]},
  {"role":"user","content":"and?"},
  {"role":"assistant","content":[
   {"type":"thinking","thinking":"Claude's own.","signature":"EqQBCgSIGNED"},
   {"type":"redacted_thinking","data":"EmwKAhgBEgy"},
   {"type":"thinking","thinking":"unsigned","signature":""},
   {"type":"thinking","thinking":"no signature at all"},
   {"type":"thinking","thinking":"","signature":"genway:call.gemini:Q2lJ"},
   {"type":"tool_use","id":"toolu_1","name":"save_note","input":{"text":"x"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"saved"}]},
  {"role":"system","content":[{"type":"text","text":"Deferred tools: save_note"}],"output_config":{"effort":"medium"}}]}`

func nativeRequest(body string, maxTokens int, headers map[string]string) *chat.Request {
	return &chat.Request{Model: opus, MaxTokens: maxTokens, APIHeaders: headers, Native: &chat.Native{API: chat.APIMessages, Body: []byte(body)}}
}

func nativeProvider(u *upstream) *Provider {
	return New(Config{Name: "anthropic", BaseURL: u.srv.URL, APIKey: "sk-test", HTTPClient: u.srv.Client(), Native: []string{chat.APIMessages}})
}

// TestNativeMessagesBody: Anthropic gets the client's own request, with
// the model its upstream name, max_tokens the gateway's bound, Genway's
// fallbacks left out, and the thinking blocks it cannot verify (empty or
// genway: signatures) left out, with the turn left empty; the client's
// anthropic-version and betas, the provider's key.
func TestNativeMessagesBody(t *testing.T) {
	u := newUpstream(t)
	u.respond(200, fixture(t, "message_thinking.json"), nil)
	p := nativeProvider(u)
	headers := map[string]string{"anthropic-version": "2026-10-21", "anthropic-beta": "context-management-2025-06-27, advanced-tool-use-2025-11-20"}
	if _, err := p.NativeComplete(context.Background(), nativeRequest(nativeClientBody, 64000, headers)); err != nil {
		t.Fatalf("NativeComplete = %v", err)
	}
	got := u.last()
	want := jsonValue(t, nativeClientBody)
	want["model"], want["max_tokens"] = "claude-opus-4-6", 64000.0
	delete(want, "models")
	delete(want, "stream")
	msgs := want["messages"].([]any)
	assistant := msgs[3].(map[string]any)
	blocks := assistant["content"].([]any)
	assistant["content"] = []any{blocks[0], blocks[1], blocks[5]}
	want["messages"] = append([]any{msgs[0]}, msgs[2:]...)
	if !reflect.DeepEqual(got.body, want) {
		g, _ := json.Marshal(got.body)
		w, _ := json.Marshal(want)
		t.Errorf("upstream body\n%s\nwant\n%s", g, w)
	}
	if got.path != "/v1/messages" || got.header.Get("anthropic-version") != "2026-10-21" || got.header.Get("x-api-key") != "sk-test" ||
		got.header.Get("anthropic-beta") != "context-management-2025-06-27,advanced-tool-use-2025-11-20" {
		t.Errorf("POST %s with headers %v; want /v1/messages, the client's version and betas, the provider's key", got.path, got.header)
	}
	// Without the client's version: the adapter's; a max_tokens under the
	// bound stays.
	if _, err := p.NativeComplete(context.Background(), nativeRequest(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, 64000, nil)); err != nil {
		t.Fatal(err)
	}
	if got := u.last(); got.header.Get("anthropic-version") != APIVersion || got.body["max_tokens"] != 100.0 || got.header.Get("anthropic-beta") != "" {
		t.Errorf("headers %v, max_tokens %v; want %s, 100, no beta", got.header, got.body["max_tokens"], APIVersion)
	}
}

// TestNativeMessagesStream: every event of Anthropic's stream is relayed
// as it came (ping, server tool blocks, citations, an unknown event), the
// deltas and the start of a block that is not text or thinking being
// content; the last message_delta and message_stop are held back for the
// sink's end, an earlier message_delta relayed; the usage is
// message_start's updated by message_delta's.
func TestNativeMessagesStream(t *testing.T) {
	stream := string(fixture(t, "stream_native.sse"))
	u := newUpstream(t)
	u.respond(200, []byte(stream), nil)
	var got []chat.NativeEvent
	var relayed strings.Builder
	resp, err := nativeProvider(u).NativeStream(context.Background(), nativeRequest(nativeClientBody, 0, nil), nativeWriter(func(e chat.NativeEvent) error {
		e.Data = append([]byte(nil), e.Data...)
		got = append(got, e)
		fmt.Fprintf(&relayed, "event: %s\ndata: %s\n\n", e.Name, e.Data)
		return nil
	}))
	if err != nil {
		t.Fatalf("NativeStream = %v", err)
	}
	if u.last().body["stream"] != true {
		t.Errorf("upstream stream = %v; want true", u.last().body["stream"])
	}
	tail := resp.Native.Tail
	if len(tail) != 2 || tail[0].Name != "message_delta" || !strings.Contains(string(tail[0].Data), `"tool_use"`) || tail[1].Name != "message_stop" {
		t.Fatalf("tail %v; want the last message_delta and message_stop", tail)
	}
	for _, e := range tail {
		fmt.Fprintf(&relayed, "event: %s\ndata: %s\n\n", e.Name, e.Data)
	}
	if relayed.String() != stream {
		t.Errorf("relayed events differ from the upstream's:\n%s", relayed.String())
	}
	var content []string
	var text, reasoning int
	for i, e := range got {
		if e.Content {
			content = append(content, fmt.Sprint(i))
		}
		text, reasoning = text+e.Text, reasoning+e.Reasoning
	}
	// The deltas, server_tool_use's and web_search_tool_result's starts
	// and tool_use's start.
	if want := "3 4 6 7 9 12 13 16 17 18"; strings.Join(content, " ") != want {
		t.Errorf("content events %v; want %s", content, want)
	}
	if want := len(`{"query":"weather Paris"}`+"Sunny in Paris."+`{"text":"sunny"}`) + len("web_search") + len("save_note"); text != want || reasoning != len("Search first.") {
		t.Errorf("output counted: text %d, reasoning %d; want %d and %d", text, reasoning, want, len("Search first."))
	}
	want := chat.Usage{PromptTokens: 3200, CompletionTokens: 90, TotalTokens: 3290, CachedTokens: 3000}
	if resp.Usage != want || resp.FinishReason != chat.FinishToolCalls || resp.ServiceTier != "default" {
		t.Errorf("usage %+v, finish %q, tier %q; want %+v, tool_calls, default", resp.Usage, resp.FinishReason, resp.ServiceTier, want)
	}
}

// TestNativeMessagesWhole: a whole answer is the upstream's body, with
// its usage, finish reason and text read from it.
func TestNativeMessagesWhole(t *testing.T) {
	body := fixture(t, "message_tool_use.json")
	u := newUpstream(t)
	u.respond(200, body, nil)
	resp, err := nativeProvider(u).NativeComplete(context.Background(), nativeRequest(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 0, nil))
	if err != nil {
		t.Fatalf("NativeComplete = %v", err)
	}
	var m messageResponse
	json.Unmarshal(body, &m)
	if string(resp.Native.Body) != string(body) || resp.Usage != m.Usage.chat() || resp.FinishReason != chat.FinishToolCalls || len(resp.ToolCalls) != 2 {
		t.Errorf("response %+v; want the body as it came, its usage and its calls", resp)
	}
}

// TestNativeMessagesCut: a native stream that fails after content
// returns the usage reported so far: message_start's input, no output
// until a message_delta counted it.
func TestNativeMessagesCut(t *testing.T) {
	stream := string(fixture(t, "stream_native.sse"))
	cut := stream[:strings.Index(stream, "event: future_event")] + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	u := newUpstream(t)
	u.respond(200, []byte(cut), nil)
	resp, err := nativeProvider(u).NativeStream(context.Background(), nativeRequest(nativeClientBody, 0, nil), nativeWriter(func(chat.NativeEvent) error { return nil }))
	if err == nil || resp == nil || resp.Usage.PromptTokens != 3200 || resp.Usage.CompletionTokens != 0 {
		t.Errorf("NativeStream = %+v, %v; want an error with 3200 input tokens and no output", resp, err)
	}
}

// nativeWriter adapts a function to a chat.NativeWriter whose Flush does
// nothing.
type nativeWriter func(chat.NativeEvent) error

func (f nativeWriter) Event(e chat.NativeEvent) error { return f(e) }
func (f nativeWriter) Flush() error                   { return nil }
