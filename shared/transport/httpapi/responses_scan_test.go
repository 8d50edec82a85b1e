package httpapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/genway/genway/shared/rawjson/rawjsontest"
)

// Request bodies of BenchmarkDecodeResponses, and common shapes that
// TestScanResponsesRequest requires to take the fast path (with every
// body of testdata/codex).
const (
	respShortBody = `{"model":"gpt-5.5","input":"say hi","stream":true}`
	respToolsBody = `{"model":"synthetic/echo","instructions":"Be brief.","stream":false,"store":false,"max_output_tokens":256,` +
		`"reasoning":{"effort":"low","summary":"auto"},"text":{"format":{"type":"json_schema","name":"n","description":"d","schema":{"type":"object"},"strict":true},"verbosity":"low"},` +
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}},{"type":"web_search"}],"tool_choice":"auto","parallel_tool_calls":true,` +
		`"metadata":{"a":"b"},"client_metadata":{"session_id":"s-1","turn":null},"include":["reasoning.encrypted_content"],"prompt_cache_key":"k",` +
		`"input":[{"role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]},{"type":"function_call","call_id":"c","name":"get_weather","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c","output":"18 \u00b0C"}]}`
)

// commonResponsesBodies take the fast path.
var commonResponsesBodies = []string{
	respShortBody, respToolsBody,
	`{"model":"m","models":["a","b"],"input":"x","temperature":0.7,"top_p":1,"user":"u","truncation":"disabled","service_tier":"flex","safety_identifier":"s",` +
		`"max_tool_calls":3,"background":false,"top_logprobs":2,"seed":42,"previous_response_id":null,"stream_options":{"include_obfuscation":false},"conversation":null,"prompt":null}`,
}

// checkResponsesScan fails if scanResponsesRequest takes data that
// json.Unmarshal refuses or decodes differently (body is set by
// neither), or declines it without leaving rp zero.
func checkResponsesScan(t *testing.T, data []byte) (scanned bool) {
	t.Helper()
	return rawjsontest.Compare(t, "scanResponsesRequest", scanResponsesRequest, data)
}

// codexBodies returns the bodies of testdata/codex, by file name.
func codexBodies(t testing.TB) map[string][]byte {
	files, err := filepath.Glob("testdata/codex/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured Codex requests: %v", err)
	}
	bodies := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies[filepath.Base(f)] = b
	}
	return bodies
}

