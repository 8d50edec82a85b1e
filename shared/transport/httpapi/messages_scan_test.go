package httpapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/rawjson/rawjsontest"
)

// Request bodies of BenchmarkDecodeMessages, and common shapes that
// TestScanMessagesRequest requires to take the fast path.
const (
	msgShortBody = `{"model":"claude-sonnet-5","max_tokens":64,"messages":[{"role":"user","content":"say hi"}]}`
	msgToolsBody = `{"model":"claude-sonnet-5","max_tokens":1024,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"system":[{"type":"text","text":"You are a careful assistant.","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"get_weather","description":"Get the weather of a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],` +
		`"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"metadata":{"user_id":"u-1"},` +
		`"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Look it up.","signature":"sig"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18 \u00b0C, sunny"}]}]}`
)

// commonMessagesBodies take the fast path.
var commonMessagesBodies = []string{
	msgShortBody, msgToolsBody,
	`{"model":"claude-haiku-4-5","models":["a","b"],"max_tokens":16,"stop_sequences":["\n\nHuman:"],"temperature":0.7,"top_p":0.9,"top_k":40,"system":"Be brief."` +
		`,"messages":[{"role":"user","content":"hi","output_config":{"effort":"low"}}],"context_management":{"edits":[]},"cache_control":{"type":"ephemeral"}}`,
	`{"model":"m","thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"medium","format":{"type":"json_schema","schema":{"type":"object"}}},` +
		`"tools":[{"type":"custom","name":"t","description":"d","input_schema":{},"strict":true,"defer_loading":true,"cache_control":{"type":"ephemeral"}},{"type":"web_search_20250305","name":"web_search"}],` +
		`"tool_choice":{"type":"tool","name":"t"},"messages":[{"role":"user","content":"x"}],"container":null,"mcp_servers":[]}`,
}

// checkMessagesScan fails if scanMessagesRequest takes data that
// json.Unmarshal refuses or decodes differently (body is set by neither),
// or declines it without leaving mr zero.
func checkMessagesScan(t *testing.T, data []byte) (scanned bool) {
	t.Helper()
	return rawjsontest.Compare(t, "scanMessagesRequest", scanMessagesRequest, data)
}

