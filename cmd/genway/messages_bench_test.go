package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// benchAnthropicEvents is a fake Anthropic upstream's stream of a text
// answer of n deltas ("w1", " w2", ...), as Anthropic sends it: message
// start, one text block, message delta with the usage, message stop.
func benchAnthropicEvents(n int) []byte {
	var sb strings.Builder
	sb.WriteString("event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_b","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}` + "\n\n")
	sb.WriteString("event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n")
	for i := 1; i <= n; i++ {
		w := fmt.Sprintf(" w%d", i)
		if i == 1 {
			w = "w1"
		}
		sb.WriteString("event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + w + `"}}` + "\n\n")
	}
	sb.WriteString("event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n")
	sb.WriteString("event: message_delta\n" + fmt.Sprintf(`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, n) + "\n\n")
	sb.WriteString("event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n")
	return []byte(sb.String())
}

// benchClaudeUpstream is a fake Anthropic upstream on loopback that
// streams benchAnthropicEvents at once: 100 deltas when the request's
// max_tokens is 500, else 5.
func benchClaudeUpstream(b *testing.B) *httptest.Server {
	b.Helper()
	short, long := benchAnthropicEvents(5), benchAnthropicEvents(100)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.Contains(string(body), `"max_tokens":500`) {
			w.Write(long)
			return
		}
		w.Write(short)
	}))
}

// BenchmarkMessagesStream measures, through genway serve to a fake
// Anthropic upstream, a Messages API stream (POST /v1/messages, as Claude
// Code and the Anthropic SDKs send it) next to the same answer on
// /v1/chat/completions: the same model (anthropic/claude-agent, priced,
// from agentsCatalog), the same upstream stream, for a short answer (5
// deltas) and a longer one (100). Each runs benchRounds rounds of b.N
// requests at 32 connections, alternating, and reports each one's median
// requests per second and CPU time per request (the whole process: load
// generator, gateway and fake upstream), and the Messages stream's cost
// over chat: the median over rounds of the rate lost and of the CPU time
// added, in percent (the target is at most 10). The upstream's stream is
// also read straight from it, and "gateway-own-cpu" is each one's CPU
// time per request minus that: what the gateway itself adds.
//
//	go test ./cmd/genway -run '^$' -bench MessagesStream -benchtime 4000x
func BenchmarkMessagesStream(b *testing.B) {
	up := benchClaudeUpstream(b)
	defer up.Close()
	srv := startServer(b, b.TempDir(), map[string]string{
		"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": up.URL, "GENWAY_SYNTHETIC": "off",
		"GENWAY_RATE_LIMIT": "1000000000", "GENWAY_CATALOG": agentsCatalog(b), "GENWAY_DEV_CREDITS": "1000000000",
		"GENWAY_USAGE_FLUSH": benchUsageFlush,
	})
	for _, size := range []struct {
		name      string
		maxTokens string
	}{{"5-deltas", "16"}, {"100-deltas", "500"}} {
		b.Run(size.name, func(b *testing.B) {
			msgs := `"messages":[{"role":"user","content":"hello there"}],"max_tokens":` + size.maxTokens + `,"stream":true`
			chat := newLoadClient(srv.base+"/v1/chat/completions", srv.key, `{"model":"anthropic/claude-agent",`+msgs+`}`, true, benchConcurrency)
			chat.first = []byte(`"content":"w1"`)
			messages := newLoadClient(srv.base+"/v1/messages", srv.key, `{"model":"anthropic/claude-agent",`+msgs+`}`, true, benchConcurrency)
			messages.first = []byte(`"text":"w1"`)
			direct := newLoadClient(up.URL+"/v1/messages", "k", `{"model":"claude-sonnet-4-5",`+msgs+`}`, true, benchConcurrency)
			direct.first = messages.first
			n := max(b.N, 200)
			for _, c := range []*loadClient{chat, messages, direct} {
				defer c.tr.CloseIdleConnections()
				c.warm(benchConcurrency)
			}
			b.ResetTimer()
			var cRPS, mRPS, cCPU, mCPU, cOwn, mOwn, lost, extra, extraOwn []float64
			for round := range benchRounds {
				d := direct.run(b, n, benchConcurrency, 0)
				// Each round in the other order, so that neither always
				// runs first.
				var c, m benchResult
				if round%2 == 0 {
					c, m = chat.run(b, n, benchConcurrency, 0), messages.run(b, n, benchConcurrency, 0)
				} else {
					m, c = messages.run(b, n, benchConcurrency, 0), chat.run(b, n, benchConcurrency, 0)
				}
				co, mo := c.cpu-d.cpu, m.cpu-d.cpu
				cRPS, mRPS = append(cRPS, c.rps), append(mRPS, m.rps)
				cCPU, mCPU = append(cCPU, us(c.cpu)), append(mCPU, us(m.cpu))
				cOwn, mOwn = append(cOwn, us(co)), append(mOwn, us(mo))
				lost = append(lost, 100*(1-m.rps/c.rps))
				extra = append(extra, 100*(float64(m.cpu)/float64(c.cpu)-1))
				extraOwn = append(extraOwn, 100*(float64(mo)/float64(co)-1))
			}
			b.StopTimer()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(median(cRPS), "chat-req/s")
			b.ReportMetric(median(mRPS), "messages-req/s")
			b.ReportMetric(median(cCPU), "chat-cpu-µs/req")
			b.ReportMetric(median(mCPU), "messages-cpu-µs/req")
			b.ReportMetric(median(cOwn), "chat-gateway-own-cpu-µs/req")
			b.ReportMetric(median(mOwn), "messages-gateway-own-cpu-µs/req")
			b.ReportMetric(median(lost), "messages-rate-%-below-chat")
			b.ReportMetric(median(extra), "messages-cpu-%-over-chat")
			b.ReportMetric(median(extraOwn), "messages-gateway-own-cpu-%-over-chat")
		})
	}
}

// us is d in microseconds, as a float for a metric.
func us(d time.Duration) float64 { return float64(d.Microseconds()) }
