package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	chaosA = "openai/gpt-4o-mini"           // 1 credit per token; falls back to B
	chaosB = "groq/llama-3.3-70b-versatile" // 2 credits per token
)

// chaosUpstream is an OpenAI-compatible upstream whose requests fail at
// the rates given, by a seeded generator: 500, 429 with Retry-After, an
// error event after the first SSE event (before any content), and a
// stall before the first byte. Every answer it gives is "<name> says hi"
// in 3 tokens for 2 prompt tokens.
type chaosUpstream struct {
	name                             string
	p500, p429, pInBand, pStall      float64
	mu                               sync.Mutex
	rng                              *rand.Rand
	calls, answers, stalls, failures atomic.Int64
}

func (u *chaosUpstream) roll() float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.rng.Float64()
}

func (u *chaosUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	var req struct {
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, 400)
		return
	}
	x := u.roll()
	switch {
	case x < u.p500:
		u.failures.Add(1)
		http.Error(w, `{"error":{"message":"internal","type":"server_error"}}`, 500)
		return
	case x < u.p500+u.p429:
		u.failures.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`, 429)
		return
	case x < u.p500+u.p429+u.pInBand:
		u.failures.Add(1)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, `data: {"error":{"message":"The server had an error","type":"server_error"}}`+"\n\n")
		return
	case x < u.p500+u.p429+u.pInBand+u.pStall:
		u.stalls.Add(1)
		select { // before the first byte, until the gateway gives up on it
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		return
	}
	u.answers.Add(1)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"%s says hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`, u.name)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, piece := range []string{u.name, " says", " hi"} {
		fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", piece)
		w.(http.Flusher).Flush()
	}
	io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`+"\n\ndata: [DONE]\n\n")
}

// TestChaos runs 2,000 requests through genway serve on a model whose
// upstream A fails half the time in every way the policy knows, with a
// healthy fallback B: chat streams, and Responses streamed and whole.
// At least 99.9% succeed, every stream is well formed and names one
// model, and each completion is billed once, at the price of the model
// that answered.
//
// With circuit breakers (the default), A's breaker is open much of the
// time and most requests go straight to B; with them off, every request
// meets A's failures first.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 requests")
	}
	for _, breakers := range []string{"on", "off"} {
		t.Run("breakers "+breakers, func(t *testing.T) { chaos(t, breakers) })
	}
}

func chaos(t *testing.T, breakers string) {
	a := &chaosUpstream{name: "A", p500: 0.30, p429: 0.10, pInBand: 0.05, pStall: 0.05, rng: rand.New(rand.NewPCG(1, 2))}
	b := &chaosUpstream{name: "B", rng: rand.New(rand.NewPCG(3, 4))}
	upA, upB := httptest.NewServer(a), httptest.NewServer(b)
	defer upA.Close()
	defer upB.Close()
	s := startServer(t, t.TempDir(), map[string]string{
		"GENWAY_CATALOG": "testdata/route_catalog.json", "GENWAY_ADMIN_TOKEN": testAdminToken,
		"OPENAI_API_KEY": "sk-a", "OPENAI_BASE_URL": upA.URL, "GROQ_API_KEY": "gsk-b", "GROQ_BASE_URL": upB.URL,
		"GENWAY_DEV_CREDITS": "1000000", "GENWAY_USAGE_FLUSH": "50ms",
		// Quick: stalls are cut after 1 s (long enough that a healthy
		// answer starved of CPU on a busy machine is not taken for one:
		// A would then have answered a request that B served), backoffs
		// are milliseconds, a Retry-After of 1 s moves on to B, an open
		// breaker probes A again after 100 ms.
		"GENWAY_ROUTE_FIRST_TOKEN": "1s", "GENWAY_ROUTE_BACKOFF": "2ms", "GENWAY_ROUTE_MAX_WAIT": "100ms",
		"GENWAY_ROUTE_BREAKER_OPEN": "100ms", "GENWAY_ROUTE_BREAKERS": breakers,
	})
	const n, workers = 2000, 16
	type outcome struct {
		model string // who answered
		err   string // "" when the request succeeded and was well formed
	}
	results := make([]outcome, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				results[i] = chaosRequest(client, s, i)
			}
		}()
	}
	wg.Wait()

	served := map[string]int64{}
	var failed []string
	for i, r := range results {
		if r.err != "" {
			failed = append(failed, fmt.Sprintf("request %d: %s", i, r.err))
			continue
		}
		served[r.model]++
	}
	ok := served[chaosA] + served[chaosB]
	t.Logf("%d requests: %d answered by A, %d by B, %d failed; upstream A: %d calls, %d answers, %d failures, %d stalls; B: %d calls",
		n, served[chaosA], served[chaosB], len(failed), a.calls.Load(), a.answers.Load(), a.failures.Load(), a.stalls.Load(), b.calls.Load())
	if len(failed) > n/1000 {
		t.Errorf("%d of %d requests failed (more than 0.1%%):\n%s", len(failed), n, strings.Join(failed[:min(len(failed), 20)], "\n"))
	}
	// Each upstream answer is one completion served: nothing answered was
	// dropped, nothing was served twice.
	if served[chaosA] != a.answers.Load() || served[chaosB] != b.answers.Load() {
		t.Errorf("served A %d B %d; the upstreams answered A %d B %d", served[chaosA], served[chaosB], a.answers.Load(), b.answers.Load())
	}
	// Billing: the usage records match what was served, at each model's
	// price (A: 5 credits a completion, B: 10), and the balance is what
	// they charged.
	var usage map[string][2]int64 // model -> requests, credits
	deadline := time.Now().Add(guardWait)
	for {
		usage = adminUsage(t, s)
		if usage[chaosA][0]+usage[chaosB][0] >= ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if usage[chaosA] != [2]int64{served[chaosA], 5 * served[chaosA]} || usage[chaosB] != [2]int64{served[chaosB], 10 * served[chaosB]} {
		t.Errorf("usage (requests, credits) A %v B %v; want A %v B %v", usage[chaosA], usage[chaosB],
			[2]int64{served[chaosA], 5 * served[chaosA]}, [2]int64{served[chaosB], 10 * served[chaosB]})
	}
	// The admin API shows A's breaker and its recent failures.
	if st := adminRouting(t, s, chaosA); st.Calls == 0 || st.Failures == 0 || (breakers == "off" && st.State != "closed") {
		t.Errorf("admin routing of %s = %+v; want its recent calls and failures (closed with breakers off)", chaosA, st)
	}
	var cr struct{ Balance int64 }
	s.do(t, "GET", "/v1/credits", nil, nil, &cr)
	if want := 1000000 - 5*served[chaosA] - 10*served[chaosB]; cr.Balance != want {
		t.Errorf("balance %d; want %d (each completion charged once, at its model's price)", cr.Balance, want)
	}
}

// guardWait bounds the waits of these tests; reaching it is a failure.
const guardWait = 30 * time.Second

// chaosRequest sends request i (a chat stream, a Responses stream or a
// whole Responses answer, in turn) and checks what came back.
func chaosRequest(client *http.Client, s *server, i int) (out struct{ model, err string }) {
	var path, body string
	switch i % 4 {
	case 0, 1:
		path, body = "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi %d"}]}`, chaosA, i)
	case 2:
		path, body = "/v1/responses", fmt.Sprintf(`{"model":%q,"stream":true,"input":"hi %d"}`, chaosA, i)
	default:
		path, body = "/v1/responses", fmt.Sprintf(`{"model":%q,"input":"hi %d"}`, chaosA, i)
	}
	req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		out.err = err.Error()
		return out
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		out.err = fmt.Sprintf("status %d (%s): %s", resp.StatusCode, resp.Header.Get("X-Genway-Attempts"), b)
		return out
	}
	switch i % 4 {
	case 0, 1:
		out.model, out.err = checkChatStream(resp.Body)
	case 2:
		out.model, out.err = checkResponsesStream(resp.Body)
	default:
		var o struct {
			Model  string `json:"model"`
			Status string `json:"status"`
			Output []struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"output"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil || o.Status != "completed" || len(o.Output) != 1 || len(o.Output[0].Content) != 1 {
			out.err = fmt.Sprintf("response %+v, %v", o, err)
			return out
		}
		out.model = o.Model
		out.err = answerOf(o.Model, o.Output[0].Content[0].Text)
	}
	return out
}

