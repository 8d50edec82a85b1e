package chat_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/rawjson/rawjsontest"
)

// Request bodies of BenchmarkDecodeParams, and common shapes that
// TestScanParams requires to take the fast path.
const (
	shortBody = `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":16}`
	turnsBody = `{"model":"anthropic/claude-haiku-4-5","messages":[` +
		`{"role":"system","content":"You are a helpful assistant. Answer in one short sentence, and say when you do not know."},` +
		`{"role":"user","content":"What is the capital of France?"},` +
		`{"role":"assistant","content":"Paris is the capital of France."},` +
		`{"role":"user","content":"And which river runs through it? Give its length too."}],` +
		`"temperature":0.7,"top_p":1,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"user":"user-1234"}`
	toolsBody = `{"model":"openai/gpt-4o","tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather of a city.",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}],"tool_choice":"auto","parallel_tool_calls":false,` +
		`"messages":[{"role":"developer","content":"Use the tools."},{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18 \u00b0C, sunny"}],"stream":true}`
)

// commonBodies take the fast path.
var commonBodies = []string{
	shortBody, turnsBody, toolsBody,
	`{"model":"synthetic/thinker","stream":true,"reasoning_effort":"low","max_tokens":2,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"nope/nope","stream":true,"n":1,"user":"u","messages":[{"role":"user","content":"x"}]}`,
	`{"model":"","models":["openai/gpt-4o-mini","anthropic/claude-haiku-4-5"],"messages":[{"role":"user","name":"ann","content":"hi"}],"stop":["\n\n","END"],"seed":42,"presence_penalty":-0.5,"frequency_penalty":0.25,"max_completion_tokens":100}`,
	`{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Say \"hi\"\n\u00e9\ud83d\ude00 \u2028 caf\u00e9 é"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object"}}},"temperature":null,"logprobs":false}`,
	` {
	  "model": "openai/gpt-4o-mini",
	  "messages": [ { "role": "user", "content": "hi", "cache_control": {"type": "ephemeral"} } ],
	  "service_tier": "flex", "verbosity": "low", "prompt_cache_key": "k", "unknown": {"a": [1, 2.5e3, true, null]}
	} `,
	`{"model":"openai/gpt-4o-mini","messages":[` + strings.Repeat(`{"role":"user","content":"and then?"},{"role":"assistant","content":"more"},`, 12) +
		`{"role":"user","content":"the end"}]}`,
}

// checkParams fails if ScanParams takes data that json.Unmarshal refuses
// or decodes differently, or declines it without leaving p zero.
func checkParams(t *testing.T, data []byte) (scanned bool) {
	t.Helper()
	return rawjsontest.Compare(t, "ScanParams", chat.ScanParams, data)
}

