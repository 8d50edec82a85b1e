package anthropic

// Signed thinking both ways, against the fake upstream of
// anthropic_test.go, following the documented wire format:
//   - thinking blocks {"type": "thinking", "thinking", "signature"} and
//     redacted_thinking {"data"} in answers and, sent back, first in their
//     assistant turn; a tool-use loop continued with thinking on starts
//     with the turn's thinking block:
//     https://platform.claude.com/docs/en/build-with-claude/extended-thinking
//     ("Preserving thinking blocks", "Thinking redaction"),
//     https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows
//   - streamed: content_block_start of a thinking block, thinking_delta,
//     signature_delta, content_block_stop; a redacted_thinking block whole
//     in its content_block_start (testdata/stream_redacted.sse, with the
//     empty thinking text of thinking.display "omitted")
//   - thinking.display, top_k, tool_result is_error:
//     https://docs.anthropic.com/en/api/messages
//   - count_tokens: https://docs.anthropic.com/en/api/messages-count-tokens

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/chat"
)

var (
	signed   = chat.Thought{Provider: "anthropic", Text: "Let me think.", Signature: "EqQBsig"}
	redacted = chat.Thought{Provider: "anthropic", Redacted: "EmwKredacted"}
	// Thoughts that are not sent back: unsigned, another provider's.
	unsigned = chat.Thought{Provider: "anthropic", Text: "no signature"}
	gemini   = chat.Thought{Provider: "gemini", Signature: "gem-sig"}
)

// bashLoop is a tool-use loop whose assistant turn carries thoughts.
func bashLoop(thoughts ...chat.Thought) []chat.Message {
	return []chat.Message{
		user("List the files."),
		{Role: chat.RoleAssistant, Thoughts: thoughts, ToolCalls: []chat.ToolCall{{ID: "toolu_01Bash", Name: "Bash", Arguments: `{"command":"ls"}`}}},
		{Role: chat.RoleTool, ToolCallID: "toolu_01Bash", ToolName: "Bash", Parts: []chat.Part{{Text: "a.txt"}}},
	}
}

const (
	wireBashTool   = `"tools":[{"name":"Bash","input_schema":{"type":"object","properties":{}}}]`
	wireBashResult = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01Bash","content":"a.txt"}]}`
	wireBashCall   = `{"type":"tool_use","id":"toolu_01Bash","name":"Bash","input":{"command":"ls"}}`
)

var bashTool = chat.Tool{Name: "Bash", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}

