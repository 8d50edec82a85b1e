package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bifrostLikeDir is the bifrost-like gateway's module, relative to this
// package.
const bifrostLikeDir = "../../bench/bifrostlike"

// buildBifrostLike builds bench/bifrostlike (its own module, with its own
// go.sum) into a temporary directory of tb and returns the binary's path.
// It skips tb if the build fails (its modules not in the module cache and
// no module proxy, say). env is added to the go command's environment;
// with budget > 0, a build that takes longer is stopped and tb skipped.
func buildBifrostLike(tb testing.TB, budget time.Duration, env ...string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "bifrostlike")
	ctx, cancel := context.WithCancel(context.Background())
	if budget > 0 {
		ctx, cancel = context.WithTimeout(ctx, budget)
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-o", bin, ".")
	cmd.Dir = bifrostLikeDir
	cmd.Env = append(os.Environ(), append([]string{"GOWORK=off"}, env...)...)
	// Stopped, the go command and the compilers it started go together:
	// they are a process group of their own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		tb.Skipf("bench/bifrostlike did not build within %v (a cold build cache takes about 30 s: go build it there once)", budget)
	}
	if err != nil {
		tb.Skipf("cannot build bench/bifrostlike (its modules, github.com/valyala/fasthttp and github.com/bytedance/sonic, need the module proxy or cache): %v\n%s", err, out)
	}
	tb.Logf("built bench/bifrostlike in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// bifrostLike is a running bench/bifrostlike process.
type bifrostLike struct {
	base string // http://127.0.0.1:port
	pid  int
}

// startBifrostLike runs the binary bin on a free loopback port, proxying
// to upstream (an OpenAI base URL, ending in /v1); tb's cleanup kills it.
func startBifrostLike(tb testing.TB, bin, upstream string) *bifrostLike {
	tb.Helper()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-upstream", upstream, "-key", "k")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		base, found := strings.CutPrefix(l, "listening on ")
		if !ok || !found {
			cmd.Process.Kill()
			cmd.Wait() // stderr is complete after it
			tb.Fatalf("bifrostlike did not start: %q %s", l, stderr.String())
		}
		return &bifrostLike{base: base, pid: cmd.Process.Pid}
	case <-time.After(10 * time.Second):
		tb.Fatal("bifrostlike did not start within 10 s")
	}
	return nil
}

// processCPU returns the CPU time (user + system) process pid has used:
// the sum of its threads' se.sum_exec_runtime in /proc/<pid>/task/*/sched
// (nanoseconds; the scheduler's debug files, CONFIG_SCHED_DEBUG) or,
// without those, utime + stime in /proc/<pid>/stat (clock ticks: 10 ms at
// Linux's usual 100 Hz, coarse for a phase of a fraction of a second).
func processCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	if d, ok := schedCPU(pid); ok {
		return d
	}
	return statCPU(tb, pid)
}

// schedCPU is processCPU from the threads' sched files; false if the main
// thread's is missing or has no se.sum_exec_runtime.
func schedCPU(pid int) (time.Duration, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var total time.Duration
	main := false
	for _, tid := range tids {
		sched, err := os.ReadFile(filepath.Join(dir, tid.Name(), "sched"))
		if err != nil {
			continue // a thread that has exited since
		}
		for line := range strings.Lines(string(sched)) {
			v, ok := strings.CutPrefix(line, "se.sum_exec_runtime")
			if !ok {
				continue
			}
			_, v, _ = strings.Cut(v, ":")
			ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, false
			}
			total += time.Duration(ms * float64(time.Millisecond))
			main = main || tid.Name() == strconv.Itoa(pid)
			break
		}
	}
	return total, main
}

// clockTicks is the kernel's clock ticks per second (getconf CLK_TCK), the
// unit of /proc/<pid>/stat's CPU times; 100, Linux's usual value, if
// getconf cannot tell.
var clockTicks = sync.OnceValue(func() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		return 100
	}
	return n
})

// statCPU is processCPU from /proc/<pid>/stat.
func statCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(stat, ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(string(stat[i+1:]))
	}
	if len(f) < 13 {
		tb.Fatalf("unexpected /proc/%d/stat: %q", pid, stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		tb.Fatal(err)
	}
	return time.Duration((utime + stime) * int64(time.Second) / clockTicks())
}

// chatEvents sends body to url (a chat completions URL) and returns what it
// answered, each JSON document decoded: the completion, or each data:
// event of a stream ([DONE] as the string).
func chatEvents(tb testing.TB, url, body string) []any {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s answered %d %s (%v)", url, resp.StatusCode, raw, err)
	}
	var docs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range bytes.Lines(raw) {
			if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
				docs = append(docs, data)
			}
		}
	} else {
		docs = [][]byte{raw}
	}
	var events []any
	for _, d := range docs {
		if string(d) == "[DONE]" {
			events = append(events, "[DONE]")
			continue
		}
		var v any
		if err := json.Unmarshal(d, &v); err != nil {
			tb.Fatalf("%s answered %q: %v", url, d, err)
		}
		events = append(events, v)
	}
	return events
}

// checkBifrostLike fails tb unless the bifrost-like gateway at base answers
// body as the upstream at upURL answers upBody: the same completion, or the
// same stream events.
func checkBifrostLike(tb testing.TB, base, upURL, body, upBody string) {
	tb.Helper()
	want := chatEvents(tb, upURL+"/v1/chat/completions", upBody)
	got := chatEvents(tb, base+"/v1/chat/completions", body)
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("bifrostlike answered\n%v\nthe upstream\n%v", got, want)
	}
}

