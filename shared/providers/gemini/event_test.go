package gemini

import (
	"fmt"
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
		`{"candidates": [{"content": {"parts": [{"text": "Hello \"world\"\n\u00e9"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 2,"totalTokenCount": 7},"modelVersion": "gemini-2.5-flash","responseId": "abc"}`,
		`{"candidates":[{"content":{"parts":[{"text":"hmm","thought":true},{"text":"ok","thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"a":1}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"content":{"role":"model"}}]}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"}],"parts":[{"text":"b"}]}}]}`,
		`{"candidates":[{"content":null,"finishReason":"SAFETY","safetyRatings":[{"category":"x","probability":"HIGH"}]}]}`,
		`{"candidates":[{"content":{"parts":null}}]}`,
		`{"candidates":[{"content":{"parts":[null]}}]}`,
		`{"candidates":null}`,
		`{"candidates":[],"candidates":[]}`,
		`{"candidates":[{"Content":{}}]}`,
		`{"candidates":[{"content":{"parts":[{"Text":"a"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"thought":"yes"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"thought":null,"text":null}]}}]}`,
		`{"usageMetadata":{"promptTokenCount":1.5}}`,
		`{"usageMetadata":null,"responseId":null}`,
		`{"usageMetadata":{"promptTokenCount":1},"usageMetadata":{"totalTokenCount":2}}`,
		`{"promptFeedback":{"blockReason":"SAFETY"}}`,
		`{"error":{"code":429,"message":"exhausted","status":"RESOURCE_EXHAUSTED"}}`,
		`null`, `[]`, `{}`, ``, `{"candidates":[]} x`,
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

// TestScanEvent checks the seeds, and that a text event takes the fast
// path.
func TestScanEvent(t *testing.T) {
	seeds := eventSeeds(t)
	for _, data := range seeds {
		checkEvent(t, data)
	}
	var g generateResponse
	if !scanEvent([]byte(seeds[0]), &g) || len(g.Candidates) != 1 || g.Candidates[0].Content.Parts[0].Text == "" || g.UsageMetadata.TotalTokenCount != 7 {
		t.Errorf("scanEvent declined or misread a text event: %+v", g)
	}
}

// FuzzScanEvent: scanEvent's result is json.Unmarshal's wherever it takes
// an event.
//
//	go test ./shared/providers/gemini -run '^$' -fuzz FuzzScanEvent -fuzztime 60s
func FuzzScanEvent(f *testing.F) {
	for _, s := range eventSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkEvent)
}

// BenchmarkReadStream measures reading a translated stream of 100 text
// events (what Gemini streams for an answer): the per-stream decoding
// cost of a Gemini model behind the chat or Responses API.
//
//	go test ./shared/providers/gemini -run '^$' -bench ReadStream -benchmem
func BenchmarkReadStream(b *testing.B) {
	var sb strings.Builder
	for i := range 100 {
		sb.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": " w` + strings.Repeat("x", i%3) + `"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": ` + fmt.Sprint(i+1) + `,"totalTokenCount": ` + fmt.Sprint(i+6) + `},"modelVersion": "gemini-2.5-flash","responseId": "resp_1"}` + "\r\n\r\n")
	}
	sb.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": ""}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 5,"candidatesTokenCount": 100,"totalTokenCount": 105},"modelVersion": "gemini-2.5-flash","responseId": "resp_1"}` + "\r\n\r\n")
	body := sb.String()
	p := &Provider{name: "gemini"}
	w := chat.WriterFunc(func(chat.Delta) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.readStream(b.Context(), strings.NewReader(body), w); err != nil {
			b.Fatal(err)
		}
	}
}
