package openai

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/jsonscan"
)

// chunkSamples are chunks as OpenAI-compatible servers send them, and
// inputs that the fast path must leave to encoding/json.
var chunkSamples = []struct {
	data string
	fast bool // decodeChunk's own parser handles it
}{
	{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`, true},
	{`{"id":"x","choices":[{"index":0,"delta":{"content":"Hello \"world\"\n\u00e9\ud83d\ude00 \/ \t\b\f\r\\"},"finish_reason":null}]}`, true},
	{`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, true},
	{`{"id":"x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, true},
	{` { "choices" : [ { "index" : 1 , "delta" : { "reasoning_content" : "hm" , "reasoning" : "mm" } } , null ] } `, true},
	{`{"choices":[{"index":0,"delta":{"content":"日本語 🙂","tool_calls":[{"index":0,"id":"c","function":{"arguments":"{\"a\":[1,2.5e-3,-0,true,false,null]}"}}]}}],"x":[[],{},"",-1.5E+10]}`, true},
	{`{"choices":null,"usage":null,"error":null}`, true},
	{`{}`, true},
	{`{"Choices":[{"index":0,"delta":{"content":"case"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"CONTENT":"case"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"con\u0074ent":"escaped key"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`, false},
	{`{"choices":[{"index":1.0,"delta":{}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":5}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"lone \ud83d"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"bad utf-8 ` + "\xff" + `"}}]}`, false},
	{`{"error":{"message":"overloaded"}}`, false},
	{`{"choices":[}`, false},
	{`{"choices":[{"index":0}]} trailing`, false},
	{`[]`, false},
	{`null`, false},
	{``, false},
}

func TestDecodeChunk(t *testing.T) {
	for _, tt := range chunkSamples {
		t.Run(tt.data, func(t *testing.T) {
			var got, want wireChunk
			p := wireParser{jsonscan.Scanner{Buf: []byte(tt.data)}}
			fast := p.chunk(&got)
			if p.WS(); p.Pos != len(p.Buf) {
				fast = false
			}
			if fast != tt.fast {
				t.Errorf("wireParser.chunk(%q) handled = %v; want %v", tt.data, fast, tt.fast)
			}
			got = wireChunk{}
			err := decodeChunk([]byte(tt.data), &got)
			wantErr := json.Unmarshal([]byte(tt.data), &want)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("decodeChunk(%q) error = %v; want %v", tt.data, err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("decodeChunk(%q) = %+v; want %+v", tt.data, got, want)
			}
		})
	}
}

// FuzzDecodeChunk checks decodeChunk against encoding/json on arbitrary
// input: the same error, or the same value.
func FuzzDecodeChunk(f *testing.F) {
	for _, tt := range chunkSamples {
		f.Add([]byte(tt.data))
	}
	files, _ := filepath.Glob("testdata/*.sse")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				f.Add([]byte(data))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want wireChunk
		err := decodeChunk(data, &got)
		wantErr := json.Unmarshal(data, &want)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("decodeChunk(%q) error = %v; want %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("decodeChunk(%q) = %+v; want %+v", data, got, want)
		}
	})
}

// responseSamples are non-streamed response bodies.
var responseSamples = []struct {
	data string
	fast bool
}{
	{`{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"w1 w2","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":0}},"service_tier":"default","system_fingerprint":null}`, true},
	{`{"choices":[{"message":{"content":null,"reasoning_content":"why\n","reasoning":"\u00e9"},"finish_reason":"length"},{"message":null,"finish_reason":null}],"usage":null,"error":null}`, true},
	{`{"choices":[]}`, true},
	{`{"error":{"message":"nope","type":"invalid_request_error"}}`, false},
	{`{"choices":[{"Message":{"content":"x"}}]}`, false},
	{`{"choices":[{"message":{"content":"x"},"finish_reason":7}]}`, false},
	{`{"choices":[{"message":{"content":"x"}}],"usage":{"total_tokens":1e3}}`, false},
	{`{"choices":[{"message":{"content":"x"}}]`, false},
}

func TestDecodeResponse(t *testing.T) {
	for _, tt := range responseSamples {
		t.Run(tt.data, func(t *testing.T) {
			var got, want wireResponse
			p := wireParser{jsonscan.Scanner{Buf: []byte(tt.data)}}
			fast := p.response(&got)
			if p.WS(); p.Pos != len(p.Buf) {
				fast = false
			}
			if fast != tt.fast {
				t.Errorf("wireParser.response(%q) handled = %v; want %v", tt.data, fast, tt.fast)
			}
			got = wireResponse{}
			err := decodeResponse([]byte(tt.data), &got)
			wantErr := json.Unmarshal([]byte(tt.data), &want)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("decodeResponse(%q) error = %v; want %v", tt.data, err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, want) {
				t.Errorf("decodeResponse(%q) = %+v; want %+v", tt.data, got, want)
			}
		})
	}
}

// FuzzDecodeResponse checks decodeResponse against encoding/json.
func FuzzDecodeResponse(f *testing.F) {
	for _, tt := range responseSamples {
		f.Add([]byte(tt.data))
	}
	for _, tt := range chunkSamples {
		f.Add([]byte(strings.ReplaceAll(tt.data, `"delta"`, `"message"`)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want wireResponse
		err := decodeResponse(data, &got)
		wantErr := json.Unmarshal(data, &want)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("decodeResponse(%q) error = %v; want %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("decodeResponse(%q) = %+v; want %+v", data, got, want)
		}
	})
}

// TestStreamReusesReader runs streams one after another on one Provider,
// whose pooled SSE reader must start each stream afresh, also after a
// stream that failed in the middle of an event.
func TestStreamReusesReader(t *testing.T) {
	up := &upstream{header: map[string]string{"Content-Type": "text/event-stream"}}
	srv := httptest.NewServer(up)
	defer srv.Close()
	p := New(Config{Name: "openai", BaseURL: srv.URL, APIKey: "k"})
	req := &chat.Request{Model: model(t, "openai/gpt-4o-mini"), Messages: []chat.Message{{Role: "user", Parts: []chat.Part{{Text: "x"}}}}}
	for _, tt := range []struct {
		body string
		want []chat.Delta
		ok   bool
	}{
		{fixture(t, "stream_basic.sse"), []chat.Delta{{Content: "Hello"}, {Content: " there"}}, true},
		{"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"ind", []chat.Delta{{Content: "Hi"}}, false},
		{fixture(t, "stream_basic.sse"), []chat.Delta{{Content: "Hello"}, {Content: " there"}}, true},
		{fixture(t, "stream_garbage.sse"), []chat.Delta{{Content: "Hi"}}, false},
		{fixture(t, "stream_reasoning.sse"), []chat.Delta{{Reasoning: "Think"}, {Reasoning: " hard."}, {Content: "42"}}, true},
	} {
		up.body = tt.body
		var got []chat.Delta
		_, err := p.Stream(context.Background(), req, func(d chat.Delta) error { got = appendDelta(got, d); return nil })
		if (err == nil) != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Stream(%.30q...) = %+v, %v; want %+v, ok %v", tt.body, got, err, tt.want, tt.ok)
		}
	}
}