// answerOf checks text is the whole answer of model's upstream.
func answerOf(model, text string) string {
	want := map[string]string{chaosA: "A says hi", chaosB: "B says hi"}[model]
	if want == "" || text != want {
		return fmt.Sprintf("model %q answered %q", model, text)
	}
	return ""
}

// checkChatStream reads a chat stream: exactly one role chunk, every
// chunk of one model, that model's whole answer once, a final chunk and
// [DONE].
func checkChatStream(r io.Reader) (model, problem string) {
	var text strings.Builder
	roles, finals, done := 0, 0, false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Model   string `json:"model"`
			Error   any    `json:"error"`
			Choices []struct {
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Error != nil || len(c.Choices) != 1 {
			return model, "event " + data
		}
		if model == "" {
			model = c.Model
		} else if c.Model != model {
			return model, fmt.Sprintf("chunks of %q and %q", model, c.Model)
		}
		d := c.Choices[0].Delta
		if d.Role != "" {
			roles++
		} else if d.Content != nil {
			text.WriteString(*d.Content)
		}
		if c.Choices[0].FinishReason != nil {
			finals++
		}
	}
	if roles != 1 || finals != 1 || !done {
		return model, fmt.Sprintf("%d role chunks, %d final chunks, [DONE] %v", roles, finals, done)
	}
	return model, answerOf(model, text.String())
}

