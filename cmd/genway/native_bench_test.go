package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// benchClaudeStream is a fake Anthropic upstream's stream of n text
// deltas ("w1", " w2", ...), as the Messages API sends one: message_start
// with the input's usage, a ping, one text block, message_delta with the
// output's usage, message_stop.
func benchClaudeStream(n int) []byte {
	var sb strings.Builder
	sb.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-haiku-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1,\"service_tier\":\"standard\"}}}\n\n")
	sb.WriteString("event: ping\ndata: {\"type\":\"ping\"}\n\n")
	sb.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := 1; i <= n; i++ {
		w := fmt.Sprintf(" w%d", i)
		if i == 1 {
			w = "w1"
		}
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + w + "\"}}\n\n")
	}
	sb.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	sb.WriteString(fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":%d}}\n\n", n))
	sb.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return []byte(sb.String())
}

// BenchmarkNativeStream measures, through genway serve over a fake
// Anthropic upstream on loopback that answers every request with the
// same stream, what one answer costs in each of three ways:
// "messages-native" (POST /v1/messages to an Anthropic model: the native
// path, the client's body sent on and the upstream's events relayed),
// "messages-translated" (the same request on a second genway serve with
// GENWAY_NATIVE=off: decoded, translated to the provider's request,
// re-encoded as the Messages API's events) and "chat" (the same answer
// on /v1/chat/completions, which is always translated); each for a short
// answer (5 deltas) and a longer one (100). Each runs benchRounds rounds
// of b.N requests at 32 connections, in turn; it reports each one's median
// requests per second and CPU time per request (the whole process: load
// generator, gateways and fake upstream), and the gateway's own CPU time
// per request (that less the same stream asked of the upstream directly).
// native-own-cpu-%-below-translated is the median over rounds of what the
// native path saves of the translation's own CPU time, and
// <format>-own-cpu-%-over-chat what each Messages path costs over chat
// completions (the target: at most 10).
//
//	go test ./cmd/genway -run '^$' -bench NativeStream -benchtime 2000x
func BenchmarkNativeStream(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"5-deltas", 5}, {"100-deltas", 100}} {
		b.Run(size.name, func(b *testing.B) {
			stream := benchClaudeStream(size.n)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write(stream)
			}))
			defer up.Close()
			env := func(native string) map[string]string {
				return map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": up.URL, "GENWAY_SYNTHETIC": "off",
					"GENWAY_RATE_LIMIT": "1000000000", "GENWAY_DEV_CREDITS": "1000000000", "GENWAY_NATIVE": native,
					"GENWAY_USAGE_FLUSH": benchUsageFlush}
			}
			native, translated := startServer(b, b.TempDir(), env("on")), startServer(b, b.TempDir(), env("off"))
			msgs := `"max_tokens":500,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`
			body := `{"model":"anthropic/claude-haiku-4-5",` + msgs
			formats := []*loadClient{
				newLoadClient(native.base+"/v1/messages", native.key, body, true, benchConcurrency),
				newLoadClient(translated.base+"/v1/messages", translated.key, body, true, benchConcurrency),
				newLoadClient(native.base+"/v1/chat/completions", native.key, body, true, benchConcurrency),
			}
			names := []string{"messages-native", "messages-translated", "chat"}
			formats[0].first, formats[1].first = []byte(`"text":"w1"`), []byte(`"text":"w1"`)
			direct := newLoadClient(up.URL+"/v1/messages", "k", `{"model":"claude-haiku-4-5",`+msgs, true, benchConcurrency)
			direct.first = []byte(`"text":"w1"`)
			n := max(b.N, 200)
			for _, c := range append(formats, direct) {
				defer c.tr.CloseIdleConnections()
				c.warm(benchConcurrency)
			}
			b.ResetTimer()
			rps := make([][]float64, len(formats))
			cpu := make([][]float64, len(formats))
			own := make([][]float64, len(formats))
			var saved []float64
			var overChat [2][]float64
			for range benchRounds {
				d := direct.run(b, n, benchConcurrency, 0)
				var o []time.Duration
				for i, c := range formats {
					res := c.run(b, n, benchConcurrency, 0)
					o = append(o, res.cpu-d.cpu)
					rps[i] = append(rps[i], res.rps)
					cpu[i] = append(cpu[i], float64(res.cpu.Microseconds()))
					own[i] = append(own[i], float64(o[i].Microseconds()))
				}
				saved = append(saved, 100*(1-float64(o[0])/float64(o[1])))
				for i := range 2 {
					overChat[i] = append(overChat[i], 100*(float64(o[i])/float64(o[2])-1))
				}
			}
			b.StopTimer()
			b.ReportMetric(0, "ns/op")
			for i, name := range names {
				b.ReportMetric(median(rps[i]), name+"-req/s")
				b.ReportMetric(median(cpu[i]), name+"-cpu-µs/req")
				b.ReportMetric(median(own[i]), name+"-own-cpu-µs/req")
			}
			b.ReportMetric(median(saved), "native-own-cpu-%-below-translated")
			b.ReportMetric(median(overChat[0]), "native-own-cpu-%-over-chat")
			b.ReportMetric(median(overChat[1]), "translated-own-cpu-%-over-chat")
		})
	}
}
