package functions_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// functionNames are the directories under functions/ with a main.go.
var functionNames = []string{"chat", "media", "models", "jobs-create", "jobs-get", "credits-api", "worker", "credits", "jobs-sweeper", "admin", "webhooks"}

// buildBootstrap builds functions/<name> as the deployed bootstrap is
// built, for goarch, into dir/<name>/bootstrap, and returns its path.
func buildBootstrap(dir, name, goarch string) (string, error) {
	out := filepath.Join(dir, name, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-ldflags=-s -w", "-o", out, "./functions/"+name)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s for linux/%s: %v\n%s", name, goarch, err, b)
	}
	return out, nil
}

// buildAll builds every function for the host architecture, in parallel.
func buildAll(t testing.TB) map[string]string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("bootstraps are linux binaries; this is %s", runtime.GOOS)
	}
	dir := t.TempDir()
	paths := make(map[string]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(functionNames))
	for _, name := range functionNames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := buildBootstrap(dir, name, runtime.GOARCH)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			paths[name] = p
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return paths
}

// chunk is one read of a response body as the Runtime API received it.
type chunk struct {
	at   time.Time
	data []byte
}

// result is what a function posted for one invocation.
type result struct {
	kind        string // "response" or "error"
	contentType string
	mode        string // Lambda-Runtime-Function-Response-Mode, if sent
	chunked     bool   // the body came with chunked transfer encoding
	body        []byte
	chunks      []chunk
	trailer     http.Header
	done        time.Time
}

type invocation struct {
	id      string
	payload []byte
}

// runtimeAPI is a Lambda Runtime API (2018-06-01) for one function
// process: /runtime/invocation/next hands out queued events, /response
// and /error collect results, streamed bodies chunk by chunk.
type runtimeAPI struct {
	t       testing.TB
	srv     *http.Server
	addr    string
	pending chan invocation

	mu        sync.Mutex
	results   map[string]chan *result
	firstNext chan time.Time // gets the time of the first /next
	initErr   []byte
	seq       int
	// onChunk, if set, sees the body received so far after every read.
	onChunk func(id string, sofar []byte)
}

// gate holds a fake upstream's answer until what the function has sent so
// far reached the Runtime API: a function that buffered its response
// instead of streaming it could never let the upstream finish.
type gate struct {
	opened   chan struct{}
	once     sync.Once
	released chan bool // wait's one value: whether the gate opened within 20 s
}

// newGate sets api's onChunk to open the gate once a body received so far
// satisfies reached.
func newGate(api *runtimeAPI, reached func(sofar []byte) bool) *gate {
	g := &gate{opened: make(chan struct{}), released: make(chan bool, 1)}
	api.onChunk = func(_ string, sofar []byte) {
		if reached(sofar) {
			g.once.Do(func() { close(g.opened) })
		}
	}
	return g
}

// wait, in the upstream's handler, blocks until the gate opens or 20 s
// pass (telling released which), or r ends; it reports whether the
// handler should go on answering.
func (g *gate) wait(r *http.Request) bool {
	select {
	case <-g.opened:
		g.released <- true
	case <-time.After(20 * time.Second):
		g.released <- false
	case <-r.Context().Done():
		return false
	}
	return true
}

func newRuntimeAPI(t testing.TB) *runtimeAPI {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := &runtimeAPI{t: t, addr: ln.Addr().String(), pending: make(chan invocation, 16),
		results: map[string]chan *result{}, firstNext: make(chan time.Time, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", api.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", api.collect("response"))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", api.collect("error"))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		api.mu.Lock()
		api.initErr = b
		api.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})
	api.srv = &http.Server{Handler: mux}
	go api.srv.Serve(ln)
	t.Cleanup(func() { api.srv.Close() })
	return api
}

func (api *runtimeAPI) next(w http.ResponseWriter, r *http.Request) {
	select {
	case api.firstNext <- time.Now():
	default:
	}
	select {
	case inv := <-api.pending:
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(2*time.Minute).UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:genway-test")
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
		h.Set("Content-Type", "application/json")
		w.Write(inv.payload)
	case <-r.Context().Done():
	}
}

