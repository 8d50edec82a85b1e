package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/providers/upstreams"
)

// benchConcurrency is the number of concurrent client connections.
const benchConcurrency = 32

// benchChunk is one content chunk of the fake upstream's stream.
func benchChunk(content string) string {
	return `data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}` + "\n\n"
}

// benchUpstream is a fake OpenAI server on loopback answering every request
// at once with a fixed completion, or a fixed stream of a role chunk, five
// content chunks, a finish chunk, a usage chunk and [DONE], as OpenAI sends
// them with stream_options.include_usage.
func benchUpstream(b *testing.B) *httptest.Server {
	b.Helper()
	complete := []byte(`{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"w1 w2 w3 w4 w5"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`)
	stream, toolStream := benchStream(5, false), benchStream(5, true)
	// A longer answer, asked for with max_tokens 500: 100 deltas.
	longStream, longToolStream := benchStream(100, false), benchStream(100, true)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		long := bytes.Contains(body, []byte(`"max_completion_tokens":500`))
		switch {
		case bytes.Contains(body, []byte(`"tools"`)):
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(map[bool][]byte{false: toolStream, true: longToolStream}[long])
		case bytes.Contains(body, []byte(`"stream":true`)):
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(map[bool][]byte{false: stream, true: longStream}[long])
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write(complete)
		}
	}))
}

// benchStream is the fake upstream's stream of n deltas ("w1", " w2", ...),
// as OpenAI sends them with stream_options.include_usage: a role chunk,
// the content chunks (or, with tool, one tool call whose arguments come
// in n pieces), a finish chunk, a usage chunk and [DONE].
func benchStream(n int, tool bool) []byte {
	var sb strings.Builder
	if tool {
		sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}]}` + "\n\n")
	} else {
		sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	}
	for i := 1; i <= n; i++ {
		w := fmt.Sprintf(" w%d", i)
		if i == 1 {
			w = "w1"
		}
		if tool {
			sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + w + `"}}]},"finish_reason":null}]}` + "\n\n")
		} else {
			sb.WriteString(benchChunk(w))
		}
	}
	finish := "stop"
	if tool {
		finish = "tool_calls"
	}
	sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"` + finish + `"}]}` + "\n\n")
	sb.WriteString(fmt.Sprintf(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`, n, n+5) + "\n\n")
	sb.WriteString("data: [DONE]\n\n")
	return []byte(sb.String())
}

// benchResult is one measured phase.
type benchResult struct {
	rps      float64
	p50, p99 time.Duration // latency (non-stream) or time to first content (stream)
	cpu      time.Duration // process CPU time (user + system) per request
	allocs   float64       // heap allocations of the process per request
}

// cpuTime returns the CPU time this process has used. It measures the
// cost of a request without counting other processes, which on a shared
// machine skew requests per second and latency (compare runs made under
// similar load: an idle machine lets the Go scheduler spin, which adds
// CPU time).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadClient sends benchmark requests to one URL over its own pool of
// keep-alive connections.
type loadClient struct {
	url, body string
	key       string // API key sent as a bearer token
	stream    bool
	first     []byte // marks the first delta of a stream; firstContent if nil
	tr        *http.Transport
	client    *http.Client
}

func newLoadClient(url, key, body string, stream bool, conns int) *loadClient {
	tr := &http.Transport{MaxIdleConns: 2 * conns, MaxIdleConnsPerHost: 2 * conns}
	return &loadClient{url: url, key: key, body: body, stream: stream, tr: tr, client: &http.Client{Transport: tr}}
}

// firstContent marks the first content delta of the fake upstream's stream.
var firstContent = []byte(`"content":"w1"`)

// one sends a request and returns when it was answered (non-stream) or
// when the first content delta arrived (stream; the rest is drained). It
// allocates no more than an ordinary client would: the load generator's
// own cost counts in the direct and the gateway rates alike, so a heavy
// one would flatter the gateway's share.
func (c *loadClient) one() (time.Time, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(c.body))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.client.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, &httpStatusError{resp.StatusCode}
	}
	if !c.stream {
		_, err := io.Copy(io.Discard, resp.Body)
		return time.Now(), err
	}
	var first time.Time
	marker := c.first
	if marker == nil {
		marker = firstContent
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if first.IsZero() && bytes.Contains(sc.Bytes(), marker) {
			first = time.Now()
		}
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	if first.IsZero() {
		return time.Time{}, errors.New("stream without the first content delta")
	}
	return first, nil
}