// checkResponsesStream reads a Responses stream: one response.created,
// the model it names throughout, its answer once, response.completed.
func checkResponsesStream(r io.Reader) (model, problem string) {
	var text strings.Builder
	created, completed := 0, 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string `json:"type"`
			Delta    string `json:"delta"`
			Response *struct {
				Model string `json:"model"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return model, "event " + data
		}
		if ev.Response != nil {
			if model == "" {
				model = ev.Response.Model
			} else if ev.Response.Model != model {
				return model, fmt.Sprintf("events of %q and %q", model, ev.Response.Model)
			}
		}
		switch ev.Type {
		case "response.created":
			created++
		case "response.completed":
			completed++
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "error", "response.failed":
			return model, "event " + data
		}
	}
	if created != 1 || completed != 1 {
		return model, fmt.Sprintf("%d response.created, %d response.completed", created, completed)
	}
	return model, answerOf(model, text.String())
}

// adminUsage returns each model's chat requests and credits, from the
// admin API.
func adminUsage(t *testing.T, s *server) map[string][2]int64 {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/admin/v1/usage", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			Model    string `json:"model"`
			Requests int64  `json:"requests"`
			Credits  int64  `json:"credits"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, u := range list.Data {
		v := out[u.Model]
		out[u.Model] = [2]int64{v[0] + u.Requests, v[1] + u.Credits}
	}
	return out
}

// adminRouting returns model's routing state from GET /admin/v1/models.
func adminRouting(t *testing.T, s *server, model string) (st struct {
	State    string `json:"state"`
	Calls    int    `json:"calls"`
	Failures int    `json:"failures"`
}) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/admin/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID      string          `json:"id"`
			Routing json.RawMessage `json:"routing"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Data {
		if m.ID == model {
			json.Unmarshal(m.Routing, &st)
		}
	}
	return st
}

// switchUpstream is an OpenAI-compatible upstream that answers "<name>
// says hi" (non-streamed) or, while failing is set, the status in it.
type switchUpstream struct {
	name    string
	failing atomic.Int64 // a status to answer with; 0: answer
	calls   atomic.Int64
}

func (u *switchUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	io.Copy(io.Discard, r.Body)
	if st := int(u.failing.Load()); st != 0 {
		http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, st)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"%s says hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`, u.name)
}

// TestOpenBreakerDemotesEndToEnd: the fallback B failed until its breaker
// opened (for ten minutes); B is healthy again when the lead A fails. The
// request is answered by B, tried after A although its breaker is open,
// instead of A's 503 (issue 26, item 9); B's breaker stays open (only its
// probe closes it).
func TestOpenBreakerDemotesEndToEnd(t *testing.T) {
	a, b := &switchUpstream{name: "A"}, &switchUpstream{name: "B"}
	upA, upB := httptest.NewServer(a), httptest.NewServer(b)
	defer upA.Close()
	defer upB.Close()
	s := startServer(t, t.TempDir(), map[string]string{
		"GENWAY_CATALOG": "testdata/route_catalog.json", "GENWAY_ADMIN_TOKEN": testAdminToken,
		"OPENAI_API_KEY": "sk-a", "OPENAI_BASE_URL": upA.URL, "GROQ_API_KEY": "gsk-b", "GROQ_BASE_URL": upB.URL,
		"GENWAY_ROUTE_BACKOFF": "2ms", "GENWAY_ROUTE_BREAKER_OPEN": "10m",
	})
	chat := func(model string) (int, http.Header, string) {
		var out struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		code, h := s.do(t, "POST", "/v1/chat/completions", map[string]any{"model": model,
			"messages": []map[string]string{{"role": "user", "content": "hi"}}}, nil, &out)
		if len(out.Choices) == 1 {
			return code, h, out.Model + ": " + out.Choices[0].Message.Content
		}
		return code, h, ""
	}
	b.failing.Store(500)
	for i := 0; i < 3 && adminRouting(t, s, chaosB).State != "open"; i++ {
		if code, _, _ := chat(chaosB); code != 502 {
			t.Fatalf("B failing: status %d; want 502", code)
		}
	}
	if st := adminRouting(t, s, chaosB); st.State != "open" {
		t.Fatalf("B's breaker after its failures = %+v; want open", st)
	}
	b.failing.Store(0)
	a.failing.Store(503)
	code, h, answer := chat(chaosA)
	if code != 200 || answer != chaosB+": B says hi" {
		t.Fatalf("A failing, B's breaker open: %d %q (attempts %s); want 200 answered by B", code, answer, h.Get("X-Genway-Attempts"))
	}
	if got, want := h.Get("X-Genway-Attempts"), chaosA+"=503, "+chaosA+"=503, "+chaosA+"=503, "+chaosB+"=200"; got != want {
		t.Errorf("attempts %q; want %q", got, want)
	}
	if st := adminRouting(t, s, chaosB); st.State != "open" {
		t.Errorf("B's breaker after answering as a demoted target = %+v; want still open (only its probe closes it)", st)
	}
	// With A healthy, A answers: B, open, comes after it.
	a.failing.Store(0)
	before := b.calls.Load()
	if code, _, answer := chat(chaosA); code != 200 || answer != chaosA+": A says hi" || b.calls.Load() != before {
		t.Errorf("A healthy: %d %q, B called %d times; want A's answer, B not called", code, answer, b.calls.Load()-before)
	}
}