// TestBifrostLikeAnswers checks that bench/bifrostlike answers a
// completion and a stream as the fake upstream of BenchmarkChatGateway
// does. It builds without the network (GOPROXY=off) and skips if the
// modules are not in the cache or the build takes more than 10 s.
func TestBifrostLikeAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds bench/bifrostlike")
	}
	bin := buildBifrostLike(t, 10*time.Second, "GOPROXY=off", "GOFLAGS=-mod=readonly")
	complete := `{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"w1 w2 w3 w4 w5"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`
	stream := benchStream(5, false)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, complete)
	}))
	defer up.Close()
	bl := startBifrostLike(t, bin, up.URL+"/v1")
	for _, stream := range []bool{false, true} {
		body := `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}],"max_tokens":16`
		if stream {
			body += `,"stream":true`
		}
		body += "}"
		checkBifrostLike(t, bl.base, up.URL, body, strings.Replace(body, "openai/gpt-4o-mini", "gpt-4o-mini", 1))
	}
}

// BenchmarkChatGatewayBifrostLike compares, in one run, genway serve with
// a Bifrost-like gateway (bench/bifrostlike: fasthttp server and client,
// sonic JSON, typed pooled structs; see its doc comment for what it
// leaves out) over the fake OpenAI upstream of BenchmarkChatGateway, at 32
// concurrent connections. Each round sends b.N requests, as fast as the
// connections go, to the upstream alone ("direct"), through genway serve
// ("gateway", set up as BenchmarkChatGateway's), through the bifrost-like
// gateway ("bifrostlike", a process of its own, built with go build at
// the start: the benchmark skips if it cannot be built) and through
// httputil.ReverseProxy ("proxy"), in turn, benchRounds times. It reports
// each one's median requests per second and CPU time per request: this
// process's (load generator and fake upstream in every phase, plus the
// gateway or proxy in theirs) plus, for bifrostlike, its process's, read
// from /proc (processCPU: to the nanosecond where the kernel has the
// scheduler's debug files, else in clock ticks of 10 ms, coarse for a
// phase of 3000 requests). gateway-rate-of-bifrostlike and gateway-cpu-of-bifrostlike are
// the medians over rounds of the gateway's rate and CPU per request as
// shares of the bifrost-like gateway's in the same round. Before
// measuring, it checks that the bifrost-like gateway answers as the
// upstream does.
//
//	go test ./cmd/genway -run '^$' -bench ChatGatewayBifrostLike -benchtime 3000x
func BenchmarkChatGatewayBifrostLike(b *testing.B) {
	bin := buildBifrostLike(b, 0)
	up := benchUpstream(b)
	defer up.Close()
	srv := startServer(b, b.TempDir(), benchServerEnv(up.URL))
	bl := startBifrostLike(b, bin, up.URL+"/v1")
	proxy := startBareProxy(b, up.URL)
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
			checkBifrostLike(b, bl.base, up.URL, body, upBody)
			n := max(b.N, 200)
			direct := newLoadClient(up.URL+"/v1/chat/completions", "k", upBody, mode.stream, benchConcurrency)
			via := newLoadClient(srv.base+"/v1/chat/completions", srv.key, body, mode.stream, benchConcurrency)
			like := newLoadClient(bl.base+"/v1/chat/completions", "k", body, mode.stream, benchConcurrency)
			floor := newLoadClient(proxy.URL+"/v1/chat/completions", "k", upBody, mode.stream, benchConcurrency)
			for _, c := range []*loadClient{direct, via, like, floor} {
				defer c.tr.CloseIdleConnections()
				c.warm(benchConcurrency)
			}
			b.ResetTimer()
			var dRPS, gRPS, lRPS, pRPS, dCPU, gCPU, lCPU, pCPU, rateOf, cpuOf []float64
			for range benchRounds {
				d := direct.run(b, n, benchConcurrency, 0)
				g := via.run(b, n, benchConcurrency, 0)
				before := processCPU(b, bl.pid)
				l := like.run(b, n, benchConcurrency, 0)
				l.cpu += (processCPU(b, bl.pid) - before) / time.Duration(n)
				p := floor.run(b, n, benchConcurrency, 0)
				dRPS, gRPS, lRPS, pRPS = append(dRPS, d.rps), append(gRPS, g.rps), append(lRPS, l.rps), append(pRPS, p.rps)
				dCPU, gCPU = append(dCPU, float64(d.cpu.Microseconds())), append(gCPU, float64(g.cpu.Microseconds()))
				lCPU, pCPU = append(lCPU, float64(l.cpu.Microseconds())), append(pCPU, float64(p.cpu.Microseconds()))
				rateOf, cpuOf = append(rateOf, g.rps/l.rps), append(cpuOf, float64(g.cpu)/float64(l.cpu))
			}
			b.StopTimer()
			b.ReportMetric(0, "ns/op") // the metrics below are what matter
			b.ReportMetric(median(dRPS), "direct-req/s")
			b.ReportMetric(median(gRPS), "gateway-req/s")
			b.ReportMetric(median(lRPS), "bifrostlike-req/s")
			b.ReportMetric(median(pRPS), "proxy-req/s")
			b.ReportMetric(median(dCPU), "direct-cpu-µs/req")
			b.ReportMetric(median(gCPU), "gateway-cpu-µs/req")
			b.ReportMetric(median(lCPU), "bifrostlike-cpu-µs/req")
			b.ReportMetric(median(pCPU), "proxy-cpu-µs/req")
			b.ReportMetric(median(rateOf), "gateway-rate-of-bifrostlike")
			b.ReportMetric(median(cpuOf), "gateway-cpu-of-bifrostlike")
		})
	}
}