// responsesSeeds are the common bodies, the bodies of the package's
// Responses tests, odd cases around each rule json.Unmarshal follows, and
// the bodies of testdata/codex.
func responsesSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, s := range commonResponsesBodies {
		seeds = append(seeds, []byte(s))
	}
	for _, s := range []string{
		// The Responses tests' requests.
		`{"model":"synthetic/echo","input":"hi","previous_response_id":"resp_1"}`,
		`{"model":"synthetic/echo","input":[{"type":"item_reference","id":"msg_1"}]}`,
		`{"model":"synthetic/echo"}`, `{"model":"synthetic/echo","input":3}`,
		`{"model":"synthetic/echo","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search_preview"}}`,
		`{"model":"synthetic/echo","input":"hi","max_output_tokens":0}`, `{"model":"synthetic/echo","input":"hi","reasoning":{"effort":"max"}}`,
		`{"model":"synthetic/echo","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":true}}}`,
		`{"model":"synthetic/echo","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`,
		`{"model":"synthetic/echo","input":"hi","truncation":"auto"}`, `{"model":"synthetic/echo","input":"hi","background":true}`,
		`{"model":"synthetic/echo","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"},{"type":"custom","name":"p","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}]},{"type":"tool_search","execution":"client"},{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","namespace":"ns","name":"p"}]},"input":[{"role":"user","content":"CALL_TOOL p"},{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gw1.eyJjIjpbeyJpIjoiYyIsInMiOiJ4IiwiYiI6ImdlbWluaSJ9XX0"},{"type":"custom_tool_call","call_id":"c","namespace":"ns","name":"p","input":"x"},{"type":"custom_tool_call_output","call_id":"c","output":"ok"}]}`,
		`{"model":"synthetic/echo","tools":[{"type":"local_shell"},{"type":"apply_patch"}],"input":[{"type":"tool_search_call","call_id":"s","arguments":{"query":"q"}},{"type":"tool_search_output","tools":[{"type":"function","name":"g","defer_loading":true}]},{"type":"local_shell_call","id":"l","call_id":"c","action":{"type":"exec","command":["ls"]}},{"type":"local_shell_call_output","id":"l","output":"a"}]}`,
		// Odd cases.
		`{"model":"a","model":"b","model":null,"stream":true,"stream":null,"temperature":1,"temperature":null,"top_p":0.5,"top_p":0.25,"user":"u","user":null}`,
		`{"input":"x","input":null,"max_output_tokens":1,"max_output_tokens":null,"tool_choice":"auto","tool_choice":{"type":"none"},"prompt":{},"conversation":"c"}`,
		`{"instructions":"a","instructions":null}`, `{"instructions":null,"instructions":"b"}`, `{"instructions":7}`,
		`{"models":["a","b"],"models":[null]}`, `{"models":[]}`, `{"models":["a",null,"c"]}`, `{"include":[],"include":["x"]}`, `{"include":null}`,
		`{"tools":[],"tools":null}`, `{"tools":null}`, `{"tools":[]}`, `{"tools":[null,1,"x",{}]}`, `{"tools":{}}`, `{"tools":[{"type":"function"}],"tools":[]}`,
		`{"metadata":null}`, `{"metadata":{}}`, `{"metadata":{"a":"b","a":"c"}}`, `{"metadata":{"a":null}}`, `{"metadata":{"a":1}}`,
		`{"metadata":{"a":"b"},"metadata":{"c":"d"}}`, `{"metadata":{"a":"b"},"metadata":null}`, `{"metadata":{"A":"x","a":"y"}}`,
		`{"metadata":{"\u0061":"x"}}`, `{"metadata":{"é":"x"}}`, `{"metadata":{"":"x"}}`, `{"metadata":[]}`, `{"metadata":"x"}`,
		`{"client_metadata":{"session_id":"s"},"client_metadata":{"turn_id":"t"}}`, `{"client_metadata":{"x":{"y":1}}}`, "{\"client_metadata\":{\"a\":\"\xff\"}}",
		`{"reasoning":{"effort":"high"},"reasoning":{"summary":"concise"}}`, `{"reasoning":null}`, `{"reasoning":{"effort":null,"summary":null}}`,
		`{"reasoning":{"effort":"high"},"reasoning":null,"reasoning":{"Effort":"x"}}`, `{"reasoning":{"effort":1}}`, `{"reasoning":"high"}`,
		`{"reasoning":{"effort":"low","generate_summary":"auto"}}`,
		`{"text":{"format":{"type":"json_schema","schema":null}},"text":{"format":{"name":"n"}}}`, `{"text":null}`, `{"text":{"format":null}}`,
		`{"text":{"format":{"x":1}},"text":{"format":null}}`, `{"text":7}`, `{"text":{"verbosity":null,"format":{"strict":null}}}`,
		`{"text":{"format":{"strict":"true"}}}`, `{"text":{"Format":{}}}`, `{"text":{"format":{"Schema":{}}}}`,
		`{"parallel_tool_calls":null}`, `{"parallel_tool_calls":1}`, `{"store":true,"store":null}`, `{"background":"true"}`,
		`{"Model":"x"}`, `{"MODEL":"x"}`, `{"Input":"x"}`, `{"max_Output_Tokens":1}`, `{"client_Metadata":{}}`,
		`{"mod\u0065l":"x"}`, `{"modél":"x"}`, `{"model\u0000":"x"}`, `{"":1,"modelx":2,"body":"x","Body":1,"modalities":["text"]}`,
		`{"model":"\ud800"}`, `{"model":"\udc00\ud800"}`, "{\"model\":\"\xff\"}", "{\"input\":\"\xff\"}", "{\"input\":[{\"content\":\"\xff\"}]}",
		`{"model":"\u00e9\ud83d\ude00\/\b\f\n\r\t\\\""}`, `{"model":"\x"}`,
		`{"max_tool_calls":1.0}`, `{"max_tool_calls":-0}`, `{"max_tool_calls":9223372036854775807}`, `{"max_tool_calls":9223372036854775808}`,
		`{"top_logprobs":"1"}`, `{"top_logprobs":null}`, `{"seed":1e3}`, `{"seed":-9223372036854775808}`, `{"seed":-9223372036854775809}`,
		`{"temperature":1e400}`, `{"temperature":1e-400}`, `{"temperature":-0}`, `{"temperature":0.1000000000000000055511151231257827}`,
		`{"temperature":"1"}`, `{"temperature":01}`, `{"temperature":1.}`, `{"temperature":-}`,
		`{"stream":1}`, `{"stream":"true"}`, `{"stream":tru}`, `{"stream":truex}`,
		`{"model":"x"} `, `{"model":"x"} {}`, `{"model":"x",}`, `{"model" "x"}`, `{"model":"x"`, `{`, `[]`, `null`, `"x"`, ``, ` `,
		`{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
		`{"input":[` + strings.Repeat(`{"a":`, 63) + `1` + strings.Repeat(`}`, 63) + `]}`,
		"\xef\xbb\xbf{}", "{\"model\":\"x\"\u00a0}", "{\"model\":\"a\tb\"}", " {\n \"input\" : [ 1 , 2 ] ,\t\"tools\" : [ {} ] \r\n} ",
	} {
		seeds = append(seeds, []byte(s))
	}
	for _, b := range codexBodies(t) {
		seeds = append(seeds, b)
	}
	return seeds
}

// TestScanResponsesRequest checks the seeds, and that the common shapes
// and every captured Codex body take the fast path, with raw members
// that an append copies.
func TestScanResponsesRequest(t *testing.T) {
	for _, data := range responsesSeeds(t) {
		checkResponsesScan(t, data)
	}
	bodies := map[string][]byte{}
	for name, b := range codexBodies(t) {
		bodies["codex/"+name] = b
	}
	for i, b := range commonResponsesBodies {
		bodies["common/"+strconv.Itoa(i)] = []byte(b)
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			if !checkResponsesScan(t, body) {
				t.Fatalf("scanResponsesRequest declined %s", name)
			}
			var rp responsesRequest
			scanResponsesRequest(body, &rp)
			raws := append([][]byte{rp.Input, rp.ToolChoice}, toBytes(rp.Tools)...)
			for _, r := range raws {
				if cap(r) != len(r) {
					t.Errorf("scanResponsesRequest: %.40s has capacity %d; want its length %d", r, cap(r), len(r))
				}
			}
		})
	}
}

// toBytes returns the elements of raws as byte slices.
func toBytes[T ~[]byte](raws []T) [][]byte {
	out := make([][]byte, len(raws))
	for i, r := range raws {
		out[i] = r
	}
	return out
}

// TestScanResponsesRequestDeclines: what scanResponsesRequest leaves to
// encoding/json.
func TestScanResponsesRequestDeclines(t *testing.T) {
	for _, body := range []string{
		`{"Model":"x"}`, `{"mod\u0065l":"x"}`, `{"reasoning":{"Effort":"low"}}`, `{"tools":[],"tools":[]}`,
		`{"metadata":{},"metadata":{}}`, `{"client_metadata":{"\u0061":"x"}}`, `{"metadata":{"a":1}}`,
		`{"model":"\ud800"}`, "{\"model\":\"\xff\"}", `{"max_tool_calls":1.5}`, `{"temperature":1e400}`,
		`{"input":"x"`, `null`, ``,
	} {
		var rp responsesRequest
		if scanResponsesRequest([]byte(body), &rp) {
			t.Errorf("scanResponsesRequest(%s) = true; want false", body)
		}
	}
}

// TestScanResponsesRequestFields sets each field that json.Unmarshal
// decodes into responsesRequest, at every depth (found by reflection, so
// that a field added to it is checked too), and requires
// scanResponsesRequest to take it and decode it as json.Unmarshal does:
// a field the fast path does not know would be skipped, and lost.
func TestScanResponsesRequestFields(t *testing.T) {
	for _, body := range rawjsontest.FieldBodies(reflect.TypeFor[responsesRequest](), func(member string) string { return member }) {
		if !checkResponsesScan(t, []byte(body)) {
			t.Errorf("scanResponsesRequest(%s) declined it; want it taken", body)
		}
	}
}

// FuzzScanResponsesRequest: whatever scanResponsesRequest takes,
// json.Unmarshal takes and decodes to the same responsesRequest; what it
// declines, it leaves zero.
//
//	go test ./shared/transport/httpapi -run '^$' -fuzz FuzzScanResponsesRequest -fuzztime 60s
func FuzzScanResponsesRequest(f *testing.F) {
	for _, s := range responsesSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkResponsesScan(t, data) })
}

// benchResponses keeps the benchmark's request on the heap, as
// serveResponses' is.
var benchResponses *responsesRequest

// BenchmarkDecodeResponses decodes a one-line request and a captured
// Codex follow-up (instructions, tools, the conversation so far), with
// scanResponsesRequest (scan) and with unmarshal (json), as
// serveResponses did before the fast path.
//
//	go test ./shared/transport/httpapi -run '^$' -bench BenchmarkDecodeResponses -benchmem
func BenchmarkDecodeResponses(b *testing.B) {
	codex, err := os.ReadFile("testdata/codex/shell-2.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, body := range []struct{ name, data string }{{"short", respShortBody}, {"codex", string(codex)}} {
		data := []byte(body.data)
		b.Run(body.name+"/scan", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				rp := new(responsesRequest)
				if !scanResponsesRequest(data, rp) {
					b.Fatal("declined")
				}
				benchResponses = rp
			}
		})
		b.Run(body.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				rp := new(responsesRequest)
				if err := unmarshal(data, rp); err != nil {
					b.Fatal(err)
				}
				benchResponses = rp
			}
		})
	}
}

// checkItemsScan is checkResponsesScan for scanResponsesItems.
func checkItemsScan(t *testing.T, data []byte) (scanned bool) {
	t.Helper()
	return rawjsontest.Compare(t, "scanResponsesItems", scanResponsesItems, data)
}

// codexInputs returns the input arrays of testdata/codex, by file name.
func codexInputs(t testing.TB) map[string][]byte {
	inputs := map[string][]byte{}
	for name, b := range codexBodies(t) {
		var rp responsesRequest
		if err := json.Unmarshal(b, &rp); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		inputs[name] = rp.Input
	}
	return inputs
}

// itemsSeeds are the input arrays of the Responses tests and of
// testdata/codex, and odd cases around each rule json.Unmarshal follows.
func itemsSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, data := range responsesSeeds(t) {
		var rp responsesRequest
		if json.Unmarshal(data, &rp) == nil && len(rp.Input) > 0 && rp.Input[0] == '[' {
			seeds = append(seeds, rp.Input)
		}
	}
	for _, s := range []string{
		`[]`, `null`, `[null]`, `[1]`, `["x"]`, `[[]]`, `{}`, `[{}]`, `[{},]`, `[{}`, `[{}] [`, ``,
		`[{"type":"message","type":null,"role":"user","role":"assistant","content":"a","content":null}]`,
		`[{"type":"custom_tool_call","input":"x","input":null},{"input":null,"input":"y"},{"input":1}]`,
		`[{"type":"tool_search_output","tools":[{"type":"function"},null]},{"tools":null},{"tools":[],"tools":[]},{"tools":{}}]`,
		`[{"type":"reasoning","summary":[],"content":null,"encrypted_content":"e","encrypted_content":null}]`,
		`[{"Type":"message"}]`, `[{"CALL_ID":"c"}]`, `[{"call_Id":"c"}]`, `[{"typ\u0065":"x"}]`, `[{"týpe":"x"}]`,
		`[{"type":"\ud800"}]`, "[{\"name\":\"\xff\"}]", "[{\"output\":\"\xff\"}]", `[{"name":"\u00e9\ud83d\ude00"}]`,
		`[{"status":"completed","id":"fc_1","namespace":"ns","action":{"type":"exec"},"operation":null,"cache_control":{"type":"ephemeral"}}]`,
		`[{"arguments":{"query":"q"}},{"arguments":"{}"},{"arguments":null}]`, `[{"type":1}]`, `[{"status":true}]`,
		" [ { \"type\" : \"message\" , \"content\" : [ ] } ] ",
		`[{"content":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]`,
	} {
		seeds = append(seeds, []byte(s))
	}
	for _, b := range codexInputs(t) {
		seeds = append(seeds, b)
	}
	return seeds
}

// TestScanResponsesItems checks the seeds, and that every captured Codex
// input takes the fast path, with raw members that an append copies.
func TestScanResponsesItems(t *testing.T) {
	for _, data := range itemsSeeds(t) {
		checkItemsScan(t, data)
	}
	for name, in := range codexInputs(t) {
		t.Run(name, func(t *testing.T) {
			if !checkItemsScan(t, in) {
				t.Fatalf("scanResponsesItems declined the input of %s", name)
			}
			var items []responsesItem
			scanResponsesItems(in, &items)
			for _, it := range items {
				for _, r := range append([][]byte{it.Content, it.Arguments, it.Output}, toBytes(it.Tools)...) {
					if cap(r) != len(r) {
						t.Errorf("scanResponsesItems: %.40s has capacity %d; want its length %d", r, cap(r), len(r))
					}
				}
			}
		})
	}
}

// TestScanResponsesItemsDeclines: what scanResponsesItems leaves to
// encoding/json.
func TestScanResponsesItemsDeclines(t *testing.T) {
	for _, body := range []string{
		`[null]`, `[1]`, `[{"Type":"message"}]`, `[{"typ\u0065":"x"}]`, `[{"tools":[],"tools":[]}]`,
		`[{"type":"\ud800"}]`, "[{\"name\":\"\xff\"}]", `[{}`, `{}`, ``,
	} {
		var items []responsesItem
		if scanResponsesItems([]byte(body), &items) {
			t.Errorf("scanResponsesItems(%s) = true; want false", body)
		}
	}
}

// TestScanResponsesItemsFields is TestScanResponsesRequestFields for
// responsesItem: each field set alone, in a one-item input.
func TestScanResponsesItemsFields(t *testing.T) {
	for _, body := range rawjsontest.FieldBodies(reflect.TypeFor[responsesItem](), func(member string) string { return "[" + member + "]" }) {
		if !checkItemsScan(t, []byte(body)) {
			t.Errorf("scanResponsesItems(%s) declined it; want it taken", body)
		}
	}
}

// FuzzScanResponsesItems: whatever scanResponsesItems takes,
// json.Unmarshal takes and decodes to the same items; what it declines,
// it leaves nil.
//
//	go test ./shared/transport/httpapi -run '^$' -fuzz FuzzScanResponsesItems -fuzztime 60s
func FuzzScanResponsesItems(f *testing.F) {
	for _, s := range itemsSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkItemsScan(t, data) })
}

// benchItems keeps the benchmark's items on the heap, as rp.items' are.
var benchItems []responsesItem

// BenchmarkDecodeResponsesItems decodes the input of a captured Codex
// follow-up (messages, reasoning, a call and its output), with
// scanResponsesItems (scan) and with json.Unmarshal (json), as rp.items
// did before the fast path.
//
//	go test ./shared/transport/httpapi -run '^$' -bench BenchmarkDecodeResponsesItems -benchmem
func BenchmarkDecodeResponsesItems(b *testing.B) {
	in := codexInputs(b)["shell-2.json"]
	b.Run("codex/scan", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			var items []responsesItem
			if !scanResponsesItems(in, &items) {
				b.Fatal("declined")
			}
			benchItems = items
		}
	})
	b.Run("codex/json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			var items []responsesItem
			if err := json.Unmarshal(in, &items); err != nil {
				b.Fatal(err)
			}
			benchItems = items
		}
	})
}
