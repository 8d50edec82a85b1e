package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
)

func TestReasoningSeal(t *testing.T) {
	thoughts := []chat.Thought{{Provider: "anthropic", Text: "Let me think.", Signature: "EqQB=="}, {Provider: "anthropic", Redacted: "opaque"},
		{Provider: "gemini", Text: "", Signature: "CiIB"}}
	calls := []chat.ToolCall{{ID: "c1", Name: "f", Signature: "sig-1", SignedBy: "gemini"}, {ID: "c2", Name: "g"}}
	sealed := sealReasoning(thoughts, calls)
	if !strings.HasPrefix(sealed, reasoningPrefix) {
		t.Fatalf("sealReasoning = %q; want the %q prefix", sealed, reasoningPrefix)
	}
	r, ok, err := openReasoning(sealed, "input[1]")
	if err != nil || !ok {
		t.Fatalf("openReasoning(%q) = %v, %v", sealed, ok, err)
	}
	if got := r.thoughts(); !reflect.DeepEqual(got, thoughts) {
		t.Errorf("thoughts = %+v; want %+v", got, thoughts)
	}
	if want := []sealedCall{{ID: "c1", Signature: "sig-1", SignedBy: "gemini"}}; !reflect.DeepEqual(r.Calls, want) {
		t.Errorf("calls = %+v; want %+v", r.Calls, want)
	}
	if s := sealReasoning(nil, []chat.ToolCall{{ID: "c2"}}); s != "" {
		t.Errorf("sealReasoning of nothing signed = %q; want empty", s)
	}
	tests := []struct {
		content string
		ok      bool
		param   string
	}{
		{"gAAAAA_fake_encrypted_reasoning_d3187aa8", false, ""}, // OpenAI's, replayed by Codex: ignored
		{"", false, ""},
		{reasoningPrefix + "!!", false, "input[1].encrypted_content"},
		{reasoningPrefix + "bm90IGpzb24", false, "input[1].encrypted_content"}, // "not json"
	}
	for _, tt := range tests {
		_, ok, err := openReasoning(tt.content, "input[1]")
		e := apierr.As(err)
		if ok != tt.ok || (tt.param == "") != (e == nil) || e != nil && e.Param != tt.param {
			t.Errorf("openReasoning(%q) = %v, %v; want %v, an error naming %q", tt.content, ok, err, tt.ok, tt.param)
		}
	}
}

// signingProvider answers the first turn with signed reasoning (two
// Anthropic thoughts, one redacted) and a call Gemini signed, streamed or
// whole, and the turn after the tool's result with text; it records the
// requests.
type signingProvider struct {
	mu  sync.Mutex
	got []*chat.Request
}

func (p *signingProvider) record(req *chat.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, req)
	return req.Messages[len(req.Messages)-1].Role == chat.RoleTool
}

