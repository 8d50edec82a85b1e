package httpapi

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// streamTools offers a tool of every kind, as TestResponsesCallItems
// does: the calls of a fuzzed stream become items of each type.
const streamTools = `{"model":"m","input":"hi","tools":[{"type":"function","name":"get_weather"},
	{"type":"namespace","name":"multi_agent_v1","tools":[{"type":"function","name":"close_agent"},{"type":"custom","name":"note"}]},
	{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},
	{"type":"tool_search","execution":"client"},{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"}],
	"metadata":{"k":"<v&>"},"instructions":"be \"brief\"\u2028"}`

// streamScript is a stream's deltas as a fuzz input: one op a delta, its
// kind in the low 3 bits and a tool's index in the others, over pieces
// of text (data split at '|', "" once used up):
//
//	0 reasoning p        1 content p          2 reasoning p and content q
//	3 call p of tool a with arguments q        4 more arguments p
//	5 call p of tool a with arguments q, signed r
//	6 a thought signed p  7 redacted thinking p
type streamScript struct {
	names []string // the tools' chat names, then some not offered
}

func (s streamScript) deltas(ops []byte, data string) []chat.Delta {
	pieces := strings.Split(data, "|")
	next := func() string {
		if len(pieces) == 0 {
			return ""
		}
		p := pieces[0]
		pieces = pieces[1:]
		return p
	}
	var ds []chat.Delta
	for _, op := range ops {
		name := s.names[int(op>>3)%len(s.names)]
		var d chat.Delta
		switch op & 7 {
		case 0:
			d.Reasoning = next()
		case 1:
			d.Content = next()
		case 2:
			d.Reasoning, d.Content = next(), next()
		case 3:
			d.ToolCall = &chat.ToolCallDelta{ID: next(), Name: name, Arguments: next()}
		case 4:
			d.ToolCall = &chat.ToolCallDelta{Arguments: next()}
		case 5:
			d.ToolCall = &chat.ToolCallDelta{ID: next(), Name: name, Arguments: next(), Signature: next(), SignedBy: "gemini"}
		case 6:
			d.Thought = &chat.Thought{Provider: "anthropic", Signature: next()}
		case 7:
			d.Thought = &chat.Thought{Provider: "anthropic", Redacted: next()}
		}
		ds = append(ds, d)
	}
	return ds
}

// script returns the fuzz input of ds (which must have no '|' and only
// tools of s.names): what deltas reverses.
func (s streamScript) script(t testing.TB, ds ...chat.Delta) (ops []byte, data string) {
	var pieces []string
	tool := func(name string) byte {
		i := slices.Index(s.names, name)
		if i < 0 || i > 31 {
			t.Fatalf("no tool %q", name)
		}
		return byte(i) << 3
	}
	for _, d := range ds {
		switch tc := d.ToolCall; {
		case d.Reasoning != "" && d.Content != "":
			ops, pieces = append(ops, 2), append(pieces, d.Reasoning, d.Content)
		case d.Reasoning != "":
			ops, pieces = append(ops, 0), append(pieces, d.Reasoning)
		case d.Content != "":
			ops, pieces = append(ops, 1), append(pieces, d.Content)
		case tc != nil && tc.Signature != "":
			ops, pieces = append(ops, 5|tool(tc.Name)), append(pieces, tc.ID, tc.Arguments, tc.Signature)
		case tc != nil && tc.ID != "":
			ops, pieces = append(ops, 3|tool(tc.Name)), append(pieces, tc.ID, tc.Arguments)
		case tc != nil:
			ops, pieces = append(ops, 4), append(pieces, tc.Arguments)
		case d.Thought != nil && d.Thought.Redacted != "":
			ops, pieces = append(ops, 7), append(pieces, d.Thought.Redacted)
		case d.Thought != nil:
			ops, pieces = append(ops, 6), append(pieces, d.Thought.Signature)
		}
	}
	return ops, strings.Join(pieces, "|")
}

