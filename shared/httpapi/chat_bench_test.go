package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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

// runLoad sends n requests to url over conns connections (the gateway's
// with benchKey) and measures each: the whole exchange, or for a stream the time until the
// first content delta (then the rest is drained).
func runLoad(b *testing.B, url, body string, stream bool, n, conns int) benchResult {
	b.Helper()
	tr := &http.Transport{MaxIdleConns: 2 * conns, MaxIdleConnsPerHost: 2 * conns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	one := func() (time.Duration, error) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+string(benchKey))
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, &httpStatusError{resp.StatusCode}
		}
		if !stream {
			_, err := io.Copy(io.Discard, resp.Body)
			return time.Since(start), err
		}
		var ttfb time.Duration
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if ttfb == 0 && strings.Contains(sc.Text(), `"content":"w1"`) {
				ttfb = time.Since(start)
			}
		}
		return ttfb, sc.Err()
	}
	// Warm the connections.
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() { defer wg.Done(); one() }()
	}
	wg.Wait()

	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Int64
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
				d, err := one()
				if err != nil || d == 0 {
					failed.Add(1)
				}
				lat[i] = d
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d requests to %s failed", f, n, url)
	}
	slices.Sort(lat)
	return benchResult{
		rps: float64(n) / elapsed.Seconds(),
		p50: lat[n/2],
		p99: lat[min(n-1, n*99/100)],
		cpu: cpu / time.Duration(n),
	}
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
// (OPENAI_BASE_URL pointing at the fake upstream), a JSON logger, and a
// real net/http server on 127.0.0.1.
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
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: providers, Log: log})
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

// BenchmarkChatGateway measures, in one run, the fake upstream alone
// ("direct"), the same upstream through the handler stack of `genway
// serve` (benchGatewayServer, "gateway"), and, as a floor for any proxy,
// behind httputil.ReverseProxy ("proxy"), at 32 concurrent connections,
// b.N requests each (bound it with -benchtime=Nx). It reports requests per
// second, p50/p99 latency (non-stream) or time to first content (stream),
// the gateway's share of the direct rate, its added p50, and the process
// CPU time per request of each. It also reports the p50 of direct and
// gateway over a single connection ("1conn"): the latency the gateway adds
// when it is not queueing behind 31 other requests for 2 cores.
//
//	go test ./shared/httpapi -run '^$' -bench ChatGateway -benchtime 10000x
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
			n := max(b.N, 200)
			b.ResetTimer()
			upBody := strings.Replace(body, "openai/gpt-4o-mini", "gpt-4o-mini", 1)
			gwURL := srv.URL + "/v1/chat/completions"
			direct := runLoad(b, up.URL+"/v1/chat/completions", upBody, mode.stream, n, benchConcurrency)
			via := runLoad(b, gwURL, body, mode.stream, n, benchConcurrency)
			floor := runLoad(b, proxy.URL+"/v1/chat/completions", upBody, mode.stream, n, benchConcurrency)
			direct1 := runLoad(b, up.URL+"/v1/chat/completions", upBody, mode.stream, max(n/10, 200), 1)
			via1 := runLoad(b, gwURL, body, mode.stream, max(n/10, 200), 1)
			b.StopTimer()
			b.ReportMetric(0, "ns/op") // the metrics below are what matter
			b.ReportMetric(direct.rps, "direct-req/s")
			b.ReportMetric(via.rps, "gateway-req/s")
			b.ReportMetric(100*via.rps/direct.rps, "gateway-%-of-direct")
			b.ReportMetric(float64(direct.p50.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(via.p50.Microseconds()), "gateway-p50-µs")
			b.ReportMetric(float64((via.p50 - direct.p50).Microseconds()), "added-p50-µs")
			b.ReportMetric(float64(direct.p99.Microseconds()), "direct-p99-µs")
			b.ReportMetric(float64(via.p99.Microseconds()), "gateway-p99-µs")
			// CPU per request of the whole process (load generator, gateway and
			// fake upstream): less sensitive than the rates to other load on
			// the machine, though not immune (on idle cores the Go scheduler
			// spins looking for work, which counts as CPU time). The CPU-bound
			// rate ratio is direct-cpu / gateway-cpu.
			b.ReportMetric(float64(direct.cpu.Microseconds()), "direct-cpu-µs/req")
			b.ReportMetric(float64(via.cpu.Microseconds()), "gateway-cpu-µs/req")
			b.ReportMetric(100*float64(direct.cpu)/float64(via.cpu), "cpu-bound-%-of-direct")
			b.ReportMetric(floor.rps, "proxy-req/s")
			b.ReportMetric(float64(floor.p50.Microseconds()), "proxy-p50-µs")
			b.ReportMetric(float64(floor.cpu.Microseconds()), "proxy-cpu-µs/req")
			b.ReportMetric(float64(direct1.p50.Microseconds()), "1conn-direct-p50-µs")
			b.ReportMetric(float64(via1.p50.Microseconds()), "1conn-gateway-p50-µs")
			b.ReportMetric(float64((via1.p50 - direct1.p50).Microseconds()), "1conn-added-p50-µs")
		})
	}
}