var signedCall = chat.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`, Signature: "sig-g", SignedBy: "gemini"}

func (p *signingProvider) Complete(_ context.Context, req *chat.Request) (*chat.Response, error) {
	if p.record(req) {
		return &chat.Response{Content: "Sunny.", FinishReason: chat.FinishStop}, nil
	}
	return &chat.Response{Reasoning: "Let me think.", Content: "Checking.", FinishReason: chat.FinishToolCalls,
		Thoughts:  []chat.Thought{{Provider: "anthropic", Text: "Let me think.", Signature: "sig-a"}, {Provider: "anthropic", Redacted: "opaque"}},
		ToolCalls: []chat.ToolCall{signedCall}}, nil
}

func (p *signingProvider) Stream(_ context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	if p.record(req) {
		return &chat.Response{FinishReason: chat.FinishStop}, w.Delta(chat.Delta{Content: "Sunny."})
	}
	c := signedCall
	for _, d := range []chat.Delta{{Reasoning: "Let me "}, {Reasoning: "think."}, {Thought: &chat.Thought{Provider: "anthropic", Signature: "sig-a"}},
		{Thought: &chat.Thought{Provider: "anthropic", Redacted: "opaque"}}, {Content: "Checking."},
		{ToolCall: &chat.ToolCallDelta{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Signature: c.Signature, SignedBy: c.SignedBy}}} {
		if err := w.Delta(d); err != nil {
			return nil, err
		}
	}
	return &chat.Response{FinishReason: chat.FinishToolCalls}, nil
}

// TestResponsesReasoningRoundTrip: signed reasoning and a signed call
// leave in a reasoning item's encrypted_content, whole and streamed, and
// come back, with the items a client replays (as Codex does, ids and
// status included), as the assistant turn's Thoughts and the call's
// signature; reasoning Genway did not make is ignored.
func TestResponsesReasoningRoundTrip(t *testing.T) {
	prov := &signingProvider{}
	srv := apiServer(t, chat.NewGateway(chat.Config{Catalog: testCatalog(t), Providers: map[string]chat.Provider{"gemini": prov}}))
	const tools = `[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	wantThoughts := []chat.Thought{{Provider: "anthropic", Text: "Let me think.", Signature: "sig-a"}, {Provider: "anthropic", Redacted: "opaque"}}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			first := `{"model":"gemini/gemini-2.5-flash","stream":` + map[bool]string{false: "false", true: "true"}[stream] +
				`,"store":false,"include":["reasoning.encrypted_content"],"tools":` + tools + `,"input":[{"type":"message","id":"msg_u1","role":"user","content":[{"type":"input_text","text":"Weather?"}]}]}`
			items := responseItems(t, srv.URL, first, stream)
			// A stream sends the thoughts with the reasoning they close, and
			// the call's signature before the call: the text came between.
			want := map[bool]string{false: "reasoning,message,function_call", true: "reasoning,message,reasoning,function_call"}[stream]
			var types []string
			for _, it := range items {
				types = append(types, it["type"].(string))
				if sealed, _ := it["encrypted_content"].(string); it["type"] == "reasoning" && !strings.HasPrefix(sealed, reasoningPrefix) {
					t.Errorf("reasoning item %v; want Genway's encrypted_content", it)
				}
			}
			if strings.Join(types, ",") != want {
				t.Fatalf("output %v; want %s", types, want)
			}
			var replay []string
			for _, it := range items {
				b, _ := json.Marshal(it)
				replay = append(replay, string(b))
			}
			second := `{"model":"gemini/gemini-2.5-flash","store":false,"tools":` + tools + `,"input":[
				{"type":"message","id":"msg_u1","role":"user","content":[{"type":"input_text","text":"Weather?"}]},` + strings.Join(replay, ",") + `,
				{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"sunny"}]}`
			if got := responseItems(t, srv.URL, second, false); len(got) != 1 || got[0]["type"] != "message" {
				t.Fatalf("second answer = %v; want a message", got)
			}
			prov.mu.Lock()
			req := prov.got[len(prov.got)-1]
			prov.mu.Unlock()
			m := req.Messages[1]
			if m.Role != chat.RoleAssistant || m.Text() != "Checking." || !reflect.DeepEqual(m.Thoughts, wantThoughts) {
				t.Errorf("assistant turn sent back = %+v; want Checking. with thoughts %+v", m, wantThoughts)
			}
			if len(m.ToolCalls) != 1 || m.ToolCalls[0] != signedCall {
				t.Errorf("its calls = %+v; want %+v", m.ToolCalls, signedCall)
			}
		})
	}
	t.Run("foreign", func(t *testing.T) {
		body := `{"model":"gemini/gemini-2.5-flash","input":[{"role":"user","content":"hi"},
			{"type":"reasoning","id":"rs_x","summary":[{"type":"summary_text","text":"**Thinking**"}],"content":null,"encrypted_content":"gAAAAA_fake"},
			{"type":"message","id":"msg_x","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]},
			{"role":"user","content":"again"}]}`
		responseItems(t, srv.URL, body, false)
		prov.mu.Lock()
		req := prov.got[len(prov.got)-1]
		prov.mu.Unlock()
		if m := req.Messages[1]; m.Role != chat.RoleAssistant || m.Thoughts != nil {
			t.Errorf("assistant turn = %+v; want no thoughts", m)
		}
	})
}