// randomIDs are the ids newID makes: two streams of the same deltas
// differ in them only.
var randomIDs = regexp.MustCompile(`(rs|msg|ctc|tsc|lsc|sh|apc)_[A-Z2-7]{26}`)

// numberIDs returns stream with its random ids numbered in the order they
// first appear: the same for two streams of the same deltas, unless one
// has an id where the other has another.
func numberIDs(stream string) string {
	n := map[string]string{}
	return randomIDs.ReplaceAllStringFunc(stream, func(id string) string {
		if _, ok := n[id]; !ok {
			n[id] = "id" + strconv.Itoa(len(n))
		}
		return n[id]
	})
}

// FuzzResponsesEvents: a Responses stream written directly is byte for
// byte the stream encoding/json writes (responsesEncoder.viaJSON), their
// random item ids numbered, for any sequence of deltas (text, reasoning,
// calls of every tool kind in pieces, thoughts) of any strings, and any
// end (each finish reason, or a failure).
//
//	go test ./shared/transport/httpapi -run '^$' -fuzz FuzzResponsesEvents -fuzztime 60s
func FuzzResponsesEvents(f *testing.F) {
	var rp responsesRequest
	if err := json.Unmarshal([]byte(streamTools), &rp); err != nil {
		f.Fatal(err)
	}
	var tr translation
	if _, err := rp.chatParams(&tr); err != nil {
		f.Fatal(err)
	}
	var s streamScript
	for name := range tr.tools.byChat {
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	s.names = append(s.names, "f", "lookup", "not_offered")
	meta := rp.echo()

	// The tests' streams: TestResponsesStreamReasoningItems's, the
	// signing provider's, BenchmarkStreamEncoders's.
	gem := &chat.Thought{Provider: "gemini", Signature: "sig-t"}
	call := func(id, sig string) chat.Delta {
		return chat.Delta{ToolCall: &chat.ToolCallDelta{ID: id, Name: "f", Arguments: "{}", Signature: sig, SignedBy: "gemini"}}
	}
	sc := signedCall
	for _, ds := range [][]chat.Delta{
		{{Reasoning: "a"}, {Reasoning: "b"}, {Thought: gem}, {Content: "ok"}},
		{{Reasoning: "a"}, {Content: "ok"}, {Thought: gem}},
		{{Reasoning: "a"}, call("c1", "sig-c")},
		{{Content: "ok"}, call("c1", "sig-c"), call("c2", "")},
		{{Reasoning: "a"}, call("c1", ""), {Reasoning: "b"}, call("c2", "")},
		{{Thought: &chat.Thought{Provider: "anthropic", Redacted: "xyz"}}},
		{{Reasoning: "Let me "}, {Reasoning: "think."}, {Thought: &chat.Thought{Provider: "anthropic", Signature: "sig-a"}},
			{Thought: &chat.Thought{Provider: "anthropic", Redacted: "opaque"}}, {Content: "Checking."},
			{ToolCall: &chat.ToolCallDelta{ID: sc.ID, Name: "get_weather", Arguments: sc.Arguments, Signature: sc.Signature, SignedBy: sc.SignedBy}}},
		{{Content: " w0"}, {Content: " w1"}, {Content: " w2"}, {Content: " w3"}, {Content: " w4"}},
		{{ToolCall: &chat.ToolCallDelta{ID: "call_1", Name: "lookup", Arguments: " w0"}}, {ToolCall: &chat.ToolCallDelta{Arguments: " w1"}}},
		{{ToolCall: &chat.ToolCallDelta{ID: "c3", Name: "apply_patch", Arguments: `{"input":"*** Begin Patch\n*** End Patch\n"}`}},
			{ToolCall: &chat.ToolCallDelta{ID: "c5", Name: "tool_search", Arguments: `{"query":"spawn agent", "limit":2}`}},
			{ToolCall: &chat.ToolCallDelta{ID: "c6", Name: "local_shell", Arguments: `{"command":"ls"`}}, {ToolCall: &chat.ToolCallDelta{Arguments: `,"env":{"A":"<&>"}}`}}},
		{{Reasoning: "q\"\\\x00\x1f\xff<>&\u2028\u2029", Content: "\t\n\r\b\f\x7f\xc3"}, {Content: ""}},
		{{Content: "<p>"}, {ToolCall: &chat.ToolCallDelta{ID: "c<1>", Name: "get_weather", Arguments: `{"city":"<Paris & Lyon>"}`}},
			{ToolCall: &chat.ToolCallDelta{ID: "c&2", Name: "multi_agent_v1__note", Arguments: `{"input":"a<b>"}`}}},
		{},
	} {
		ops, data := s.script(f, ds...)
		for end := range byte(5) {
			f.Add(ops, "model-x|"+data, end)
		}
		f.Add(ops, "m<&>\u2028|"+data, byte(4))
	}
	f.Fuzz(func(t *testing.T, ops []byte, data string, end byte) {
		model, data, _ := strings.Cut(data, "|")
		ds := s.deltas(ops, data)
		stream := func(viaJSON bool) string {
			m := *meta
			e := &responsesEncoder{meta: &m, tools: tr.tools, viaJSON: viaJSON}
			e.model(model)
			b := e.start([]byte("x"))
			for _, d := range ds {
				b = e.delta(b, d)
			}
			if end%5 == 4 {
				code := "upstream_error"
				env := envelope{Error: errorBody{Message: model, Type: "server_error", Param: &data}}
				if len(ops)%2 == 1 {
					env.Error.Code = &code
				}
				return string(e.fail(b, env))
			}
			finish := []string{chat.FinishStop, chat.FinishLength, chat.FinishContentFilter, chat.FinishToolCalls}[end%5]
			u := chat.Usage{PromptTokens: len(ops), CompletionTokens: len(data), TotalTokens: len(ops) + len(data), Cost: credits.Amount(len(model))}
			return string(e.end(b, &chat.Response{FinishReason: finish, Usage: u}))
		}
		got, want := stream(false), stream(true)
		if numberIDs(got) != numberIDs(want) {
			t.Fatalf("written directly:\n%s\nencoding/json:\n%s", got, want)
		}
	})
}

// TestResponsesItemJSON: items and parts the stream does not make (yet)
// are written as encoding/json writes them too: a nil part list or
// arguments, logprobs that are not empty, raw JSON arguments and actions.
func TestResponsesItemJSON(t *testing.T) {
	var nilArgs *string
	args := `{"a":"<b>"}`
	var nilParts []contentPart
	logprobs := []any{map[string]any{"token": "<a>", "logprob": -0.5}}
	tests := []outputItem{
		{Type: "message", ID: "msg_1", Content: &nilParts, Summary: &[]contentPart{}},
		{Type: "message", ID: "msg_2", Status: "completed", Role: "assistant",
			Content: &[]contentPart{{Type: "output_text", Text: "x&y", Logprobs: &logprobs}, {Type: "output_text", Annotations: &[]any{}}}},
		{Type: "function_call", ID: "fc_1", CallID: "c1", Name: "f", Arguments: nilArgs},
		{Type: "function_call", ID: "fc_2", CallID: "c2", Namespace: "n", Name: "f", Arguments: &args, Execution: "client"},
		{Type: "custom_tool_call", ID: "ctc_1", Input: &args},
		{Type: "tool_search_call", ID: "tsc_1", Arguments: json.RawMessage(`{"q": "<x>"}`), Execution: "client"},
		{Type: "local_shell_call", ID: "lsc_1", Action: json.RawMessage(`{"command": ["ls"]}`)},
		{Type: "apply_patch_call", ID: "apc_1", Operation: json.RawMessage(`{"type":"update_file"}`)},
	}
	for _, it := range tests {
		var want strings.Builder
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&it); err != nil {
			t.Fatal(err)
		}
		var e responsesEncoder
		if got := e.appendItem(nil, &it); string(got)+"\n" != want.String() {
			t.Errorf("appendItem(%s) =\n%s\nwant\n%s", it.ID, got, want.String())
		}
	}
}