// messagesSeeds are the common bodies, odd cases around each rule
// json.Unmarshal follows, and the bodies of testdata/messages (Claude
// Code's and the SDK's).
func messagesSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, s := range commonMessagesBodies {
		seeds = append(seeds, []byte(s))
	}
	for _, s := range []string{
		`{"model":"a","model":"b","model":null,"stream":true,"stream":null,"temperature":1,"temperature":null,"top_p":0.5,"top_p":0.25,"top_k":1,"top_k":null}`,
		`{"max_tokens":1,"max_tokens":null,"system":"x","system":[{"type":"text"}],"container":{},"mcp_servers":null}`,
		`{"messages":[{"role":"user","content":"a"}],"messages":[{"content":"b"}]}`, `{"stop_sequences":[],"stop_sequences":["x"]}`,
		`{"models":["a","b"],"models":[null]}`, `{"tools":[],"tools":null}`, `{"stop_sequences":["a",null,"c"]}`,
		`{"messages":[{"role":"user","role":null,"content":"a","content":null,"output_config":{"effort":"low"}}]}`,
		`{"messages":[null]}`, `{"messages":[]}`, `{"messages":null}`, `{"messages":[1]}`, `{"messages":{}}`, `{"models":[]}`,
		`{"metadata":null}`, `{"metadata":{}}`, `{"metadata":{"user_id":"a"},"metadata":{"x":1}}`, `{"metadata":{"user_id":"a"},"metadata":null}`,
		`{"metadata":{"User_ID":"a"}}`, `{"metadata":{"user_id":1}}`, `{"metadata":[]}`,
		`{"thinking":{"type":"enabled","budget_tokens":1024},"thinking":{"display":"summarized"}}`, `{"thinking":{"budget_tokens":null}}`,
		`{"thinking":{"budget_tokens":1.5}}`, `{"thinking":{"budget_tokens":1e3}}`, `{"thinking":{"budget_tokens":9223372036854775808}}`,
		`{"thinking":null}`, `{"thinking":{"type":"enabled"},"thinking":null,"thinking":{"Type":"x"}}`,
		`{"output_config":{"effort":"xhigh","format":{"type":"json_schema","schema":null}},"output_config":{"format":{"schema":{}}}}`,
		`{"output_config":{"format":null}}`, `{"output_config":{"format":{"x":1}},"output_config":{"format":null}}`, `{"output_config":7}`,
		`{"tools":[null]}`, `{"tools":[{"strict":null,"defer_loading":null}]}`, `{"tools":[{"strict":true,"strict":false}]}`,
		`{"tools":[{"strict":"true"}]}`, `{"tools":[{"Name":"x"}]}`, `{"tools":[{"input_schema":null}]}`,
		`{"tool_choice":{"type":"any"},"tool_choice":{"name":"n"}}`, `{"tool_choice":null}`, `{"tool_choice":"auto"}`,
		`{"tool_choice":{"disable_parallel_tool_use":null}}`, `{"cache_control":null}`,
		`{"Model":"x"}`, `{"MODEL":"x"}`, `{"messages":[{"Role":"user"}]}`, `{"max_Tokens":1}`, `{"mcp_Servers":[]}`,
		`{"mod\u0065l":"x"}`, `{"modél":"x"}`, `{"model\u0000":"x"}`, `{"":1,"modelx":2,"body":"x","Body":1,"service_tier":"auto","speed":"fast"}`,
		`{"model":"\ud800"}`, `{"model":"\udc00\ud800"}`, "{\"model\":\"\xff\"}", "{\"messages\":[{\"content\":\"\xff\"}]}",
		"{\"messages\":[{\"role\":\"\xff\"}]}", `{"model":"\u00e9\ud83d\ude00\/\b\f\n\r\t\\\""}`, `{"model":"\x"}`,
		`{"top_k":1.0}`, `{"top_k":-0}`, `{"top_k":9223372036854775807}`, `{"top_k":-9223372036854775808}`, `{"top_k":"1"}`, `{"top_k":true}`,
		`{"temperature":1e400}`, `{"temperature":1e-400}`, `{"temperature":-0}`, `{"temperature":0.1000000000000000055511151231257827}`,
		`{"temperature":"1"}`, `{"temperature":01}`, `{"temperature":1.}`, `{"temperature":-}`,
		`{"stream":1}`, `{"stream":"true"}`, `{"stream":tru}`, `{"stream":truex}`,
		`{"model":"x"} `, `{"model":"x"} {}`, `{"model":"x",}`, `{"model" "x"}`, `{"model":"x"`, `{`, `[]`, `null`, `"x"`, ``, ` `,
		`{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
		`{"messages":[{"content":` + strings.Repeat(`{"a":`, 63) + `1` + strings.Repeat(`}`, 63) + `}]}`,
		"\xef\xbb\xbf{}", "{\"model\":\"x\"\u00a0}", "{\"model\":\"a\tb\"}",
	} {
		seeds = append(seeds, []byte(s))
	}
	files, err := filepath.Glob("testdata/messages/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured requests: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		seeds = append(seeds, c.Body)
	}
	return seeds
}

// TestScanMessagesRequest checks the seeds, and that the common shapes
// and every captured body take the fast path.
func TestScanMessagesRequest(t *testing.T) {
	for _, data := range messagesSeeds(t) {
		checkMessagesScan(t, data)
	}
	for name, c := range loadCaptured(t) {
		if body := c.with("claude-sonnet-5"); !checkMessagesScan(t, []byte(body)) {
			t.Errorf("scanMessagesRequest declined the captured %s", name)
		}
	}
	for _, body := range commonMessagesBodies {
		if !checkMessagesScan(t, []byte(body)) {
			t.Errorf("scanMessagesRequest declined a common request: %s", body)
			continue
		}
		var mr messagesRequest
		scanMessagesRequest([]byte(body), &mr)
		for _, m := range mr.Messages {
			if cap(m.Content) != len(m.Content) {
				t.Errorf("scanMessagesRequest(%s): content %s has capacity %d; want its length", body, m.Content, cap(m.Content))
			}
		}
	}
}

// TestScanMessagesRequestDeclines: what scanMessagesRequest leaves to
// encoding/json.
func TestScanMessagesRequestDeclines(t *testing.T) {
	for _, body := range []string{
		`{"Model":"x"}`, `{"mod\u0065l":"x"}`, `{"messages":[{"Content":"x"}]}`, `{"messages":[],"messages":[]}`,
		`{"messages":[null]}`, `{"tools":[null]}`, `{"model":"\ud800"}`, "{\"model\":\"\xff\"}",
		`{"top_k":1.5}`, `{"temperature":1e400}`, `{"max_tokens":1`, `null`, ``,
	} {
		var mr messagesRequest
		if scanMessagesRequest([]byte(body), &mr) {
			t.Errorf("scanMessagesRequest(%s) = true; want false", body)
		}
	}
}

// TestScanMessagesRequestFields sets each field that json.Unmarshal
// decodes into messagesRequest, at every depth (found by reflection, so
// that a field added to it is checked too), and requires
// scanMessagesRequest to take it and decode it as json.Unmarshal does: a
// field the fast path does not know would be skipped, and lost.
func TestScanMessagesRequestFields(t *testing.T) {
	for _, body := range rawjsontest.FieldBodies(reflect.TypeFor[messagesRequest](), func(member string) string { return member }) {
		if !checkMessagesScan(t, []byte(body)) {
			t.Errorf("scanMessagesRequest(%s) declined it; want it taken", body)
		}
	}
}

// FuzzScanMessagesRequest: whatever scanMessagesRequest takes,
// json.Unmarshal takes and decodes to the same messagesRequest; what it
// declines, it leaves zero.
//
//	go test ./shared/transport/httpapi -run '^$' -fuzz FuzzScanMessagesRequest -fuzztime 60s
func FuzzScanMessagesRequest(f *testing.F) {
	for _, s := range messagesSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkMessagesScan(t, data) })
}

// benchMessages keeps the benchmark's request on the heap, as
// decodeMessages' is.
var benchMessages *messagesRequest

// BenchmarkDecodeMessages decodes a one-turn request, one with tools and
// a tool turn, and Claude Code's captured first request, with
// scanMessagesRequest and with json.Unmarshal.
//
//	go test ./shared/transport/httpapi -run '^$' -bench BenchmarkDecodeMessages -benchmem
func BenchmarkDecodeMessages(b *testing.B) {
	raw, err := os.ReadFile("testdata/messages/claude-baseline.json")
	if err != nil {
		b.Fatal(err)
	}
	var c struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		b.Fatal(err)
	}
	for _, body := range []struct{ name, data string }{{"short", msgShortBody}, {"tools", msgToolsBody}, {"claude-code", string(c.Body)}} {
		data := []byte(body.data)
		b.Run(body.name+"/scan", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				mr := new(messagesRequest)
				if !scanMessagesRequest(data, mr) {
					b.Fatal("declined")
				}
				benchMessages = mr
			}
		})
		b.Run(body.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				mr := new(messagesRequest)
				if err := json.Unmarshal(data, mr); err != nil {
					b.Fatal(err)
				}
				benchMessages = mr
			}
		})
	}
}