// responseItems posts a Responses request and returns its output items:
// the response's, or a stream's output_item.done items, as Codex
// collects them.
func responseItems(t *testing.T, url, body string, stream bool) []map[string]any {
	t.Helper()
	resp, err := http.Post(url+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		var o struct {
			Output []map[string]any `json:"output"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
			t.Fatal(err)
		}
		return o.Output
	}
	var items []map[string]any
	for _, ev := range responseEvents(t, resp.Body) {
		if ev["type"] == "response.output_item.done" {
			items = append(items, ev["item"].(map[string]any))
		}
	}
	return items
}

// responseEvents reads a Responses stream's events (their data), checking
// that each names its type in its event line and that sequence numbers
// count up from 0.
func responseEvents(t *testing.T, body io.Reader) []map[string]any {
	t.Helper()
	var events []map[string]any
	var name string
	for _, l := range sseLines(t, body) {
		if n, ok := strings.CutPrefix(l, "event: "); ok {
			name = n
			continue
		}
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("event %s: %v", d, err)
		}
		if ev["type"] != name || ev["sequence_number"] != float64(len(events)) {
			t.Errorf("event %q (line %q) has sequence_number %v; want %d", ev["type"], name, ev["sequence_number"], len(events))
		}
		events = append(events, ev)
	}
	return events
}

// TestResponsesStreamReasoningItems: where a stream's signed reasoning
// goes, by what comes around it: into the reasoning item it closes, into
// one of its own after a message or before a signed call; what each
// carries opens back into the thoughts and call signatures streamed.
func TestResponsesStreamReasoningItems(t *testing.T) {
	gem := &chat.Thought{Provider: "gemini", Signature: "sig-t"}
	call := func(id, sig string) chat.Delta {
		return chat.Delta{ToolCall: &chat.ToolCallDelta{ID: id, Name: "f", Arguments: "{}", Signature: sig, SignedBy: map[bool]string{true: "gemini"}[sig != ""]}}
	}
	tests := []struct {
		name   string
		deltas []chat.Delta
		want   []string // item types, a reasoning item with what it carries: "reasoning[thoughts' texts|signed calls' ids]"
	}{
		{"a thought closes the reasoning before it", []chat.Delta{{Reasoning: "a"}, {Reasoning: "b"}, {Thought: gem}, {Content: "ok"}},
			[]string{"reasoning[ab|]", "message"}},
		{"a thought after the text goes at the end", []chat.Delta{{Reasoning: "a"}, {Content: "ok"}, {Thought: gem}},
			[]string{"reasoning", "message", "reasoning[a|]"}},
		{"a signed call's signature in the reasoning before it", []chat.Delta{{Reasoning: "a"}, call("c1", "sig-c")},
			[]string{"reasoning[|c1]", "function_call"}},
		{"after text, in a reasoning item of its own", []chat.Delta{{Content: "ok"}, call("c1", "sig-c"), call("c2", "")},
			[]string{"message", "reasoning[|c1]", "function_call", "function_call"}},
		{"reasoning after a call is another item", []chat.Delta{{Reasoning: "a"}, call("c1", ""), {Reasoning: "b"}, call("c2", "")},
			[]string{"reasoning", "function_call", "reasoning", "function_call"}},
		{"redacted thinking alone", []chat.Delta{{Thought: &chat.Thought{Provider: "anthropic", Redacted: "xyz"}}},
			[]string{"reasoning[xyz|]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rp responsesRequest
			json.Unmarshal([]byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}`), &rp)
			var tr translation
			if _, err := rp.chatParams(&tr); err != nil {
				t.Fatal(err)
			}
			e := &responsesEncoder{meta: rp.echo(), tools: tr.tools}
			b := e.start(nil)
			for _, d := range tt.deltas {
				b = e.delta(b, d)
			}
			b = e.end(b, &chat.Response{FinishReason: chat.FinishStop})
			var got []string
			for _, ev := range responseEvents(t, strings.NewReader(string(b))) {
				it, _ := ev["item"].(map[string]any)
				if ev["type"] != "response.output_item.done" {
					continue
				}
				s := it["type"].(string)
				if s == "reasoning" {
					var texts, ids []string
					if ec, _ := it["encrypted_content"].(string); ec != "" {
						r, ok, err := openReasoning(ec, "x")
						if !ok || err != nil {
							t.Fatalf("encrypted_content %q: %v", ec, err)
						}
						for _, th := range r.Thoughts {
							texts = append(texts, th.Text+th.Redacted)
						}
						for _, c := range r.Calls {
							ids = append(ids, c.ID)
						}
						s += "[" + strings.Join(texts, ",") + "|" + strings.Join(ids, ",") + "]"
					}
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("items %v; want %v", got, tt.want)
			}
		})
	}
}