func TestThinkingRequestShape(t *testing.T) {
	tests := []bodyCase{
		{
			name: "a loop with signed thinking keeps thinking on, the thoughts first",
			req: &chat.Request{Model: opus, ReasoningEffort: "high", Tools: []chat.Tool{bashTool},
				Messages: bashLoop(redacted, unsigned, gemini, signed)},
			want: `{"model":"claude-opus-4-6","max_tokens":8192,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},` + wireBashTool + `,"messages":[
				{"role":"user","content":[{"type":"text","text":"List the files."}]},
				{"role":"assistant","content":[{"type":"redacted_thinking","data":"EmwKredacted"},
					{"type":"thinking","thinking":"Let me think.","signature":"EqQBsig"},` + wireBashCall + `]},` + wireBashResult + `]}`,
		},
		{
			name: "Bedrock's thoughts too; display omitted: an empty text",
			req: &chat.Request{Model: opus, ReasoningEffort: "high", ReasoningDisplay: "omitted", Tools: []chat.Tool{bashTool},
				Messages: bashLoop(chat.Thought{Provider: "bedrock", Signature: "brsig"})},
			want: `{"model":"claude-opus-4-6","max_tokens":8192,"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"},` +
				wireBashTool + `,"messages":[
				{"role":"user","content":[{"type":"text","text":"List the files."}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"brsig"},` + wireBashCall + `]},` + wireBashResult + `]}`,
		},
		{
			name: "a loop whose turn has only unsigned thoughts: no thinking",
			req:  &chat.Request{Model: opus, ReasoningEffort: "high", Tools: []chat.Tool{bashTool}, Messages: bashLoop(unsigned, gemini)},
			want: `{"model":"claude-opus-4-6","max_tokens":8192,` + wireBashTool + `,"messages":[
				{"role":"user","content":[{"type":"text","text":"List the files."}]},
				{"role":"assistant","content":[` + wireBashCall + `]},` + wireBashResult + `]}`,
		},
		{
			name: "thinking off: the thoughts stay home, an empty turn is dropped",
			req: &chat.Request{Model: opus, Messages: []chat.Message{user("Hi"),
				{Role: chat.RoleAssistant, Thoughts: []chat.Thought{redacted}}, user("Again"),
				{Role: chat.RoleAssistant, Thoughts: []chat.Thought{signed}, Parts: []chat.Part{{Text: "Hello."}}}, user("Bye")}},
			want: `{"model":"claude-opus-4-6","max_tokens":8192,"messages":[
				{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"Again"}]},
				{"role":"assistant","content":[{"type":"text","text":"Hello."}]},
				{"role":"user","content":[{"type":"text","text":"Bye"}]}]}`,
		},
		{
			name: "the client's budget and display; top_k left out with thinking",
			req: &chat.Request{Model: sonnet, MaxTokens: 32000, ReasoningEffort: "high", ReasoningBudget: 31999, ReasoningDisplay: "omitted",
				TopK: ptr(5), Messages: []chat.Message{user("hi")}},
			want: `{"model":"claude-sonnet-4-5","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":31999,"display":"omitted"},` + hiMessages + `}`,
		},
		{
			name: "top_k without thinking",
			req:  &chat.Request{Model: small, TopK: ptr(5), Messages: []chat.Message{user("hi")}},
			want: `{"model":"small","max_tokens":4096,"top_k":5,` + hiMessages + `}`,
		},
		{
			name: "is_error; ids the API would refuse are digested alike",
			req: &chat.Request{Model: small, Tools: []chat.Tool{bashTool}, Messages: []chat.Message{
				user("ls"),
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "functions.Bash:0", Name: "Bash", Arguments: `{}`}}},
				{Role: chat.RoleTool, ToolCallID: "functions.Bash:0", ToolName: "Bash", ToolError: true, Parts: []chat.Part{{Text: "denied"}}},
			}},
			want: `{"model":"small","max_tokens":4096,` + wireBashTool + `,"messages":[
				{"role":"user","content":[{"type":"text","text":"ls"}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"` + toolUseID("functions.Bash:0") + `","name":"Bash","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + toolUseID("functions.Bash:0") + `","content":"denied","is_error":true}]}]}`,
		},
	}
	checkBodies(t, tests)
}

