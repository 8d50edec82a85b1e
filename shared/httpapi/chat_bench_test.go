package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/localstore"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/upstreams"
)

// benchConcurrency is the number of concurrent client connections.
const benchConcurrency = 32

// benchUpstream is a fake OpenAI server on loopback answering every request
// at once with a fixed completion, or a fixed stream of a role chunk, five
// content chunks, a finish chunk, a usage chunk and [DONE].
func benchUpstream(b *testing.B) *httptest.Server {
	b.Helper()
	complete := []byte(`{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"w1 w2 w3 w4 w5"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`)
	var sb strings.Builder
	sb.WriteString(`data: {"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for _, w := range []string{"w1", " w2", " w3", " w4", " w5"} {
		sb.WriteString(chunkLine(w))
	}
	sb.WriteString(finishLines)
	stream := []byte(sb.String())
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(complete)
	}))
}

// benchResult is one measured phase.
type benchResult struct {
	rps      float64
	p50, p99 time.Duration // latency (non-stream) or time to first content (stream)
	cpu      time.Duration // process CPU time (user + system) per request
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
	stream    bool
	tr        *http.Transport
	client    *http.Client
}

func newLoadClient(url, body string, stream bool, conns int) *loadClient {
	tr := &http.Transport{MaxIdleConns: 2 * conns, MaxIdleConnsPerHost: 2 * conns}
	return &loadClient{url: url, body: body, stream: stream, tr: tr, client: &http.Client{Transport: tr}}
}

// one sends a request and returns when it was answered (non-stream) or
// when the first content delta arrived (stream; the rest is drained).
func (c *loadClient) one() (time.Time, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(c.body))
	if err != nil {
		return time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+string(benchKey))
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
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if first.IsZero() && strings.Contains(sc.Text(), `"content":"w1"`) {
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
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d requests to %s failed", f, n, c.url)
	}
	slices.Sort(lat)
	return benchResult{
		rps: float64(n) / elapsed.Seconds(),
		p50: lat[n/2],
		p99: lat[min(n-1, n*99/100)],
		cpu: cpu / time.Duration(n),
	}
}

// median returns the median of xs (xs is sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

type httpStatusError struct{ status int }

func (e *httpStatusError) Error() string { return http.StatusText(e.status) }

// benchKey is the API key the load generator sends through the gateway.
const benchKey = auth.Key("sk_live_BENCHbenchBENCHbenchBENCHbenchBENCHbench")

// benchStore is the key and account store behind the benchmark's
// authenticator and limiter: one key of one account, behind a mutex as a
// real store would be. With the authenticator's and limiter's caches it is
// read once per cache TTL, as the embedded store is under genway serve.
type benchStore struct {
	mu   sync.Mutex
	keys map[string]auth.Record
	acct credits.Account
}

func (s *benchStore) PutKey(ctx context.Context, r auth.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[r.Hash] = r
	return nil
}

func (s *benchStore) KeyByHash(ctx context.Context, hash string) (auth.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.keys[hash]
	if !ok {
		return auth.Record{}, auth.ErrKeyNotFound
	}
	return r, nil
}

func (s *benchStore) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.keys)), nil
}

func (s *benchStore) RevokeKey(ctx context.Context, id string, at time.Time) (auth.Record, error) {
	return auth.Record{}, auth.ErrKeyNotFound
}

func (s *benchStore) Account(ctx context.Context, id string) (credits.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.acct.ID {
		return credits.Account{}, credits.ErrAccountNotFound
	}
	return s.acct, nil
}

// benchGatewayServer serves the fake upstream up through the stack that
// `genway serve` runs (cmd/genway's serve and apiHandler): NewMux with its
// request ids, Authenticated with a real auth.Authenticator (5 s cache, as
// serve) over a store holding the key, the ratelimit.Limiter with an
// in-memory counter and an account limit far above the benchmark's rate
// (so every request is counted but none refused), ChatCompletions on a
// chat.Gateway whose providers upstreams.New builds from the environment
// (OPENAI_BASE_URL pointing at the fake upstream) and which records usage
// as serve does, through a chat.BufferedRecorder (1 s flushes) into a real
// localstore in b.TempDir(), a JSON logger, and a real net/http server on
// 127.0.0.1.
func benchGatewayServer(b *testing.B, upstreamURL string) *httptest.Server {
	b.Helper()
	st := &benchStore{keys: map[string]auth.Record{}, acct: credits.Account{ID: "bench", Balance: 1000, Available: 1000, RateLimit: 1 << 30}}
	if err := st.PutKey(context.Background(), auth.NewRecord(benchKey, st.acct.ID, time.Now())); err != nil {
		b.Fatal(err)
	}
	cat := testCatalog(b)
	env := map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": upstreamURL + "/v1", "GENWAY_SYNTHETIC": "off"}
	providers, err := upstreams.New(cat, func(k string) string { return env[k] }, nil)
	if err != nil {
		b.Fatal(err)
	}
	if providers["openai"] == nil {
		b.Fatalf("upstreams.New configured %v; want openai", slices.Collect(maps.Keys(providers)))
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	usageStore, err := localstore.Open(filepath.Join(b.TempDir(), "genway.db"))
	if err != nil {
		b.Fatal(err)
	}
	usage := chat.NewBufferedRecorder(usageStore, chat.DefaultUsageFlush, log)
	b.Cleanup(func() { // after srv.Close (cleanups run last first)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := usage.Close(ctx); err != nil {
			b.Error(err)
		}
		if err := usageStore.Close(); err != nil {
			b.Error(err)
		}
	})
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: providers, Log: log, Usage: usage})
	authn := auth.NewAuthenticator(st, 5*time.Second)
	limiter := ratelimit.New(ratelimit.NewMemory(), st, 0)
	h := NewMux(log, Route{Method: http.MethodPost, Pattern: "/v1/chat/completions",
		Handler: Authenticated(authn, limiter, log, ChatCompletions(gw, log))})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadHeaderTimeout = 10 * time.Second // as serve
	srv.Start()
	b.Cleanup(srv.Close)
	return srv
}

// benchRounds is how many times each saturation phase runs, alternating
// targets, so that a slow spell of a shared machine hits all of them
// rather than one.
const benchRounds = 5

// BenchmarkChatGateway measures, in one run, the fake upstream alone
// ("direct"), the same upstream through the handler stack of `genway
// serve` (benchGatewayServer, "gateway"), and, for comparison, behind
// httputil.ReverseProxy ("proxy"), at 32 concurrent connections.
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
// then through the gateway; added-p50 is the difference of the p50s, each
// measured over n requests.
//
// For a stream, latency is the time to the first content delta. CPU time
// per request of the whole process (load generator, gateway and fake
// upstream) is reported too: it is less sensitive than rates to other load
// on the machine.
//
//	go test ./shared/httpapi -run '^$' -bench ChatGateway -benchtime 4000x
func BenchmarkChatGateway(b *testing.B) {
	up := benchUpstream(b)
	defer up.Close()
	srv := benchGatewayServer(b, up.URL)
	u, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = upstreams.NewHTTPClient().Transport
	rp.FlushInterval = -1 // flush each write, as a streaming proxy must
	proxy := httptest.NewServer(rp)
	defer proxy.Close()
	for _, mode := range []struct {
		name   string
		stream bool
	}{{"nonstream", false}, {"stream-ttfb", true}} {
		b.Run(mode.name, func(b *testing.B) {
			body := `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":16`
			if mode.stream {
				body += `,"stream":true`
			}
			body += "}"
			upBody := strings.Replace(body, "openai/gpt-4o-mini", "gpt-4o-mini", 1)
			n := max(b.N, 200)
			direct := newLoadClient(up.URL+"/v1/chat/completions", upBody, mode.stream, benchConcurrency)
			via := newLoadClient(srv.URL+"/v1/chat/completions", body, mode.stream, benchConcurrency)
			floor := newLoadClient(proxy.URL+"/v1/chat/completions", upBody, mode.stream, benchConcurrency)
			defer direct.tr.CloseIdleConnections()
			defer via.tr.CloseIdleConnections()
			defer floor.tr.CloseIdleConnections()
			for _, c := range []*loadClient{direct, via, floor} {
				c.warm(benchConcurrency)
			}
			b.ResetTimer()
			var dRPS, gRPS, pRPS, share, dCPU, gCPU, pCPU []float64
			var dSat, gSat benchResult
			for range benchRounds {
				d := direct.run(b, n, benchConcurrency, 0)
				g := via.run(b, n, benchConcurrency, 0)
				p := floor.run(b, n, benchConcurrency, 0)
				dRPS, gRPS, pRPS = append(dRPS, d.rps), append(gRPS, g.rps), append(pRPS, p.rps)
				share = append(share, 100*g.rps/d.rps)
				dCPU, gCPU, pCPU = append(dCPU, float64(d.cpu.Microseconds())), append(gCPU, float64(g.cpu.Microseconds())), append(pCPU, float64(p.cpu.Microseconds()))
				dSat, gSat = d, g
			}
			gwRate := median(slices.Clone(gRPS))
			interval := time.Duration(float64(time.Second) / (gwRate / 2))
			dPaced := direct.run(b, n, benchConcurrency, interval)
			gPaced := via.run(b, n, benchConcurrency, interval)
			b.StopTimer()
			b.ReportMetric(0, "ns/op") // the metrics below are what matter
			b.ReportMetric(median(dRPS), "direct-req/s")
			b.ReportMetric(gwRate, "gateway-req/s")
			b.ReportMetric(median(pRPS), "proxy-req/s")
			b.ReportMetric(median(share), "gateway-%-of-direct")
			b.ReportMetric(median(dCPU), "direct-cpu-µs/req")
			b.ReportMetric(median(gCPU), "gateway-cpu-µs/req")
			b.ReportMetric(median(pCPU), "proxy-cpu-µs/req")
			b.ReportMetric(float64(dSat.p50.Microseconds()), "saturated-direct-p50-µs")
			b.ReportMetric(float64(gSat.p50.Microseconds()), "saturated-gateway-p50-µs")
			b.ReportMetric(float64(time.Second/interval), "paced-req/s")
			b.ReportMetric(float64(dPaced.p50.Microseconds()), "paced-direct-p50-µs")
			b.ReportMetric(float64(gPaced.p50.Microseconds()), "paced-gateway-p50-µs")
			b.ReportMetric(float64(dPaced.p99.Microseconds()), "paced-direct-p99-µs")
			b.ReportMetric(float64(gPaced.p99.Microseconds()), "paced-gateway-p99-µs")
			b.ReportMetric(float64((gPaced.p50 - dPaced.p50).Microseconds()), "added-p50-µs")
		})
	}
}