// warm opens conns connections.
func (c *loadClient) warm(conns int) {
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.one() }()
	}
	wg.Wait()
}

// run sends n requests over conns connections. With interval 0 it is a
// closed loop: each connection sends its next request as soon as the last
// is answered, so the phase runs at the target's saturation rate and
// latency is mostly queueing (Little's law: conns / rate). With interval
// > 0 it is an open loop: requests are sent on a fixed schedule, one every
// interval across all connections (a free connection takes the next slot),
// so the target is not saturated and latency is its own work. Latency is
// measured from the actual send: a late timer wake-up of the sender is not
// the target's.
func (c *loadClient) run(b *testing.B, n, conns int, interval time.Duration) benchResult {
	b.Helper()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	var mem runtime.MemStats
	if interval == 0 {
		benchSettle()
	}
	runtime.ReadMemStats(&mem)
	mallocs0 := mem.Mallocs
	start, cpu0 := time.Now(), cpuTime()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if interval > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
				}
				sent := time.Now()
				done, err := c.one()
				if err != nil {
					failed.Add(1)
					continue
				}
				lat[i] = done.Sub(sent)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if interval == 0 {
		benchSettle()
	}
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&mem)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d requests to %s failed", f, n, c.url)
	}
	slices.Sort(lat)
	return benchResult{
		rps:    float64(n) / elapsed.Seconds(),
		p50:    lat[n/2],
		p99:    lat[min(n-1, n*99/100)],
		cpu:    cpu / time.Duration(n),
		allocs: float64(mem.Mallocs-mallocs0) / float64(n),
	}
}

// benchSettle lets what a closed-loop round leaves behind finish on the
// round's account, and the next round start clean: it waits out the
// servers' deferred writes (longer than benchUsageFlush, and than the
// limited keys' writes behind) and collects the garbage. run calls it
// before a round and, counting its CPU time, after it: a target's round
// is charged its own records' writes and the collection of its own
// garbage, none of another target's (rounds of a few hundred
// milliseconds would otherwise carry half of the previous round's
// flush).
func benchSettle() {
	time.Sleep(benchSettleWait)
	runtime.GC()
}

// benchSettleWait is how long benchSettle waits for deferred writes.
const benchSettleWait = 150 * time.Millisecond

// median returns the median of xs (xs is sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

type httpStatusError struct{ status int }

func (e *httpStatusError) Error() string { return http.StatusText(e.status) }

// benchRounds is how many times each saturation phase runs, alternating
// targets, so that a slow spell of a shared machine hits all of them
// rather than one.
const benchRounds = 5

// pacedRounds is how many times the paced phases run, alternating direct
// and gateway; latencies are medians over them.
const pacedRounds = 3

// benchServerEnv is the environment of the genway serve the chat
// benchmarks measure: OpenAI at upURL, no synthetic models, a rate limit
// and credits that refuse no request.
func benchServerEnv(upURL string) map[string]string {
	return map[string]string{
		"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": upURL + "/v1", "GENWAY_SYNTHETIC": "off",
		"GENWAY_RATE_LIMIT": "1000000000", "GENWAY_DEV_CREDITS": "1000000000",
		"GENWAY_USAGE_FLUSH": benchUsageFlush,
	}
}

// benchUsageFlush is the GENWAY_USAGE_FLUSH of the servers the benchmarks
// that alternate targets measure (the chat gateway's, the wire formats',
// the Messages and native streams'): a round of one target lasts a few
// hundred milliseconds, so at the default second a server's flush of its
// records (and that flush's CPU and allocations) lands in whichever
// target's round is running then; at this interval nearly all of a
// round's records are written within it.
const benchUsageFlush = "100ms"

// startBareProxy starts the floor the chat benchmarks compare with: an
// httputil.ReverseProxy to upURL over the upstreams' transport, flushing
// each write as a streaming proxy must; closed when b ends.
func startBareProxy(b *testing.B, upURL string) *httptest.Server {
	u, err := url.Parse(upURL)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = upstreams.NewHTTPClient().Transport
	rp.FlushInterval = -1
	proxy := httptest.NewServer(rp)
	b.Cleanup(proxy.Close)
	return proxy
}

