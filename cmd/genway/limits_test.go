package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/transport/httpapi"
)

// heapBound is the most heap (runtime.MemStats.HeapInuse) that
// TestBodyMemoryBound lets genway serve (and the test, in the same
// process) reach above what it held before: the default memory of request
// bodies (httpapi.DefaultBodyMemory, the bodies counted at
// httpapi.BodyCost times their size) and as much again for the garbage
// their decoding leaves until the collector runs (GOGC=100), plus 64 MiB
// for the rest (connections, the upstream's buffers).
const heapBound = 2*httpapi.DefaultBodyMemory + 64<<20

// TestBodyMemoryBound (issue 26, item 2): one key sends 200 chat requests
// of 5 MB at once, each with an image (a 5 MB body without one is refused
// past 2 MiB), with the default limits. Those past the key's bound on
// requests in progress are refused 429 concurrency_limit_exceeded (or see
// their connection closed while they still send); the others are served,
// or, if no room frees for their body in time, refused 503 server_busy.
// The process's heap stays within heapBound of where it was, and another
// key's requests, small and as large, are all served meanwhile. Before the limits, each such
// request held about 21 MB: 200 of them, gigabytes.
func TestBodyMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GB of requests")
	}
	// The upstream holds each of the flood's requests (the question
	// "what is it?") until every request of the flood is either there or
	// answered, so that the flood is in progress all at once however
	// slowly the machine sends it (at most 30 s); the other key's (the
	// question "what is that") are answered at once.
	const n = 200
	var inUp, done atomic.Int64
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if bytes.Contains(b, []byte("what is it?")) {
			if inUp.Add(1)+done.Load() >= n {
				free()
			}
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"a picture"},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":2,"total_tokens":92}}`)
	}))
	defer up.Close()
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": up.URL + "/v1", "GENWAY_DEV_CREDITS": "100000000"})
	other := &server{base: s.base, key: newKey(t, dir, "other")}
	body := bigImageBody(t, 5<<20)
	otherBody := bytes.Replace(body, []byte("what is it?"), []byte("what is that"), 1)

	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapInuse
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var peak atomic.Uint64
	sampled := make(chan struct{})
	go func() { // samples the heap; past the bound, stops the flood
		defer close(sampled)
		var m runtime.MemStats
		for ctx.Err() == nil {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			if m.HeapInuse > base+heapBound {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+s.key)
			req.Header.Set("Content-Type", "application/json")
			outcome := "connection closed while sending"
			if resp, err := client.Do(req); err == nil {
				var e struct {
					Error struct{ Code string } `json:"error"`
				}
				json.NewDecoder(resp.Body).Decode(&e)
				resp.Body.Close()
				outcome = fmt.Sprintf("%d %s", resp.StatusCode, e.Error.Code)
			} else if ctx.Err() != nil {
				outcome = "stopped"
			}
			mu.Lock()
			outcomes[outcome]++
			mu.Unlock()
			if outcome != "200 " && done.Add(1)+inUp.Load() >= n {
				free() // every request of the flood is answered or held
			}
		}()
	}
	// Meanwhile another key is served: small requests, and every fifth
	// a 5 MB one like the flood's (one key holds at most half of the
	// bodies' memory, so the other half is there for it).
	var otherFailed []string
	for i := 0; i < 20 && ctx.Err() == nil; i++ {
		code, _, err := doRequest(other, "POST", "/v1/chat/completions", map[string]any{"model": "synthetic/echo",
			"messages": []map[string]string{{"role": "user", "content": fmt.Sprint("hello ", i)}}}, nil, nil)
		if err != nil || code != 200 {
			otherFailed = append(otherFailed, fmt.Sprintf("request %d: %d %v", i, code, err))
		}
		if i%5 == 0 {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/chat/completions", bytes.NewReader(otherBody))
			req.Header.Set("Authorization", "Bearer "+other.key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				otherFailed = append(otherFailed, fmt.Sprintf("5 MB request %d: %v", i, err))
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				otherFailed = append(otherFailed, fmt.Sprintf("5 MB request %d: %d %s", i, resp.StatusCode, b))
			}
		}
	}
	wg.Wait()
	stopped := ctx.Err() != nil
	cancel()
	<-sampled
	t.Logf("heap before %d MiB, peak %d MiB (bound: +%d MiB); outcomes %v", base>>20, peak.Load()>>20, heapBound>>20, outcomes)
	if stopped && peak.Load() > base+heapBound {
		t.Fatalf("the heap reached %d MiB, more than %d MiB above the %d MiB before the flood: stopped", peak.Load()>>20, heapBound>>20, base>>20)
	}
	if len(otherFailed) > 0 {
		t.Errorf("another key's requests failed during the flood: %s", strings.Join(otherFailed, "; "))
	}
	for o, k := range outcomes {
		switch o {
		case "200 ", "429 concurrency_limit_exceeded", "503 server_busy", "connection closed while sending":
		default:
			t.Errorf("%d requests ended %q; want 200, 429 concurrency_limit_exceeded or 503 server_busy", k, o)
		}
	}
	if outcomes["200 "] == 0 {
		t.Errorf("no request of the flood was served: %v", outcomes)
	}
	if refused := n - outcomes["200 "] - outcomes["503 server_busy"]; refused < n-ratelimit.DefaultInFlightPerKey {
		t.Errorf("%d requests refused for the key's requests in progress; want at least %d (200 at once, %d allowed)", refused, n-ratelimit.DefaultInFlightPerKey, ratelimit.DefaultInFlightPerKey)
	}
}

