package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/providers/sse"
)

// chunkSeeds are chunks the scanner must take, decline, or get right:
// every data line of testdata's streams, and the edges of JSON.
func chunkSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{
		[]byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`),
		[]byte(`{"choices":[{"index":0,"delta":{"content":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"},"logprobs":null,"finish_reason":"stop"}],"usage":null}`),
		[]byte(`{"choices":[{"index":0,"delta":{"content":"héllo ✓"}}],"service_tier":"default","system_fingerprint":"fp"}`),
		[]byte(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2,"accepted_prediction_tokens":0}}}`),
		[]byte(`{"choices":[],"usage":{"prompt_tokens":5,"prompt_cache_hit_tokens":4,"prompt_tokens_details":null}}`),
		[]byte(`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`),
		[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}`),
		[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a"}],"tool_calls":[{"index":1}]}}]}`),
		[]byte(`{"choices":[{"index":1,"delta":{"reasoning_content":"r","reasoning":"s","refusal":"no"}},{"index":0,"delta":{}}]}`),
		[]byte(`{"choices":[{"index":0,"delta":null,"finish_reason":"length"}]}`),
		[]byte(`{"Choices":[{"index":0,"delta":{"content":"x"}}]}`),
		[]byte(`{"choices":[{"Index":1}]}`),
		[]byte(`{"choices":[{"index":0,"delta":{"Content":"x"}}]}`),
		[]byte(`{"choices":[{"index":0}],"choices":[{"index":1}]}`),
		[]byte(`{"choices":null}`),
		[]byte(`{"choices":[null]}`),
		[]byte(`{"choices":[{"index":1.0}]}`),
		[]byte(`{"choices":[{"index":1e0}]}`),
		[]byte(`{"choices":[{"index":"0"}]}`),
		[]byte(`{"choices":[{"index":-3}]}`),
		[]byte(`{"choices":[{"index":99999999999999999999}]}`),
		[]byte(`{"choices":[{"index":01}]}`),
		[]byte(`{"choices":[{"delta":{"content":"\ud800"}}]}`),
		[]byte(`{"choices":[{"delta":{"content":"\ud800\u0041"}}]}`),
		[]byte(`{"choices":[{"delta":{"content":"\x"}}]}`),
		[]byte("{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}"),
		[]byte("{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}"),
		[]byte(`{"choices":[{"delta":{"content":5}}]}`),
		[]byte(`{"error":{"message":"boom","type":"server_error"}}`),
		[]byte(`{"error":"boom","error_type":"validation"}`),
		[]byte(`{"x":{"y":[1,2.5e-3,true,false,null,"s\u0041",{"z":{}}]},"choices":[]}`),
		[]byte(`{"x":[1,]}`),
		[]byte(`{"x":{"a":1,}}`),
		[]byte(`{"x":-}`),
		[]byte(`{"x":1.}`),
		[]byte(`{"x":tru}`),
		[]byte(`{"\u0063hoices":[{"index":1}]}`),
		[]byte(`{"ключ":1,"choices":[]}`),
		[]byte(`{"choices":[]} x`),
		[]byte(`{"choices":[]}  `),
		[]byte(`null`),
		[]byte(`[]`),
		[]byte(`{}`),
		[]byte(``),
		[]byte(`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`),
		[]byte(`{"usage":{"prompt_tokens":1},"usage":null}`),
		[]byte(`{"choices":[{"finish_reason":"stop","finish_reason":null}]}`),
		[]byte(`{"choices":[{"delta":{"tool_calls":null}}]}`),
		[]byte(`{"choices":[{"delta":{"tool_calls":[]}}]}`),
		[]byte(`{"choices":[{"delta":{"tool_calls":[{"function":null}]}}]}`),
		[]byte(`{"service_tier":null,"choices":[]}`),
		[]byte(`{"service_tier":1}`),
	}
	data, err := sse.ReadFiles("testdata/*.sse")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		seeds = append(seeds, []byte(d))
	}
	return seeds
}

// normalChunk is c with empty slices nil, so that a scanned and an
// unmarshalled chunk compare by what they hold.
func normalChunk(c wireChunk) wireChunk {
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	c.Choices = append([]wireChoice(nil), c.Choices...)
	for i := range c.Choices {
		if len(c.Choices[i].Delta.ToolCalls) == 0 {
			c.Choices[i].Delta.ToolCalls = nil
		}
	}
	return c
}