// TestResponsesDirectFields sets every field of the structs the stream
// writes directly (an item, a part, an event, a delta event) and compares
// the direct bytes with encoding/json's: a field added to one of them and
// not to its writer fails it, as does a field of a type this test does
// not know how to set (then teach it, and the writer).
func TestResponsesDirectFields(t *testing.T) {
	args, input := `{"a":"<b>"}`, "in&put"
	fill := func(t *testing.T, v reflect.Value) {
		t.Helper()
		for i := range v.NumField() {
			f, name := v.Field(i), v.Type().Field(i).Name
			n := i + 1
			switch f.Type() {
			case reflect.TypeFor[string]():
				f.SetString(name + " <&>\u2028")
			case reflect.TypeFor[int]():
				f.SetInt(int64(n))
			case reflect.TypeFor[*int]():
				f.Set(reflect.ValueOf(&n))
			case reflect.TypeFor[*string]():
				s := name + ` "q"`
				f.Set(reflect.ValueOf(&s))
			case reflect.TypeFor[*[]contentPart]():
				f.Set(reflect.ValueOf(&[]contentPart{{Type: "output_text", Text: "t"}}))
			case reflect.TypeFor[*[]any]():
				f.Set(reflect.ValueOf(&[]any{}))
			case reflect.TypeFor[any]():
				if name != "Arguments" {
					t.Fatalf("%s.%s: set it here, and write it directly", v.Type().Name(), name)
				}
				f.Set(reflect.ValueOf(&args)) // a function_call's
			case reflect.TypeFor[json.RawMessage](), reflect.TypeFor[*responseObject]():
				// Written through encoding/json (TestResponsesItemJSON, the fuzz test).
			case reflect.TypeFor[*outputItem]():
				f.Set(reflect.ValueOf(&outputItem{Type: "function_call", ID: "fc_1", CallID: "c", Name: "f", Arguments: &args, Input: &input}))
			case reflect.TypeFor[*contentPart]():
				f.Set(reflect.ValueOf(&contentPart{Type: "output_text", Text: "x", Annotations: &[]any{}}))
			default:
				t.Fatalf("%s.%s: a %s this test does not set; set it here, and write it directly", v.Type().Name(), name, f.Type())
			}
		}
	}
	jsonOf := func(v any) string {
		var sb strings.Builder
		enc := json.NewEncoder(&sb)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}

	t.Run("item", func(t *testing.T) {
		var it outputItem
		fill(t, reflect.ValueOf(&it).Elem())
		var e responsesEncoder
		if got, want := string(e.appendItem(nil, &it))+"\n", jsonOf(&it); got != want {
			t.Errorf("appendItem =\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("part", func(t *testing.T) {
		var p contentPart
		fill(t, reflect.ValueOf(&p).Elem())
		var e responsesEncoder
		if got, want := string(e.appendPart(nil, &p))+"\n", jsonOf(&p); got != want {
			t.Errorf("appendPart =\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("event", func(t *testing.T) {
		var ev responseEvent
		fill(t, reflect.ValueOf(&ev).Elem())
		direct, ref := responsesEncoder{seq: 7}, responsesEncoder{seq: 7, viaJSON: true}
		if got, want := string(direct.event(nil, ev)), string(ref.event(nil, ev)); got != want {
			t.Errorf("event =\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("delta event", func(t *testing.T) {
		var ev deltaEvent
		fill(t, reflect.ValueOf(&ev).Elem())
		direct, ref := responsesEncoder{seq: 7}, responsesEncoder{seq: 7, viaJSON: true}
		for range 2 { // the second reuses the first's prefix
			if got, want := string(direct.deltaEv(nil, ev)), string(ref.deltaEv(nil, ev)); got != want {
				t.Errorf("deltaEv =\n%s\nwant\n%s", got, want)
			}
		}
	})
}