// bigImageBody returns a chat request for openai/gpt-4o-mini of about
// size bytes: a short question and a PNG (its header, padded) as a data
// URI.
func bigImageBody(t testing.TB, size int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size*3/4)
	copy(data, b.Bytes())
	return []byte(`{"model":"openai/gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString(data) + `"}}]}]}`)
}

// newKey makes a key of a new account with credits, through the CLI on
// dir, and returns it.
func newKey(t *testing.T, dir, account string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "create", "--account", account, "--credits", "1000"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// TestInFlightLimits: past GENWAY_MAX_IN_FLIGHT_PER_KEY requests in
// progress of one key, and GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT of one
// account, a request is refused 429 concurrency_limit_exceeded with
// Retry-After, in the OpenAI envelope, while other accounts are served;
// once the requests end, the key is served again.
func TestInFlightLimits(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived.Add(1)
		select { // holds the request in progress until the test lets it go
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`)
	}))
	defer up.Close()
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": up.URL + "/v1",
		"GENWAY_MAX_IN_FLIGHT_PER_KEY": "2", "GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT": "3"})
	second := &server{base: s.base, key: newKey(t, dir, "dev")} // the dev account's second key
	other := &server{base: s.base, key: newKey(t, dir, "other")}
	slow := map[string]any{"model": "openai/gpt-4o-mini", "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	fast := map[string]any{"model": "synthetic/echo", "messages": []map[string]string{{"role": "user", "content": "hi"}}}

	type result struct {
		code int
		err  error
	}
	held := make(chan result, 3)
	hold := func(c *server) { // a request that stays in progress
		go func() {
			code, _, err := doRequest(c, "POST", "/v1/chat/completions", slow, nil, nil)
			held <- result{code, err}
		}()
	}
	waitArrived := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(guardWait); arrived.Load() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests reached the upstream; want %d", arrived.Load(), n)
			}
		}
	}
	refused := func(c *server, want string) {
		t.Helper()
		var e struct {
			Error struct{ Message, Type, Code string } `json:"error"`
		}
		code, h, err := doRequest(c, "POST", "/v1/chat/completions", fast, nil, &e)
		if err != nil || code != 429 || e.Error.Type != "rate_limit_error" || e.Error.Code != "concurrency_limit_exceeded" ||
			h.Get("Retry-After") != "1" || !strings.Contains(e.Error.Message, want) {
			t.Errorf("request past the bound = %d %+v, Retry-After %q, %v; want 429 concurrency_limit_exceeded saying %q, Retry-After 1",
				code, e.Error, h.Get("Retry-After"), err, want)
		}
	}
	hold(s)
	hold(s)
	waitArrived(2)
	refused(s, "This key has 2 requests in progress")
	hold(second) // the account's third
	waitArrived(3)
	refused(second, "account has 3 requests in progress")
	if code, _, err := doRequest(other, "POST", "/v1/chat/completions", fast, nil, nil); err != nil || code != 200 {
		t.Errorf("another account's request = %d, %v; want 200", code, err)
	}
	close(release)
	for range 3 {
		if r := <-held; r.err != nil || r.code != 200 {
			t.Errorf("a held request = %d, %v; want 200", r.code, r.err)
		}
	}
	if code, _, err := doRequest(s, "POST", "/v1/chat/completions", fast, nil, nil); err != nil || code != 200 {
		t.Errorf("once they ended, the key's request = %d, %v; want 200", code, err)
	}
}

func TestServeConfigLimits(t *testing.T) {
	tests := []struct {
		env     map[string]string
		check   func(app.Config) bool
		wantErr string
	}{
		{nil, func(c app.Config) bool {
			return c.MaxConns == 4096 && c.MaxConnsPerAddr == 512 && c.IdleTimeout == 30*time.Second && c.InFlightPerKey == ratelimit.DefaultInFlightPerKey &&
				c.InFlightPerAccount == ratelimit.DefaultInFlightPerAccount && c.MaxTextBody == httpapi.DefaultTextBodyBytes && c.BodyMemory == httpapi.DefaultBodyMemory
		}, ""},
		{map[string]string{"GENWAY_MAX_CONNS_PER_ADDR": "64", "GENWAY_MAX_IN_FLIGHT_PER_KEY": "-1", "GENWAY_BODY_MEMORY": "1GiB", "GENWAY_MAX_TEXT_BODY": "6MiB"},
			func(c app.Config) bool {
				return c.MaxConnsPerAddr == 64 && c.InFlightPerKey == -1 && c.BodyMemory == 1<<30 && c.MaxTextBody == 6<<20
			}, ""},
		{map[string]string{"GENWAY_MAX_CONNS_PER_ADDR": "0"}, nil, "GENWAY_MAX_CONNS_PER_ADDR"},
		{map[string]string{"GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT": "x"}, nil, "GENWAY_MAX_IN_FLIGHT_PER_ACCOUNT"},
		{map[string]string{"GENWAY_BODY_MEMORY": "0"}, nil, "GENWAY_BODY_MEMORY"},
		{map[string]string{"GENWAY_MAX_TEXT_BODY": "7MiB"}, nil, "GENWAY_MAX_TEXT_BODY"},
	}
	for _, tt := range tests {
		c, err := app.LoadConfig(app.Serve, func(k string) string { return tt.env[k] })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadConfig(%v) = %v; want an error naming %s", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !tt.check(c) {
			t.Errorf("LoadConfig(%v) = %+v, %v", tt.env, c, err)
		}
	}
}
