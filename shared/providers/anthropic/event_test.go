package anthropic

import (
	"strings"
	"testing"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/sse"
	"github.com/genway/genway/shared/rawjson/rawjsontest"
)

// eventSeeds are the data of every event in testdata's streams and the
// edges of an event.
func eventSeeds(t testing.TB) []string {
	seeds := []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello \"world\"\n\u00e9\ud83d\ude00"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type": "ping"}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`,
		`{"type":"message_delta","delta":{"stop_reason":null}}`,
		`{"type":"content_block_delta","index":0,"delta":null}`,
		`{"type":"content_block_delta","delta":{"text":"a"},"delta":{"type":"text_delta"}}`,
		`{"Type":"content_block_delta"}`,
		`{"type":"content_block_delta","delta":{"Text":"a"}}`,
		`{"type":"content_block_delta","index":1.5}`,
		`{"type":"content_block_delta","index":"1"}`,
		`{"type":"content_block_delta","delta":{"text":5}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`{"type":"content_block_delta","delta":{"text":"\ud800"}}`,
		"{\"type\":\"content_block_delta\",\"delta\":{\"text\":\"\xff\"}}",
		`{"type":"content_block_delta"} x`,
		`null`, `[]`, `{}`, ``, `{"extra":{"deep":[1,2,{"x":null}]},"type":"ping"}`,
	}
	data, err := sse.ReadFiles("testdata/*.sse")
	if err != nil {
		t.Fatal(err)
	}
	return append(seeds, data...)
}

// checkEvent fails if scanEvent takes data that json.Unmarshal refuses or
// decodes differently, or declines it without leaving the event zero.
func checkEvent(t *testing.T, data string) {
	t.Helper()
	rawjsontest.Compare(t, "scanEvent", scanEvent, []byte(data))
}

// TestScanEvent checks the seeds, and that the deltas of a stream take
// the fast path.
func TestScanEvent(t *testing.T) {
	for _, data := range eventSeeds(t) {
		checkEvent(t, data)
	}
	var se streamEvent
	if !scanEvent([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`), &se) ||
		se.Delta == nil || se.Delta.Text != "hi" {
		t.Errorf("scanEvent declined or misread a text delta: %+v", se)
	}
}

// FuzzScanEvent: scanEvent's result is json.Unmarshal's wherever it takes
// an event.
//
//	go test ./shared/providers/anthropic -run '^$' -fuzz FuzzScanEvent -fuzztime 60s
func FuzzScanEvent(f *testing.F) {
	for _, s := range eventSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkEvent)
}

// BenchmarkRelayMessages measures relaying (the native Messages path:
// each event read as far as its type and output, and passed on as it
// came) the stream BenchmarkReadStream translates.
//
//	go test ./shared/providers/anthropic -run '^$' -bench RelayMessages -benchmem
func BenchmarkRelayMessages(b *testing.B) {
	body := benchStream()
	p := &Provider{name: "anthropic"}
	emit := func(chat.NativeEvent) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.relayMessages(b.Context(), sse.NewReader(strings.NewReader(body)), emit); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStream is an Anthropic stream of 100 text deltas.
func benchStream() string {
	var sb strings.Builder
	sb.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
	sb.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range 100 {
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" w" + strings.Repeat("x", i%3) + "\"}}\n\n")
	}
	sb.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	sb.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":100}}\n\n")
	sb.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return sb.String()
}

// BenchmarkReadStream measures reading a translated stream of 100 text
// deltas (the events an Anthropic answer streams): the per-stream decoding
// cost of a Claude model behind the chat or Responses API.
//
//	go test ./shared/providers/anthropic -run '^$' -bench ReadStream -benchmem
func BenchmarkReadStream(b *testing.B) {
	body := benchStream()
	p := &Provider{name: "anthropic"}
	w := chat.WriterFunc(func(chat.Delta) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.readStream(b.Context(), strings.NewReader(body), w, ""); err != nil {
			b.Fatal(err)
		}
	}
}