// BenchmarkChatGateway measures, in one run, a fake OpenAI upstream on
// loopback alone ("direct"), the same upstream through `genway serve`
// ("gateway": the real serve, started in-process by startServer on the
// embedded store, its chat usage recorded as always, the upstream
// configured by OPENAI_BASE_URL, a rate limit per key high enough to count
// every request and refuse none) and, for comparison, behind
// httputil.ReverseProxy over the same upstream transport ("proxy"), at 32
// concurrent connections.
//
// Throughput: benchRounds rounds of b.N requests to each target in turn, as
// fast as 32 connections go (closed loop). It reports each target's median
// requests per second and the median over rounds of the gateway's rate as
// a share of the direct rate measured in the same round. At saturation the
// p50 latency is queueing (32 / rate), so it is reported
// (saturated-*-p50) but it is not the gateway's cost.
//
// Added latency: the same 32 connections sending on a fixed schedule
// (open loop) at half the gateway's measured rate, first to the upstream,
// then through the gateway, pacedRounds times; added-p50 is the median
// over rounds of the difference of the p50s, each over b.N requests.
//
// The -fallbacks modes send the same request with two fallback models
// (models): routing's cost on the happy path, where the first answers.
//
// openai/gpt-4o-mini is priced in the shipped catalog, so "gateway" is a
// priced completion (admitted against the account's credits, charged its
// tokens). A second genway serve ("gateway-free"), on a copy of the
// catalog where the model is marked free, takes its turn in every round:
// priced-%-of-free is the median over rounds of the priced rate as a
// share of the free one, what pricing costs (the target: at least 95).
//
// A key with a credit limit ("limited", made with `genway keys create
// --credit-limit`) takes its turn too: each of its requests holds credits
// against the key's limit before it is sent and settles the hold after,
// what a limited key costs over the account's own key; limited-rate-of-proxy
// and limited-cpu-of-proxy are its shares of the bare proxy's, as below.
//
// For a stream, latency is the time to the first content delta. CPU time
// per request of the whole process (load generator, gateway and fake
// upstream) is reported too: it is less sensitive than rates to other load
// on the machine; and so are the process's heap allocations per request
// (*-allocs/req). gateway-rate-of-proxy and gateway-cpu-of-proxy are the
// medians over rounds of the gateway's rate and CPU per request as
// shares of the bare reverse proxy's in the same round (issue 28's
// targets: at least 0.95 non-stream and 0.85 stream; at most 1.15).
//
// Each round settles before and after (benchSettle). Rounds of a few
// thousand requests (a fifth of a second) are too short for steady
// rates: a round's share moves by several points from run to run (the
// proxy alone measured 9% below its steady rate at 3,000 a round); at
// 15,000 a round (about a second) three runs agree within about 2
// points. A run takes about three and a half minutes.
//
//	go test ./cmd/genway -run '^$' -bench '^BenchmarkChatGateway$' -benchtime 15000x
func BenchmarkChatGateway(b *testing.B) {
	up := benchUpstream(b)
	defer up.Close()
	srvDir, srvEnv := b.TempDir(), benchServerEnv(up.URL)
	srv := startServer(b, srvDir, srvEnv)
	free := startServer(b, b.TempDir(), map[string]string{
		"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": up.URL + "/v1", "GENWAY_SYNTHETIC": "off",
		"GENWAY_RATE_LIMIT": "1000000000", "GENWAY_CATALOG": freeCatalog(b, "openai/gpt-4o-mini"), "GENWAY_USAGE_FLUSH": benchUsageFlush,
	})
	limitedKey := cliKeyEnv(b, srvDir, srvEnv, "--account", "dev", "--name", "limited", "--credit-limit", "1000000000")
	proxy := startBareProxy(b, up.URL)
	for _, mode := range []struct {
		name      string
		stream    bool
		fallbacks bool // the request lists fallbacks (models), all of which would answer
	}{{"nonstream", false, false}, {"stream-ttfb", true, false}, {"nonstream-fallbacks", false, true}, {"stream-fallbacks-ttfb", true, true}} {
		b.Run(mode.name, func(b *testing.B) {
			body := `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":16`
			if mode.stream {
				body += `,"stream":true`
			}
			if mode.fallbacks {
				body += `,"models":["openai/gpt-4o","openai/gpt-4.1"]`
			}
			body += "}"
			upBody := strings.Replace(body, "openai/gpt-4o-mini", "gpt-4o-mini", 1)
			upBody = strings.Replace(upBody, `,"models":["openai/gpt-4o","openai/gpt-4.1"]`, "", 1)
			n := max(b.N, 200)
			direct := newLoadClient(up.URL+"/v1/chat/completions", "k", upBody, mode.stream, benchConcurrency)
			via := newLoadClient(srv.base+"/v1/chat/completions", srv.key, body, mode.stream, benchConcurrency)
			viaFree := newLoadClient(free.base+"/v1/chat/completions", free.key, body, mode.stream, benchConcurrency)
			floor := newLoadClient(proxy.URL+"/v1/chat/completions", "k", upBody, mode.stream, benchConcurrency)
			limited := newLoadClient(srv.base+"/v1/chat/completions", limitedKey, body, mode.stream, benchConcurrency)
			defer limited.tr.CloseIdleConnections()
			defer direct.tr.CloseIdleConnections()
			defer via.tr.CloseIdleConnections()
			defer viaFree.tr.CloseIdleConnections()
			defer floor.tr.CloseIdleConnections()
			for _, c := range []*loadClient{direct, via, viaFree, floor, limited} {
				c.warm(benchConcurrency)
			}
			b.ResetTimer()
			var dRPS, gRPS, fRPS, pRPS, share, priced, dCPU, gCPU, fCPU, pCPU []float64
			var lRPS, lCPU, ofProxy, cpuOfProxy, lOfProxy, lCPUOfProxy, dAllocs, gAllocs, pAllocs, lAllocs []float64
			var dSat, gSat benchResult
			for range benchRounds {
				d := direct.run(b, n, benchConcurrency, 0)
				g := via.run(b, n, benchConcurrency, 0)
				f := viaFree.run(b, n, benchConcurrency, 0)
				p := floor.run(b, n, benchConcurrency, 0)
				l := limited.run(b, n, benchConcurrency, 0)
				lRPS, lCPU = append(lRPS, l.rps), append(lCPU, float64(l.cpu.Microseconds()))
				ofProxy, cpuOfProxy = append(ofProxy, g.rps/p.rps), append(cpuOfProxy, float64(g.cpu)/float64(p.cpu))
				lOfProxy, lCPUOfProxy = append(lOfProxy, l.rps/p.rps), append(lCPUOfProxy, float64(l.cpu)/float64(p.cpu))
				dAllocs, gAllocs, pAllocs, lAllocs = append(dAllocs, d.allocs), append(gAllocs, g.allocs), append(pAllocs, p.allocs), append(lAllocs, l.allocs)
				dRPS, gRPS, fRPS, pRPS = append(dRPS, d.rps), append(gRPS, g.rps), append(fRPS, f.rps), append(pRPS, p.rps)
				share, priced = append(share, 100*g.rps/d.rps), append(priced, 100*g.rps/f.rps)
				dCPU, gCPU, pCPU = append(dCPU, float64(d.cpu.Microseconds())), append(gCPU, float64(g.cpu.Microseconds())), append(pCPU, float64(p.cpu.Microseconds()))
				fCPU = append(fCPU, float64(f.cpu.Microseconds()))
				dSat, gSat = d, g
			}
			gwRate := median(slices.Clone(gRPS))
			interval := time.Duration(float64(time.Second) / (gwRate / 2))
			var dP50, gP50, dP99, gP99, added []float64
			for range pacedRounds {
				d := direct.run(b, n, benchConcurrency, interval)
				g := via.run(b, n, benchConcurrency, interval)
				dP50, gP50 = append(dP50, float64(d.p50.Microseconds())), append(gP50, float64(g.p50.Microseconds()))
				dP99, gP99 = append(dP99, float64(d.p99.Microseconds())), append(gP99, float64(g.p99.Microseconds()))
				added = append(added, float64((g.p50 - d.p50).Microseconds()))
			}
			b.StopTimer()
			b.ReportMetric(0, "ns/op") // the metrics below are what matter
			b.ReportMetric(median(dRPS), "direct-req/s")
			b.ReportMetric(gwRate, "gateway-req/s")
			b.ReportMetric(median(pRPS), "proxy-req/s")
			b.ReportMetric(median(share), "gateway-%-of-direct")
			b.ReportMetric(median(fRPS), "gateway-free-req/s")
			b.ReportMetric(median(priced), "priced-%-of-free")
			b.ReportMetric(median(fCPU), "gateway-free-cpu-µs/req")
			b.ReportMetric(median(dCPU), "direct-cpu-µs/req")
			b.ReportMetric(median(gCPU), "gateway-cpu-µs/req")
			b.ReportMetric(median(pCPU), "proxy-cpu-µs/req")
			b.ReportMetric(median(ofProxy), "gateway-rate-of-proxy")
			b.ReportMetric(median(cpuOfProxy), "gateway-cpu-of-proxy")
			b.ReportMetric(median(lRPS), "limited-req/s")
			b.ReportMetric(median(lCPU), "limited-cpu-µs/req")
			b.ReportMetric(median(lOfProxy), "limited-rate-of-proxy")
			b.ReportMetric(median(lCPUOfProxy), "limited-cpu-of-proxy")
			b.ReportMetric(median(dAllocs), "direct-allocs/req")
			b.ReportMetric(median(gAllocs), "gateway-allocs/req")
			b.ReportMetric(median(pAllocs), "proxy-allocs/req")
			b.ReportMetric(median(lAllocs), "limited-allocs/req")
			b.ReportMetric(float64(dSat.p50.Microseconds()), "saturated-direct-p50-µs")
			b.ReportMetric(float64(gSat.p50.Microseconds()), "saturated-gateway-p50-µs")
			b.ReportMetric(float64(time.Second/interval), "paced-req/s")
			b.ReportMetric(median(dP50), "paced-direct-p50-µs")
			b.ReportMetric(median(gP50), "paced-gateway-p50-µs")
			b.ReportMetric(median(dP99), "paced-direct-p99-µs")
			b.ReportMetric(median(gP99), "paced-gateway-p99-µs")
			b.ReportMetric(median(added), "added-p50-µs")
		})
	}
}