// paramsSeeds are the common bodies, odd cases around each rule
// json.Unmarshal follows, and the request bodies of testdata (this
// package's and the HTTP edge's, of other APIs: they share fields).
func paramsSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, s := range commonBodies {
		seeds = append(seeds, []byte(s))
	}
	for _, s := range []string{
		`{"model":"a","model":"b","model":null,"stream":true,"stream":null,"temperature":1,"temperature":null,"top_p":0.5,"top_p":0.25}`,
		`{"stream_options":{"include_usage":true},"stream_options":{},"max_tokens":1,"max_tokens":null,"stop":"x","stop":["y"]}`,
		`{"stream_options":{"include_usage":true},"stream_options":null,"stream_options":{"x":1}}`,
		`{"messages":[{"role":"user","content":"a"}],"messages":[{"content":"b"}]}`,
		`{"models":["a","b"],"models":[null]}`,
		`{"messages":[{"role":"user","role":null,"content":"a","content":null,"name":"n","name":null}]}`,
		`{"messages":[null]}`, `{"messages":[]}`, `{"messages":null}`, `{"models":[]}`, `{"models":["a",null,"c"]}`,
		`{"Model":"x"}`, `{"MODEL":"x"}`, `{"messages":[{"Role":"user"}]}`, `{"stream_options":{"Include_Usage":true}}`,
		`{"mod\u0065l":"x"}`, `{"modél":"x"}`, `{"model\u0000":"x"}`, `{"":1,"modelx":2,"id":"chatcmpl-1","kind":"x","VerbosityHint":true,"TopK":3}`,
		`{"model":"\ud800"}`, `{"model":"\udc00\ud800"}`, "{\"model\":\"\xff\"}", "{\"messages\":[{\"content\":\"\xff\"}]}",
		`{"model":"\u00e9\ud83d\ude00\/\b\f\n\r\t\\\""}`, `{"model":"\x"}`,
		`{"seed":1.0}`, `{"seed":1e3}`, `{"seed":-0}`, `{"seed":9223372036854775807}`, `{"seed":9223372036854775808}`,
		`{"seed":-9223372036854775808}`, `{"n":"1"}`, `{"n":true}`, `{"top_logprobs":-1}`,
		`{"temperature":1e400}`, `{"temperature":1e-400}`, `{"temperature":-0}`, `{"temperature":0.1000000000000000055511151231257827}`,
		`{"temperature":"1"}`, `{"temperature":01}`, `{"temperature":1.}`, `{"temperature":-}`,
		`{"stream":1}`, `{"stream":"true"}`, `{"stream":tru}`, `{"stream":truex}`, `{"logprobs":null}`, `{"store":true}`,
		`{"reasoning_effort":null}`, `{"reasoning_effort":"high"}`, `{"reasoning_effort":7}`,
		`{"logit_bias":{"1":2}}`, `{"metadata":{"a":"b"}}`, `{"tools":null}`, `{"tools":[]}`, `{"tools":[null]}`,
		`{"tools":[{"function":null}]}`, `{"tools":[{"function":{"name":"a"},"function":{"description":"b"}}]}`,
		`{"tools":[{"function":{"name":"a"},"function":null}]}`, `{"tools":[{"type":"function"}],"tools":[]}`,
		`{"response_format":{"type":"json_object"},"response_format":{"json_schema":{"name":"x"}}}`, `{"response_format":null}`,
		`{"response_format":{"json_schema":null}}`, `{"response_format":[]}`,
		`{"messages":[{"tool_calls":null}]}`, `{"messages":[{"tool_calls":[]}]}`, `{"messages":[{"tool_calls":[null]}]}`,
		`{"messages":[{"tool_calls":[{"function":null}]}]}`, `{"messages":[{"tool_calls":[{"function":{"name":"a"},"function":{"arguments":"{}"}}]}]}`,
		`{"messages":[{"tool_calls":[{"id":"a"}],"tool_calls":[{"type":"function"}]}]}`,
		`{"messages":[{"refusal":null},{"refusal":"no"},{"refusal":1}]}`, `{"messages":[{"thoughts":[1],"tool_error":true}]}`,
		`{"functions":[],"function_call":"auto","audio":null,"prediction":{},"web_search_options":{},"modalities":["text"]}`,
		`{"model":"x"} `, `{"model":"x"} {}`, `{"model":"x",}`, `{"model" "x"}`, `{"model":"x"`, `{`, `[]`, `null`, `"x"`, ``, ` `,
		`{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
		`{"messages":[{"content":` + strings.Repeat(`{"a":`, 63) + `1` + strings.Repeat(`}`, 63) + `}]}`,
		"\xef\xbb\xbf{}", "{\"model\":\"x\"\u00a0}", "{\"model\":\"a\tb\"}",
	} {
		seeds = append(seeds, []byte(s))
	}
	for _, n := range []int{7, 8, 9} { // around the messages ScanParams reads on the stack
		seeds = append(seeds, []byte(`{"model":"m","messages":[`+strings.Repeat(`{"role":"user","content":"x"},`, n)+`{"role":"assistant","content":"y"}]}`))
	}
	var files []string
	for _, pattern := range []string{"testdata/*.json", "../transport/httpapi/testdata/*/*.json", "../transport/httpapi/testdata/*/*/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// TestScanParams checks the seeds, and that the common shapes take the
// fast path, with raw members that an append copies.
func TestScanParams(t *testing.T) {
	for _, data := range paramsSeeds(t) {
		checkParams(t, data)
	}
	for _, body := range commonBodies {
		if !checkParams(t, []byte(body)) {
			t.Errorf("ScanParams declined a common request: %s", body)
			continue
		}
		var p chat.Params
		chat.ScanParams([]byte(body), &p)
		for _, m := range p.Messages {
			if cap(m.Content) != len(m.Content) {
				t.Errorf("ScanParams(%s): content %s has capacity %d; want its length", body, m.Content, cap(m.Content))
			}
		}
	}
}

// TestScanParamsDeclines: what ScanParams leaves to encoding/json.
func TestScanParamsDeclines(t *testing.T) {
	for _, body := range []string{
		`{"Model":"x"}`, `{"mod\u0065l":"x"}`, `{"logit_bias":{"1":2}}`, `{"metadata":{}}`,
		`{"messages":[],"messages":[]}`, `{"messages":[null]}`, `{"model":"\ud800"}`, "{\"model\":\"\xff\"}",
		`{"seed":1.5}`, `{"temperature":1e400}`, `{"max_tokens":1`, `null`, ``,
	} {
		var p chat.Params
		if chat.ScanParams([]byte(body), &p) {
			t.Errorf("ScanParams(%s) = true; want false", body)
		}
	}
}

// TestScanParamsFields sets each field that json.Unmarshal decodes into
// Params, at every depth (found by reflection, so that a field added to
// Params is checked too), and requires ScanParams to take it and decode
// it as json.Unmarshal does: a field the fast path does not know would be
// skipped, and lost. The maps are left to encoding/json.
func TestScanParamsFields(t *testing.T) {
	declined := map[string]bool{`{"logit_bias":{"k":1.5}}`: true, `{"metadata":{"k":"x"}}`: true}
	for _, body := range rawjsontest.FieldBodies(reflect.TypeFor[chat.Params](), func(member string) string { return member }) {
		if checkParams(t, []byte(body)) == declined[body] {
			t.Errorf("ScanParams(%s) took it: %v; want %v", body, !declined[body], !declined[body])
		}
	}
}

// FuzzScanParams: whatever ScanParams takes, json.Unmarshal takes and
// decodes to the same Params; what it declines, it leaves zero.
//
//	go test ./shared/chat -run '^$' -fuzz FuzzScanParams -fuzztime 60s
func FuzzScanParams(f *testing.F) {
	for _, s := range paramsSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkParams(t, data) })
}

// benchParams keeps the benchmark's Params on the heap, as the HTTP
// edge's are.
var benchParams *chat.Params

// BenchmarkDecodeParams decodes a one-message request and a multi-turn
// one (a system prompt, sampling fields, a stream) and one with a tool
// turn, with ScanParams and with json.Unmarshal.
//
//	go test ./shared/chat -run '^$' -bench BenchmarkDecodeParams -benchmem
func BenchmarkDecodeParams(b *testing.B) {
	for _, body := range []struct{ name, data string }{{"short", shortBody}, {"turns", turnsBody}, {"tools", toolsBody}} {
		data := []byte(body.data)
		b.Run(body.name+"/scan", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				p := new(chat.Params)
				if !chat.ScanParams(data, p) {
					b.Fatal("declined")
				}
				benchParams = p
			}
		})
		b.Run(body.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				p := new(chat.Params)
				if err := json.Unmarshal(data, p); err != nil {
					b.Fatal(err)
				}
				benchParams = p
			}
		})
	}
}