func (api *runtimeAPI) collect(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		res := &result{kind: kind, contentType: r.Header.Get("Content-Type"),
			mode:    r.Header.Get("Lambda-Runtime-Function-Response-Mode"),
			chunked: len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked"}
		buf := make([]byte, 32<<10)
		for i := 0; i < 1_000_000; i++ {
			n, err := r.Body.Read(buf)
			if n > 0 {
				res.chunks = append(res.chunks, chunk{at: time.Now(), data: bytes.Clone(buf[:n])})
				res.body = append(res.body, buf[:n]...)
				if api.onChunk != nil {
					api.onChunk(id, res.body)
				}
			}
			if err != nil {
				break
			}
		}
		res.trailer = r.Trailer
		res.done = time.Now()
		w.WriteHeader(http.StatusAccepted)
		api.mu.Lock()
		ch := api.results[id]
		api.mu.Unlock()
		if ch != nil {
			ch <- res
		}
	}
}

// invoke queues payload and waits (bounded) for the function's result.
func (api *runtimeAPI) invoke(payload []byte) (*result, error) {
	api.mu.Lock()
	api.seq++
	id := fmt.Sprintf("req-%04d", api.seq)
	ch := make(chan *result, 1)
	api.results[id] = ch
	api.mu.Unlock()
	api.pending <- invocation{id: id, payload: payload}
	select {
	case res := <-ch:
		return res, nil
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("invocation %s: no response within 60 s", id)
	}
}

// process is a running bootstrap.
type process struct {
	cmd     *exec.Cmd
	started time.Time
	stderr  *lockedBuffer
	exited  chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lambdaEnv is the environment Lambda gives a function, plus env; nothing
// from this machine's environment (no AWS_PROFILE, AWS_CA_BUNDLE or shared
// config) reaches the function.
func lambdaEnv(api string, env map[string]string) []string {
	base := map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          api,
		"AWS_LAMBDA_FUNCTION_NAME":        "genway-test",
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_REGION":                      "us-east-1",
		"AWS_DEFAULT_REGION":              "us-east-1",
		"AWS_ACCESS_KEY_ID":               "test",
		"AWS_SECRET_ACCESS_KEY":           "test",
		"AWS_CONFIG_FILE":                 os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE":     os.DevNull,
		"AWS_EC2_METADATA_DISABLED":       "true",
		"TZ":                              "UTC",
	}
	for k, v := range env {
		base[k] = v
	}
	out := make([]string, 0, len(base))
	for k, v := range base {
		out = append(out, k+"="+v)
	}
	return out
}

// newCmd is the command running bootstrap against api with env, its
// output going to out.
func newCmd(bootstrap string, api *runtimeAPI, env map[string]string, out io.Writer) *exec.Cmd {
	cmd := exec.Command(bootstrap)
	cmd.Env = lambdaEnv(api.addr, env)
	cmd.Stdout = out
	cmd.Stderr = out
	return cmd
}

// start runs bootstrap against api with env and stops it when the test
// ends.
func start(t testing.TB, bootstrap string, api *runtimeAPI, env map[string]string) *process {
	t.Helper()
	p := &process{stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = newCmd(bootstrap, api, env, p.stderr)
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bootstrap, err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s output:\n%s", bootstrap, p.stderr.String())
		}
	})
	return p
}

// initTime waits (bounded) for the process's first /next and returns the
// time from process start to it.
func (p *process) initTime(api *runtimeAPI) (time.Duration, error) {
	select {
	case at := <-api.firstNext:
		return at.Sub(p.started), nil
	case <-p.exited:
		return 0, fmt.Errorf("bootstrap exited before asking for an event: %s", p.stderr.String())
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("bootstrap did not ask for an event within 30 s")
	}
}

// splitStream splits an API Gateway streaming integration response: a JSON
// prelude, 8 NUL bytes, then the body.
func splitStream(b []byte) (prelude, body []byte, ok bool) {
	i := bytes.Index(b, make([]byte, 8))
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+8:], true
}

// sseData returns the data lines of an SSE body, in order.
func sseData(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}