// checkChunk decodes prev then data into one wireChunk, reset between
// them as decodeEvents does, once with decodeChunk and once with
// json.Unmarshal alone, and fails if they differ in error or result.
func checkChunk(t *testing.T, prev, data []byte) {
	t.Helper()
	var fast, slow wireChunk
	_ = json.Unmarshal(prev, &fast)
	_ = json.Unmarshal(prev, &slow)
	fast.reset()
	slow.reset()
	scanned := scanChunk(data, &fast)
	if !scanned {
		fast.reset()
		if json.Unmarshal(data, &fast) != nil {
			return // encoding/json's error, as before
		}
	}
	err := json.Unmarshal(data, &slow)
	if scanned && err != nil {
		t.Fatalf("scanChunk took %q, which encoding/json refuses: %v", data, err)
	}
	if err != nil {
		return
	}
	if f, s := normalChunk(fast), normalChunk(slow); !reflect.DeepEqual(f, s) {
		t.Fatalf("scanned=%v %q after %q:\nfast %+v\njson %+v", scanned, data, prev, f, s)
	}
}

// TestScanChunk checks the seeds, each after every other, and that the
// chunks a stream mostly carries take the fast path.
func TestScanChunk(t *testing.T) {
	seeds := chunkSeeds(t)
	for _, prev := range seeds {
		for _, data := range seeds {
			checkChunk(t, prev, data)
		}
	}
	for _, data := range []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi \"x\"\n"},"logprobs":null,"finish_reason":null}],"system_fingerprint":"fp_1","service_tier":"default","obfuscation":"ab"}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]},"finish_reason":null}]}`,
		`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}}`,
	} {
		var c wireChunk
		if !scanChunk([]byte(data), &c) {
			t.Errorf("scanChunk declined a common chunk: %s", data)
		}
	}
}

// FuzzScanChunk: for any chunk after any other, decodeChunk's result is
// json.Unmarshal's, and scanChunk takes nothing encoding/json refuses.
//
//	go test ./shared/providers/openai -run '^$' -fuzz FuzzScanChunk -fuzztime 60s
func FuzzScanChunk(f *testing.F) {
	seeds := chunkSeeds(f)
	for i, s := range seeds {
		f.Add(seeds[(i+1)%len(seeds)], s)
	}
	f.Fuzz(checkChunk)
}

// responseSeeds are whole completions: testdata's, the chunk seeds (as
// bodies), and the edges of a message.
func responseSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{
		[]byte(`{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"w1 w2 w3 w4 w5","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10},"service_tier":"default","system_fingerprint":"fp"}`),
		[]byte(`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":\"\\u00e9\"}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`),
		[]byte(`{"choices":[{"message":null,"finish_reason":null}]}`),
		[]byte(`{"choices":[{"Message":{"content":"x"}}]}`),
		[]byte(`{"choices":[{"finish_reason":1}]}`),
		[]byte(`{"choices":[],"error":{"message":"boom"}}`),
	}
	files, err := filepath.Glob("testdata/complete_*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return append(seeds, chunkSeeds(t)...)
}

// checkResponse fails if scanResponse takes data that json.Unmarshal
// refuses, or decodes it differently.
func checkResponse(t *testing.T, data []byte) {
	t.Helper()
	var fast, slow wireResponse
	scanned := scanResponse(data, &fast)
	err := json.Unmarshal(data, &slow)
	if !scanned {
		return
	}
	if err != nil {
		t.Fatalf("scanResponse took %q, which encoding/json refuses: %v", data, err)
	}
	if len(fast.Choices) == 0 && len(slow.Choices) == 0 {
		fast.Choices, slow.Choices = nil, nil
	}
	for _, r := range []*wireResponse{&fast, &slow} {
		for i := range r.Choices {
			if len(r.Choices[i].Message.ToolCalls) == 0 {
				r.Choices[i].Message.ToolCalls = nil
			}
		}
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q:\nfast %+v\njson %+v", data, fast, slow)
	}
}

// TestScanResponse checks the seeds, and that a plain completion takes
// the fast path.
func TestScanResponse(t *testing.T) {
	seeds := responseSeeds(t)
	for _, data := range seeds {
		checkResponse(t, data)
	}
	var r wireResponse
	if !scanResponse(seeds[0], &r) || r.Choices[0].Message.Content != "w1 w2 w3 w4 w5" || r.Usage.TotalTokens != 10 {
		t.Errorf("scanResponse declined or misread a plain completion: %+v", r)
	}
}

// FuzzScanResponse: scanResponse's result is json.Unmarshal's wherever it
// takes a body.
//
//	go test ./shared/providers/openai -run '^$' -fuzz FuzzScanResponse -fuzztime 60s
func FuzzScanResponse(f *testing.F) {
	for _, s := range responseSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkResponse)
}