// BenchmarkChatWireFormats measures, through genway serve over the fake
// upstream of BenchmarkChatGateway, what a tool-calling stream and a
// Responses API stream cost next to a plain chat stream: "plain" (chat
// completions), "tools" (chat completions with a tool, the upstream
// streaming one call whose arguments come in pieces) and "responses"
// (POST /v1/responses, the same deltas as Responses events); each for a
// short answer (5 deltas) and a longer one (100). Each runs benchRounds
// rounds of b.N requests at 32 connections, alternating; it reports each
// one's median requests per second and CPU time per request (the whole
// process: load generator, gateway and fake upstream), and each format's
// cost over plain: the median over rounds of the rate lost, in percent
// (the target is at most 10), and the same for CPU time per request. The
// same requests are also sent straight to the upstream (the plain stream
// and the tool stream; a Responses stream's upstream stream is the plain
// one), and "gateway-own-cpu" is the gateway's CPU time per request minus
// that: what the gateway itself adds, without the bytes a bigger format
// costs the client and the upstream anyway.
//
//	go test ./cmd/genway -run '^$' -bench ChatWireFormats -benchtime 4000x
func BenchmarkChatWireFormats(b *testing.B) {
	up := benchUpstream(b)
	defer up.Close()
	// The translation's cost: openai/gpt-4o-mini stands for any
	// OpenAI-compatible model (OpenAI's own get Responses requests
	// natively: BenchmarkNativeStream).
	srv := startServer(b, b.TempDir(), map[string]string{
		"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": up.URL + "/v1", "GENWAY_SYNTHETIC": "off",
		"GENWAY_RATE_LIMIT": "1000000000", "GENWAY_NATIVE": "off", "GENWAY_USAGE_FLUSH": benchUsageFlush,
	})
	for _, size := range []struct {
		name      string
		maxTokens string
	}{{"5-deltas", "16"}, {"100-deltas", "500"}} {
		b.Run(size.name, func(b *testing.B) { benchWireFormats(b, srv, up.URL, size.maxTokens) })
	}
}