// TestStreamThoughts: a redacted_thinking block is a Thought at its
// start; a thinking block's Thought, with its signature, at its stop.
func TestStreamThoughts(t *testing.T) {
	u := newUpstream(t)
	u.respond(http.StatusOK, fixture(t, "stream_redacted.sse"), nil)
	var deltas []chat.Delta
	got, err := u.provider().Stream(context.Background(), &chat.Request{Model: sonnet, Messages: []chat.Message{user("x")}},
		chat.WriterFunc(func(d chat.Delta) error { deltas = appendDelta(deltas, d); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	red := chat.Thought{Provider: "anthropic", Redacted: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5"}
	omitted := chat.Thought{Provider: "anthropic", Signature: "EqQBCkgIBhABGAIiQOmitted"}
	want := []chat.Delta{{Thought: &red}, {Thought: &omitted},
		{ToolCall: &chat.ToolCallDelta{ID: "toolu_01Bash", Name: "Bash"}}, {ToolCall: &chat.ToolCallDelta{Arguments: `{"command":"ls"}`}}}
	if !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %+v; want %+v", deltas, want)
	}
	if wantT := []chat.Thought{red, omitted}; !reflect.DeepEqual(got.Thoughts, wantT) || got.FinishReason != chat.FinishToolCalls {
		t.Errorf("Stream() = %+v; want thoughts %+v and finish reason tool_calls", got, wantT)
	}
}

// TestBetaHeaders: the client's betas go upstream as they are, with the
// one-hour cache's when a breakpoint needs it, once each; the API
// version is the adapter's, not the client's.
func TestBetaHeaders(t *testing.T) {
	tests := []struct {
		name, betas string
		cache1h     bool
		want        string
	}{
		{"none", "", false, ""},
		{"client's", "interleaved-thinking-2025-05-14, context-management-2025-06-27", false, "interleaved-thinking-2025-05-14,context-management-2025-06-27"},
		{"cache", "", true, BetaExtendedCacheTTL},
		{"both, once", "a-1," + BetaExtendedCacheTTL, true, "a-1," + BetaExtendedCacheTTL},
	}
	u := newUpstream(t)
	u.respond(http.StatusOK, fixture(t, "message.json"), nil)
	p := u.provider()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &chat.Request{Model: small, Messages: []chat.Message{user("hi")},
				APIHeaders: map[string]string{"anthropic-beta": tt.betas, "anthropic-version": "2026-10-21"}}
			if tt.cache1h {
				req.Messages[0].Parts[0].Cache = &chat.CacheControl{TTL: chat.CacheTTL1h}
			}
			if _, err := p.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			h := u.last().header
			if got := h.Get("anthropic-beta"); got != tt.want {
				t.Errorf("anthropic-beta = %q; want %q", got, tt.want)
			}
			if got := h.Get("anthropic-version"); got != APIVersion {
				t.Errorf("anthropic-version = %q; want %q", got, APIVersion)
			}
		})
	}
}

// TestCountTokens: the request's input fields to count_tokens (no
// max_tokens, no stream), its answer's count; failures as the API's.
func TestCountTokens(t *testing.T) {
	u := newUpstream(t)
	p := u.provider()
	req := &chat.Request{Model: opus, ReasoningEffort: "low", Tools: []chat.Tool{bashTool},
		Messages: []chat.Message{{Role: chat.RoleSystem, Parts: []chat.Part{{Text: "Be brief."}}}, user("hi")}}

	u.respond(http.StatusOK, []byte(`{"input_tokens": 64}`), nil)
	n, err := p.CountTokens(context.Background(), req)
	if err != nil || n != 64 {
		t.Fatalf("CountTokens = %d, %v; want 64", n, err)
	}
	got := u.last()
	want := jsonValue(t, `{"model":"claude-opus-4-6","system":"Be brief.","thinking":{"type":"adaptive"},"output_config":{"effort":"low"},`+
		wireBashTool+`,`+hiMessages+`}`)
	if got.path != "/v1/messages/count_tokens" || !reflect.DeepEqual(got.body, want) {
		gb, _ := json.Marshal(got.body)
		t.Errorf("request %s %s; want /v1/messages/count_tokens %v", got.path, gb, want)
	}
	if got.header.Get("x-api-key") != "sk-test" {
		t.Errorf("x-api-key = %q; want the key", got.header.Get("x-api-key"))
	}

	for _, c := range []struct {
		status int
		body   string
		kind   chat.UpstreamKind
	}{
		{http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, chat.UpstreamBadRequest},
		{http.StatusOK, `{"tokens": 3}`, chat.UpstreamFailed},
	} {
		u.respond(c.status, []byte(c.body), nil)
		var ue *chat.UpstreamError
		if _, err := p.CountTokens(context.Background(), req); !errors.As(err, &ue) || ue.Kind != c.kind {
			t.Errorf("CountTokens with %d %s = %v; want kind %v", c.status, c.body, err, c.kind)
		}
	}
}