// benchWireFormats is one size of BenchmarkChatWireFormats.
func benchWireFormats(b *testing.B, srv *server, upURL, maxTokens string) {
	msgs := `"messages":[{"role":"user","content":"hello there"}],"max_tokens":` + maxTokens + `,"stream":true`
	upMsgs := `"messages":[{"role":"user","content":"hello there"}],"max_completion_tokens":` + maxTokens + `,"stream":true`
	tool := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	formats := []*loadClient{
		newLoadClient(srv.base+"/v1/chat/completions", srv.key, `{"model":"openai/gpt-4o-mini",`+msgs+`}`, true, benchConcurrency),
		newLoadClient(srv.base+"/v1/chat/completions", srv.key, `{"model":"openai/gpt-4o-mini",`+msgs+`,`+tool+`}`, true, benchConcurrency),
		newLoadClient(srv.base+"/v1/responses", srv.key, `{"model":"openai/gpt-4o-mini","input":"hello there","max_output_tokens":`+maxTokens+`,"stream":true}`, true, benchConcurrency),
	}
	formats[1].first = []byte(`"arguments":"w1"`)
	formats[2].first = []byte(`"delta":"w1"`)
	// What each format costs straight from the upstream: the gateway's
	// own cost is the difference (a Responses stream's upstream stream
	// is the plain one).
	plainDirect := newLoadClient(upURL+"/v1/chat/completions", "k", `{"model":"gpt-4o-mini",`+upMsgs+`}`, true, benchConcurrency)
	toolDirect := newLoadClient(upURL+"/v1/chat/completions", "k", `{"model":"gpt-4o-mini",`+upMsgs+`,`+tool+`}`, true, benchConcurrency)
	toolDirect.first = formats[1].first
	directs := []*loadClient{plainDirect, toolDirect}
	directOf := []int{0, 1, 0} // the direct stream of each format
	names := []string{"plain", "tools", "responses"}
	n := max(b.N, 200)
	for _, c := range append(formats, directs...) {
		defer c.tr.CloseIdleConnections()
		c.warm(benchConcurrency)
	}
	b.ResetTimer()
	rps := make([][]float64, len(formats))
	cpu := make([][]float64, len(formats))
	own := make([][]float64, len(formats))
	lost := make([][]float64, len(formats))
	extraCPU := make([][]float64, len(formats))
	extraOwn := make([][]float64, len(formats))
	for range benchRounds {
		var d []benchResult
		for _, c := range directs {
			d = append(d, c.run(b, n, benchConcurrency, 0))
		}
		var r []benchResult
		var o []time.Duration
		for i, c := range formats {
			res := c.run(b, n, benchConcurrency, 0)
			r = append(r, res)
			o = append(o, res.cpu-d[directOf[i]].cpu)
			rps[i] = append(rps[i], res.rps)
			cpu[i] = append(cpu[i], float64(res.cpu.Microseconds()))
			own[i] = append(own[i], float64(o[i].Microseconds()))
		}
		for i := 1; i < len(formats); i++ {
			lost[i] = append(lost[i], 100*(1-r[i].rps/r[0].rps))
			extraCPU[i] = append(extraCPU[i], 100*(float64(r[i].cpu)/float64(r[0].cpu)-1))
			extraOwn[i] = append(extraOwn[i], 100*(float64(o[i])/float64(o[0])-1))
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	for i, name := range names {
		b.ReportMetric(median(rps[i]), name+"-req/s")
		b.ReportMetric(median(cpu[i]), name+"-cpu-µs/req")
		b.ReportMetric(median(own[i]), name+"-gateway-own-cpu-µs/req")
		if i > 0 {
			b.ReportMetric(median(lost[i]), name+"-rate-%-below-plain")
			b.ReportMetric(median(extraCPU[i]), name+"-cpu-%-over-plain")
			b.ReportMetric(median(extraOwn[i]), name+"-gateway-own-cpu-%-over-plain")
		}
	}
}

// freeCatalog writes, in a temporary directory of b, the shipped catalog
// with model marked free, and returns its path (for GENWAY_CATALOG).
func freeCatalog(b testing.TB, model string) string {
	b.Helper()
	cat, err := catalog.Default()
	if err != nil {
		b.Fatal(err)
	}
	m, ok := cat.Model(model)
	if !ok {
		b.Fatalf("no model %s in the shipped catalog", model)
	}
	m.Price = &catalog.Price{Free: true}
	js, err := json.Marshal(cat)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "free_catalog.json")
	if err := os.WriteFile(path, js, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}
